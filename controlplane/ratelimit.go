package controlplane

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"
)

// limiter keeps one token bucket per key (an email, a client address, a
// cell). With a Redis (Config.RateLimitRedis) the buckets live there, so
// every control plane instance on that Redis draws from the same bucket
// and the configured limit holds across all of them. Without one, or
// while Redis does not answer, the buckets live in this process's memory
// (local): each instance then limits on its own, and with N instances the
// effective limit is up to N times the configured one (docs/operations.md,
// "Two or more control planes"). Redis failing falls back to the local
// buckets rather than refusing every call (fail open to the per-instance
// limit): a managed service does not lock every user out because its
// Redis blipped, and the local buckets still bound a guessing attacker.
type limiter struct {
	name  string
	every time.Duration
	burst int
	now   func() time.Time
	rdb   redis.UniversalClient // nil: local buckets only
	pfx   string                // Redis key prefix of this limit's buckets
	log   *slog.Logger

	// mu guards the fields below.
	mu        sync.Mutex
	buckets   map[string]*rate.Limiter
	lastSweep time.Time
	// redisDownUntil skips Redis after a failure, so an absent Redis
	// costs one timeout per redisRetry, not one per call.
	redisDownUntil time.Time
}

const (
	// redisTimeout bounds one Redis round trip of a limit check.
	redisTimeout = 250 * time.Millisecond
	// redisRetry is how long the local buckets are used after Redis failed.
	redisRetry = 5 * time.Second
)

// newLimiter returns the limit called name (part of its Redis keys:
// namespace:cp:rate:name:<hash of the key>) of burst calls, then one per
// every.
func newLimiter(name string, every time.Duration, burst int, cfg *Config) *limiter {
	return &limiter{name: name, every: every, burst: burst, now: cfg.Now, rdb: cfg.RateLimitRedis,
		pfx: cfg.RateLimitNamespace + ":cp:rate:" + name + ":", log: cfg.Logger, buckets: map[string]*rate.Limiter{}}
}

// allow takes a token from every key's bucket and reports whether all had
// one; it returns how long to wait otherwise.
func (l *limiter) allow(ctx context.Context, keys ...string) (bool, time.Duration) {
	if l.rdb != nil && l.redisUp() {
		ok, wait, err := l.allowRedis(ctx, keys)
		if err == nil {
			return ok, wait
		}
		if ctx.Err() == nil { // not the caller going away: Redis failed
			l.mu.Lock()
			l.redisDownUntil = time.Now().Add(redisRetry)
			l.mu.Unlock()
			l.log.Warn("rate limit redis unavailable; limiting per instance", "limit", l.name, "retry_in", redisRetry, "err", err)
		}
	}
	return l.allowLocal(keys)
}

func (l *limiter) redisUp() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !time.Now().Before(l.redisDownUntil)
}

// gcraScript is the generic cell rate algorithm over one key per bucket:
// each key holds its theoretical arrival time (TAT, microseconds of the
// Redis clock, so instances' clocks need not agree). A call is allowed
// when now >= TAT + every - burst*every; each key is charged on its own,
// like the local buckets. It returns {all allowed (1/0), wait µs}.
var gcraScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local every = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local ok, wait = 1, 0
for _, k in ipairs(KEYS) do
  local tat = tonumber(redis.call('GET', k) or now)
  if tat < now then tat = now end
  local nt = tat + every
  local allowAt = nt - burst * every
  if now < allowAt then
    ok = 0
    if allowAt - now > wait then wait = allowAt - now end
  else
    redis.call('SET', k, string.format('%.0f', nt), 'PX', math.ceil((nt - now) / 1000) + 1)
  end
end
return {ok, wait}
`)

func (l *limiter) allowRedis(ctx context.Context, keys []string) (bool, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	rk := make([]string, len(keys))
	for i, k := range keys {
		// Hashed: the keys name emails and addresses, which Redis need not hold.
		sum := sha256.Sum256([]byte(k))
		rk[i] = l.pfx + hex.EncodeToString(sum[:16])
	}
	res, err := gcraScript.Run(ctx, l.rdb, rk, strconv.FormatInt(l.every.Microseconds(), 10), l.burst).Int64Slice()
	if err != nil {
		return false, 0, err
	}
	if len(res) != 2 {
		return false, 0, errors.New("rate limit script: unexpected reply")
	}
	return res[0] == 1, time.Duration(res[1]) * time.Microsecond, nil
}

func (l *limiter) allowLocal(keys []string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	ok, wait := true, time.Duration(0)
	for _, k := range keys {
		b := l.buckets[k]
		if b == nil {
			b = rate.NewLimiter(rate.Every(l.every), l.burst)
			l.buckets[k] = b
		}
		if !b.AllowN(now, 1) {
			ok = false
			r := b.ReserveN(now, 1)
			if d := r.DelayFrom(now); d > wait {
				wait = d
			}
			r.CancelAt(now)
		}
	}
	return ok, wait
}

func (l *limiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < time.Minute {
		return
	}
	l.lastSweep = now
	for k, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, k)
		}
	}
}
