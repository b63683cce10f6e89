package launch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluicehq/sluice/cmd/internal/launch"
	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/dataplane/celltest/history"
)

// wholeTopics are the moving tenant's topics: two plain ones and a
// compacted one written with a small key space.
var wholeTopics = []struct {
	name      string
	parts     int
	compacted bool
}{{"orders", 3, false}, {"events", 2, false}, {"state", 2, true}}

// groupWatch follows one consumer group over several topics: every
// record each member polls goes to its topic's checker, and for each
// partition it keeps the end of what was polled and what the members
// committed, so a member's first record after an assignment shows where
// the group resumed.
type groupWatch struct {
	chks map[string]*history.Checker
	// mu guards the fields below.
	mu        sync.Mutex
	polledEnd map[string]map[int32]int64 // one past the highest offset polled
	committed map[string]map[int32]int64 // the members' last successful commits
	fresh     map[string]map[int32]bool  // assigned, nothing polled since
	resumes   []string                   // each resume: where, and how much was read again
	reread    int64                      // records polled a second time
	bad       []string                   // resumes before a commit or past the end
	since     time.Time                  // resumes are timed from here (the move's start)
	// mostUncommitted is the most ever polled and not (yet) committed,
	// after any poll: a resume may read that much again, no more.
	mostUncommitted int64
}

func newGroupWatch(chks map[string]*history.Checker) *groupWatch {
	w := &groupWatch{chks: chks, polledEnd: map[string]map[int32]int64{}, committed: map[string]map[int32]int64{},
		fresh: map[string]map[int32]bool{}}
	for t := range chks {
		w.polledEnd[t], w.committed[t], w.fresh[t] = map[int32]int64{}, map[int32]int64{}, map[int32]bool{}
	}
	return w
}

// member starts a group member (sess names it in the checkers) reading
// every topic, committing synchronously after each poll. It returns a
// stop that makes a last commit, then leaves the group.
func (w *groupWatch) member(ctx context.Context, c *procCell, group, sess string) func() {
	topics := make([]string, 0, len(w.chks))
	for t := range w.chks {
		topics = append(topics, t)
	}
	assigned := func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
		w.mu.Lock()
		defer w.mu.Unlock()
		for t, ps := range m {
			for _, p := range ps {
				w.chks[t].StartSessionAnywhere(sess, p)
				w.fresh[t][p] = true
			}
		}
	}
	revoked := func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
		for t, ps := range m {
			for _, p := range ps {
				w.chks[t].EndSession(sess, p)
			}
		}
	}
	g := c.kgo(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topics...), kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(assigned), kgo.OnPartitionsRevoked(revoked), kgo.OnPartitionsLost(revoked))
	stop := launch.Repeat(func() bool {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := g.PollFetches(pctx)
		pcancel()
		w.polled(sess, fs)
		w.commit(ctx, g)
		return true
	})
	return func() {
		stop()
		w.commit(ctx, g)
		g.Close()
	}
}

// polled hands a poll's records to the checkers and notes, for a
// partition's first record since its assignment, how far back it resumed.
func (w *groupWatch) polled(sess string, fs kgo.Fetches) {
	recs := map[string][]history.Record{}
	w.mu.Lock()
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		t, part := p.Topic, p.Partition
		first := p.Records[0].Offset
		if w.fresh[t][part] {
			w.fresh[t][part] = false
			end, com := w.polledEnd[t][part], w.committed[t][part]
			again := max(0, end-first)
			w.reread += again
			w.resumes = append(w.resumes, fmt.Sprintf("%s/%d at %d (committed %d, polled to %d) at %s", t, part, first, com, end,
				time.Since(w.since).Round(time.Millisecond)))
			// A compacted log may have no record at the committed offset:
			// the first one is then above it, never below.
			if first < com || (first > end && !w.isCompacted(t)) {
				w.bad = append(w.bad, fmt.Sprintf("%s/%d resumed at %d, committed %d, polled to %d", t, part, first, com, end))
			}
		}
		for _, r := range p.Records {
			recs[t] = append(recs[t], history.Record{Part: r.Partition, Offset: r.Offset, Value: string(r.Value), Key: string(r.Key)})
			w.polledEnd[t][part] = max(w.polledEnd[t][part], r.Offset+1)
		}
	})
	w.mostUncommitted = max(w.mostUncommitted, w.uncommittedLocked())
	w.mu.Unlock()
	for t, rs := range recs {
		w.chks[t].Polled(sess, rs)
	}
}

func (w *groupWatch) isCompacted(t string) bool {
	for _, wt := range wholeTopics {
		if wt.name == t {
			return wt.compacted
		}
	}
	return false
}

// commit commits what g polled and records what it now holds committed.
func (w *groupWatch) commit(ctx context.Context, g *kgo.Client) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := g.CommitUncommittedOffsets(cctx); err != nil {
		return // not committed: a later commit or a resume shows it
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for t, ps := range g.CommittedOffsets() {
		for p, eo := range ps {
			w.committed[t][p] = max(w.committed[t][p], eo.Offset)
		}
	}
}

// uncommitted is what the members polled and had not committed.
func (w *groupWatch) uncommitted() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.uncommittedLocked()
}

// uncommittedLocked is uncommitted with w.mu held.
func (w *groupWatch) uncommittedLocked() int64 {
	var n int64
	for t, ps := range w.polledEnd {
		for p, end := range ps {
			n += max(0, end-w.committed[t][p])
		}
	}
	return n
}

// tenantProducer is one franz-go idempotent producer writing unique
// values one at a time, round robin over topics (keyed from a small key
// space on a compacted one), each recorded in its topic's checker.
type tenantProducer struct {
	cl   *kgo.Client
	chks map[string]*history.Checker
	stop func()
	// mu guards the fields below.
	mu       sync.Mutex
	ackTimes []time.Time
	errs     error
}

func startTenantProducer(ctx context.Context, cl *kgo.Client, prefix string, chks map[string]*history.Checker, compacted map[string]bool) *tenantProducer {
	tp := &tenantProducer{cl: cl, chks: chks}
	topics := make([]string, 0, len(chks))
	for t := range chks {
		topics = append(topics, t)
	}
	next := 0
	tp.stop = launch.Repeat(func() bool {
		i := next
		next++
		topic := topics[i%len(topics)]
		v := fmt.Sprintf("%s%07d", prefix, i)
		key := v
		if compacted[topic] {
			key = fmt.Sprintf("k%02d", i%17)
		}
		r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(v)}).First()
		if err != nil {
			tp.mu.Lock()
			tp.errs = errors.Join(tp.errs, fmt.Errorf("produce %s to %s: %w", v, topic, err))
			tp.mu.Unlock()
			return true // indeterminate: it may have been appended
		}
		if compacted[topic] {
			chks[topic].AckedKey(r.Partition, r.Offset, key, v)
		} else {
			chks[topic].Acked(r.Partition, r.Offset, v)
		}
		tp.mu.Lock()
		tp.ackTimes = append(tp.ackTimes, time.Now())
		tp.mu.Unlock()
		return true
	})
	return tp
}

func (tp *tenantProducer) acks() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.ackTimes)
}

func (tp *tenantProducer) waitAcks(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	if err := launch.WaitFor(ctx, fmt.Sprintf("%d acknowledged produces", n), 2*time.Minute, func() error {
		if got := tp.acks(); got < n {
			return fmt.Errorf("%d acknowledged", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func (tp *tenantProducer) halt() error {
	tp.stop()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.errs
}

func (tp *tenantProducer) longestGap(from, to time.Time) time.Duration {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return longestGap(tp.ackTimes, from, to)
}

// TestTenantMoveWholeTenant moves a whole tenant (three topics, one of
// them compacted and keyed, and a consumer group over all three with
// committed offsets) from its shared cell to a dedicated pool's cell
// while its idempotent producer and its group run on the old cell's
// bootstrap addresses only, and another tenant keeps producing on the
// shared cell. The producer's id and epoch survive (its sequence goes
// on), the group resumes, on the new cell, from the offsets it committed
// (what it reads again is bounded by what it had not committed), every
// topic's history holds, and the other tenant never stops.
func TestTenantMoveWholeTenant(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and six brokers in two cells")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c := startProcCell(t, "twhole", 3)
	chks := map[string]*history.Checker{}
	compacted := map[string]bool{}
	for _, tp := range wholeTopics {
		req := api.CreateTopicRequest{Name: tp.name, Partitions: tp.parts}
		chks[tp.name] = history.New()
		if tp.compacted {
			req.Config = map[string]string{"cleanup.policy": "compact"}
			chks[tp.name] = history.NewCompacted()
			compacted[tp.name] = true
		}
		if _, err := c.tenant.Client.CreateTopic(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	other := c.otherTenant(ctx, "twhole-other", "quiet", 2)
	c.addCell(ctx, "twhole-dedicated", "dedicated", "twhole-dcell", 3)

	prodCl := c.kgo(kgo.RecordDeliveryTimeout(2*time.Minute), kgo.ProducerLinger(5*time.Millisecond))
	prod := startTenantProducer(ctx, prodCl, "w", chks, compacted)
	otherCl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap...), kgo.SASL(plain.Auth{User: other.KeyID, Pass: other.Secret}.AsMechanism()),
		kgo.RecordDeliveryTimeout(2*time.Minute), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer otherCl.Close()
	otherChk := map[string]*history.Checker{"quiet": history.New()}
	otherProd := startTenantProducer(ctx, otherCl, "o", otherChk, nil)

	watch := newGroupWatch(chks)
	watch.since = time.Now()
	stopFirst := watch.member(ctx, c, "whole-group", "member")
	prod.waitAcks(ctx, t, 300)
	otherProd.waitAcks(ctx, t, 100)
	pid, epoch, err := prodCl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	mv := c.startTenantMove(ctx, "twhole-dedicated")
	started := time.Now()
	watch.mu.Lock()
	watch.since = started
	watch.mu.Unlock()
	uncommittedAtMove := watch.uncommitted()
	mv, timeline := c.awaitTenantMove(ctx, mv.ID, started, 4*time.Minute)
	finished := time.Now()
	// Traffic goes on in the new cell, the group commits there, then its
	// member leaves and a new one (old bootstrap again) takes over from
	// the committed offsets.
	prod.waitAcks(ctx, t, prod.acks()+300)
	stopFirst()
	uncommittedAtHandover := watch.uncommitted()
	stopSecond := watch.member(ctx, c, "whole-group", "member")
	prod.waitAcks(ctx, t, prod.acks()+150)
	otherProd.waitAcks(ctx, t, otherProd.acks()+50)
	pid2, epoch2, err := prodCl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if perr := prod.halt(); perr != nil {
		t.Logf("the tenant's produces that failed (indeterminate, checked as such): %v", perr)
	}
	if perr := otherProd.halt(); perr != nil {
		t.Logf("the other tenant's produces that failed: %v", perr)
	}
	// Let the second member read to the end of what was produced.
	if err := launch.WaitFor(ctx, "the second member reads to the end", time.Minute, func() error {
		watch.mu.Lock()
		defer watch.mu.Unlock()
		for topic, chk := range chks {
			for _, tp := range wholeTopics {
				if tp.name != topic {
					continue
				}
				for p := range int32(tp.parts) {
					if end := chk.AckedEnd(p); watch.polledEnd[topic][p] < end {
						return fmt.Errorf("%s/%d polled to %d of %d", topic, p, watch.polledEnd[topic][p], end)
					}
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	stopSecond()
	t.Logf("move %d to %s imported %d committed offsets (offsets partitions %v)", mv.ID, mv.DestCellID, mv.GroupOffsets, mv.OffsetsImported)
	t.Logf("move %d to %s took %s (%s); longest wait for an ack during it: tenant %s, other tenant %s", mv.ID, mv.DestCellID,
		finished.Sub(started).Round(time.Millisecond), strings.Join(timeline, ", "),
		prod.longestGap(started, finished).Round(time.Millisecond), otherProd.longestGap(started, finished).Round(time.Millisecond))

	if pid2 != pid || epoch2 != epoch {
		t.Errorf("the idempotent producer's id/epoch went from %d/%d to %d/%d: its sequence did not continue", pid, epoch, pid2, epoch2)
	}
	watch.mu.Lock()
	t.Logf("group resumes: %s; read again %d records; uncommitted at the move %d, at the handover %d, at most %d",
		strings.Join(watch.resumes, "; "), watch.reread, uncommittedAtMove, uncommittedAtHandover, watch.mostUncommitted)
	if len(watch.bad) > 0 {
		t.Errorf("the group did not resume from its committed offsets: %s", strings.Join(watch.bad, "; "))
	}
	// A resume reads again at most what was polled and not committed
	// when it happened (commits are refused while the destination holds
	// the group, so that can grow during the move): never more than the
	// most ever uncommitted, for each of the two resumes a move and a
	// handover may cause.
	if bound := 2 * watch.mostUncommitted; watch.reread > bound {
		t.Errorf("the group read %d records again, more than the %d it had not committed", watch.reread, bound)
	}
	watch.mu.Unlock()
	if gap := otherProd.longestGap(started, finished); gap > 5*time.Second {
		t.Errorf("the other tenant went %v without an acknowledgement during the move", gap)
	}

	for _, tp := range wholeTopics {
		fin := c.kgo(kgo.ConsumeTopics(tp.name), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		finalRead(ctx, t, fin, chks[tp.name], tp.name, tp.parts)
		res := chks[tp.name].Result()
		t.Logf("%s: %+v", tp.name, res)
		if !res.Valid() {
			t.Errorf("%s's history violates the delivery contract: %+v", tp.name, res.Examples)
		}
		if res.GroupRecords == 0 {
			t.Errorf("the group polled nothing of %s", tp.name)
		}
	}
	ofin, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap...), kgo.SASL(plain.Auth{User: other.KeyID, Pass: other.Secret}.AsMechanism()),
		kgo.ConsumeTopics("quiet"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer ofin.Close()
	finalRead(ctx, t, ofin, otherChk["quiet"], "quiet", 2)
	if res := otherChk["quiet"].Result(); !res.Valid() {
		t.Errorf("the other tenant's history violates the delivery contract: %+v", res.Examples)
	}
}
