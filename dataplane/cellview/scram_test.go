package cellview

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/wire"
)

// TestScramLookups: SCRAM finds a key's credential by mechanism, and
// admitting a key after its proof refuses what PLAIN refuses once the
// secret is right: an expired key, a suspended tenant, a key no longer in
// the state.
func TestScramLookups(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	past := now.Add(-time.Minute)
	cred := wire.ScramCredential{Mechanism: "SCRAM-SHA-256", Salt: []byte("s"), Iterations: 4096, StoredKey: []byte("k"), ServerKey: []byte("v")}
	v, err := newView(wire.CellState{Version: wire.Version, Cell: "c1",
		Tenants: []wire.Tenant{{ID: "t1", Status: "active"}, {ID: "t2", Status: "suspended"}},
		Keys: []wire.Key{
			{ID: "K1", TenantID: "t1", Role: "developer", Scram: []wire.ScramCredential{cred}},
			{ID: "K0", TenantID: "t1", Role: "developer"},
			{ID: "KX", TenantID: "t1", Role: "developer", ExpiresAt: &past, Scram: []wire.ScramCredential{cred}},
			{ID: "KS", TenantID: "t2", Role: "developer", Scram: []wire.ScramCredential{cred}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, key, mech     string
		wantCred, wantAdmit error
	}{
		{"has the mechanism", "K1", "SCRAM-SHA-256", nil, nil},
		{"lacks the mechanism", "K1", "SCRAM-SHA-512", ErrNoScram, nil},
		{"made before SCRAM", "K0", "SCRAM-SHA-256", ErrNoScram, nil},
		{"unknown or revoked", "KZ", "SCRAM-SHA-256", ErrBadCredentials, ErrBadCredentials},
		{"expired", "KX", "SCRAM-SHA-256", nil, ErrKeyExpired},
		{"suspended tenant", "KS", "SCRAM-SHA-256", nil, ErrTenantSuspended},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := v.ScramCredential(tc.key, tc.mech)
			if !errors.Is(err, tc.wantCred) || (err == nil && c.Iterations != 4096) {
				t.Fatalf("credential: %+v %v, want err %v", c, err, tc.wantCred)
			}
			p, err := v.AdmitScram(tc.key, now)
			if !errors.Is(err, tc.wantAdmit) || (err == nil && (p.KeyID != tc.key || p.TenantID == "")) {
				t.Fatalf("admit: %+v %v, want err %v", p, err, tc.wantAdmit)
			}
		})
	}
	if keys := v.TenantKeys("t1"); len(keys) != 3 || keys[0].ID != "K0" || keys[1].ID != "K1" || keys[2].ID != "KX" {
		t.Fatalf("tenant keys %+v", keys)
	}
}
