// Package keyhome asks the control plane where the tenant of an API key
// that this broker's cell does not know lives, for every front door (the
// Kafka listener redirects the client, the HTTP data API proxies the
// request to the home cell): answers are cached by key id and secret
// digest, concurrent lookups of one key coalesced, and the lookups of a
// listener rate limited, so unknown keys cannot flood the control plane.
// It imports only the wire contract.
package keyhome

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/contract/wire"
)

// Homes says where the tenant of an API key that this broker's cell does
// not know lives. Production: the control plane's key-home lookup
// (client.KeyHome with the broker's cell key), which checks the secret
// itself so that no cell holds another cell's key hashes.
type Homes interface {
	KeyHome(ctx context.Context, keyID, secret string) (wire.KeyHome, error)
}

// HomesFunc adapts a function to Homes.
type HomesFunc func(ctx context.Context, keyID, secret string) (wire.KeyHome, error)

// KeyHome calls f.
func (f HomesFunc) KeyHome(ctx context.Context, keyID, secret string) (wire.KeyHome, error) {
	return f(ctx, keyID, secret)
}

// Limits bound what key-home lookups cost the control plane. Every
// field's zero value takes its default.
type Limits struct {
	// TTL is how long an answer for a valid key is reused, by every
	// connection presenting that key and secret (default 2 s). A redirect
	// session's Metadata answers are at most this old.
	TTL time.Duration
	// MissTTL is how long an answer for an invalid, expired or suspended
	// key is reused (default 10 s): a client retrying a wrong key costs
	// one lookup per MissTTL.
	MissTTL time.Duration
	// PerSecond and Burst limit this listener's lookups (defaults 20 and
	// 40). Beyond them an unknown key fails authentication as a wrong one
	// does, without a lookup.
	PerSecond float64
	Burst     int
	// MaxEntries bounds the remembered answers (default 10,000).
	MaxEntries int
}

// Fill checks l and fills its defaults.
func (l *Limits) Fill() error {
	if l.TTL < 0 || l.MissTTL < 0 || l.PerSecond < 0 || l.Burst < 0 || l.MaxEntries < 0 {
		return errors.New("key-home limits must not be negative")
	}
	l.TTL = cmp.Or(l.TTL, 2*time.Second)
	l.MissTTL = cmp.Or(l.MissTTL, 10*time.Second)
	l.PerSecond = cmp.Or(l.PerSecond, 20)
	l.Burst = cmp.Or(l.Burst, 40)
	l.MaxEntries = cmp.Or(l.MaxEntries, 10_000)
	return nil
}

// Stale is how long a valid answer may stand in when the control plane
// cannot be asked (down, or the lookup limit reached).
const Stale = time.Minute

// homeLookupWait bounds one lookup.
const homeLookupWait = 5 * time.Second

// ErrLimited: the lookup limit is reached and nothing usable is cached.
var ErrLimited = errors.New("key-home lookups are over their limit")

// Cache remembers key-home answers by key id and secret digest (never
// the secret), coalesces concurrent lookups of one key, and limits the
// lookups of the listener.
type Cache struct {
	homes  Homes
	limits Limits
	now    func() time.Time
	lim    *rate.Limiter

	// mu guards the fields below.
	mu      sync.Mutex
	entries map[homeKey]*homeEntry
}

type homeKey struct {
	id  string
	sum [sha256.Size]byte
}

type homeEntry struct {
	home  wire.KeyHome
	at    time.Time     // when home was answered; zero before the first answer
	wait  chan struct{} // closed when the lookup in flight ends; nil when none is
	stamp time.Time     // last use, for trimming
}

// NewCache returns a cache over h; l must have been filled (Limits.Fill).
func NewCache(h Homes, l Limits, now func() time.Time) *Cache {
	return &Cache{homes: h, limits: l, now: now, lim: rate.NewLimiter(rate.Limit(l.PerSecond), l.Burst),
		entries: map[homeKey]*homeEntry{}}
}

// Lookup returns the answer for a key id and secret: a cached one if fresh
// enough, else the control plane's. With the control plane unreachable or
// the limit reached, a valid answer up to Stale old stands in.
func (h *Cache) Lookup(ctx context.Context, keyID, secret string) (wire.KeyHome, error) {
	k := homeKey{id: keyID, sum: sha256.Sum256([]byte(secret))}
	for {
		h.mu.Lock()
		now := h.now()
		e := h.entries[k]
		if e != nil {
			e.stamp = now
			if !e.at.IsZero() && now.Sub(e.at) < h.ttl(e.home) {
				home := e.home
				h.mu.Unlock()
				return home, nil
			}
			if e.wait != nil {
				ch := e.wait
				h.mu.Unlock()
				select {
				case <-ch:
					continue
				case <-ctx.Done():
					return wire.KeyHome{}, ctx.Err()
				}
			}
		}
		if !h.lim.AllowN(now, 1) {
			home, ok := h.stale(e, now)
			h.mu.Unlock()
			if ok {
				return home, nil
			}
			return wire.KeyHome{}, ErrLimited
		}
		if e == nil {
			h.trim(now)
			e = &homeEntry{stamp: now}
			h.entries[k] = e
		}
		ch := make(chan struct{})
		e.wait = ch
		h.mu.Unlock()

		lctx, cancel := context.WithTimeout(ctx, homeLookupWait)
		home, err := h.homes.KeyHome(lctx, keyID, secret)
		cancel()

		h.mu.Lock()
		e.wait = nil
		close(ch)
		if err == nil {
			e.home, e.at = home, h.now()
			h.mu.Unlock()
			return home, nil
		}
		home, ok := h.stale(e, h.now())
		h.mu.Unlock()
		if ok {
			return home, nil
		}
		return wire.KeyHome{}, err
	}
}

func (h *Cache) ttl(home wire.KeyHome) time.Duration {
	if home.Status == wire.KeyValid {
		return h.limits.TTL
	}
	return h.limits.MissTTL
}

// stale returns e's valid answer if it is at most Stale old. Only
// with mu held.
func (h *Cache) stale(e *homeEntry, now time.Time) (wire.KeyHome, bool) {
	if e == nil || e.at.IsZero() || e.home.Status != wire.KeyValid || now.Sub(e.at) >= Stale {
		return wire.KeyHome{}, false
	}
	return e.home, true
}

// trim makes room for one more entry: first it drops answers too old to
// be used, then, if still full, every entry with no lookup in flight that
// was not used within the last TTL. Only with mu held.
func (h *Cache) trim(now time.Time) {
	if len(h.entries) < h.limits.MaxEntries {
		return
	}
	keep := max(h.limits.MissTTL, Stale)
	for k, e := range h.entries {
		if e.wait == nil && now.Sub(e.at) >= keep {
			delete(h.entries, k)
		}
	}
	for k, e := range h.entries {
		if len(h.entries) < h.limits.MaxEntries {
			return
		}
		if e.wait == nil && now.Sub(e.stamp) >= h.limits.TTL {
			delete(h.entries, k)
		}
	}
}

// Size is the number of remembered answers.
func (h *Cache) Size() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.entries)
}
