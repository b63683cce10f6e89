// Package cellview is a broker's view of its cell's desired state: it long-polls
// the control plane's internal cell API, keeps the newest state in memory and
// in a file beside the broker's data (so the broker keeps serving through a
// control-plane outage and restarts with it), and answers the lookups of the
// front doors: API keys, tenants, topics, ACLs.
//
// The data plane imports it; it imports only the control plane's public leaf
// packages.
package cellview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/credential"
	"github.com/sluicehq/sluice/contract/wire"
)

// Config configures a Syncer.
type Config struct {
	// Cell is the cell's id; required.
	Cell string
	// API is a client of the control plane carrying the cell key; required
	// for Run (a Syncer without it serves only its cached state).
	API *client.Client
	// CacheFile holds the last state received; required.
	CacheFile string
	// Wait is how long one long-poll may wait (default 30 s).
	Wait time.Duration
	// RetryEvery is the pause after a failed poll (default 2 s).
	RetryEvery time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (c *Config) validate() error {
	if c.Cell == "" {
		return errors.New("state config: Cell is required")
	}
	if c.CacheFile == "" {
		return errors.New("state config: CacheFile is required")
	}
	if c.Wait == 0 {
		c.Wait = 30 * time.Second
	}
	if c.RetryEvery == 0 {
		c.RetryEvery = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Syncer keeps the cell's state current.
type Syncer struct {
	cfg Config

	// mu guards the fields below.
	mu      sync.RWMutex
	view    *View
	lastOK  time.Time
	waiters []chan struct{}

	// usedMu guards the field below (apart from mu: it is taken on
	// requests, not on state changes).
	usedMu sync.Mutex
	used   map[string]struct{} // key ids used since TakeKeysUsed
}

// New loads the cached state, if any, and returns a Syncer. Call Run to keep
// it current.
func New(cfg Config) (*Syncer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Syncer{cfg: cfg, view: emptyView(cfg.Cell)}
	b, err := os.ReadFile(cfg.CacheFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read state cache: %w", err)
	default:
		var st wire.CellState
		if err := json.Unmarshal(b, &st); err != nil {
			// A damaged cache is not fatal: the control plane has the truth.
			cfg.Logger.Warn("state cache unreadable; waiting for the control plane", "file", cfg.CacheFile, "err", err)
			break
		}
		v, err := newView(st)
		if err != nil {
			cfg.Logger.Warn("state cache rejected; waiting for the control plane", "file", cfg.CacheFile, "err", err)
			break
		}
		s.view = v
		cfg.Logger.Info("loaded cached cell state", "state_version", st.StateVersion)
	}
	return s, nil
}

// View returns the current state. Views are immutable; hold one for the
// duration of a request.
func (s *Syncer) View() *View {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.view
}

// LastSync is when the control plane last answered.
func (s *Syncer) LastSync() time.Time {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.lastOK
}

// Changed returns a channel closed at the next state change.
func (s *Syncer) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	s.waiters = append(s.waiters, ch)
	return ch
}

// Run long-polls until ctx ends. Failures are logged and retried; the last
// good state keeps serving meanwhile.
func (s *Syncer) Run(ctx context.Context) error {
	if s.cfg.API == nil {
		return errors.New("state: Run needs Config.API")
	}
	for {
		err := s.pollOnce(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			s.cfg.Logger.Warn("poll cell state", "cell", s.cfg.Cell, "err", err)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(s.cfg.RetryEvery):
			}
		}
	}
}

// pollOnce waits for one change (or the poll's end) and applies it.
func (s *Syncer) pollOnce(ctx context.Context) error {
	after := s.View().StateVersion
	st, changed, err := s.cfg.API.CellState(ctx, s.cfg.Cell, after, s.cfg.Wait)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.lastOK = s.cfg.Now()
	s.mu.Unlock()
	if !changed {
		return nil
	}
	return s.Apply(st)
}

// Apply installs st if it is newer than the current state, writes the cache
// and wakes the Changed waiters.
func (s *Syncer) Apply(st wire.CellState) error {
	if st.Version != wire.Version {
		return fmt.Errorf("cell state version %d; this broker speaks %d", st.Version, wire.Version)
	}
	if st.Cell != s.cfg.Cell {
		return fmt.Errorf("cell state for %q, want %q", st.Cell, s.cfg.Cell)
	}
	v, err := newView(st)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(s.cfg.CacheFile, st); err != nil {
		return err
	}
	s.mu.Lock()
	if st.StateVersion <= s.view.StateVersion {
		s.mu.Unlock()
		return nil
	}
	s.view = v
	waiters := s.waiters
	s.waiters = nil
	s.mu.Unlock()
	for _, ch := range waiters {
		close(ch)
	}
	s.cfg.Logger.Info("cell state applied", "state_version", st.StateVersion, "tenants", len(st.Tenants), "topics", len(st.Topics))
	return nil
}

func writeFileAtomic(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode state cache: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create state cache dir: %w", err)
	}
	f, err := os.CreateTemp(dir, ".state-*")
	if err != nil {
		return fmt.Errorf("write state cache: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("write state cache: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync state cache: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close state cache: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("install state cache: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync state cache dir: %w", err)
	}
	defer d.Close()
	return d.Sync()
}

// ErrBadCredentials is returned for any failed key check; callers must not
// tell the client more than that, except for revoked or expired keys whose
// secret was right.
var ErrBadCredentials = errors.New("the API key id or secret is wrong")

// ErrKeyExpired means the secret was right but the key has expired.
var ErrKeyExpired = errors.New("the API key has expired")

// ErrTenantSuspended means the key's tenant is suspended.
var ErrTenantSuspended = errors.New("the tenant is suspended")

// Authenticate checks a key id and secret (SASL/PLAIN) against the state.
// Revoked keys are absent from the state, so they fail like unknown ones.
func (v *View) Authenticate(id, secret string, now time.Time) (*Principal, error) {
	k, ok := v.keys[id]
	if !ok {
		credential.CheckSecret(make([]byte, 32), secret)
		return nil, ErrBadCredentials
	}
	if !credential.CheckSecret(k.SecretHash, secret) {
		return nil, ErrBadCredentials
	}
	return v.admit(k, now)
}

// admit returns the principal of a key whose secret the caller proved it
// knows: expired keys and suspended tenants are refused.
func (v *View) admit(k *wire.Key, now time.Time) (*Principal, error) {
	if k.ExpiresAt != nil && !now.Before(*k.ExpiresAt) {
		return nil, ErrKeyExpired
	}
	t, ok := v.tenants[k.TenantID]
	if !ok {
		return nil, ErrBadCredentials
	}
	if t.Status != "active" {
		return nil, ErrTenantSuspended
	}
	return &Principal{KeyID: k.ID, TenantID: k.TenantID, Role: k.Role}, nil
}

// Principal is an authenticated API key.
type Principal struct {
	KeyID    string
	TenantID string
	Role     string
}

// Valid reports whether the principal's key is still present, unexpired and
// its tenant active in this view: connections re-check it when state changes.
func (v *View) Valid(p *Principal, now time.Time) bool {
	k, ok := v.keys[p.KeyID]
	if !ok || k.TenantID != p.TenantID || k.Role != p.Role {
		return false
	}
	if k.ExpiresAt != nil && !now.Before(*k.ExpiresAt) {
		return false
	}
	t, ok := v.tenants[p.TenantID]
	return ok && t.Status == "active"
}

// Allowed evaluates the tenant's ACLs for the principal.
func (v *View) Allowed(p *Principal, resourceType, name, op string) bool {
	acl := v.acls[p.TenantID]
	return acl != nil && acl.Allowed(p.KeyID, resourceType, name, op)
}
