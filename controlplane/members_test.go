package controlplane_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
)

// TestMemberChangesByRank: nobody changes or removes a member whose role is
// above their own: an admin (by session or by key) may not demote or remove
// an owner, a developer changes no member at all, an admin changes and
// removes developers and other admins, and an owner removes another owner.
func TestMemberChangesByRank(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tn := e.signup("members")
	add := func(email, role string) (api.Member, *client.Client) {
		m, err := tn.owner.AddMember(ctx, api.AddMemberRequest{Email: email, Role: role, Password: "password of " + email})
		if err != nil {
			t.Fatal(err)
		}
		s, err := e.anon.Login(ctx, api.SessionRequest{Email: email, Password: "password of " + email})
		if err != nil {
			t.Fatal(err)
		}
		return m, e.anon.With(client.WithSession(s.Token))
	}
	owner2, _ := add("owner2@members.test", "owner")
	admin2, admin := add("admin@members.test", "admin")
	other, _ := add("other-admin@members.test", "admin")
	devM, dev := add("dev@members.test", "developer")
	viewM, _ := add("viewer@members.test", "viewer")

	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"admin demotes an owner", func() error {
			_, err := admin.UpdateMember(ctx, owner2.UserID, api.UpdateMemberRequest{Role: "viewer"})
			return err
		}},
		{"admin removes an owner", func() error { return admin.RemoveMember(ctx, owner2.UserID) }},
		{"admin key removes the first owner", func() error { return tn.key.RemoveMember(ctx, tn.User.ID) }},
		{"admin promotes to owner", func() error {
			_, err := admin.UpdateMember(ctx, devM.UserID, api.UpdateMemberRequest{Role: "owner"})
			return err
		}},
		{"developer changes a viewer", func() error {
			_, err := dev.UpdateMember(ctx, viewM.UserID, api.UpdateMemberRequest{Role: "developer"})
			return err
		}},
		{"developer removes a viewer", func() error { return dev.RemoveMember(ctx, viewM.UserID) }},
	} {
		t.Run(tc.name, func(t *testing.T) { wantCode(t, tc.do(), "permission_denied") })
	}
	if _, err := admin.UpdateMember(ctx, devM.UserID, api.UpdateMemberRequest{Role: "viewer"}); err != nil {
		t.Fatalf("admin demotes a developer: %v", err)
	}
	if _, err := admin.UpdateMember(ctx, other.UserID, api.UpdateMemberRequest{Role: "developer"}); err != nil {
		t.Fatalf("admin demotes another admin: %v", err)
	}
	if err := tn.key.RemoveMember(ctx, viewM.UserID); err != nil {
		t.Fatalf("admin key removes a viewer: %v", err)
	}
	if err := tn.owner.RemoveMember(ctx, owner2.UserID); err != nil {
		t.Fatalf("owner removes another owner: %v", err)
	}
	if err := tn.owner.RemoveMember(ctx, admin2.UserID); err != nil {
		t.Fatalf("owner removes an admin: %v", err)
	}
}
