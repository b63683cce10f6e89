package celltest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/raftlog"
)

// Options configures a Cell. Zero values mean the default.
type Options struct {
	Brokers    int // default 3
	Partitions int // default 1
	// Raft returns the base Raft config of each replica; default
	// TestRaftConfig.
	Raft func() *raft.Config
	// Log configures each partition log.
	Log log.Config
	// CheckInterval is the replicas' removal and preferred-leader check
	// interval; default 200ms.
	CheckInterval time.Duration
	// Network connects the replicas; default a TransportNetwork (real
	// transport on loopback), which the cell closes when it closes.
	Network Network
	// Dir is the root of the brokers' data directories; default t.TempDir().
	Dir string
	// BootstrapGrace is how long a new group's non-preferred replicas wait
	// for the preferred one; default the partition package's.
	BootstrapGrace time.Duration
	// Stopped lists brokers that New does not start (StartBroker starts
	// them later).
	Stopped []int
	// Voters is how many brokers (the first ones) form each group's
	// initial configuration; default all. The others open their replicas
	// with no configuration, as brand-new replicas a leader may add
	// (raft AddVoter/AddNonvoter).
	Voters int
	// Logger receives the replicas' lines; default discarded.
	Logger *slog.Logger
	// Meter, if set, returns the produce-metering sink of broker b's
	// replica of part (partition.Config.Meter); MeterInterval is their
	// close interval (default the partition package's).
	Meter         func(b, part int) partition.MeterSink
	MeterInterval time.Duration
	// SeedRate is each broker's seeding byte rate (partition.NewSeeder);
	// 0 is unlimited. SetSeedRate changes it for brokers started later.
	SeedRate int64
	// Mirror opens every replica as the destination of a move from
	// another cell (partition.Config.Mirror).
	Mirror bool
	// FailoverStagger is partition.Config.FailoverStagger; default the
	// partition package's.
	FailoverStagger time.Duration
}

// TestRaftConfig has short timeouts so failover takes well under a second
// in tests.
func TestRaftConfig() *raft.Config {
	c := raft.DefaultConfig()
	c.HeartbeatTimeout = 300 * time.Millisecond
	c.ElectionTimeout = 300 * time.Millisecond
	c.LeaderLeaseTimeout = 150 * time.Millisecond
	c.CommitTimeout = 20 * time.Millisecond
	return c
}

// Cell is three (or Options.Brokers) brokers in one process.
type Cell struct {
	t      testing.TB
	opts   Options
	net    Network
	ownNet *TransportNetwork // the default network, closed by Close

	reopened atomic.Int64

	// mu guards the fields below.
	mu      sync.Mutex
	brokers []*broker
}

type broker struct {
	dir       string
	seeder    *partition.Seeder
	committer *raftlog.Committer
	replicas  []*partition.Replica // nil while the broker is stopped
}

// New starts a cell and registers its shutdown with t.Cleanup.
func New(t testing.TB, opts Options) *Cell {
	t.Helper()
	opts.Brokers = cmp.Or(opts.Brokers, 3)
	opts.Partitions = cmp.Or(opts.Partitions, 1)
	opts.Voters = cmp.Or(opts.Voters, opts.Brokers)
	if opts.Raft == nil {
		opts.Raft = TestRaftConfig
	}
	opts.CheckInterval = cmp.Or(opts.CheckInterval, 200*time.Millisecond)
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	c := &Cell{t: t, opts: opts, net: opts.Network}
	if c.net == nil {
		tn, err := NewTransportNetwork(opts.Brokers, nil)
		if err != nil {
			t.Fatalf("new cell: %v", err)
		}
		c.net, c.ownNet = tn, tn
	}
	for b := 0; b < opts.Brokers; b++ {
		c.brokers = append(c.brokers, &broker{dir: filepath.Join(opts.Dir, fmt.Sprintf("broker-%d", b))})
	}
	for b := range c.brokers {
		if !slices.Contains(opts.Stopped, b) {
			c.StartBroker(b)
		}
	}
	t.Cleanup(c.Close)
	return c
}

// BrokerID is the Raft server id of broker b.
func BrokerID(b int) raft.ServerID { return raft.ServerID(fmt.Sprintf("b%d", b)) }

// Brokers is the number of brokers.
func (c *Cell) Brokers() int { return c.opts.Brokers }

// Partitions is the number of partitions.
func (c *Cell) Partitions() int { return c.opts.Partitions }

// Network is the cell's network, for cutting links.
func (c *Cell) Network() Network { return c.net }

// Dir is broker b's data directory.
func (c *Cell) Dir(b int) string { return c.brokers[b].dir }

func (c *Cell) peers(part int) []raft.Server {
	var s []raft.Server
	for i := 0; i < c.opts.Voters; i++ {
		// Rotate so that preferred leaders spread over the brokers.
		b := (part + i) % c.opts.Voters
		s = append(s, raft.Server{Suffrage: raft.Voter, ID: BrokerID(b), Address: c.net.Addr(b, part)})
	}
	return s
}

// Server is broker b's Raft server in part's group, as AddVoter wants it.
func (c *Cell) Server(b, part int) raft.Server {
	return raft.Server{Suffrage: raft.Voter, ID: BrokerID(b), Address: c.net.Addr(b, part)}
}

// SetSeedRate sets the seeding byte rate of brokers started from now on.
func (c *Cell) SetSeedRate(bytesPerSecond int64) {
	c.mu.Lock()
	c.opts.SeedRate = bytesPerSecond
	c.mu.Unlock()
}

// Seeder is broker b's seeding budget and counters (since it last
// started), nil before it first started.
func (c *Cell) Seeder(b int) *partition.Seeder {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokers[b].seeder
}

// StartBroker opens every replica of broker b from its data directory. It
// is a no-op if the broker runs.
func (c *Cell) StartBroker(b int) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	br := c.brokers[b]
	if br.replicas != nil {
		return
	}
	br.committer = raftlog.NewCommitter(log.SyncFiles)
	br.seeder = partition.NewSeeder(c.opts.SeedRate)
	for p := 0; p < c.opts.Partitions; p++ {
		r, err := c.openReplica(b, p)
		if err != nil {
			c.t.Fatal(err)
		}
		br.replicas = append(br.replicas, r)
	}
}

// openReplica opens broker b's replica of partition p; c.mu is held.
func (c *Cell) openReplica(b, p int) (*partition.Replica, error) {
	br := c.brokers[b]
	tr, err := c.net.Attach(b, p)
	if err != nil {
		return nil, fmt.Errorf("start broker %d partition %d: %w", b, p, err)
	}
	peers, voter := c.peers(p), b < c.opts.Voters
	if !voter {
		// A new replica admits its group's members' RPCs before it
		// has a configuration: those of Peers.
		peers = append(peers, c.Server(b, p))
	}
	r, err := partition.Open(context.Background(), partition.Config{
		ID:              BrokerID(b),
		Dir:             filepath.Join(br.dir, fmt.Sprintf("p%d", p)),
		Peers:           peers,
		NodeID:          NodeOf,
		Bootstrap:       voter,
		Seeder:          br.seeder,
		BootstrapGrace:  c.opts.BootstrapGrace,
		Transport:       tr,
		Committer:       br.committer,
		Log:             c.opts.Log,
		Raft:            c.opts.Raft(),
		CheckInterval:   c.opts.CheckInterval,
		FailoverStagger: c.opts.FailoverStagger,
		Meter:           c.meter(b, p),
		MeterInterval:   c.opts.MeterInterval,
		Logger:          cmp.Or(c.opts.Logger, slog.New(slog.DiscardHandler)),
		Mirror:          c.opts.Mirror,
		Reopen:          func() { go c.reopen(b, p) },
	})
	if err != nil {
		return nil, fmt.Errorf("start broker %d partition %d: %w", b, p, err)
	}
	return r, nil
}

// reopen closes and opens again broker b's replica of p if it asked to be
// (partition.Config.Reopen), as the broker's replica manager does.
func (c *Cell) reopen(b, p int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	br := c.brokers[b]
	if br.replicas == nil || !br.replicas[p].NeedsReopen() {
		return // stopped meanwhile: it opens anew when started
	}
	c.net.Detach(b, p)
	if err := br.replicas[p].Close(); err != nil && !errors.Is(err, raft.ErrRaftShutdown) {
		c.t.Errorf("reopen broker %d partition %d: %v", b, p, err)
	}
	r, err := c.openReplica(b, p)
	if err != nil {
		c.t.Errorf("reopen: %v", err) // not the test's goroutine: no Fatal
		return
	}
	br.replicas[p] = r
	c.reopened.Add(1)
}

// Reopened is how many replicas were reopened because they asked to be.
func (c *Cell) Reopened() int64 { return c.reopened.Load() }

func (c *Cell) meter(b, part int) partition.MeterSink {
	if c.opts.Meter == nil {
		return nil
	}
	return c.opts.Meter(b, part)
}

// StopBroker closes every replica of broker b and its committer, as a
// process exit would: whatever was acknowledged is on disk already. It is
// a no-op if the broker is stopped.
func (c *Cell) StopBroker(b int) {
	c.t.Helper()
	c.mu.Lock()
	br := c.brokers[b]
	reps := br.replicas
	br.replicas = nil
	c.mu.Unlock()
	if reps == nil {
		return
	}
	for p := range reps {
		c.net.Detach(b, p)
	}
	var wg sync.WaitGroup
	for _, r := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Close(); err != nil && !errors.Is(err, raft.ErrRaftShutdown) {
				c.t.Errorf("stop broker %d: %v", b, err)
			}
		}()
	}
	wg.Wait()
	br.committer.Close()
}

// Running reports whether broker b runs.
func (c *Cell) Running(b int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokers[b].replicas != nil
}

// Replica returns broker b's replica of part, or nil if b is stopped.
func (c *Cell) Replica(b, part int) *partition.Replica {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.brokers[b].replicas == nil {
		return nil
	}
	return c.brokers[b].replicas[part]
}

// Leader returns the broker whose replica of part serves as leader now,
// or -1.
func (c *Cell) Leader(part int) int { return LeaderOf(c, part) }

// LeaderOf is Cell.Leader for any Serving: a test's own brokers find the
// leader the same way a Cell does, by asking each replica.
func LeaderOf(c Serving, part int) int {
	for b := range c.Brokers() {
		if r := c.Replica(b, part); r != nil && r.IsLeader() {
			return b
		}
	}
	return -1
}

// LedBy returns the partitions whose serving leader is broker b now.
func (c *Cell) LedBy(b int) []int {
	var led []int
	for p := range c.opts.Partitions {
		if c.Leader(p) == b {
			led = append(led, p)
		}
	}
	return led
}

// WaitLeader polls until part has a serving leader and returns its broker;
// it fails the test after timeout.
func (c *Cell) WaitLeader(part int, timeout time.Duration) int {
	c.t.Helper()
	b := -1
	WaitFor(c.t, timeout, fmt.Sprintf("a serving leader of partition %d", part), func() bool {
		b = c.Leader(part)
		return b >= 0
	})
	return b
}

// Produce sends batch to part's leader until ctx ends, retrying while no
// leader serves or the leader refused the batch before appending it (so a
// retry cannot duplicate it). Errors are as partition.Replica.Produce
// returns them.
func (c *Cell) Produce(ctx context.Context, part int, batch []byte) (int64, error) {
	return ProduceToLeader(ctx, c, part, batch)
}

// ProduceToLeader is Cell.Produce for any Serving.
func ProduceToLeader(ctx context.Context, c Serving, part int, batch []byte) (int64, error) {
	for {
		b := c.Leader(part)
		if b >= 0 {
			if r := c.Replica(b, part); r != nil {
				off, err := r.Produce(ctx, batch)
				var nl *partition.NotLeaderError
				if err == nil || !errors.As(err, &nl) {
					return off, err
				}
				if nl.Cause != nil && !definitelyNotWritten(err) {
					return off, err // the outcome is unknown: do not resend
				}
			}
		}
		if err := pause(ctx); err != nil {
			return 0, err
		}
	}
}

// pause yields between polls of cluster state.
func pause(ctx context.Context) error {
	t := time.NewTimer(5 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Close stops every broker, then the default network.
func (c *Cell) Close() {
	for b := range c.brokers {
		c.StopBroker(b)
	}
	if c.ownNet != nil {
		if err := c.ownNet.Close(); err != nil {
			c.t.Errorf("close cell network: %v", err)
		}
	}
}

// WaitFor polls cond until it holds or timeout passes, then fails t
// naming what it waited for (testkit.WaitFor, the one bounded wait).
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.WaitFor(t, timeout, what, cond)
}

// CrashBroker stops broker b as a power cut would: its committer stops
// first, so appends waiting for an fsync fail unacknowledged, and then
// everything each replica wrote beyond what it had made durable is cut at
// a random point, with random bytes left as a torn tail. Restart it with
// StartBroker.
func (c *Cell) CrashBroker(b int, rng *rand.Rand) {
	c.t.Helper()
	c.mu.Lock()
	br := c.brokers[b]
	reps := br.replicas
	c.mu.Unlock()
	if reps == nil {
		return
	}
	br.committer.Close()
	type cut struct {
		dir            string
		kafka, entries int64
	}
	cuts := make([]cut, len(reps))
	for p, r := range reps {
		k, e := r.Store().Durable()
		cuts[p] = cut{dir: filepath.Join(br.dir, fmt.Sprintf("p%d", p)), kafka: k, entries: e}
	}
	c.StopBroker(b)
	for _, ct := range cuts {
		if err := tearReplica(ct.dir, ct.kafka, ct.entries, rng); err != nil {
			c.t.Fatalf("crash broker %d: %v", b, err)
		}
	}
}

// tearReplica cuts a stopped replica's files back to their durable prefix
// plus a random part of what followed, then appends a few random bytes.
func tearReplica(dir string, kafka, entries int64, rng *rand.Rand) error {
	l, err := log.Open(context.Background(), log.Config{Dir: filepath.Join(dir, "log")})
	if err != nil {
		return err
	}
	if l.NextOffset() > kafka && rng.Intn(2) == 0 {
		err = l.TruncateTo(kafka)
	}
	segs := l.Segments()
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if len(segs) > 0 && rng.Intn(2) == 0 {
		if err := appendJunk(filepath.Join(dir, "log", fmt.Sprintf("%020d.log", segs[len(segs)-1])), rng); err != nil {
			return err
		}
	}
	ep := filepath.Join(dir, "raft.entries")
	fi, err := os.Stat(ep)
	if err != nil {
		return err
	}
	if fi.Size() > entries {
		if err := os.Truncate(ep, entries+rng.Int63n(fi.Size()-entries+1)); err != nil {
			return err
		}
	}
	if rng.Intn(2) == 0 {
		return appendJunk(ep, rng)
	}
	return nil
}

func appendJunk(path string, rng *rand.Rand) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	junk := make([]byte, 1+rng.Intn(40))
	rng.Read(junk)
	_, err = f.Write(junk)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// StoredBytes is r's partition log in [from, to), its batches as they lie
// in its files: any replica's, leading, following or seeding.
func StoredBytes(t testing.TB, r *partition.Replica, from, to int64) []byte {
	t.Helper()
	var out []byte
	for off := from; off < to; {
		sl, err := r.Store().Log().Read(off, 1<<20, to)
		if err != nil {
			t.Fatalf("read %d from %s: %v", off, r.ID(), err)
		}
		out, err = sl.AppendTo(out)
		sl.Release()
		if err != nil {
			t.Fatal(err)
		}
		off = sl.NextOffset
	}
	return out
}
