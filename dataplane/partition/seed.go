package partition

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/raftlog"
	"github.com/sluicehq/sluice/dataplane/transport"
)

// Seeding: a replica whose log lacks what its Raft snapshot describes (it
// was behind the leader's log start, or is new and empty and the leader no
// longer has the first entries) copies a peer's segment files from the
// snapshot's log start to its high watermark, then installs them and takes
// Raft's entries after the snapshot again. See DESIGN.md, "Seeding a
// replica from segments".

// seedChunk is the most one segment read asks for.
const seedChunk = 1 << 20

// Seeder is one broker's seeding budget, shared by all its replicas: a
// byte rate for the copies (golang.org/x/time/rate) and counters.
type Seeder struct {
	lim    *rate.Limiter // nil: unlimited
	chunk  int
	copied atomic.Int64
	kept   atomic.Int64
	left   atomic.Int64
	busy   atomic.Int64 // nanoseconds spent in seeds that completed
}

// NewSeeder returns a Seeder copying at most bytesPerSecond bytes a second
// over all of a broker's seeding replicas; 0 (or less) is unlimited.
func NewSeeder(bytesPerSecond int64) *Seeder {
	s := &Seeder{chunk: seedChunk}
	if bytesPerSecond > 0 {
		s.chunk = int(min(seedChunk, max(bytesPerSecond/4, 4<<10)))
		s.lim = rate.NewLimiter(rate.Limit(bytesPerSecond), s.chunk)
	}
	return s
}

// Copied is how many segment bytes this broker's replicas copied from
// peers so far.
func (s *Seeder) Copied() int64 { return s.copied.Load() }

// Kept is how many bytes seeds resumed after a restart found already
// copied and verified on disk, and did not copy again.
func (s *Seeder) Kept() int64 { return s.kept.Load() }

// Busy is the time this broker's completed seeds took, from reading the
// snapshot to the installed copy (copy, verification and install).
func (s *Seeder) Busy() time.Duration { return time.Duration(s.busy.Load()) }

// Remaining is how many bytes this broker's seeding replicas have left to
// copy (as far as their current plans know).
func (s *Seeder) Remaining() int64 { return s.left.Load() }

// segmentPeer is what seeding needs of the transport.
type segmentPeer interface {
	SegmentList(ctx context.Context, id raft.ServerID, target raft.ServerAddress, from, to int64) (int64, []transport.SegmentInfo, error)
	SegmentRead(ctx context.Context, id raft.ServerID, target raft.ServerAddress, base, pos, limit int64, p []byte) (int, error)
	SetSeeding(on bool)
}

// Seeding reports whether the replica is being seeded: it serves nothing
// (ErrBehindLogStart) until its copy is installed.
func (r *Replica) Seeding() bool { return r.fsm.isBehind() }

// SeedRemaining is how many bytes this replica's seed has left to copy, 0
// when it is not seeding.
func (r *Replica) SeedRemaining() int64 { return r.seedLeft.Load() }

// behind is the FSM's onBehind: stop taking entries and votes at the
// transport at once (before the InstallSnapshot answer goes back, so the
// leader's next AppendEntries is refused, not walked back), and wake the
// seed loop.
func (r *Replica) behind() {
	if p, ok := r.cfg.Transport.(segmentPeer); ok {
		p.SetSeeding(true)
	}
	select {
	case r.seedKick <- struct{}{}:
	default:
	}
}

// seedLoop seeds the replica whenever it is behind, retrying with backoff.
func (r *Replica) seedLoop() {
	defer r.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.cancelOnStop(ctx, cancel)
	for {
		select {
		case <-r.stop:
			return
		case <-r.seedKick:
		}
		wait := 100 * time.Millisecond
		for r.fsm.isBehind() && !r.reopen.Load() { // a replica to reopen seeds after (diverge.go)
			err := r.seedOnce(ctx)
			if err == nil {
				continue
			}
			if ctx.Err() != nil {
				return
			}
			r.cfg.Logger.Warn("seeding replica from segments failed; retrying", "replica", r.cfg.ID, "retry_in", wait, "err", err)
			if !r.sleep(wait) {
				return
			}
			wait = min(2*wait, 5*time.Second)
		}
	}
}

// seedTarget reads the latest Raft snapshot: its index and term, and the
// high watermark and log start it describes.
func (r *Replica) seedTarget() (*raft.SnapshotMeta, fsmState, error) {
	metas, err := r.snaps.List()
	if err != nil || len(metas) == 0 {
		return nil, fsmState{}, fmt.Errorf("seed: no snapshot to seed to: %w", err)
	}
	meta, rc, err := r.snaps.Open(metas[0].ID)
	if err != nil {
		return nil, fsmState{}, fmt.Errorf("seed: open snapshot: %w", err)
	}
	defer rc.Close()
	var st fsmState
	if err := json.NewDecoder(rc).Decode(&st); err != nil {
		return nil, fsmState{}, fmt.Errorf("seed: read snapshot: %w", err)
	}
	return meta, st, nil
}

// seedSources are the peers to copy from: the leader first (it has every
// committed entry), then the other members.
func (r *Replica) seedSources() []raft.Server {
	var out []raft.Server
	addr, id := r.raft.LeaderWithID()
	if id != "" && id != r.cfg.ID {
		out = append(out, raft.Server{ID: id, Address: addr})
	}
	servers := r.cfg.Peers
	if f := r.raft.GetConfiguration(); f.Error() == nil && len(f.Configuration().Servers) > 0 {
		servers = f.Configuration().Servers
	}
	for _, s := range servers {
		if s.ID != r.cfg.ID && s.ID != id {
			out = append(out, s)
		}
	}
	return out
}

// seedOnce copies and installs one seed from the first source that can
// serve it.
func (r *Replica) seedOnce(ctx context.Context) error {
	p, ok := r.cfg.Transport.(segmentPeer)
	if !ok {
		return errors.New("seed: the transport carries no segments")
	}
	began := time.Now()
	meta, st, err := r.seedTarget()
	if err != nil {
		return err
	}
	if r.store.Log().NextOffset() >= st.HighWatermark && r.fsm.caughtUp() {
		p.SetSeeding(false)
		return nil
	}
	errs := []error{}
	for _, src := range r.seedSources() {
		start, segs, err := p.SegmentList(ctx, src.ID, src.Address, st.LogStartOffset, st.HighWatermark)
		if err == nil {
			err = r.copySegments(ctx, p, src, segs)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("from %s: %w", src.ID, err))
			continue
		}
		plan := raftlog.SeedPlan{Index: meta.Index, Term: meta.Term, Offset: st.HighWatermark, LogStart: start}
		if err := r.store.InstallSeed(ctx, plan); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
		// The cache may hold entries of the replaced store; an empty
		// range clears it and changes nothing in the store.
		_ = r.logs.DeleteRange(1, 0)
		took := time.Since(began)
		r.seeder.busy.Add(int64(took))
		if r.fsm.caughtUp() {
			p.SetSeeding(false)
			r.cfg.Logger.Info("replica seeded from a peer's segments", "replica", r.cfg.ID, "source", src.ID,
				"snapshot_index", meta.Index, "log_start_offset", start, "high_watermark", st.HighWatermark,
				"segments", len(segs), "took", took)
		}
		return nil
	}
	if len(errs) == 0 {
		return errors.New("seed: no peer to copy from")
	}
	return fmt.Errorf("seed: %w", errors.Join(errs...))
}

// copySegments brings SeedDir to exactly segs: files no longer wanted are
// removed, files partly there are verified (batch CRCs) and continued,
// missing ones are copied, every read throttled by the broker's Seeder.
func (r *Replica) copySegments(ctx context.Context, p segmentPeer, src raft.Server, segs []transport.SegmentInfo) error {
	dir := r.store.SeedDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	want := map[string]transport.SegmentInfo{}
	var total int64
	for _, s := range segs {
		want[log.SegmentFileName(s.Base)] = s
		total += s.Size
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range names {
		if _, ok := want[e.Name()]; !ok {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	left := total
	r.setSeedLeft(left)
	defer r.setSeedLeft(0)
	buf := make([]byte, r.seeder.chunk)
	for _, s := range segs {
		path := filepath.Join(dir, log.SegmentFileName(s.Base))
		var have int64
		if _, err := os.Stat(path); err == nil {
			if have, _, err = log.VerifySegmentFile(path, s.Base, s.Size); err != nil {
				return err
			}
			r.seeder.kept.Add(have)
		} else if s.Size == 0 {
			// An empty segment (compaction emptied it, or it starts at
			// the seed's end) is a boundary the copy must keep.
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				return err
			}
		}
		left -= have
		r.setSeedLeft(left)
		if have == s.Size {
			continue
		}
		if err := r.copyFile(ctx, p, src, s, path, have, buf, &left); err != nil {
			return err
		}
	}
	return log.SyncDir(dir)
}

func (r *Replica) copyFile(ctx context.Context, p segmentPeer, src raft.Server, s transport.SegmentInfo, path string, pos int64, buf []byte, left *int64) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	for pos < s.Size {
		n := int(min(int64(len(buf)), s.Size-pos))
		if r.seeder.lim != nil {
			if err := r.seeder.lim.WaitN(ctx, n); err != nil {
				return err
			}
		}
		k, err := p.SegmentRead(ctx, src.ID, src.Address, s.Base, pos, s.Size, buf[:n])
		if err != nil {
			return fmt.Errorf("read segment %d at %d: %w", s.Base, pos, err)
		}
		if k == 0 {
			return fmt.Errorf("read segment %d at %d: the source has no more of it", s.Base, pos)
		}
		if _, err := f.WriteAt(buf[:k], pos); err != nil {
			return err
		}
		pos += int64(k)
		*left -= int64(k)
		r.seeder.copied.Add(int64(k))
		r.setSeedLeft(*left)
	}
	return f.Sync()
}

// setSeedLeft records this replica's bytes left and keeps the broker's
// total in step.
func (r *Replica) setSeedLeft(n int64) {
	old := r.seedLeft.Swap(n)
	r.seeder.left.Add(n - old)
}

// segmentSource serves this replica's committed segment bytes to seeding
// peers: never past its own high watermark, never while it is behind.
type segmentSource struct{ r *Replica }

func (s segmentSource) SeedSegments(from, to int64) (int64, []transport.SegmentInfo, error) {
	if s.r.fsm.isBehind() {
		return 0, nil, ErrBehindLogStart
	}
	if hw := s.r.fsm.highWatermark(); to > hw {
		return 0, nil, fmt.Errorf("seed segments to %d: %w: high watermark %d", to, log.ErrOffsetOutOfRange, hw)
	}
	start, segs, err := s.r.store.Log().SeedSegments(from, to)
	if err != nil {
		return 0, nil, err
	}
	out := make([]transport.SegmentInfo, len(segs))
	for i, sg := range segs {
		out[i] = transport.SegmentInfo{Base: sg.Base, Size: sg.Size}
	}
	return start, out, nil
}

func (s segmentSource) ReadSegment(base, pos, limit int64, p []byte) (int, error) {
	if s.r.fsm.isBehind() {
		return 0, ErrBehindLogStart
	}
	return s.r.store.Log().ReadSegment(base, pos, limit, p)
}
