package mail

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// The dev mailers say in the log that nothing was sent; Dir keeps each
// message as a file, and Last finds the newest to an address.
func TestDevMailers(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	d, err := NewDir(t.TempDir(), log)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, m := range []Message{
		{To: "a@example.com", Subject: "first", Body: "token: one"},
		{To: "b@example.com", Subject: "other", Body: "token: other"},
		{To: "a@example.com", Subject: "second", Body: "no token here\ntoken: two\nbye"},
		{To: "../c@example.com", Subject: "odd address", Body: "x"},
	} {
		if err := d.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	text, err := Last(d.Path, "a@example.com")
	if err != nil || !strings.Contains(text, "Subject: second") || Token(text) != "two" {
		t.Fatalf("newest mail to a: %q %v (token %q)", text, err, Token(text))
	}
	if text, err := Last(d.Path, "nobody@example.com"); text != "" || err != nil {
		t.Fatalf("mail to nobody: %q %v", text, err)
	}
	if text, _ := Last(d.Path, "../c@example.com"); !strings.Contains(text, "odd address") {
		t.Fatalf("an address with a path in it: %q", text)
	}
	if Token("tokens: x\n token: y") != "" {
		t.Fatal("Token matched a line that is not a token line")
	}
	if got := logs.String(); strings.Count(got, "dev mailer: mail NOT sent") != 4 {
		t.Fatalf("log lines:\n%s", got)
	}
}
