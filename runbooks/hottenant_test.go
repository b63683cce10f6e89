package runbooks

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluicehq/sluice/contract/testkit"
)

// latencies records a producer's acknowledged produce latencies.
type latencies struct {
	mu      sync.Mutex
	at      []time.Time
	seconds []float64
}

// sloCheck makes the neighbours' recovery a failure: the compliant
// tenant's produce p99 back within 20% (+10 ms) of its solo figure within
// 30 s. It compares latencies measured a minute apart, so it is for the
// measured run of docs/oncall-hot-tenant.md on a quiet machine, not for
// make test on a busy one, where the test logs the figures and checks
// what does not depend on timing (the throttle holds, no acknowledged
// record is lost).
var sloCheck = flag.Bool("runbook-slo", false, "fail unless the compliant tenant's produce p99 recovers within 20% (+10 ms) of its solo figure within 30 s of the throttle")

func (l *latencies) add(at time.Time, d time.Duration) {
	l.mu.Lock()
	l.at, l.seconds = append(l.at, at), append(l.seconds, d.Seconds())
	l.mu.Unlock()
}

// p99 of the produces sent in [from, to), and how many there were.
func (l *latencies) p99(from, to time.Time) (time.Duration, int) {
	l.mu.Lock()
	var xs []float64
	for i, at := range l.at {
		if !at.Before(from) && at.Before(to) {
			xs = append(xs, l.seconds[i])
		}
	}
	l.mu.Unlock()
	if len(xs) == 0 {
		return 0, 0
	}
	slices.Sort(xs)
	return time.Duration(xs[min(len(xs)-1, len(xs)*99/100)] * float64(time.Second)), len(xs)
}

func kafkaClient(t *testing.T, s *stack, tn tenant, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.bootstrap), kgo.SASL(plain.Auth{User: tn.keyID, Pass: tn.secret}.AsMechanism())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// window waits d, bounded by ctx, and returns its bounds.
func window(ctx context.Context, d time.Duration) (time.Time, time.Time) {
	from := time.Now()
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	return from, time.Now()
}

// TestRunbooks runs every runbook's marked blocks in order against
// `tenantd dev`: hot-tenant.md with a synthetic hot tenant producing as
// fast as it can beside a compliant tenant producing steadily, checking
// what the runbook says (the compliant tenant's produce p99 recovers once
// the hot one is throttled; moved live to the dedicated pool and back, the
// hot one's running producer keeps its bootstrap address and loses no
// acknowledged record), then the others. A block that fails (a command that drifted from the
// CLI) or whose output misses its expectations fails the test.
func TestRunbooks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tenantd dev")
	}
	s := startStack(t)
	prom := startPrometheus(t, s) // nil without a Prometheus outside CI
	hot := s.signUp(t, "hotco", "ingest", 3)
	calm := s.signUp(t, "calmco", "orders", 3)
	leaked := s.call(t, "POST", "/v1/api-keys", "Bearer "+calm.session, `{"description":"laptop","role":"developer"}`, 201)
	// The hot tenant has a big tenant's quota: its own quota does not hold
	// it back, so it can hurt its neighbours.
	if out, err := exec.Command(s.bin, "admin", "-api", s.apiURL, "-key", s.opKey, "quota", "set", hot.id,
		"-produce-bytes-per-sec", "268435456", "-produce-messages-per-sec", "1000000", "-max-requests-per-sec", "100000",
		// and may read back what it wrote at the same pace: the final check
		// reads every acknowledged record, which at the default fetch quota
		// (2 MiB/s) takes longer than the test may for the GiB a fast disk
		// takes in 30 s.
		"-fetch-bytes-per-sec", "268435456").CombinedOutput(); err != nil {
		t.Fatalf("quota set: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// The compliant tenant: one 200-byte record every 25 ms, acks=all,
	// and a consumer group reading them (for the lag runbook).
	calmCl := kafkaClient(t, s, calm, kgo.DefaultProduceTopic("orders"))
	var calmLat latencies
	calmCtx, stopCalm := context.WithCancel(ctx)
	calmDone := make(chan struct{})
	go func() {
		defer close(calmDone)
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for i := 0; calmCtx.Err() == nil; i++ {
			start := time.Now()
			if err := calmCl.ProduceSync(calmCtx, kgo.StringRecord(fmt.Sprintf("order-%06d-%0180d", i, i))).FirstErr(); err == nil {
				calmLat.add(start, time.Since(start))
			}
			select {
			case <-calmCtx.Done():
			case <-tick.C:
			}
		}
	}()
	defer func() { stopCalm(); <-calmDone }()
	reader := kafkaClient(t, s, calm, kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("calm-readers"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if fs := reader.PollRecords(ctx, 10); fs.NumRecords() == 0 {
		t.Fatal("the compliant tenant's consumer read nothing")
	}
	if err := reader.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	if prom != nil {
		prom.waitHealthy(t, time.Minute)
	}
	soloFrom, soloTo := window(ctx, 6*time.Second)
	solo, nSolo := calmLat.p99(soloFrom, soloTo)
	if nSolo < 50 {
		t.Fatalf("the compliant tenant acknowledged %d produces in 6 s alone", nSolo)
	}

	// The hot tenant: 1 KiB incompressible records as fast as the cell
	// takes them; every acknowledged record is remembered.
	hotCl := kafkaClient(t, s, hot, kgo.DefaultProduceTopic("ingest"), kgo.ProducerLinger(2*time.Millisecond), kgo.MaxBufferedRecords(20000),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	type ack struct {
		part  int32
		off   int64
		value string
	}
	var acksMu sync.Mutex
	var acks []ack
	var hotBytes atomic.Int64
	hotCtx, stopHot := context.WithCancel(ctx)
	hotStart := time.Now()
	since := func() time.Duration { return time.Since(hotStart).Round(100 * time.Millisecond) }
	hotDone := make(chan struct{})
	go func() {
		defer close(hotDone)
		for hotCtx.Err() == nil {
			v := make([]byte, 1024)
			rand.Read(v)
			hotCl.Produce(hotCtx, &kgo.Record{Value: v}, func(r *kgo.Record, err error) {
				if err == nil {
					hotBytes.Add(int64(len(r.Value)))
					acksMu.Lock()
					acks = append(acks, ack{r.Partition, r.Offset, string(r.Value)})
					acksMu.Unlock()
				}
			})
		}
	}()
	hotRate := func(from, to time.Time, before int64) float64 {
		return float64(hotBytes.Load()-before) / to.Sub(from).Seconds()
	}
	b0 := hotBytes.Load()
	besideFrom, besideTo := window(ctx, 6*time.Second)
	beside, nBeside := calmLat.p99(besideFrom, besideTo)
	hotBeside := hotRate(besideFrom, besideTo, b0)
	t.Logf("compliant tenant's produce p99: alone %v (%d produces), beside the hot tenant %v (%d); hot tenant %.0f KiB/s",
		solo, nSolo, beside, nBeside, hotBeside/1024)
	t.Logf("T+%v: SluiceProduceLatencyAboveSLO's condition (p99 > 250 ms) for the compliant tenant: %v", since(), beside > 250*time.Millisecond)
	if prom != nil {
		// What Prometheus makes of the brokers' histogram: the rule's
		// expression for the compliant tenant, and whether it fired. On a
		// machine where the hot tenant does not push the compliant one past
		// the SLO it does not, so this is logged, not checked.
		v, err := prom.query(`histogram_quantile(0.99, sum by (le, tenant) (rate(sluice_kafka_request_seconds_bucket{api="Produce",tenant="` + calm.id + `"}[5m])))`)
		f, ferr := prom.firing("SluiceProduceLatencyAboveSLO", map[string]string{"tenant": calm.id})
		t.Logf("T+%v: Prometheus: the compliant tenant's produce p99 from the brokers' histogram %v (%v); SluiceProduceLatencyAboveSLO firing for it: %v (%v)", since(), v, err, len(f) > 0, ferr)
	}

	// kcat (librdkafka) produces for the hot tenant too, through the
	// throttle and the move: a client that gives up when all its brokers
	// close at once, which the move must not make it do.
	kc := startKcat(t, s, hot, "ingest")

	vars := map[string]string{"HOT_TENANT": hot.id, "CALM_TENANT": calm.id,
		"CALM_KEY_ID": calm.keyID, "CALM_KEY_SECRET": calm.secret, "LEAKED_TENANT": calm.id, "LEAKED_KEY_ID": leaked["id"].(string), "LEAKED_KEY_SECRET": leaked["secret"].(string),
		"DATA_API": "http://" + s.http}
	env := s.env(vars)
	blocks, err := parseRunbook("hot-tenant.md")
	if err != nil {
		t.Fatal(err)
	}
	var after time.Duration
	var hotAfter float64
	var throttledAt time.Time
	var moved, followed bool
	nAcks := func() int {
		acksMu.Lock()
		defer acksMu.Unlock()
		return len(acks)
	}
	for _, b := range blocks {
		runBlock(t, b, env, 2*time.Minute)
		t.Logf("T+%v: %s: ran hot-tenant.md:%d", since(), b.heading, b.line)
		if strings.Contains(b.script, "tenants throttle \"$HOT_TENANT\"") && throttledAt.IsZero() {
			throttledAt = time.Now()
		}
		if strings.Contains(b.script, "tenants move \"$HOT_TENANT\" -pool dev-dedicated") {
			moved = true
		}
		if moved && !followed && strings.Contains(b.script, "tenants unthrottle \"$HOT_TENANT\"") {
			// The runbook's promise after the move: the hot tenant's
			// running producer, seeded only with the shared cell's
			// address, is acknowledged again, now by the dedicated cell.
			followed = true
			kc.stop(t)
			n0 := nAcks()
			testkit.WaitForState(t, time.Minute, "the moved hot tenant's producer acknowledged again (bootstrap "+s.bootstrap+")", func() (bool, string) {
				n := nAcks() - n0
				return n >= 100, fmt.Sprintf("%d new acknowledgements since the unthrottle", n)
			})
			b1 := hotBytes.Load()
			from, to := window(ctx, 6*time.Second)
			p99, n := calmLat.p99(from, to)
			t.Logf("T+%v: after the move: %d new acknowledgements of the hot tenant's producer (bootstrap %s); compliant tenant's produce p99 %v (%d produces; alone %v); hot tenant %.0f KiB/s on its own cell",
				since(), nAcks()-n0, s.bootstrap, p99, n, solo, hotRate(from, to, b1)/1024)
		}
		if b.heading != "3. Verify the neighbours recovered" {
			continue
		}
		// The runbook's promise: within 30 s of the throttle, a 6-second
		// window of the compliant tenant's produces has its p99 back within
		// 20% (+10 ms of scheduling noise on a shared machine) of its solo
		// figure. Windows follow one another until one does or 30 s pass.
		limit := time.Duration(1.2*float64(solo)) + 10*time.Millisecond
		var recovered bool
		var hotBytesAfter, hotSecondsAfter float64
		until := time.Now().Add(30 * time.Second)
		for !recovered && time.Now().Before(until) {
			b1 := hotBytes.Load()
			from, to := window(ctx, 6*time.Second)
			var n int
			after, n = calmLat.p99(from, to)
			hotAfter = hotRate(from, to, b1)
			recovered = after <= limit
			t.Logf("T+%v: window from %v after the throttle: compliant tenant's produce p99 %v (%d produces, limit %v); hot tenant %.0f KiB/s",
				since(), from.Sub(throttledAt).Round(100*time.Millisecond), after, n, limit, hotAfter/1024)
			hotBytesAfter += hotAfter * to.Sub(from).Seconds()
			hotSecondsAfter += to.Sub(from).Seconds()
		}
		// Over all the windows together: a throttled client's
		// acknowledgements come in bursts (a window of nothing, then one
		// of several times the rate), so one window is no verdict.
		if avg := hotBytesAfter / hotSecondsAfter; avg > 8*131072 {
			t.Errorf("the throttled hot tenant still produces %.0f KiB/s over %.0f s (throttle 128 KiB/s; bursts allowed up to 1 MiB/s)", avg/1024, hotSecondsAfter)
		}
		if !recovered && *sloCheck {
			t.Errorf("the compliant tenant's produce p99 is %v 30 s after the throttle, want within 20%% (+10 ms) of its %v alone (%v beside the hot tenant)", after, solo, beside)
		}
		if !recovered {
			t.Logf("the compliant tenant's produce p99 is %v 30 s after the throttle, not within 20%% (+10 ms) of its %v alone (%v beside the hot tenant); not a failure without -runbook-slo", after, solo, beside)
		}
		if prom != nil {
			// The throttled tenant's clients now wait most of the time: the
			// ticket alert fires for it (its 10 minutes read as 10 s), and
			// not for the compliant tenant.
			took := prom.waitFiring(t, 2*time.Minute, "SluiceTenantThrottled", map[string]string{"tenant": hot.id})
			t.Logf("T+%v: SluiceTenantThrottled firing for the hot tenant, %v after the throttle (%v after the verify step)", since(), time.Since(throttledAt).Round(100*time.Millisecond), took.Round(100*time.Millisecond))
			if f, err := prom.firing("SluiceTenantThrottled", map[string]string{"tenant": calm.id}); err != nil || len(f) > 0 {
				t.Errorf("SluiceTenantThrottled for the compliant tenant: %v (%v)", f, err)
			}
		}
	}
	if after == 0 {
		t.Fatal("hot-tenant.md has no section \"3. Verify the neighbours recovered\"")
	}
	if !moved || !followed {
		t.Fatal("hot-tenant.md does not move the hot tenant to dev-dedicated and then lift its throttle")
	}

	// The hot tenant lost no acknowledged record.
	stopHot()
	<-hotDone
	if err := hotCl.Flush(ctx); err != nil && ctx.Err() != nil {
		t.Fatal(err)
	}
	acksMu.Lock()
	want := map[[2]int64]string{}
	for _, a := range acks {
		want[[2]int64{int64(a.part), a.off}] = a.value
	}
	acksMu.Unlock()
	if len(want) == 0 {
		t.Fatal("the hot tenant had no record acknowledged")
	}
	check := kafkaClient(t, s, hot, kgo.ConsumeTopics("ingest"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(16<<20))
	for seen := 0; len(want) > 0 || kc.pending() > 0; {
		fs := check.PollFetches(ctx)
		if ctx.Err() != nil {
			kc.check(t)
			t.Fatalf("%d acknowledged records of the hot tenant not read back (read %d)", len(want), seen)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen++
			kc.seen(r.Value)
			k := [2]int64{int64(r.Partition), r.Offset}
			if v, ok := want[k]; ok {
				if v != string(r.Value) {
					t.Fatalf("hot tenant's record %d/%d changed", r.Partition, r.Offset)
				}
				delete(want, k)
			}
		})
	}
	t.Logf("the hot tenant's %d acknowledged records all read back", len(acks))
	kc.check(t)
	stopCalm()
	<-calmDone

	// The other runbooks, in name order, against the same stack.
	for _, f := range []string{"broker-lost.md", "control-plane-down.md", "disk-watermark.md", "lag-beyond-retention.md", "leaked-key.md", "stuck-move.md"} {
		blocks, err := parseRunbook(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			runBlock(t, b, env, 2*time.Minute)
		}
	}
	if prom != nil {
		prom.checkRuleInputs(t)
	}
}
