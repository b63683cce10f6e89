// Package mirror copies a partition from another cell into a partition of
// this one, at the same offsets, for a tenant's move across cells
// (dataplane/DESIGN.md, "Tenant moves across cells"). A Puller runs beside
// each replica of the destination partition; while that replica leads, it
// pulls raw batches from a Source (the source cell's partition) and
// replicates them through the destination's Raft group as mirror entries
// (dataplane/partition, mirror.go), rate limited, until the source is
// fenced and the mirror is promoted. The Source is the source leader
// replica in process (ReplicaSource) or, across cells, the source brokers'
// transport (RemoteSource, remote.go). It imports dataplane/partition,
// dataplane/raftlog, dataplane/log and dataplane/transport; the replica
// manager (dataplane/replicas, mirrors.go) runs it as the cell state says.
package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// Source is the source partition as a mirror reads it. Every call is
// answered by the source's serving leader; an error that is a not-leader
// error (it has a LeaderNode method) or a context error is retried.
type Source interface {
	// Read returns whole raw batches from offset, at least one if any
	// lies below the high watermark, up to maxBytes otherwise, exactly
	// as the source's log holds them. Offsets below the log start fail
	// with log.ErrOffsetOutOfRange.
	Read(ctx context.Context, offset int64, maxBytes int) ([]byte, error)
	// State is the source's log start, high watermark and fence.
	State(ctx context.Context) (partition.MoveState, error)
	// Snapshot is the source's producer states, the high watermark they
	// hold at and its log start: the mirror's start entry.
	Snapshot(ctx context.Context) (raftlog.MirrorStart, error)
}

// ReplicaSource is a Source over a partition of a cell in this process:
// Leader returns the source group's current leader replica, nil if none
// is known. The cross-cell Source (DESIGN.md) answers the same calls over
// the source broker's transport.
type ReplicaSource struct {
	Leader func() *partition.Replica
}

var errNoSourceLeader = errors.New("mirror: the source partition has no known leader")

func (s ReplicaSource) leader() (*partition.Replica, error) {
	if r := s.Leader(); r != nil {
		return r, nil
	}
	return nil, errNoSourceLeader
}

// Read implements Source.
func (s ReplicaSource) Read(ctx context.Context, offset int64, maxBytes int) ([]byte, error) {
	r, err := s.leader()
	if err != nil {
		return nil, err
	}
	return r.ReadRaw(offset, maxBytes)
}

// State implements Source.
func (s ReplicaSource) State(ctx context.Context) (partition.MoveState, error) {
	r, err := s.leader()
	if err != nil {
		return partition.MoveState{}, err
	}
	return r.MoveState()
}

// Snapshot implements Source.
func (s ReplicaSource) Snapshot(ctx context.Context) (raftlog.MirrorStart, error) {
	r, err := s.leader()
	if err != nil {
		return raftlog.MirrorStart{}, err
	}
	return r.MirrorSnapshot()
}

// Config configures a Puller.
type Config struct {
	// Replica is this broker's replica of the destination partition, a
	// mirror (partition.Config.Mirror). Required.
	Replica *partition.Replica
	// Source is the source partition. Required.
	Source Source
	// BytesPerSecond limits what this puller copies; 0 is unlimited.
	// A mirror competes with the source cell's own traffic: set it.
	BytesPerSecond int64
	// MaxBytes is the most one pull reads (a single larger batch is
	// still read whole). Default 1 MiB.
	MaxBytes int
	// Poll is how often the puller looks again while it does not lead,
	// has caught up, or failed. Default 50ms.
	Poll time.Duration
	// Logger gets lifecycle lines. Nil discards them.
	Logger *slog.Logger
}

func (c *Config) validate() error {
	switch {
	case c.Replica == nil:
		return errors.New("config: Replica is required: the destination replica")
	case c.Source == nil:
		return errors.New("config: Source is required: the partition to mirror")
	case c.BytesPerSecond < 0:
		return fmt.Errorf("config: BytesPerSecond %d is negative; 0 means unlimited", c.BytesPerSecond)
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 1 << 20
	}
	if c.Poll <= 0 {
		c.Poll = 50 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// Status is a puller's last view of the move.
type Status struct {
	// Leading: this puller's replica leads the destination and pulls.
	Leading bool
	// Mirrored is the destination's high watermark: every source offset
	// below it is mirrored.
	Mirrored int64
	// Looked: the puller has read the source's state at least once;
	// until then Lag says nothing.
	Looked bool
	// SourceHighWatermark, SourceFenced and FencedEnd are the source's
	// state at the last look.
	SourceHighWatermark int64
	SourceFenced        bool
	FencedEnd           int64
	// Lag is SourceHighWatermark − Mirrored (offsets, ≥ 0).
	Lag int64
	// Bytes is what this puller replicated since it started.
	Bytes int64
	// BytesPerSecond is the puller's rate limit (Config.BytesPerSecond;
	// 0 is unlimited).
	BytesPerSecond int64
	// Promoted: the destination takes produce; the puller has stopped.
	Promoted bool
	// Err is the last error, nil after a pull that succeeded.
	Err error
}

// Puller copies the source into its replica's group while the replica
// leads. Close stops it.
type Puller struct {
	cfg    Config
	limit  *rate.Limiter
	cancel context.CancelFunc // stops run
	done   sync.WaitGroup
	flight *flight // the pull in flight; run's alone

	// mu guards the field below.
	mu sync.Mutex
	st Status
}

// Start starts a puller for cfg.Replica.
func Start(cfg Config) (*Puller, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("start mirror: %w", err)
	}
	p := &Puller{cfg: cfg, limit: rate.NewLimiter(rate.Inf, 0), st: Status{BytesPerSecond: cfg.BytesPerSecond}}
	if cfg.BytesPerSecond > 0 {
		p.limit = rate.NewLimiter(rate.Limit(cfg.BytesPerSecond), cfg.MaxBytes)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		p.run(ctx)
	}()
	return p, nil
}

// Close stops the puller and waits for it. It is idempotent.
func (p *Puller) Close() error {
	p.cancel()
	p.done.Wait()
	return nil
}

// Status is the puller's last view of the move.
func (p *Puller) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st
}

func (p *Puller) update(f func(*Status)) {
	p.mu.Lock()
	f(&p.st)
	p.mu.Unlock()
}

// run owns the pull loop: one step at a time, a pause after each step
// that had nothing to do or failed.
func (p *Puller) run(ctx context.Context) {
	defer p.drain() // ends at once: ctx is done
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		busy, err := p.step(ctx)
		if ctx.Err() != nil {
			return
		}
		p.update(func(s *Status) { s.Err = err })
		if err != nil {
			p.cfg.Logger.Debug("mirror pull failed", "replica", p.cfg.Replica.ID(), "err", err)
		}
		if p.Status().Promoted {
			p.cfg.Logger.Info("mirror promoted; puller stops", "replica", p.cfg.Replica.ID())
			return
		}
		if busy && err == nil {
			t.Reset(0)
		} else {
			t.Reset(p.cfg.Poll)
		}
	}
}

// step does one pull if this replica leads: the start entry first, then
// the batches from the destination's high watermark, or from the end of
// the pull still in flight (two pulls overlap: one applies while the next
// is read). busy says it copied something and should go on at once. A new
// leader of either group starts from the destination's high watermark
// again, so nothing is skipped; what it copies twice is a no-op, and what
// followed a pull that a leader change lost is refused (ErrMirrorHole)
// and pulled again.
func (p *Puller) step(ctx context.Context) (busy bool, err error) {
	r := p.cfg.Replica
	if r.MirrorStarted() && !r.Mirroring() {
		p.drain()
		p.update(func(s *Status) { s.Promoted, s.Leading = true, false })
		return false, nil
	}
	leading := r.IsLeader()
	p.update(func(s *Status) { s.Leading = leading; s.Mirrored = r.HighWatermark() })
	if !leading {
		p.drain()
		return false, nil
	}
	if !r.MirrorStarted() {
		snap, err := p.cfg.Source.Snapshot(ctx)
		if err != nil {
			return false, fmt.Errorf("mirror snapshot: %w", err)
		}
		if err := r.StartMirror(ctx, snap); err != nil {
			return false, err
		}
		p.cfg.Logger.Info("mirror started", "replica", r.ID(), "log_start_offset", snap.LogStart,
			"producers", len(snap.Producers), "producers_at", snap.ProducersAt)
	}
	src, err := p.cfg.Source.State(ctx)
	if err != nil {
		return false, errors.Join(fmt.Errorf("mirror source state: %w", err), p.drain())
	}
	next := max(r.HighWatermark(), r.LogStartOffset())
	if p.flight != nil {
		next = max(next, p.flight.end)
	}
	p.update(func(s *Status) {
		s.Looked, s.SourceHighWatermark, s.SourceFenced, s.FencedEnd = true, src.HighWatermark, src.Fenced, src.FencedEnd
		s.Mirrored, s.Lag = r.HighWatermark(), max(src.HighWatermark-r.HighWatermark(), 0)
	})
	if next >= src.HighWatermark {
		return false, p.drain()
	}
	if next < src.LogStart {
		return false, errors.Join(fmt.Errorf("mirror at %d: %w: the source's log now starts at %d; the move must start again",
			next, log.ErrOffsetOutOfRange, src.LogStart), p.drain())
	}
	b, err := p.cfg.Source.Read(ctx, next, p.cfg.MaxBytes)
	if err != nil {
		return false, errors.Join(fmt.Errorf("mirror read at %d: %w", next, err), p.drain())
	}
	batches, end, err := split(b)
	if err != nil {
		return false, errors.Join(fmt.Errorf("mirror read at %d: %w", next, err), p.drain())
	}
	if len(batches) == 0 {
		return false, p.drain()
	}
	if err := p.wait(ctx, len(b)); err != nil {
		return false, errors.Join(err, p.drain())
	}
	wait, err := r.ProposeMirror(ctx, next, batches)
	if err != nil {
		return false, errors.Join(err, p.drain())
	}
	prevErr := p.drain()
	p.flight = &flight{wait: wait, end: end}
	p.update(func(s *Status) { s.Bytes += int64(len(b)) })
	if prevErr != nil {
		return false, errors.Join(prevErr, p.drain())
	}
	return true, nil
}

// flight is a pull handed to Raft whose entries have not all applied.
type flight struct {
	wait func() (int64, error)
	end  int64 // the source offset after its last batch
}

// drain waits for the pull in flight, if any.
func (p *Puller) drain() error {
	f := p.flight
	if f == nil {
		return nil
	}
	p.flight = nil
	hw, err := f.wait()
	if err == nil {
		p.update(func(s *Status) { s.Mirrored, s.Lag = hw, max(s.SourceHighWatermark-hw, 0) })
	}
	return err
}

// wait takes n bytes from the rate limit, in pieces no larger than its
// burst.
func (p *Puller) wait(ctx context.Context, n int) error {
	if p.limit.Limit() == rate.Inf {
		return nil
	}
	for n > 0 {
		k := min(n, p.limit.Burst())
		if err := p.limit.WaitN(ctx, k); err != nil {
			return fmt.Errorf("mirror rate limit: %w", err)
		}
		n -= k
	}
	return nil
}

// split cuts raw log bytes into whole batches and returns the offset
// after the last.
func split(b []byte) ([][]byte, int64, error) {
	var out [][]byte
	var end int64
	for len(b) > 0 {
		h, err := log.ParseHeader(b)
		if err != nil {
			return nil, 0, err
		}
		n := h.Size()
		if n > int64(len(b)) {
			return nil, 0, fmt.Errorf("%w: batch at %d is cut short", log.ErrCorruptBatch, h.BaseOffset)
		}
		out = append(out, b[:n:n])
		b, end = b[n:], h.NextOffset()
	}
	return out, end, nil
}

// Errors of Promote.
var (
	// ErrNotFenced: the source is not fenced; promoting now would lose
	// what it takes after.
	ErrNotFenced = errors.New("mirror: the source partition is not fenced")
	// ErrFenceLeak: the source's high watermark is past its fenced end:
	// a batch entered after the fence (see DESIGN.md). Unfence and fence
	// again.
	ErrFenceLeak = errors.New("mirror: the source took data after its fence")
	// ErrNotCaughtUp: the destination does not hold everything below the
	// source's fenced end yet.
	ErrNotCaughtUp = errors.New("mirror: the destination has not caught up with the fenced source")
)

// Promote ends a mirror: dst (the destination's leader) takes produce
// from now on. It checks first that the source is fenced, holds nothing
// past its fenced end, and that dst holds everything below it. The
// source's current leader epoch goes into the promote entry's epoch base,
// so that dst's epochs from now on are above every epoch a client saw
// from the source (partition.Replica.PromoteMirror).
func Promote(ctx context.Context, dst *partition.Replica, src Source) error {
	st, err := src.State(ctx)
	if err != nil {
		return fmt.Errorf("promote: source state: %w", err)
	}
	switch hw := dst.HighWatermark(); {
	case !st.Fenced:
		return fmt.Errorf("promote: %w", ErrNotFenced)
	case st.HighWatermark != st.FencedEnd:
		return fmt.Errorf("promote: %w: fenced at %d, high watermark %d", ErrFenceLeak, st.FencedEnd, st.HighWatermark)
	case hw != st.FencedEnd:
		return fmt.Errorf("promote: %w: mirrored to %d, fenced end %d", ErrNotCaughtUp, hw, st.FencedEnd)
	}
	return dst.PromoteMirror(ctx, st.FencedEnd, st.LeaderEpoch)
}
