package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest/history"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EarlyDeletion is the harness's own property with retention on: the log
// start a broker reported is above a record acknowledged less than
// retention.ms before the report (and not below a DeleteRecords offset), so
// retention deleted a record it had to keep.
const EarlyDeletion = "early-deletion"

// earlySlack absorbs the millisecond truncation of record timestamps: a
// record is counted as deleted early only if its produce was called more
// than this after the retention cut-off.
const earlySlack = 100 * time.Millisecond

// ackAt is an acknowledged offset and when its produce was called (its
// record timestamp is no earlier).
type ackAt struct {
	off int64
	at  time.Time
}

// Trimmer moves the log start of the chaos topic's partitions with
// DeleteRecords, watches where the brokers report it, and tells the
// checker how far records may be gone: up to the highest DeleteRecords
// offset asked and the highest log start reported (which a history takes
// as never going backwards). It checks that retention deleted no record
// younger than retention.ms.
type Trimmer struct {
	cfg Config
	chk *history.Checker
	log *slog.Logger
	cl  *kgo.Client
	adm *kadm.Client
	// mu guards the fields below.
	mu       sync.Mutex
	acked    map[int32][]ackAt // acknowledged at or above start, oldest produce first per producer
	asked    map[int32]int64   // highest DeleteRecords offset asked
	start    map[int32]int64   // highest log start reported
	backs    int               // reports of a log start below one reported before
	byAge    int               // reports of a log start moved past every DeleteRecords offset asked (retention)
	deletes  int               // DeleteRecords partitions answered without error
	delErrs  int
	examples []string
	early    int
}

// NewTrimmer returns a Trimmer with its own admin client.
func NewTrimmer(cfg Config, c *Cluster, chk *history.Checker, log *slog.Logger) (*Trimmer, error) {
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return nil, err
	}
	return &Trimmer{cfg: cfg, chk: chk, log: log, cl: cl, adm: kadm.NewClient(cl),
		acked: map[int32][]ackAt{}, asked: map[int32]int64{}, start: map[int32]int64{}}, nil
}

// Close closes the admin client.
func (t *Trimmer) Close() { t.cl.Close() }

// Acked records an acknowledged offset whose produce was called at at.
func (t *Trimmer) Acked(part int32, off int64, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if off >= t.start[part] {
		// Wall clock only: retention compares record timestamps with the
		// broker's wall clock, and a paused virtual machine can move the
		// wall clock a second or more past the monotonic one.
		t.acked[part] = append(t.acked[part], ackAt{off, at.Round(0)})
	}
}

// observe takes a log start a broker reported at (or before) now.
func (t *Trimmer) observe(part int32, start int64, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if start < t.start[part] {
		// A deposed leader cut off by a partition may still answer
		// with the log start it had.
		t.backs++
		return
	}
	if start > t.start[part] && start > t.asked[part] {
		t.byAge++
	}
	t.start[part] = start
	// Without retention only DeleteRecords may remove records.
	var cut time.Time
	if t.cfg.Retention > 0 {
		cut = now.Round(0).Add(-t.cfg.Retention + earlySlack) // wall clock, as Acked
	}
	kept := t.acked[part][:0]
	for _, a := range t.acked[part] {
		switch {
		case a.off >= start:
			kept = append(kept, a)
		case a.off >= t.asked[part] && a.at.After(cut):
			t.early++
			if len(t.examples) < 10 {
				t.examples = append(t.examples, fmt.Sprintf("partition %d: log start %d reported at %s is above offset %d, produced at %s, less than %v before",
					part, start, now.Format("15:04:05.000"), a.off, a.at.Format("15:04:05.000"), t.cfg.Retention))
			}
		}
	}
	t.acked[part] = kept
	t.chk.MayTrim(part, start)
}

// Refresh asks the brokers for every partition's log start and records
// it; it returns what was reported (partitions that answered with an
// error are absent).
func (t *Trimmer) Refresh(ctx context.Context) map[int32]int64 {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	offs, err := t.adm.ListStartOffsets(ctx, t.cfg.Topic)
	now := time.Now()
	out := map[int32]int64{}
	if err != nil && len(offs) == 0 {
		t.log.Debug("trimmer: list start offsets", "err", err)
		return out
	}
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Partition >= 0 {
			t.observe(o.Partition, o.Offset, now)
			out[o.Partition] = o.Offset
		}
	})
	return out
}

// AwaitStart refreshes the log starts until part's is at least atLeast,
// for at most 30 s (faults may keep the brokers from answering for a
// while); the checker then judges what was seen with what was reported.
func (t *Trimmer) AwaitStart(ctx context.Context, part int32, atLeast int64) {
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end) && ctx.Err() == nil; {
		if s, ok := t.Refresh(ctx)[part]; ok && s >= atLeast {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Run refreshes the log starts every second and, every cfg.DeleteEvery
// (0: never), deletes the records of each partition below halfway from
// its log start to its high watermark, retrying every second while faults
// make that fail, until stop closes.
func (t *Trimmer) Run(stop <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var del <-chan time.Time
	if t.cfg.DeleteEvery > 0 {
		dt := time.NewTicker(t.cfg.DeleteEvery)
		defer dt.Stop()
		del = dt.C
	}
	pending := false
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if pending {
				pending = !t.deleteHalf()
			} else {
				t.Refresh(context.Background())
			}
		case <-del:
			pending = !t.deleteHalf()
		}
	}
}

// deleteHalf moves every partition's log start halfway to its high
// watermark and reports whether every partition answered (those with too
// little to delete included).
func (t *Trimmer) deleteHalf() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	starts := t.Refresh(ctx)
	ends, err := t.adm.ListEndOffsets(ctx, t.cfg.Topic)
	if err != nil && len(ends) == 0 {
		t.log.Debug("trimmer: list end offsets", "err", err)
		return false
	}
	answered := 0
	req := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) {
		s, ok := starts[o.Partition]
		if o.Err != nil || !ok {
			return
		}
		answered++
		if o.Offset-s < 2 {
			return
		}
		to := s + (o.Offset-s)/2
		// The checker must allow the move before it can happen.
		t.mu.Lock()
		t.asked[o.Partition] = max(t.asked[o.Partition], to)
		t.mu.Unlock()
		t.chk.MayTrim(o.Partition, to)
		req.Add(kadm.Offset{Topic: t.cfg.Topic, Partition: o.Partition, At: to})
	})
	resp, err := t.adm.DeleteRecords(ctx, req)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil && len(resp) == 0 {
		t.delErrs += len(req[t.cfg.Topic])
		t.log.Debug("trimmer: delete records", "err", err)
		return false
	}
	ok := answered == t.cfg.Partitions
	resp.Each(func(r kadm.DeleteRecordsResponse) {
		if r.Err != nil {
			ok = false
			t.delErrs++
			t.log.Debug("trimmer: delete records", "partition", r.Partition, "err", r.Err)
			return
		}
		t.deletes++
	})
	return ok && err == nil && resp.Error() == nil
}

// Report adds the harness's early deletions to res and describes the
// trimming for the summary.
func (t *Trimmer) Report(res *history.Result) (string, map[int32]int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if res.Counts == nil {
		res.Counts = map[string]int{}
	}
	if res.Examples == nil {
		res.Examples = map[string][]string{}
	}
	res.Counts[EarlyDeletion] = t.early
	res.Examples[EarlyDeletion] = t.examples
	starts := make(map[int32]int64, len(t.start))
	for p, s := range t.start {
		starts[p] = s
	}
	return fmt.Sprintf("retention.ms %d, log starts %v (DeleteRecords asked up to %v; %d partitions deleted, %d errors; %d moves past DeleteRecords by retention; %d reports below an earlier one)",
		t.cfg.Retention.Milliseconds(), t.start, t.asked, t.deletes, t.delErrs, t.byAge, t.backs), starts
}
