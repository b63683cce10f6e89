package controlplane_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
)

// Passwords, key secrets and session tokens are stored only as hashes and
// never logged, also when requests fail.
func TestSecretsNeverStoredOrLogged(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	password := "unique password 4242"
	res, err := e.signUp(ctx, api.SignupRequest{TenantName: "secrets", Email: "s@secrets.test", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	owner := e.anon.With(client.WithSession(res.Session.Token))
	k := e.createKey(owner, api.CreateAPIKeyRequest{Description: "k"})
	// Failing requests carrying the secrets.
	e.raw("POST", "/v1/sessions", "", "application/json", `{"email":"s@secrets.test","password":"`+password+`x"}`)
	e.raw("GET", "/v1/topics", "Basic "+base64.StdEncoding.EncodeToString([]byte("SLKAAAAAAAAAAAAAAAA:"+k.Secret)), "", "")
	e.raw("POST", "/v1/topics", "Bearer "+res.Session.Token, "application/json", `{"name":"bad name"}`)

	secrets := []string{password, k.Secret, res.Session.Token}
	for _, table := range []string{"users", "api_keys", "sessions", "audit_log", "memberships", "tenants", "topics", "signup_requests"} {
		rows, err := e.db.Query(ctx, "SELECT t::text FROM "+table+" t")
		if err != nil {
			t.Fatal(err)
		}
		all, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range all {
			for _, s := range secrets {
				if strings.Contains(row, s) {
					t.Fatalf("table %s stores a secret in plaintext: %s", table, row)
				}
			}
		}
	}
	logs := e.logs.String()
	if logs == "" {
		t.Fatal("no logs captured; the check would prove nothing")
	}
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Fatalf("logs contain a secret")
		}
	}
}
