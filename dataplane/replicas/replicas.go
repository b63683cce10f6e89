// Package replicas owns a broker's partition replicas: it turns the cell's
// desired state (a cellview.View) into open partition.Replicas, one Raft group
// per partition assigned to this broker, over the broker's shared transport
// Node and group Committer. It opens the replicas of new partitions (every
// replica bootstraps its group with the same configuration, so a new topic
// elects leaders with no operator action), closes and deletes the replicas
// of partitions no longer assigned here, serves the front doors' lookups
// (Get) and the reporter's observations (Status).
//
// tenantd's broker wiring imports it; the front doors (Kafka listener, HTTP
// data API) use Get. It imports the data plane and the control plane's wire
// package only.
package replicas

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/raftlog"
	"github.com/sluicehq/sluice/dataplane/transport"
	"github.com/sluicehq/sluice/dataplane/usage"
)

// ErrClosed is returned by Apply after Close.
var ErrClosed = errors.New("replicas: manager closed")

// Config configures a Manager.
type Config struct {
	// NodeID is this broker's node id in the cell (wire.Broker.NodeID).
	// Required.
	NodeID int
	// DataDir holds one directory per topic id, with one replica directory
	// per partition inside. The Manager owns everything in it. Required.
	DataDir string
	// Transport is the broker's Raft transport; its ID must be
	// ServerID(NodeID). Required.
	Transport *transport.Node
	// Committer is the broker's group committer. Required.
	Committer *raftlog.Committer
	// Raft returns the base Raft config of a replica; default
	// partition.DefaultRaftConfig (timeouts for hundreds of groups).
	Raft func() *raft.Config
	// Log configures every partition log; zero is the log package's
	// defaults. Each topic's own settings (segment.bytes, retention, ...)
	// come from the cell state and override it (settings.go).
	Log log.Config
	// CheckInterval is each replica's removal and preferred-leader check
	// interval; default partition's (1s).
	CheckInterval time.Duration
	// OffsetsPartitions is the number of the cell's internal offsets
	// partitions (consumer groups; see OffsetsPlacement); every broker of
	// a cell must agree. Default groups.DefaultPartitions; negative: none.
	OffsetsPartitions int
	// OffsetsReplicas is each offsets partition's replica count; default
	// DefaultOffsetsReplicas.
	OffsetsReplicas int
	// RetentionInterval is how often a retention pass runs over the
	// replicas (retention.go); default DefaultRetentionInterval.
	RetentionInterval time.Duration
	// RetentionTimeout bounds one replica's part of a pass; default 5s.
	RetentionTimeout time.Duration
	// SeedRate bounds, in bytes a second, how fast this broker's replicas
	// copy segment files from peers when they are seeded (behind the log
	// start, or new): one budget for all of them. 0 is unlimited;
	// negative is refused. tenantd's -seed-rate defaults to
	// DefaultSeedRate.
	SeedRate int64
	// MirrorRate bounds, in bytes a second, each destination partition's
	// pull in a tenant move whose topic mirror sets no rate of its own
	// (wire.TopicMirror.BytesPerSec 0). 0 is unlimited; negative is
	// refused. tenantd's -mirror-rate defaults to DefaultMirrorRate.
	MirrorRate int64
	// Usage, if set, is the broker's meter: the leaders of the tenants'
	// partitions record their closed produce ranges into it (usage.go).
	Usage *usage.Meter
	// CompactInterval is how often the cleaner passes over the replicas
	// of compacted topics (compact.go); default DefaultCompactInterval.
	CompactInterval time.Duration
	// CompactTimeout bounds one replica's part of a cleaner pass; default
	// 10 minutes (a big partition at CleanerRate takes a while).
	CompactTimeout time.Duration
	// CleanerRate bounds the cleaner's reads plus writes, bytes a second,
	// for each replica it cleans in turn; default DefaultCleanerRate;
	// negative: no limit.
	CleanerRate int64
	// Now is the clock compaction decisions take their "now" from (the
	// leaders replicate it); default time.Now.
	Now func() time.Time
	// Logger; nil discards.
	Logger *slog.Logger
}

func (c *Config) validate() error {
	switch {
	case c.NodeID <= 0:
		return errors.New("replicas config: NodeID is required: this broker's node id in the cell")
	case c.DataDir == "":
		return errors.New("replicas config: DataDir is required")
	case c.Transport == nil:
		return errors.New("replicas config: Transport is required: the broker's raft transport")
	case c.Committer == nil:
		return errors.New("replicas config: Committer is required: the broker's group committer")
	case c.Transport.ID() != ServerID(c.NodeID):
		return fmt.Errorf("replicas config: transport id %q is not ServerID(%d) = %q", c.Transport.ID(), c.NodeID, ServerID(c.NodeID))
	}
	if c.SeedRate < 0 {
		return fmt.Errorf("replicas config: SeedRate %d is negative: bytes a second, 0 for unlimited", c.SeedRate)
	}
	if c.MirrorRate < 0 {
		return fmt.Errorf("replicas config: MirrorRate %d is negative: bytes a second, 0 for unlimited", c.MirrorRate)
	}
	if c.Raft == nil {
		c.Raft = partition.DefaultRaftConfig
	}
	if c.OffsetsPartitions == 0 {
		c.OffsetsPartitions = groups.DefaultPartitions
	}
	if c.OffsetsReplicas == 0 {
		c.OffsetsReplicas = DefaultOffsetsReplicas
	}
	if c.RetentionInterval <= 0 {
		c.RetentionInterval = DefaultRetentionInterval
	}
	if c.RetentionTimeout <= 0 {
		c.RetentionTimeout = 5 * time.Second
	}
	if c.CompactInterval <= 0 {
		c.CompactInterval = DefaultCompactInterval
	}
	if c.CompactTimeout <= 0 {
		c.CompactTimeout = 10 * time.Minute
	}
	switch {
	case c.CleanerRate == 0:
		c.CleanerRate = DefaultCleanerRate
	case c.CleanerRate < 0:
		c.CleanerRate = 0 // log.CleanParams: no limit
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// ServerID is the Raft server id of the broker with node id node, in every
// group and on its transport.
func ServerID(node int) raft.ServerID { return raft.ServerID(strconv.Itoa(node)) }

// GroupID is the Raft group id of a partition on the transport.
func GroupID(topicID string, part int32) string {
	return topicID + "/" + strconv.Itoa(int(part))
}

type key struct {
	topic string
	part  int32
}

// Manager keeps a broker's replicas in line with the cell's state.
type Manager struct {
	cfg Config

	// applyMu serializes Apply, Close and reopens: only they open, close
	// or delete replicas. Lock order: applyMu, then mu.
	applyMu sync.Mutex
	// lastView is the view Apply was last given (guarded by applyMu):
	// what a reopen opens a replica again from (reopen.go).
	lastView *cellview.View
	// offsetsAt is the offsets partitions' placement in the state last
	// applied (offsets.go), read without applyMu.
	offsetsAt atomic.Pointer[[]wire.Partition]
	// reopenKick wakes reopenLoop for the keys in reopenWant (under mu).
	reopenKick chan struct{}

	// stop ends the retention loop, which wg waits for.
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	// seeder is the broker's seeding budget, shared by its replicas (seed.go).
	seeder *partition.Seeder

	// cleaner is the cleaner's broker-wide totals (compact.go).
	cleaner cleanerTotals

	// mir is the replicas' part in tenant moves (mirrors.go); moveKick
	// wakes the move loop (moveloop.go).
	mir      mirrors
	moveKick chan struct{}

	// mu guards the fields below.
	mu       sync.RWMutex
	replicas map[key]*partition.Replica
	closed   bool
	// leaving are replicas no longer assigned here, kept open while their
	// group's configuration still makes this broker a voter (moves.go).
	leaving map[key]time.Time // since when
	// badTarget is the last reason logged for a partition whose target
	// is not usable (moves.go).
	badTarget map[key]string
	// rejoin are partitions whose replica here was removed from its group
	// and is wanted again: it is opened anew as a joiner.
	rejoin map[key]bool
	// reopenWant are the partitions whose replica asked to be reopened
	// (partition.Config.Reopen; reopen.go).
	reopenWant map[key]bool
}

// New checks cfg and returns a Manager with no replicas; Apply opens them.
func New(cfg Config) (*Manager, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create replicas dir: %w", err)
	}
	m := &Manager{cfg: cfg, replicas: map[key]*partition.Replica{}, stop: make(chan struct{}), seeder: partition.NewSeeder(cfg.SeedRate),
		leaving: map[key]time.Time{}, badTarget: map[key]string{}, rejoin: map[key]bool{},
		mir: newMirrors(), moveKick: make(chan struct{}, 1), reopenKick: make(chan struct{}, 1), reopenWant: map[key]bool{}}
	if err := m.loadCancelled(); err != nil {
		return nil, err
	}
	m.wg.Add(5)
	go m.reopenLoop() // reopen.go
	go m.retentionLoop()
	go m.leaveLoop()
	go m.compactLoop() // compact.go
	go m.moveLoop()    // moveloop.go
	return m, nil
}

// dir is the replica directory of a partition.
func (m *Manager) dir(k key) string {
	return filepath.Join(m.cfg.DataDir, k.topic, strconv.Itoa(int(k.part)))
}

// Apply reconciles the replicas with v: it opens a replica for every
// partition whose replica list contains this broker, and closes every
// replica not assigned here any more and deletes its data. Directories under
// DataDir of topics v does not assign here (deleted while the broker was
// down) are deleted too, unless v is the empty state a broker starts with
// before its first sync. A partition that fails to open is skipped and
// reported in the error; the next Apply tries it again.
func (m *Manager) Apply(ctx context.Context, v *cellview.View) error {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.lastView = v
	return m.apply(ctx, v)
}

// apply is Apply with applyMu held.
func (m *Manager) apply(ctx context.Context, v *cellview.View) error {
	m.mu.RLock()
	closed := m.closed
	m.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	want := map[key]wire.Partition{}
	settings := map[string]partition.Settings{} // by topic id
	planMax := map[string]int{}
	for _, t := range v.CellState.Topics {
		for _, p := range t.Partitions {
			for _, r := range p.Replicas {
				if r == m.cfg.NodeID {
					want[key{t.ID, int32(p.Partition)}] = p
					if _, ok := settings[t.ID]; !ok {
						settings[t.ID] = settingsFor(v, &t)
						planMax[t.ID] = planMaxBatch(v, &t, settings[t.ID])
					}
				}
			}
		}
	}
	moves := topicMoves(v) // mirrors.go
	m.offsetsWanted(v, want)
	m.usageWanted(v, want, settings, planMax)
	m.noteCleanerNames(v, settings) // compact.go
	settings[groups.OffsetsTopicID] = offsetsSettings
	planMax[groups.OffsetsTopicID] = offsetsSettings.MaxBatchBytes
	var errs []error

	// Close and delete what is no longer assigned here, unless the
	// partition moved away and its group still counts this broker as a
	// voter (a move not finished yet): that one leaves later (leaveLoop). A replica that was removed from its
	// group but is wanted again (a move cancelled after it left) starts
	// over as a joiner.
	present := m.present(v)
	m.mu.Lock()
	var gone []key
	keep := map[key]bool{}
	for k, r := range m.replicas {
		_, wanted := want[k]
		switch {
		case wanted && r.Removed():
			gone = append(gone, k)
			m.rejoin[k] = true
		case wanted:
			delete(m.leaving, k)
		case !present[k] || m.mayDelete(r):
			gone = append(gone, k)
		default:
			if _, ok := m.leaving[k]; !ok {
				m.cfg.Logger.Info("replica no longer assigned here but still a voter of its group; deleting it once it is not", "topic_id", k.topic, "partition", k.part)
				m.leaving[k] = time.Now()
			}
			keep[k] = true
		}
	}
	m.mu.Unlock()
	for _, k := range gone {
		if err := m.remove(k); err != nil {
			errs = append(errs, err)
		}
	}
	if v.StateVersion > 0 {
		for k := range want {
			keep[k] = true
		}
		if err := m.removeOrphans(keep); err != nil {
			errs = append(errs, err)
		}
	}

	// Open what is new.
	for k, p := range want {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		m.mu.RLock()
		r, open := m.replicas[k]
		m.mu.RUnlock()
		if open {
			m.setTarget(v, k, p, r)
			// Settings changed in the cell state reach open replicas.
			if r.Settings() != settings[k.topic] {
				if err := r.SetSettings(settings[k.topic]); err != nil {
					errs = append(errs, fmt.Errorf("apply settings to %s partition %d: %w", k.topic, k.part, err))
				} else {
					m.cfg.Logger.Info("replica settings changed", "topic_id", k.topic, "partition", k.part)
				}
			}
			continue
		}
		if m.skipOpen(k, moves) {
			continue // a cancelled move's destination, deleted (mirrors.go)
		}
		asMirror, err := m.openAsMirror(k, moves[k.topic])
		if err != nil {
			errs = append(errs, fmt.Errorf("open replica of %s partition %d: %w", k.topic, k.part, err))
			continue
		}
		r, err = m.open(ctx, v, k, p, settings[k.topic], planMax[k.topic], asMirror)
		if err != nil {
			errs = append(errs, fmt.Errorf("open replica of %s partition %d: %w", k.topic, k.part, err))
			continue
		}
		m.mu.Lock()
		m.replicas[k] = r
		delete(m.rejoin, k)
		m.mu.Unlock()
		m.setTarget(v, k, p, r)
		m.cfg.Logger.Info("replica opened", "topic_id", k.topic, "partition", k.part, "replicas", p.Replicas, "joining", m.joining(p), "mirror", asMirror)
	}
	if err := m.syncMirrors(v, moves); err != nil {
		errs = append(errs, err)
	}
	m.forgetCancelled(moves)
	m.kickMoves()
	m.noteApplied(v.StateVersion)
	return errors.Join(errs...)
}

// open starts the replica of partition k. Every replica of a new group
// bootstraps it with the same configuration (the partition's replicas in
// order, so the first is the preferred leader); hashicorp/raft accepts
// identical bootstraps on all voters, and a replica with existing state
// ignores it. A replica of a broker the partition's move adds joins the
// group instead (partition.Config.Join): it never bootstraps. asMirror
// opens the destination of a tenant move (partition.Config.Mirror).
func (m *Manager) open(ctx context.Context, v *cellview.View, k key, p wire.Partition, s partition.Settings, planMax int, asMirror bool) (*partition.Replica, error) {
	peers := make([]raft.Server, 0, len(p.Replicas))
	for _, node := range p.Replicas {
		b, ok := v.Broker(node)
		if !ok || b.RaftAddr == "" {
			return nil, fmt.Errorf("broker node %d has no raft address in the cell state", node)
		}
		peers = append(peers, raft.Server{Suffrage: raft.Voter, ID: ServerID(node), Address: raft.ServerAddress(b.RaftAddr)})
	}
	tr, err := m.cfg.Transport.Group(GroupID(k.topic, k.part))
	if err != nil {
		return nil, err
	}
	m.mu.RLock()
	join := m.joining(p) || m.rejoin[k]
	m.mu.RUnlock()
	rc := m.cfg.Raft()
	// Entries as large as the plan allows must fit one transport frame.
	// Raft takes this at start only, so a plan raised later applies to
	// replicas opened afterwards; partition.MaxBatchCeiling bounds every
	// one of them.
	rc.MaxAppendEntries = maxAppendEntries(planMax, rc.MaxAppendEntries)
	r, err := partition.Open(ctx, partition.Config{
		ID:            ServerID(m.cfg.NodeID),
		Dir:           m.dir(k),
		Peers:         peers,
		Bootstrap:     !join,
		Join:          join,
		Transport:     tr,
		Committer:     m.cfg.Committer,
		Log:           m.cfg.Log,
		Settings:      s,
		Raft:          rc,
		CheckInterval: m.cfg.CheckInterval,
		Seeder:        m.seeder,
		Mirror:        asMirror,
		Meter:         m.produceMeter(v, k),
		Logger:        m.cfg.Logger.With("topic_id", k.topic, "partition", k.part),
		Reopen:        func() { m.askReopen(k) }, // reopen.go
	})
	if err != nil {
		_ = tr.Close() // Raft never started, so nothing else closes it
		return nil, err
	}
	return r, nil
}

// remove closes the replica of k and deletes its directory.
func (m *Manager) remove(k key) error {
	m.dropMirror(k) // its puller and serving use the replica
	m.mu.Lock()
	r := m.replicas[k]
	delete(m.replicas, k)
	delete(m.leaving, k)
	delete(m.badTarget, k)
	m.mu.Unlock()
	m.cleaner.drop(k) // its labelled cleaner metrics go with it
	if r != nil {
		if err := r.Close(); err != nil && !errors.Is(err, raft.ErrRaftShutdown) {
			m.cfg.Logger.Warn("close removed replica", "topic_id", k.topic, "partition", k.part, "err", err)
		}
	}
	if err := os.RemoveAll(m.dir(k)); err != nil {
		return fmt.Errorf("delete replica of %s partition %d: %w", k.topic, k.part, err)
	}
	// The topic directory goes with its last partition; Remove fails
	// harmlessly while others remain.
	_ = os.Remove(filepath.Join(m.cfg.DataDir, k.topic))
	m.cfg.Logger.Info("replica removed and its data deleted", "topic_id", k.topic, "partition", k.part)
	return nil
}

// removeOrphans deletes replica directories that keep does not list.
func (m *Manager) removeOrphans(want map[key]bool) error {
	topics, err := os.ReadDir(m.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("list replicas dir: %w", err)
	}
	var errs []error
	for _, t := range topics {
		if !t.IsDir() || strings.HasPrefix(t.Name(), ".") {
			continue
		}
		parts, err := os.ReadDir(filepath.Join(m.cfg.DataDir, t.Name()))
		if err != nil {
			errs = append(errs, fmt.Errorf("list replicas of topic %s: %w", t.Name(), err))
			continue
		}
		for _, p := range parts {
			n, err := strconv.ParseInt(p.Name(), 10, 32)
			if err != nil {
				continue // not a replica directory
			}
			if _, ok := want[key{t.Name(), int32(n)}]; !ok {
				errs = append(errs, m.remove(key{t.Name(), int32(n)}))
			}
		}
	}
	return errors.Join(errs...)
}

// Get returns this broker's replica of a partition, whether or not it
// leads.
func (m *Manager) Get(topicID string, part int32) (*partition.Replica, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	r, ok := m.replicas[key{topicID, part}]
	return r, ok
}

// Status reports every replica's view of its tenant partition. LeaderNode
// is 0 while no leader is known.
func (m *Manager) Status() []wire.PartitionStatus { return m.status(false) }

// ReportStatus is Status plus the cell's offsets partitions (topic id
// groups.OffsetsTopicID), for the cell report: the control plane moves
// them too, and finishes their moves from their leaders' reports.
func (m *Manager) ReportStatus() []wire.PartitionStatus { return m.status(true) }

func (m *Manager) status(offsets bool) []wire.PartitionStatus {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]wire.PartitionStatus, 0, len(m.replicas))
	for k, r := range m.replicas {
		if (k.topic == groups.OffsetsTopicID && !offsets) || k.topic == UsageTopicID {
			continue // internal: no topic of the control plane's
		}
		st := wire.PartitionStatus{TopicID: k.topic, Partition: int(k.part), LeaderEpoch: int64(r.LeaderEpoch()),
			HighWatermark: r.HighWatermark()}
		if id, _ := r.LeaderID(); id != "" {
			st.LeaderNode, _ = strconv.Atoi(string(id))
		}
		l := r.Store().Log()
		st.LogStartOffset, st.LogEndOffset, st.SizeBytes = r.LogStartOffset(), l.NextOffset(), l.Size()
		st.BehindLogStart = r.BehindLogStart()
		moveStatus(r, &st)
		st.Mirror = m.mirrorStatus(k, r) // mirrors.go
		out = append(out, st)
	}
	return out
}

// BehindLogStart counts the replicas stuck behind their leader's log
// start (partition.ErrBehindLogStart), the offsets partitions included.
func (m *Manager) BehindLogStart() int {
	return m.count((*partition.Replica).BehindLogStart)
}

// count counts, under mu, the open replicas for which is returns true:
// several of the gauges the broker exports are such counts.
func (m *Manager) count(is func(*partition.Replica) bool) int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := 0
	for _, r := range m.replicas {
		if is(r) {
			n++
		}
	}
	return n
}

// openReplicas copies, under mu, the open replicas that keep accepts (all
// of them when keep is nil), so that a pass can work on them (Raft rounds,
// file I/O) without holding mu.
func (m *Manager) openReplicas(keep func(*partition.Replica) bool) map[key]*partition.Replica {
	m.mu.RLock()
	defer m.mu.RUnlock()
	open := make(map[key]*partition.Replica, len(m.replicas))
	for k, r := range m.replicas {
		if keep == nil || keep(r) {
			open[k] = r
		}
	}
	return open
}

// Close closes every replica and waits for all of them. Data stays on disk.
// Apply fails afterwards. Close is idempotent.
func (m *Manager) Close() error {
	m.stopOnce.Do(func() { close(m.stop) })
	m.wg.Wait()
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.closeMirrors()
	m.mu.Lock()
	m.closed = true
	reps := m.replicas
	m.replicas = map[key]*partition.Replica{}
	m.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, 0, len(reps))
	var emu sync.Mutex
	for _, r := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Close(); err != nil && !errors.Is(err, raft.ErrRaftShutdown) {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
