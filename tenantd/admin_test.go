package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/controlplane"
	"github.com/sluicehq/sluice/controlplane/pgtest"
)

// TestAdminEnv: tenantd admin finds the control plane and its operator key
// under the names tenantd dev prints and the Terraform provider reads, and
// under the older ones, against a real control plane.
func TestAdminEnv(t *testing.T) {
	db := pgtest.Pool(t)
	srv, err := controlplane.New(controlplane.Config{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	ctx := context.Background()
	id, secret, err := controlplane.CreateOperatorKey(ctx, db, "admin env test")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"current names", map[string]string{"SLUICE_ENDPOINT": hs.URL, "SLUICE_API_KEY_ID": id, "SLUICE_API_KEY_SECRET": secret}, ""},
		{"older names", map[string]string{"SLUICE_API_URL": hs.URL, "SLUICE_API_KEY": id + ":" + secret}, ""},
		{"current names win", map[string]string{"SLUICE_ENDPOINT": hs.URL, "SLUICE_API_URL": "http://127.0.0.1:1",
			"SLUICE_API_KEY_ID": id, "SLUICE_API_KEY_SECRET": secret, "SLUICE_API_KEY": "ak_nope:nope"}, ""},
		{"no key", map[string]string{"SLUICE_ENDPOINT": hs.URL}, "SLUICE_API_KEY_ID"},
		{"half a key", map[string]string{"SLUICE_ENDPOINT": hs.URL, "SLUICE_API_KEY_ID": id}, "SLUICE_API_KEY_SECRET"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := admin(ctx, []string{"pools", "list"}, &out, func(k string) string { return tc.env[k] })
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("admin pools list: %v\n%s", err, out.String())
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("admin pools list: %v; want an error naming %s", err, tc.wantErr)
			case tc.wantErr == "" && !strings.Contains(out.String(), "ID"):
				t.Errorf("no table in the output: %q", out.String())
			}
		})
	}
}
