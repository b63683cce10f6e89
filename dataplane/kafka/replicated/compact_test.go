package replicated

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/contract/topicspec"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/replicas"
)

// TestCompactedTopicEndToEnd: a topic created through kadm with
// cleanup.policy=compact refuses a keyless record with INVALID_RECORD,
// takes keyed ones, is compacted on every replica by the brokers' own
// cleaners, and a franz-go consumer from the start sees the newest value
// of every key at the offset it was produced at, and fewer records than
// were produced.
func TestCompactedTopicEndToEnd(t *testing.T) {
	m := startLifecycleCell(t, func(c *replicas.Config) { c.CompactInterval = 100 * time.Millisecond })
	tn := m.tenant("latest")
	cl := m.client(tn, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createCompacted(t, ctx, adm, "latest")
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "latest", Value: []byte("no key")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record on a compacted topic: %v, want INVALID_RECORD", err)
	}

	// 3.5 MiB of updates of 10 keys: segments of 1 MiB, rolled by the
	// leader's replicated rolls, the closed ones compacted.
	produced := map[int64]string{} // offset → value
	final := map[string]string{}
	val := make([]byte, 1000)
	const n = 3500
	var recs []*kgo.Record
	for i := range n {
		copy(val, fmt.Sprintf("update %06d", i))
		recs = append(recs, &kgo.Record{Topic: "latest", Key: []byte(fmt.Sprintf("key-%d", i%10)), Value: append([]byte(nil), val...)})
	}
	for i := 0; i < n; i += 100 {
		if err := cl.ProduceSync(ctx, recs[i:i+100]...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	for _, r := range recs {
		produced[r.Offset] = string(r.Value)
		final[string(r.Key)] = string(r.Value)
	}
	tp, ok := m.syncers[0].View().Topic(tn.Tenant.ID, "latest")
	if !ok {
		t.Fatal("the topic is not in the cell state")
	}
	topicID := tp.ID
	celltest.WaitFor(t, 60*time.Second, "every replica to compact the closed segments", func() bool {
		for b := range m.mgrs {
			r := m.replica(b, topicID, 0)
			if r == nil {
				return false
			}
			upTo, ok := r.CompactedTo()
			if !ok || upTo < 1<<20/1100 {
				return false
			}
		}
		return true
	})

	// A replica's compaction point moves inside its cleaning; the manager
	// counts the cleaning when it returns, a moment later.
	series := tn.Tenant.ID + "/latest/0"
	celltest.WaitFor(t, 10*time.Second, "every broker to count the partition's cleaning", func() bool {
		for _, mgr := range m.mgrs {
			if cleanerMetrics(t, mgr)["sluice_cleaner_partition_cleaned_bytes_total"][series] == 0 {
				return false
			}
		}
		return true
	})
	var written float64
	for b, mgr := range m.mgrs {
		fams := cleanerMetrics(t, mgr)
		if f := fams["sluice_cleaner_written_bytes_total"]; f != nil {
			written += f[""]
		}
		// The partition's own series, labelled by tenant, topic and
		// partition: scraped after its cleaning on every broker.
		if got := fams["sluice_cleaner_partition_cleaned_bytes_total"][series]; got == 0 {
			t.Fatalf("broker %d: sluice_cleaner_partition_cleaned_bytes_total{%s} = 0 after its cleaning: %v", b, series, fams)
		}
		if got := fams["sluice_cleaner_partition_seconds_total"][series]; got == 0 {
			t.Fatalf("broker %d: sluice_cleaner_partition_seconds_total{%s} = 0 after its cleaning", b, series)
		}
		if got, ok := fams["sluice_cleaner_partition_dirty_ratio"][series]; !ok || got < 0 || got > 1 {
			t.Fatalf("broker %d: sluice_cleaner_partition_dirty_ratio{%s} = %v (exported %v), want within [0, 1]", b, series, got, ok)
		}
	}
	if written == 0 {
		t.Fatal("sluice_cleaner_written_bytes_total is 0 on every broker after compaction")
	}

	cons := m.client(tn, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"latest": {0: kgo.NewOffset().AtStart()}}))
	readCompacted(t, ctx, cons, produced, final, n, 10)

	// ListOffsets: the range is the offsets produced, gaps or not; a
	// timestamp lookup lands inside it.
	starts, err := adm.ListStartOffsets(ctx, "latest")
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, "latest")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := starts.Lookup("latest", 0); s.Offset != 0 || s.Err != nil {
		t.Fatalf("start offset %d, %v; want 0", s.Offset, s.Err)
	}
	if e, _ := ends.Lookup("latest", 0); e.Offset != n || e.Err != nil {
		t.Fatalf("end offset %d, %v; want %d", e.Offset, e.Err, n)
	}
	mid := recs[n/2].Timestamp.UnixMilli()
	byTS, err := adm.ListOffsetsAfterMilli(ctx, mid, "latest")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := byTS.Lookup("latest", 0); o.Err != nil || o.Offset < 0 || o.Offset > n {
		t.Fatalf("offset for timestamp %d: %d, %v", mid, o.Offset, o.Err)
	}

	// The partition's cleaner series go with the topic.
	if _, err := adm.DeleteTopics(ctx, "latest"); err != nil {
		t.Fatalf("delete topic: %v", err)
	}
	celltest.WaitFor(t, 60*time.Second, "the deleted topic's cleaner series to go on every broker", func() bool {
		for _, mgr := range m.mgrs {
			for _, name := range []string{"sluice_cleaner_partition_dirty_ratio", "sluice_cleaner_partition_cleaned_bytes_total", "sluice_cleaner_partition_seconds_total"} {
				if _, ok := cleanerMetrics(t, mgr)[name][tn.Tenant.ID+"/latest/0"]; ok {
					return false
				}
			}
		}
		return true
	})
}

// createCompacted creates a topic of one partition through kadm, as a
// Kafka admin would, with cleanup.policy=compact, 1 MiB segments and a
// dirty ratio of 0.01, so that the cleaners compact it as soon as a
// segment rolls.
func createCompacted(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) {
	t.Helper()
	res, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{
		topicspec.CleanupPolicy: kadm.StringPtr("compact"), topicspec.SegmentBytes: kadm.StringPtr("1048576"),
		topicspec.MinCleanableDirtyRatio: kadm.StringPtr("0.01"),
	}, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("create compacted topic: %v", err)
	}
}

// cleanerMetrics scrapes the cleaner metrics of mgr: by metric name, by
// "tenant/topic/partition" ("" for a series without labels), the value.
func cleanerMetrics(t *testing.T, mgr *replicas.Manager) map[string]map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(replicas.NewCompactionMetrics(func() *replicas.Manager { return mgr })...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, mf := range mfs {
		out[mf.GetName()] = map[string]float64{}
		for _, mt := range mf.GetMetric() {
			lv := map[string]string{}
			for _, lp := range mt.GetLabel() {
				lv[lp.GetName()] = lp.GetValue()
			}
			k := ""
			if len(lv) > 0 {
				k = lv["tenant"] + "/" + lv["topic"] + "/" + lv["partition"]
			}
			v := mt.GetCounter().GetValue() + mt.GetGauge().GetValue()
			out[mf.GetName()][k] = v
		}
	}
	return out
}

// readCompacted consumes through cons, from the start of the one
// partition it reads, until it has seen at least minKeys keys and the
// newest value of each is final's. Every record must come at a higher
// offset than the one before and hold what was produced at its offset;
// fewer records than the n produced must be read (compaction dropped
// some).
func readCompacted(t *testing.T, ctx context.Context, cons *kgo.Client, produced map[int64]string, final map[string]string, n, minKeys int) {
	t.Helper()
	last := map[string]string{}
	seen, prev := 0, int64(-1)
	for len(last) < minKeys || !maps.Equal(last, final) {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset <= prev {
				t.Fatalf("offset %d after %d", r.Offset, prev)
			}
			prev = r.Offset
			if produced[r.Offset] != string(r.Value) {
				t.Fatalf("offset %d holds %.13q, produced there was %.13q", r.Offset, r.Value, produced[r.Offset])
			}
			last[string(r.Key)] = string(r.Value)
			seen++
		})
	}
	if seen >= n {
		t.Fatalf("read %d records, as many as produced: nothing was compacted", seen)
	}
	t.Logf("read %d of %d records; newest value of every key at its original offset", seen, n)
}

// closedSums is the SHA-256 of each closed segment file of a replica's log,
// by base offset.
func closedSums(t *testing.T, r *partition.Replica) map[int64]string {
	t.Helper()
	l := r.Store().Log()
	bases := l.Segments()
	out := map[int64]string{}
	for _, b := range bases[:max(len(bases)-1, 0)] {
		data, err := os.ReadFile(filepath.Join(l.Dir(), fmt.Sprintf("%020d.log", b)))
		if errors.Is(err, os.ErrNotExist) {
			continue // swapped meanwhile; the caller polls
		}
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(data)
		out[b] = hex.EncodeToString(s[:])
	}
	return out
}

// TestCompactionTurnedOnEndToEnd: a delete topic written by franz-go on
// three replicas whose segment boundaries differ (each replica of a
// delete topic rolls by its own clock; here the followers roll their
// logs at moments of their own, as segment.ms would) is switched to
// cleanup.policy=compact through kadm (IncrementalAlterConfigs). The
// brokers' own cleaners re-cut and compact it: the three replicas' closed
// segment files become byte-identical (SHA-256), a consumer from the start
// sees the newest value of every key at the offset it was produced at,
// and the log start stays 0. Switching back to delete is accepted, stops
// the cleaning, and retention deletes segments again.
func TestCompactionTurnedOnEndToEnd(t *testing.T) {
	m := startLifecycleCell(t, func(c *replicas.Config) {
		c.CompactInterval = 100 * time.Millisecond
		fastRetention(c)
	})
	tn := m.tenant("switcher")
	cl := m.client(tn, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	id := m.createTopic(tn, "switch", 1, map[string]string{topicspec.CleanupPolicy: "delete", topicspec.SegmentBytes: "1048576"})

	produced := map[int64]string{}
	final := map[string]string{}
	val := make([]byte, 1000)
	n := 0
	produce := func(count int) {
		t.Helper()
		var recs []*kgo.Record
		for range count {
			copy(val, fmt.Sprintf("update %06d", n))
			recs = append(recs, &kgo.Record{Topic: "switch", Key: []byte(fmt.Sprintf("key-%d", n%10)), Value: append([]byte(nil), val...)})
			n++
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		for _, r := range recs {
			produced[r.Offset] = string(r.Value)
			final[string(r.Key)] = string(r.Value)
		}
	}
	lead := m.leader(id, 0)
	for round := range 35 {
		produce(100)
		// A follower's own roll: broker (round mod 3) rolls here unless it
		// leads.
		if r := m.replica(round%3, id, 0); r != lead && round%4 == 1 {
			if err := r.Store().Log().Roll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	celltest.WaitFor(t, 30*time.Second, "every replica to hold every record", func() bool {
		for b := range m.mgrs {
			if m.replica(b, id, 0).Store().Log().NextOffset() < int64(n) {
				return false
			}
		}
		return true
	})
	before := map[int][]int64{}
	for b := range m.mgrs {
		before[b] = m.replica(b, id, 0).Store().Log().Segments()
	}
	if slices.Equal(before[0], before[1]) && slices.Equal(before[1], before[2]) {
		t.Fatalf("the replicas' segments start at the same offsets before the switch: %v", before)
	}
	t.Logf("segment bases before the switch: %v", before)
	series := tn.Tenant.ID + "/switch/0"
	hasSeries := func(b int) bool {
		_, ok := cleanerMetrics(t, m.mgrs[b])["sluice_cleaner_partition_dirty_ratio"][series]
		return ok
	}
	for b := range m.mgrs {
		if hasSeries(b) {
			t.Fatalf("broker %d exports cleaner series for a delete topic", b)
		}
	}

	err := alterTopic(ctx, adm, "switch",
		kadm.AlterConfig{Name: topicspec.CleanupPolicy, Value: kadm.StringPtr("compact")},
		kadm.AlterConfig{Name: topicspec.MinCleanableDirtyRatio, Value: kadm.StringPtr("0.01")})
	if err != nil {
		t.Fatalf("turn compaction on: %v", err)
	}
	celltest.WaitFor(t, 30*time.Second, "the policy on every replica", func() bool {
		for b := range m.mgrs {
			if !m.replica(b, id, 0).Store().Log().Compacted() {
				return false
			}
		}
		return true
	})
	produce(50)
	switchedAt := int64(n)
	celltest.WaitFor(t, 90*time.Second, "equal closed segment files on every replica after compaction", func() bool {
		var want map[int64]string
		for b := range m.mgrs {
			r := m.replica(b, id, 0)
			if upTo, ok := r.CompactedTo(); !ok || upTo < switchedAt-50 {
				return false
			}
			got := closedSums(t, r)
			if b == 0 {
				want = got
			} else if !maps.Equal(want, got) {
				return false
			}
		}
		return len(want) > 0
	})
	recut := 0
	for b := range m.mgrs {
		r := m.replica(b, id, 0)
		st := r.CompactionStats()
		t.Logf("broker %d: %+v, segments %v", b, st, r.Store().Log().Segments())
		if st.Recuts > 0 {
			recut++
		}
	}
	if recut == 0 {
		t.Fatal("no replica re-cut its segments")
	}
	for b := range m.mgrs {
		if !hasSeries(b) {
			t.Fatalf("broker %d exports no cleaner series for the partition it compacted", b)
		}
	}

	cons := m.client(tn, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"switch": {0: kgo.NewOffset().AtStart()}}))
	readCompacted(t, ctx, cons, produced, final, n, 0)
	starts, err := adm.ListStartOffsets(ctx, "switch")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := starts.Lookup("switch", 0); s.Offset != 0 || s.Err != nil {
		t.Fatalf("start offset %d, %v after compaction; want 0", s.Offset, s.Err)
	}

	// Back to delete: accepted; the replicas stop compacting.
	err = alterTopic(ctx, adm, "switch", kadm.AlterConfig{Name: topicspec.CleanupPolicy, Value: kadm.StringPtr("delete")})
	if err != nil {
		t.Fatalf("turn compaction off: %v", err)
	}
	celltest.WaitFor(t, 30*time.Second, "delete on every replica", func() bool {
		for b := range m.mgrs {
			if m.replica(b, id, 0).Store().Log().Compacted() {
				return false
			}
		}
		return true
	})
	produce(100)
	celltest.WaitFor(t, 30*time.Second, "the cleaner series to go with the policy", func() bool {
		for b := range m.mgrs {
			if hasSeries(b) {
				return false
			}
		}
		return true
	})

	// And retention deletes again: with retention.ms lowered, the closed
	// segments go, to the same log start on every replica.
	err = alterTopic(ctx, adm, "switch", kadm.AlterConfig{Name: topicspec.RetentionMs, Value: kadm.StringPtr("1000")})
	if err != nil {
		t.Fatalf("lower retention.ms: %v", err)
	}
	start := agreedStart(t, m, id, func(int) bool { return true })
	t.Logf("back on delete, retention moved the log start to %d on every replica", start)
}

// alterTopic sets configs on topic through AlterConfigs and returns the
// request's error or the topic's.
func alterTopic(ctx context.Context, adm *kadm.Client, topic string, configs ...kadm.AlterConfig) error {
	ar, err := adm.AlterTopicConfigs(ctx, configs, topic)
	if err != nil {
		return err
	}
	r, err := ar.On(topic, nil)
	if err != nil {
		return err
	}
	return r.Err
}

// TestCompactedConsumerKeepsUp: Kafka's first compaction promise, that a
// consumer keeping up with the head of the log sees every record. A
// franz-go consumer tails a compacted topic while updates of 10 keys are
// produced in rounds of 100 KB (at least 40, and 5 more after the leader
// first compacted) and the brokers' cleaners (every 100 ms) roll and
// compact behind it: after each round it reads up to the round's
// last offset, and it must have seen every offset produced, in order,
// each with its value, although the log was compacted meanwhile (a fresh
// consumer from the start then reads fewer records).
func TestCompactedConsumerKeepsUp(t *testing.T) {
	m := startLifecycleCell(t, func(c *replicas.Config) { c.CompactInterval = 100 * time.Millisecond })
	tn := m.tenant("tail")
	cl := m.client(tn, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	createCompacted(t, ctx, adm, "tail")
	tail := m.client(tn, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tail": {0: kgo.NewOffset().AtStart()}}))
	produced := map[int64]string{}
	final := map[string]string{}
	next := int64(0) // the next offset the tail must see
	val := make([]byte, 1000)
	// At least 40 rounds, and on until 5 rounds after the leader first
	// compacted: the cleaner's pace depends on the machine, the test's
	// point is that it compacts while the tail keeps up.
	const per = 100
	compactedAt := -1 // the first round after which the leader had compacted
	rounds := 0
	for round := 0; round < 40 || compactedAt < 0 || round <= compactedAt+5; round++ {
		if ctx.Err() != nil {
			t.Fatalf("the cleaner did not compact while the tail kept up, in %d rounds", round)
		}
		rounds = round + 1
		recs := make([]*kgo.Record, per)
		for i := range recs {
			copy(val, fmt.Sprintf("update %03d/%03d", round, i))
			recs[i] = &kgo.Record{Topic: "tail", Key: []byte(fmt.Sprintf("key-%d", i%10)), Value: append([]byte(nil), val...)}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce round %d: %v", round, err)
		}
		for _, r := range recs {
			produced[r.Offset] = string(r.Value)
			final[string(r.Key)] = string(r.Value)
		}
		end := recs[per-1].Offset + 1
		for next < end {
			fs := tail.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatalf("tail: %v", err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset != next {
					t.Fatalf("round %d: the tail read offset %d, want %d: a record it kept up with is missing", round, r.Offset, next)
				}
				if string(r.Value) != produced[r.Offset] {
					t.Fatalf("offset %d holds another value than was produced", r.Offset)
				}
				next++
			})
		}
		if compactedAt < 0 {
			if tp, ok := m.syncers[0].View().Topic(tn.Tenant.ID, "tail"); ok {
				for b := range m.mgrs {
					if r := m.replica(b, tp.ID, 0); r != nil && r.IsLeader() {
						if upTo, ok := r.CompactedTo(); ok && upTo > 0 {
							compactedAt = round
						}
					}
				}
			}
		}
	}
	t.Logf("the leader had compacted after round %d of %d", compactedAt, rounds)
	tp, ok := m.syncers[0].View().Topic(tn.Tenant.ID, "tail")
	if !ok {
		t.Fatal("the topic is not in the cell state")
	}
	celltest.WaitFor(t, 60*time.Second, "every replica to compact the closed segments", func() bool {
		for b := range m.mgrs {
			r := m.replica(b, tp.ID, 0)
			if r == nil {
				return false
			}
			if upTo, ok := r.CompactedTo(); !ok || upTo < 1<<20/1100 {
				return false
			}
		}
		return true
	})
	cons := m.client(tn, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tail": {0: kgo.NewOffset().AtStart()}}))
	readCompacted(t, ctx, cons, produced, final, rounds*per, 10)
}
