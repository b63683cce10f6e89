package controlplane_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/scram"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane"
)

// TestKeySCRAMCredentials: a new key's SCRAM credentials, one per
// mechanism, reach the cell state and check against the key's secret; the
// secret is stored nowhere; operator keys (API and bootstrap) get them too;
// a key made before SCRAM (no credentials) travels without any.
func TestKeySCRAMCredentials(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.signup("scramcreds")
	old := e.createKey(a.owner, api.CreateAPIKeyRequest{Description: "before scram"})
	if _, err := e.db.Exec(ctx, `UPDATE api_keys SET scram_credentials = NULL WHERE id = $1`, old.ID); err != nil {
		t.Fatal(err)
	}
	st, _, err := e.cellClient().CellState(ctx, "cell-1", -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]wire.Key{}
	for _, k := range st.Keys {
		keys[k.ID] = k
	}
	if k := keys[old.ID]; k.ID == "" || k.Scram != nil {
		t.Fatalf("key without credentials in state: %+v", k)
	}
	checkScram(t, keys[a.keyID].Scram, a.secret)

	opKey, err := e.op.AdminCreateKey(ctx, api.CreateOperatorKeyRequest{Description: "scram operator"})
	if err != nil {
		t.Fatal(err)
	}
	bootID, bootSecret, err := controlplane.CreateOperatorKey(ctx, e.db, "scram bootstrap")
	if err != nil {
		t.Fatal(err)
	}
	for id, secret := range map[string]string{opKey.ID: opKey.Secret, bootID: bootSecret, a.keyID: a.secret} {
		var creds []wire.ScramCredential
		var raw string
		if err := e.db.QueryRow(ctx, `SELECT scram_credentials, scram_credentials::text FROM api_keys WHERE id = $1`, id).Scan(&creds, &raw); err != nil {
			t.Fatal(err)
		}
		checkScram(t, creds, secret)
		if strings.Contains(raw, secret) {
			t.Fatalf("key %s: stored credentials contain the secret", id)
		}
	}
}

func checkScram(t *testing.T, creds []wire.ScramCredential, secret string) {
	t.Helper()
	if len(creds) != len(scram.Mechanisms) {
		t.Fatalf("%d SCRAM credentials, want %d", len(creds), len(scram.Mechanisms))
	}
	for i, m := range scram.Mechanisms {
		c := creds[i]
		if c.Mechanism != m.Name || c.Iterations != scram.Iterations || len(c.Salt) == 0 {
			t.Fatalf("credential %d: %+v", i, c)
		}
		want := scram.DeriveWith(m, secret, c.Salt, c.Iterations)
		if !bytes.Equal(c.StoredKey, want.StoredKey) || !bytes.Equal(c.ServerKey, want.ServerKey) {
			t.Fatalf("%s credential does not derive from the secret", m.Name)
		}
	}
}
