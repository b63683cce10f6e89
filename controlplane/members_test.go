package controlplane_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/controlplane/mail"
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
		m, err := e.addMember(ctx, tn.owner, api.AddMemberRequest{Email: email, Role: role, Password: "password of " + email})
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

// TestAddMemberAnswersAlike: inviting an address that has no account, one
// that has (another tenant's owner), and one that is a member already gets
// the same status and byte-for-byte the same body; the mail differs. The
// invited people become members only by accepting: the new address with
// the inviter's password, the existing user keeping their own. A token
// works once, and a bad request is still told what is wrong.
func TestAddMemberAnswersAlike(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.signup("inviter")
	e.signup("elsewhere") // elsewhere@example.com has an account
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(a.keyID+":"+a.secret))
	post := func(body string) (int, []byte) {
		t.Helper()
		status, b, _ := e.send("POST", "/v1/members", auth, "application/json", body)
		return status, b
	}
	var first []byte
	tokens := map[string]string{}
	for _, tc := range []struct{ name, email, mailHas string }{
		{"no account", "fresh@example.com", "token: "},
		{"has an account", "elsewhere@example.com", "token: "},
		{"a member already", "inviter@example.com", "a member already"},
	} {
		status, body := post(`{"email":"` + tc.email + `","role":"developer","password":"initial password 1"}`)
		if status != http.StatusAccepted {
			t.Fatalf("%s: %d %s", tc.name, status, body)
		}
		if first == nil {
			first = body
		} else if !bytes.Equal(first, body) {
			t.Fatalf("%s: answer %s differs from %s", tc.name, body, first)
		}
		text, err := mail.Last(e.mail, tc.email)
		if err != nil || !strings.Contains(text, tc.mailHas) {
			t.Fatalf("%s: mail %v\n%s", tc.name, err, text)
		}
		tokens[tc.email] = mail.Token(text)
	}
	if tokens["inviter@example.com"] != "" {
		t.Fatal("a member already was mailed a token")
	}
	if ms, err := a.owner.Members(ctx); err != nil || len(ms) != 1 {
		t.Fatalf("members before anyone accepts: %+v %v", ms, err)
	}
	for _, email := range []string{"fresh@example.com", "elsewhere@example.com"} {
		m, err := e.anon.AcceptInvitation(ctx, tokens[email])
		if err != nil || m.Email != email || m.Role != "developer" {
			t.Fatalf("accept %s: %+v %v", email, m, err)
		}
		_, err = e.anon.AcceptInvitation(ctx, tokens[email])
		wantCode(t, err, "not_found")
	}
	if ms, err := a.owner.Members(ctx); err != nil || len(ms) != 3 {
		t.Fatalf("members after both accept: %+v %v", ms, err)
	}
	if _, err := e.anon.Login(ctx, api.SessionRequest{Email: "fresh@example.com", Password: "initial password 1"}); err != nil {
		t.Fatalf("the new member signs in with the inviter's password: %v", err)
	}
	if _, err := e.anon.Login(ctx, api.SessionRequest{Email: "elsewhere@example.com", Password: "initial password 1", Tenant: "inviter"}); !client.IsCode(err, "unauthenticated") {
		t.Fatalf("the existing user's password changed to the inviter's: %v", err)
	}
	if _, err := e.anon.Login(ctx, api.SessionRequest{Email: "elsewhere@example.com", Password: "password-elsewhere-1", Tenant: "inviter"}); err != nil {
		t.Fatalf("the existing user signs in to the new tenant with their own password: %v", err)
	}
	if status, body := post(`{"email":"x@example.com","role":"developer","password":"short"}`); status != http.StatusBadRequest {
		t.Fatalf("weak password: %d %s", status, body)
	}
}
