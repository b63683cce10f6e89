package cptest

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/controlplane/mail"
)

// SignUp signs up through anon as a user would: POST /v1/signup, then the
// token of the newest mail to req.Email in mailDir (the control plane's
// mail.Dir mailer), then POST /v1/signup/confirm. The error is the
// signup's, the confirmation's, or that the mail carried no token (the
// address or name was taken: the mail's text says which).
func SignUp(ctx context.Context, anon *client.Client, mailDir string, req api.SignupRequest) (api.SignupResponse, error) {
	if _, err := anon.Signup(ctx, req); err != nil {
		return api.SignupResponse{}, err
	}
	token, err := mailedToken(mailDir, req.Email, "signup")
	if err != nil {
		return api.SignupResponse{}, err
	}
	return anon.ConfirmSignup(ctx, token)
}

// Mailer returns a mail.Dir mailer writing into a temporary directory, and
// that directory, for a control plane a test builds itself (SignUp reads
// its mail).
func Mailer(t testing.TB) (*mail.Dir, string) {
	t.Helper()
	dir := t.TempDir()
	m, err := mail.NewDir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m, dir
}

// AddMember invites req.Email through by (POST /v1/members) and accepts
// with the token of the newest mail to it in mailDir, through anon, as the
// invited person would; it returns the member.
func AddMember(ctx context.Context, by, anon *client.Client, mailDir string, req api.AddMemberRequest) (api.Member, error) {
	if _, err := by.AddMember(ctx, req); err != nil {
		return api.Member{}, err
	}
	token, err := mailedToken(mailDir, req.Email, "invitation")
	if err != nil {
		return api.Member{}, err
	}
	return anon.AcceptInvitation(ctx, token)
}

// mailedToken is the token in the newest mail to addr in mailDir; the
// error says when that mail (the what mail) carries none, with its text.
func mailedToken(mailDir, addr, what string) (string, error) {
	text, err := mail.Last(mailDir, addr)
	if err != nil {
		return "", err
	}
	token := mail.Token(text)
	if token == "" {
		return "", fmt.Errorf("the %s mail to %s has no token:\n%s", what, addr, text)
	}
	return token, nil
}
