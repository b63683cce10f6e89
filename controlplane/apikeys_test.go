package controlplane_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/contract/client"
)

// TestRevokeByRank: nobody revokes a key whose role is above their own, as
// nobody creates one: a developer key may not revoke an admin key (and the
// key keeps working), an admin key may revoke a developer key, a developer
// may revoke a developer's, and the owner's session revokes anything.
func TestRevokeByRank(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tn := e.signup("ranks")
	dev, _ := e.roleKey(tn, "developer")
	_, adminID := e.roleKey(tn, "admin")
	_, dev2ID := e.roleKey(tn, "developer")
	_, dev3ID := e.roleKey(tn, "developer")
	_, admin2ID := e.roleKey(tn, "admin")

	_, err := dev.RevokeAPIKey(ctx, adminID)
	wantCode(t, err, "permission_denied")
	if k, err := tn.owner.APIKey(ctx, adminID); err != nil || k.Status != "active" {
		t.Fatalf("admin key after a developer's revoke: %+v %v", k, err)
	}
	for _, tc := range []struct {
		name  string
		by    *client.Client
		keyID string
	}{
		{"developer revokes a developer", dev, dev2ID},
		{"admin key revokes a developer", tn.key, dev3ID},
		{"owner revokes an admin", tn.owner, adminID},
		{"admin key revokes an admin", tn.key, admin2ID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := tc.by.RevokeAPIKey(ctx, tc.keyID)
			if err != nil || k.Status != "revoked" {
				t.Fatalf("revoke: %+v %v", k, err)
			}
		})
	}
}
