// Package mail is the control plane's seam for the messages it sends to an
// email address: the signup confirmation (or the news that the address or
// tenant name is taken) and the invitation to a tenant. The API answers
// those requests the same way whatever the address's state, so whether an
// address is registered is told only to whoever reads its mail.
//
// Production plugs a real mailer (SMTP, a provider's API) in as a Mailer
// in controlplane.Config. This package has the two the project runs: Log,
// which writes each message to the log and sends nothing, and Dir, which
// also keeps each message as a file for `tenantd dev`, its tour and the
// tests to read. Imported by controlplane, tenantd and the tools that
// drive a control plane.
package mail

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Message is one mail to one address.
type Message struct {
	To      string
	Subject string
	// Body is plain text. A message that carries a token has it on its
	// own line as "token: <token>" (see Token).
	Body string
}

// A Mailer delivers messages. Send may block while it hands the message
// over; an error means the message was not accepted for delivery.
type Mailer interface {
	Send(ctx context.Context, m Message) error
}

// Log writes every message to the log at warn level, saying that it was
// not sent: the development mailer, for a control plane without a real
// one.
type Log struct{ Logger *slog.Logger }

// Send logs m.
func (l Log) Send(_ context.Context, m Message) error {
	l.Logger.Warn("dev mailer: mail NOT sent (no mailer configured; production plugs one in), message follows",
		"to", m.To, "subject", m.Subject, "body", m.Body)
	return nil
}

// Dir is Log that also writes each message to a file in a directory, one
// file per message, named so that they sort in the order sent.
type Dir struct {
	Path   string
	Logger *slog.Logger

	mu  sync.Mutex // serialises the names
	seq int
}

// NewDir returns a Dir mailer writing into path (created, mode 0700).
func NewDir(path string, log *slog.Logger) (*Dir, error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("create mail dir: %w", err)
	}
	return &Dir{Path: path, Logger: log}, nil
}

// Send writes m to a new file and logs it.
func (d *Dir) Send(ctx context.Context, m Message) error {
	d.mu.Lock()
	d.seq++
	name := fmt.Sprintf("%d-%06d-%s.txt", time.Now().UnixNano(), d.seq, fileSafe(m.To))
	d.mu.Unlock()
	text := "To: " + m.To + "\nSubject: " + m.Subject + "\n\n" + m.Body + "\n"
	if err := os.WriteFile(filepath.Join(d.Path, name), []byte(text), 0o600); err != nil {
		return fmt.Errorf("write mail: %w", err)
	}
	if d.Logger != nil {
		Log{Logger: d.Logger}.Send(ctx, m)
	}
	return nil
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9@._+-]`)

func fileSafe(s string) string { return unsafeName.ReplaceAllString(s, "_") }

// Last returns the text of the newest message in dir addressed to to, or
// "" when there is none.
func Last(dir, to string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("read mail dir: %w", err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), "-"+fileSafe(to)+".txt") {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return "", nil
	}
	sort.Strings(names)
	b, err := os.ReadFile(filepath.Join(dir, names[len(names)-1]))
	if err != nil {
		return "", fmt.Errorf("read mail: %w", err)
	}
	return string(b), nil
}

var tokenLine = regexp.MustCompile(`(?m)^token: (\S+)$`)

// Token returns the token a message's text carries, or "".
func Token(text string) string {
	if m := tokenLine.FindStringSubmatch(text); m != nil {
		return m[1]
	}
	return ""
}
