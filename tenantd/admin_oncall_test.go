package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/controlplane/cptest"
)

// TestAdminOncallBadInput: every on-call command refuses bad input
// (unknown tenant, negative or zero rates, an expiry in the past, a
// missing argument) with an error naming what is wrong, and changes
// nothing: no throttle appears and the key still works. Then the good
// forms do what they say, against a real control plane.
func TestAdminOncallBadInput(t *testing.T) {
	ctx := context.Background()
	hs, id, secret, mailDir := adminControlPlane(t)
	run, _ := adminCommands(ctx, t, hs.URL, id, secret)
	cp := client.New(hs.URL, client.WithAPIKey(id, secret))
	cptest.SeedFleet(t, cp, cptest.TestAddrs)
	res, err := cptest.SignUp(ctx, client.New(hs.URL), mailDir, api.SignupRequest{TenantName: "hotco", Email: "ops@hotco.test", Password: "password-hotco-1"})
	if err != nil {
		t.Fatal(err)
	}
	tid := res.Tenant.ID
	owner := client.New(hs.URL, client.WithSession(res.Session.Token))
	key, err := owner.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Description: "leaks", Role: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	tenantKey := client.New(hs.URL, client.WithAPIKey(key.ID, key.Secret))
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tenants", "throttle", "tn_nope", "-bytes-in", "1000", "-for", "10m"}, "no such tenant"},
		{[]string{"tenants", "throttle", tid, "-bytes-in", "-5", "-for", "10m"}, "-bytes-in must be greater than 0"},
		{[]string{"tenants", "throttle", tid, "-bytes-out", "0", "-for", "10m"}, "-bytes-out must be greater than 0"},
		{[]string{"tenants", "throttle", tid, "-msgs-in", "-1", "-for", "10m"}, "-msgs-in must be greater than 0"},
		{[]string{"tenants", "throttle", tid, "-for", "10m"}, "name a rate"},
		{[]string{"tenants", "throttle", tid, "-bytes-in", "1000"}, "say how long"},
		{[]string{"tenants", "throttle", tid, "-bytes-in", "1000", "-for", "-10m"}, "-for must be greater than 0"},
		{[]string{"tenants", "throttle", tid, "-bytes-in", "1000", "-until", past}, "is in the past"},
		{[]string{"tenants", "throttle", tid, "-bytes-in", "1000", "-until", "tomorrow"}, "want RFC 3339"},
		{[]string{"tenants", "throttle", tid, "-bytes-in", "1000", "-for", "200h"}, "at most"},
		{[]string{"tenants", "throttle"}, "TENANT_ID is required"},
		{[]string{"tenants", "throttle-show", "tn_nope"}, "no throttle (or no such tenant)"},
		{[]string{"tenants", "unthrottle", tid}, "no throttle"},
		{[]string{"keys", "revoke", "tn_nope", key.ID}, "no such tenant"},
		{[]string{"keys", "revoke", tid, "ak_nope"}, "has no API key ak_nope"},
		{[]string{"keys", "revoke", tid}, "KEY_ID is required"},
		{[]string{"tenants", "top", "-sort", "loudness"}, `-sort "loudness"`},
		{[]string{"tenants", "top", "-n", "-3"}, "-n must be greater than 0"},
		{[]string{"tenants", "top", "-interval", "-1s"}, "-interval must be at least"},
		{[]string{"cells", "health", "-stale", "-1s"}, "-stale must be greater than 0"},
	} {
		out, err := run(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v (want an error containing %q)\n%s", tc.args, err, tc.want, out)
		}
	}
	var th api.Throttle
	if err := cp.Do(ctx, "GET", "/v1/admin/tenants/"+tid+"/throttle", nil, &th); !client.IsCode(err, "not_found") {
		t.Fatalf("bad input left a throttle: %v %+v", err, th)
	}
	if _, err := tenantKey.Topics(ctx); err != nil {
		t.Fatalf("bad revokes broke the key: %v", err)
	}
	if q, err := cp.AdminQuotas(ctx, tid); err != nil || q.ProduceBytesPerSec != 1<<20 {
		t.Fatalf("bad input changed the quotas: %+v %v", q, err)
	}

	// The good forms.
	out, err := run("tenants", "throttle", tid, "-bytes-in", "4096", "-for", "10m", "-reason", "hot")
	if err != nil || !regexp.MustCompile(`(?m)^effective\.produce_bytes_per_sec\s+4096$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^reason\s+hot$`).MatchString(out) {
		t.Fatalf("tenants throttle: %v\n%s", err, out)
	}
	if out, err = run("-o", "json", "tenants", "throttle-show", tid); err != nil || json.Unmarshal([]byte(out), &th) != nil ||
		th.ExpiresAt.Before(time.Now().Add(9*time.Minute)) || *th.ProduceBytesPerSec != 4096 {
		t.Fatalf("tenants throttle-show: %v\n%s", err, out)
	}
	if out, err = run("tenants", "unthrottle", tid); err != nil || !regexp.MustCompile(`(?m)^effective\.produce_bytes_per_sec\s+1048576$`).MatchString(out) {
		t.Fatalf("tenants unthrottle: %v\n%s", err, out)
	}
	if out, err = run("keys", "revoke", tid, key.ID); err != nil || !regexp.MustCompile(`(?m)^status\s+revoked$`).MatchString(out) {
		t.Fatalf("keys revoke: %v\n%s", err, out)
	}
	if _, err := tenantKey.Topics(ctx); !client.IsCode(err, "key_revoked") {
		t.Fatalf("the revoked key: %v", err)
	}
	// No broker of the seeded cell has reported: all silent, the cell down.
	if out, err = run("cells", "health"); err != nil || !regexp.MustCompile(`(?m)^cell-1\s+\S+\s+\S+\s+down\s+0/3\s`).MatchString(out) {
		t.Fatalf("cells health: %v\n%s", err, out)
	}
}
