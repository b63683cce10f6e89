package admission

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/quotas"
)

// Cause is why a request was refused or throttled; it is the cause label
// of the sluice_quota_rejections_total metric.
type Cause string

// Causes of refusal.
const (
	CauseDiskFull    Cause = "disk_full"          // the broker's disk is above its hard watermark
	CauseStorage     Cause = "storage"            // the tenant's stored bytes reached max_storage_bytes
	CauseMessageSize Cause = "message_size"       // a batch is larger than the tenant's max_message_bytes
	CauseConnections Cause = "connections"        // the tenant has max_connections to this broker
	CauseRequestRate Cause = "request_rate"       // the tenant is over max_requests_per_sec
	CauseProduceRate Cause = "produce_throughput" // the tenant owes produce bytes or messages (HTTP only)
	CauseFetchRate   Cause = "fetch_throughput"   // the tenant owes fetch bytes (HTTP only)
)

// Refusal is a request admission refused. It wraps the catalogue error
// the caller sees (errors.As finds the *catalog.Error); RetryAfter is how
// long to wait before retrying, zero when retrying alone will not help
// soon.
type Refusal struct {
	Cause      Cause
	RetryAfter time.Duration
	Err        *catalog.Error
}

func (r *Refusal) Error() string { return r.Err.Error() }

// Unwrap returns the catalogue error.
func (r *Refusal) Unwrap() error { return r.Err }

// Op is what a request does, for Admit and Record.
type Op uint8

// Ops.
const (
	OpProduce Op = iota // write records: bytes and messages
	OpFetch             // read records: bytes
)

func (a *Admission) refuse(tenant string, c Cause, retry time.Duration, err *catalog.Error) *Refusal {
	a.metrics.reject(tenant, c)
	return &Refusal{Cause: c, RetryAfter: retry, Err: err}
}

// CheckProduce decides whether a produce of one batch of size bytes may be
// appended for a tenant: it is refused when the broker's disk is above its
// hard watermark, when the tenant stores its max_storage_bytes or more,
// or when the batch is larger than the tenant's max_message_bytes. It
// does not look at throughput, which is throttled after the fact (Record).
func (a *Admission) CheckProduce(tenant string, size int) error {
	if d := a.disk.Load(); d.refusal != nil {
		var df *quotas.DiskFullError
		errors.As(d.refusal, &df)
		msg := fmt.Sprintf("broker %s: disk %.1f%% full (%d of %d bytes), at or above its %.0f%% hard watermark; produce resumes below %.0f%%, retry later",
			a.cfg.BrokerID, 100*float64(df.UsedBytes)/float64(df.TotalBytes), df.UsedBytes, df.TotalBytes, 100*df.Hard, 100*df.Resume)
		return a.refuse(tenant, CauseDiskFull, a.cfg.Every, catalog.DiskFull.Wrap(d.refusal, msg))
	}
	a.mu.Lock()
	t := a.tenants[tenant]
	var limits struct{ storage, stored int64 }
	var maxMsg int
	if t != nil {
		limits.storage, limits.stored, maxMsg = t.limits.MaxStorageBytes, t.stored, t.limits.MaxMessageBytes
	}
	a.mu.Unlock()
	if maxMsg > 0 && size > maxMsg {
		return a.refuse(tenant, CauseMessageSize, 0, catalog.MessageTooLarge.Newf(
			"the record batch is %d bytes, larger than the tenant's max_message_bytes quota of %d", size, maxMsg))
	}
	if limits.storage > 0 && limits.stored >= limits.storage {
		return a.refuse(tenant, CauseStorage, 0, catalog.StorageQuotaExceeded.Newf(
			"the tenant stores %d bytes on this cell, at or above its max_storage_bytes quota of %d", limits.stored, limits.storage))
	}
	return nil
}

// RecordProduce records an admitted produce of bytes and messages for a
// tenant and returns the throttle the client must then wait: enough to
// repay its debt on either bucket, and above the soft disk watermark at
// least SoftThrottle when the tenant is one of the heaviest writers.
func (a *Admission) RecordProduce(tenant string, bytes, messages int64) time.Duration {
	now := a.cfg.Now()
	d := a.cfg.Buckets.Record(tenant, quotas.ProduceBytes, bytes, now)
	a.metrics.throttle(tenant, quotas.ProduceBytes.String(), d)
	dm := a.cfg.Buckets.Record(tenant, quotas.ProduceMessages, messages, now)
	a.metrics.throttle(tenant, quotas.ProduceMessages.String(), dm)
	d = max(d, dm)
	a.mu.Lock()
	if t := a.tenants[tenant]; t != nil {
		t.written += bytes
	}
	heavy := a.heavy[tenant]
	a.mu.Unlock()
	if heavy && a.disk.Load().state != quotas.DiskOK && d < a.cfg.SoftThrottle {
		a.metrics.throttle(tenant, "disk_soft", a.cfg.SoftThrottle-d)
		d = a.cfg.SoftThrottle
	}
	a.metrics.bytes(tenant, "produce", bytes)
	return a.capped(d)
}

// RecordFetch records fetch response bytes sent to a tenant and returns
// the throttle the client must then wait.
func (a *Admission) RecordFetch(tenant string, bytes int64) time.Duration {
	d := a.cfg.Buckets.Record(tenant, quotas.FetchBytes, bytes, a.cfg.Now())
	a.metrics.throttle(tenant, quotas.FetchBytes.String(), d)
	a.metrics.bytes(tenant, "fetch", bytes)
	return a.capped(d)
}

// Request counts one request of a tenant against its request rate and
// returns how long the client must wait before its next one (zero within
// the rate). It is record-then-throttle, for the Kafka listener: the
// request goes ahead in any case and the wait repays the debt it leaves,
// capped at MaxThrottle (a longer debt is kept).
func (a *Admission) Request(tenant string) time.Duration {
	now := a.cfg.Now()
	a.mu.Lock()
	t := a.tenants[tenant]
	var d time.Duration
	if t != nil && t.requests != nil {
		d = t.requests.ReserveN(now, 1).DelayFrom(now)
	}
	a.mu.Unlock()
	a.metrics.throttle(tenant, "requests", d)
	return a.capped(d)
}

// takeRequest is Request for front doors that refuse instead of muting:
// it takes one request from the tenant's request rate when the rate has
// one to give and returns zero; otherwise it takes nothing and returns
// how long until the rate has one. A refused request must not make the
// next one wait longer: a client that retries when told would otherwise
// be refused for ever, each refusal adding to the debt.
func (a *Admission) takeRequest(tenant string) time.Duration {
	now := a.cfg.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.tenants[tenant]
	if t == nil || t.requests == nil || t.requests.AllowN(now, 1) {
		return 0
	}
	return untilTokens(t.requests, now, 1)
}

// untilTokens is how long from now until lim holds n tokens, rounded up
// to the nanosecond.
func untilTokens(lim *rate.Limiter, now time.Time, n float64) time.Duration {
	need := n - lim.TokensAt(now)
	if need <= 0 {
		return 0
	}
	if lim.Limit() <= 0 {
		return time.Duration(math.MaxInt64)
	}
	d := math.Ceil(need / float64(lim.Limit()) * float64(time.Second))
	if d >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(d)
}

// Connect counts a new authenticated connection of a tenant to this
// broker. It is refused when the tenant already has its max_connections;
// otherwise release must be called once when the connection closes.
func (a *Admission) Connect(id string) (release func(), err error) {
	a.mu.Lock()
	t := a.tenants[id]
	if t == nil {
		t = &tenant{}
		a.tenants[id] = t
	}
	if m := t.limits.MaxConnections; m > 0 && t.conns >= m {
		a.mu.Unlock()
		return nil, a.refuse(id, CauseConnections, time.Second, catalog.ConnectionLimit.Newf(
			"the tenant already has %d connections to broker %s, its max_connections quota", t.conns, a.cfg.BrokerID))
	}
	t.conns++
	a.mu.Unlock()
	var once bool
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if !once {
			once = true
			t.conns--
		}
	}, nil
}

// Egress waits for a fetch response of bytes to a tenant to take its turn
// in the broker's egress budget (fair egress). It returns at once without
// a budget, and ctx's error when ctx ends first.
func (a *Admission) Egress(ctx context.Context, tenant string, bytes int64) error {
	return a.egress.wait(ctx, tenant, bytes)
}

// Admit is for front doors that refuse instead of muting (the HTTP data
// API answers 429 with Retry-After): it checks, for a produce,
// CheckProduce with size, the tenant's throughput debt for op, and then
// takes one request from its request rate. It returns nil or a *Refusal
// whose RetryAfter is the true wait (not capped at MaxThrottle: a
// refusal holds no connection). A refused request takes nothing from any
// bucket, so waiting the RetryAfter is enough for the next one to be
// admitted (unless other requests of the tenant came first). After an
// admitted request, call Record with what it actually moved.
func (a *Admission) Admit(tenant string, op Op, size int) error {
	return a.admit(tenant, op, size, true)
}

// AdmitForwarded is Admit for a request another broker of the cell
// admitted already and forwarded here (to the partition's leader or the
// group's coordinator, or a coordinator's own read of a partition led
// here): its request was counted where it entered the cell, so only the
// disk, storage and throughput checks apply. The caller must have proof
// that a broker sent it; a tenant's claim is not enough.
func (a *Admission) AdmitForwarded(tenant string, op Op, size int) error {
	return a.admit(tenant, op, size, false)
}

func (a *Admission) admit(tenant string, op Op, size int, request bool) error {
	now := a.cfg.Now()
	switch op {
	case OpProduce:
		if err := a.CheckProduce(tenant, size); err != nil {
			return err
		}
		d := max(a.cfg.Buckets.Throttle(tenant, quotas.ProduceBytes, now), a.cfg.Buckets.Throttle(tenant, quotas.ProduceMessages, now))
		if d > 0 {
			return a.refuse(tenant, CauseProduceRate, d, catalog.ThroughputExceeded.Newf(
				"the tenant is over its produce quota; retry in %s", roundUp(d)))
		}
	case OpFetch:
		if d := a.cfg.Buckets.Throttle(tenant, quotas.FetchBytes, now); d > 0 {
			return a.refuse(tenant, CauseFetchRate, d, catalog.ThroughputExceeded.Newf(
				"the tenant is over its fetch quota; retry in %s", roundUp(d)))
		}
	}
	if !request {
		return nil
	}
	if d := a.takeRequest(tenant); d > 0 {
		return a.refuse(tenant, CauseRequestRate, d, catalog.RequestRateExceeded.Newf(
			"the tenant is over its request rate; retry in %s", roundUp(d)))
	}
	return nil
}

// roundUp is d rounded up to the millisecond, for messages: a wait is
// never shown shorter than it is.
func roundUp(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

// Record records what an admitted request moved (bytes, and messages for a
// produce) and returns the throttle the client should wait before its next
// request (an HTTP front door may send it as Retry-After on the next
// refusal, or simply let Admit refuse until it has passed).
func (a *Admission) Record(tenant string, op Op, bytes, messages int64) time.Duration {
	if op == OpFetch {
		return a.RecordFetch(tenant, bytes)
	}
	return a.RecordProduce(tenant, bytes, messages)
}
