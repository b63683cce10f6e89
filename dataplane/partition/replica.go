package partition

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/raftlog"
	"github.com/sluicehq/sluice/dataplane/transport"
)

// Errors. Callers match them with errors.Is.
var (
	// ErrNotLeader: this replica cannot serve the request; a *NotLeaderError
	// carrying the known leader wraps it.
	ErrNotLeader = errors.New("partition: not the leader")
	// ErrRemoved: the replica was removed from its group's configuration
	// and has shut down.
	ErrRemoved error = goneError("partition: replica removed from the group")
	// ErrClosed: the replica was closed.
	ErrClosed error = goneError("partition: replica closed")
	// ErrFencedLeaderEpoch: the caller's leader epoch is older than this
	// leader's (Kafka FENCED_LEADER_EPOCH); refresh and retry.
	ErrFencedLeaderEpoch = errors.New("partition: caller's leader epoch is fenced")
	// ErrUnknownLeaderEpoch: the caller has seen a newer epoch than this
	// replica's (Kafka UNKNOWN_LEADER_EPOCH); this replica is stale.
	ErrUnknownLeaderEpoch = errors.New("partition: leader epoch newer than this replica's")
)

// goneError is a replica that no longer serves anything. Like a
// NotLeaderError, it tells a client to look for the leader elsewhere.
type goneError string

func (e goneError) Error() string { return string(e) }

// LeaderNode knows no leader: see NotLeaderError.LeaderNode.
func (e goneError) LeaderNode() (int, bool) { return -1, false }

// NotLeaderError says who the leader is, as far as this replica knows
// (empty if unknown). Cause is the Raft error, if any; after
// raft.ErrLeadershipLost the produce may still have been committed.
type NotLeaderError struct {
	Leader raft.ServerID
	Addr   raft.ServerAddress
	// Node is the leader's broker node id (Config.NodeID), -1 if unknown.
	Node int
	// Majority is true when no leader is known and a majority of the
	// group's voters are on brokers the transport finds down: no leader
	// can be elected until they return (see Replica.NoQuorum).
	Majority bool
	Cause    error
}

// NoQuorum tells a partition whose majority is gone from one whose leader
// is merely moving; front doors match it by this method.
func (e *NotLeaderError) NoQuorum() bool { return e.Majority }

// LeaderNode is the leader's broker node id. Front ends that must not
// import this package (the Kafka listener) match not-leader errors by
// this method.
func (e *NotLeaderError) LeaderNode() (int, bool) { return e.Node, e.Node >= 0 }

func (e *NotLeaderError) Error() string {
	msg := "partition: not the leader"
	if e.Leader != "" {
		msg += "; leader is " + string(e.Leader)
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }
func (e *NotLeaderError) Unwrap() error        { return e.Cause }

// Config configures one replica.
type Config struct {
	// ID is this replica's server id in the group (the broker's id).
	// Required.
	ID raft.ServerID
	// Dir is the replica directory. Required.
	Dir string
	// Peers are the group's voters, this replica included. Peers[0] is the
	// preferred leader. Required when bootstrapping.
	Peers []raft.Server
	// Bootstrap makes a replica with no state write the initial
	// configuration (Peers). Every replica of a new group may do so: the
	// preferred replica (Peers[0]) writes it at once and campaigns at once
	// (if Transport can: transport.GroupTransport.Campaign), so it alone
	// can campaign and becomes the first leader within milliseconds; the
	// others wait for it to
	// reach them and write the configuration themselves only if no
	// leader has within BootstrapGrace (the preferred replica is down).
	Bootstrap bool
	// Join opens a replica of a group that exists elsewhere (a replica
	// move adds it): it never bootstraps, waits for the leader to add it
	// (as a non-voter, seeded from segments), and does not campaign or
	// vote until a configuration of its own join makes it a voter
	// (joingate.go). Peers are then the brokers it admits RPCs from until
	// Raft's configuration lists them. Exclusive with Bootstrap.
	Join bool
	// BootstrapGrace is how long a non-preferred replica of a new group
	// waits for the preferred one before it bootstraps the group itself.
	// Default three times the Raft election timeout, at most 15s.
	BootstrapGrace time.Duration
	// Transport carries this group's Raft RPCs. Required.
	Transport raft.Transport
	// Committer is the broker's group committer. Required.
	Committer *raftlog.Committer
	// Log configures the partition log (segment size, retention, ...).
	// Its MaxBatchBytes is set to MaxBatchCeiling: the topic's limit is
	// Settings.MaxBatchBytes, which Produce checks.
	Log log.Config
	// Settings are the initial per-topic settings (SetSettings changes
	// them); their Log part overrides Log's segment and retention fields.
	Settings Settings
	// Raft is the base Raft configuration; nil means DefaultRaftConfig.
	// LocalID, the snapshot and trailing-log settings, ShutdownOnRemove and
	// NotifyCh are set by the replica.
	Raft *raft.Config
	// CheckInterval is how often the replica checks for its removal from the
	// configuration and whether to hand leadership back to Peers[0].
	// Default 1s.
	CheckInterval time.Duration
	// ApplyTimeout bounds a Produce whose context has no deadline.
	// Default 10s.
	ApplyTimeout time.Duration
	// LogCacheEntries and LogCacheBytes bound the recent entries (whole
	// batches) Raft keeps in memory for replication (raftlog.Cache), by
	// count and by bytes of data. Defaults 32 and 4 MiB: a caught-up
	// follower reads what the last round or two stored, a lagging one
	// reads the partition log.
	LogCacheEntries int
	LogCacheBytes   int64
	// FailoverStagger separates the campaigns of a dead leader's
	// followers: the first live voter in Peers order campaigns at once,
	// the next one this much later (three times as much if those ranked
	// before it have been up a while) and only if no leader came
	// meanwhile, so that two followers do not split the vote of one term
	// (a split costs a whole election timeout). A follower that refuses
	// the first candidate's vote does not wait (leadership.go). Default
	// DefaultFailoverStagger.
	FailoverStagger time.Duration
	// Logger gets lifecycle lines. Nil discards them.
	Logger *slog.Logger
	// NodeID maps a replica's server id to its broker's node id, for
	// Leader and NotLeaderError.Node. Default: the server id in decimal.
	NodeID func(raft.ServerID) (int, bool)
	// Meter, if set, meters this partition's produce from its log
	// (meter.go): while this replica leads, it closes the pending sums
	// every MeterInterval and records each closed range with Meter.
	// Every replica sums whether or not it is set.
	Meter MeterSink
	// MeterInterval is how often the leader closes pending produce sums;
	// default DefaultMeterInterval.
	MeterInterval time.Duration
	// Seeder is the broker's seeding budget (seed.go), shared by its
	// replicas. Default: an unlimited one of this replica's own.
	Seeder *Seeder
	// Mirror opens the destination of a move from another cell
	// (mirror.go): the partition refuses produce until it is promoted.
	Mirror bool
	// Reopen, if set, is called (once, without blocking) when the replica
	// must be closed and opened again on its directory: a snapshot
	// install found an uncommitted tail in its store that the group's
	// leader can no longer overwrite, and hashicorp/raft's view of the
	// last entry can only be re-read at start (diverge.go); or it has led
	// for two unreadyLimits without serving (barrier.go). Until then it
	// serves nothing, takes no entries and gives no votes.
	Reopen func()
}

func decimalNodeID(id raft.ServerID) (int, bool) {
	n, err := strconv.Atoi(string(id))
	return n, err == nil && n >= 0
}

func (c *Config) validate() error {
	switch {
	case c.ID == "":
		return errors.New("config: ID is required: this replica's server id")
	case c.Dir == "":
		return errors.New("config: Dir is required: the replica directory")
	case c.Transport == nil:
		return errors.New("config: Transport is required")
	case c.Committer == nil:
		return errors.New("config: Committer is required: the broker's group committer")
	case c.Bootstrap && len(c.Peers) == 0:
		return errors.New("config: Peers is required to bootstrap a group")
	case c.Bootstrap && c.Join:
		return errors.New("config: Bootstrap and Join exclude each other: a joining replica waits to be added")
	}
	if err := c.Settings.validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	c.Log.MaxBatchBytes = MaxBatchCeiling
	if l := c.Settings.Log; l != (log.Settings{}) {
		c.Log.ApplySettings(l)
	}
	if c.Raft == nil {
		c.Raft = DefaultRaftConfig()
	}
	if c.BootstrapGrace <= 0 {
		c.BootstrapGrace = min(3*max(c.Raft.ElectionTimeout, c.Raft.HeartbeatTimeout), 15*time.Second)
	}
	if c.CheckInterval <= 0 {
		c.CheckInterval = time.Second
	}
	if c.ApplyTimeout <= 0 {
		c.ApplyTimeout = 10 * time.Second
	}
	if c.LogCacheEntries <= 0 {
		c.LogCacheEntries = 32
	}
	if c.LogCacheBytes <= 0 {
		c.LogCacheBytes = 4 << 20
	}
	if c.FailoverStagger <= 0 {
		c.FailoverStagger = DefaultFailoverStagger
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.NodeID == nil {
		c.NodeID = decimalNodeID
	}
	if c.Seeder == nil {
		c.Seeder = NewSeeder(0)
	}
	if c.MeterInterval <= 0 {
		c.MeterInterval = DefaultMeterInterval
	}
	return nil
}

// DefaultRaftConfig returns transport.RaftConfig, the timeouts for hundreds
// of groups per broker sharing one transport (heartbeat and election 10s,
// lease 5s, commit 5s; failures are detected per broker, not by these):
// one definition, so the replicas and the transport's own benchmarks
// agree. Open sets LocalID.
func DefaultRaftConfig() *raft.Config { return transport.RaftConfig("") }

// snapshotThreshold: FSM snapshots are a few hundred bytes, so take them
// often enough to bound replay after a restart. They never remove data.
const snapshotThreshold = 1024

// Replica is one member of a partition's Raft group.
type Replica struct {
	cfg    Config
	store  *raftlog.Store
	fsm    *fsm
	raft   *raft.Raft
	snaps  raft.SnapshotStore
	stable *raftlog.StableStore // Raft's term and vote (votedAfter reads it)
	logs   *raftlog.Cache       // Raft's cache over store; a seed install clears it
	notify chan bool
	obs    chan raft.Observation
	obsReg *raft.Observer

	stop      chan struct{}
	peerDown  chan raft.ServerID // peer brokers found down (watchPeers)
	peers     peerWatcher        // nil without per-broker failure detection
	openedAt  time.Time          // when watchPeers ran: the replica's Raft started
	wg        sync.WaitGroup     // the monitor, barrier, campaign, deferred-bootstrap and meter goroutines
	closeOnce sync.Once
	closeErr  error

	// transfer, when set (tests only), stands in for Raft's
	// LeadershipTransferToServer (transferTo).
	transfer atomic.Pointer[func(raft.ServerID, raft.ServerAddress) raft.Future]
	// barrierFn, when set (tests only), stands in for Raft's Barrier in
	// barrier (barrier.go).
	barrierFn atomic.Pointer[func(time.Duration) raft.Future]
	// refusedTerm is the highest term of a vote request this replica's
	// Raft refused (noteRefusal, leadership.go).
	refusedTerm atomic.Uint64

	// mu guards the fields below.
	mu        sync.Mutex
	readyTerm uint64 // term whose barrier completed while leader; 0 if none
	// electedAt is when this replica last became leader without serving
	// yet, or when checkUnready last acted on it; zero when it is not
	// leader (barrier.go).
	electedAt time.Time
	// unreadyTries counts checkUnready's steps in this leadership.
	unreadyTries int
	// transferAfter is when the next transfer to the preferred replica may
	// start: three check intervals after serving a term or after a failed
	// transfer, longer after slowTransfers slow failures in a row
	// (transfer.go).
	transferAfter time.Time
	slowTransfers int
	failing       map[raft.ServerID]bool      // peers the leader cannot heartbeat
	peerUp        map[raft.ServerID]time.Time // when a peer broker last answered again after being down
	// deferredDown is the dead leader whose succession this replica
	// passed over because too few voters' brokers answered; retryFailover
	// takes it up again once they do. Empty if none.
	deferredDown raft.ServerID
	removed      bool
	shutdown     bool

	// seqMu serializes idempotent produces from their sequence check to
	// their raft.Apply, so that entries enter the log in checked order;
	// it guards inflight.
	seqMu    sync.Mutex
	inflight map[int64][]*pendingBatch // by producer id, in log order

	// maxBatch is Settings.MaxBatchBytes (settings.go).
	maxBatch atomic.Int64
	// compact is the compaction state (compact.go).
	compact compactor

	// Seeding (seed.go): seedKick wakes seedLoop; seedLeft is the bytes
	// its copy has left.
	seeder   *Seeder
	seedKick chan struct{}
	seedLeft atomic.Int64
	// reopen is set once Config.Reopen was asked for (diverge.go).
	reopen atomic.Bool

	// member is the replica's part of a replica move (membership.go);
	// gate is set while it joins its group (joingate.go).
	member memberState
	gate   *joinGate
	// move orders produce against a fence (mirror.go).
	move moveGate

	// watchMu guards watchers.
	watchMu  sync.Mutex
	watchers map[*watcher]struct{}
}

// pendingBatch is an idempotent batch handed to Raft and not yet applied
// (or failed). done closes once base and err are set.
type pendingBatch struct {
	epoch       int16
	first, last int32
	done        chan struct{}
	base        int64
	err         error
}

type watcher struct {
	above int64
	wake  chan<- struct{}
}

// Open opens the replica's store from cfg.Dir and starts its Raft member.
func Open(ctx context.Context, cfg Config) (*Replica, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("open replica: %w", err)
	}
	store, err := raftlog.Open(ctx, raftlog.Config{Dir: cfg.Dir, Log: cfg.Log, Committer: cfg.Committer, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("open replica %s: %w", cfg.ID, err)
	}
	r, err := start(cfg, store)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("open replica %s: %w", cfg.ID, err)
	}
	return r, nil
}

func start(cfg Config, store *raftlog.Store) (*Replica, error) {
	stable, err := raftlog.OpenStable(cfg.Dir)
	if err != nil {
		return nil, err
	}
	hl := hclog.New(&hclog.LoggerOptions{Name: "raft", Output: io.Discard, Level: hclog.Off})
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(cfg.Dir, "snapshots"), 2, hl)
	if err != nil {
		return nil, err
	}
	r := &Replica{
		cfg:      cfg,
		store:    store,
		notify:   make(chan bool, 8),
		obs:      make(chan raft.Observation, 64),
		stop:     make(chan struct{}),
		peerDown: make(chan raft.ServerID, 4),
		failing:  map[raft.ServerID]bool{},
		peerUp:   map[raft.ServerID]time.Time{},
		inflight: map[int64][]*pendingBatch{},
		watchers: map[*watcher]struct{}{},
		snaps:    snaps,
		stable:   stable,
		seeder:   cfg.Seeder,
		seedKick: make(chan struct{}, 1),
	}
	r.maxBatch.Store(int64(cfg.Settings.MaxBatchBytes))
	r.compact.settings = cfg.Settings.Compaction
	r.compact.end = max(store.Log().CleanedTo(), 0) // the log's checkpoint: the dirty ratio is right from the first pass
	r.fsm = &fsm{store: store.Log(), advanced: r.wake, logger: cfg.Logger, onBehind: r.behind,
		restored: r.restored, follows: r.followsSnapshot}
	if err := cutDivergent(store, snaps, cfg.Logger); err != nil { // diverge.go: before Raft reads the last entry
		return nil, err
	}
	if s, ok := cfg.Transport.(interface{ SetSegmentSource(transport.SegmentSource) }); ok {
		s.SetSegmentSource(segmentSource{r})
	}
	rc := *cfg.Raft
	rc.LocalID = cfg.ID
	rc.NotifyCh = r.notify
	rc.ShutdownOnRemove = true
	// Keep every entry after a snapshot: prefix compaction would have to
	// delete partition data, and the store refuses to anyway. With the
	// whole log available the leader catches any follower up by
	// AppendEntries and never needs InstallSnapshot.
	rc.TrailingLogs = math.MaxUint64 / 2
	rc.SnapshotThreshold = snapshotThreshold
	if rc.Logger == nil {
		rc.Logger = raftLogger(cfg.Logger, string(cfg.ID))
	}
	logs, err := raftlog.NewCache(store, cfg.LogCacheEntries, cfg.LogCacheBytes)
	if err != nil {
		return nil, err
	}
	r.logs = logs
	deferBootstrap, bootstrapped := false, false
	has, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return nil, err
	}
	if r.gate, err = openJoinGate(cfg, has); err != nil {
		return nil, err
	}
	if cfg.Bootstrap {
		switch {
		case has:
		case cfg.Peers[0].ID == cfg.ID:
			if err := raft.BootstrapCluster(&rc, logs, stable, snaps, cfg.Transport, raft.Configuration{Servers: cfg.Peers}); err != nil {
				return nil, fmt.Errorf("bootstrap: %w", err)
			}
			bootstrapped = true
		default:
			// Without a configuration this replica never campaigns
			// (hashicorp/raft grants votes to a bootstrapping group),
			// so the preferred replica wins the first election and no
			// leadership transfer follows it.
			deferBootstrap = true
		}
	}
	// The transport refuses a peer's RPC unless the peer is in the group's
	// configuration: Raft's latest one, or Peers until Raft has one (a
	// replica waiting for the preferred replica's first append).
	var started atomic.Pointer[raft.Raft]
	if m, ok := cfg.Transport.(interface{ SetMembers(func() []raft.Server) }); ok {
		m.SetMembers(r.gate.members(transport.RaftMembers(started.Load, cfg.Peers)))
	}
	var raftLogs raft.LogStore = logs
	if r.gate.gated() {
		if err := r.gate.scanLog(cfg.ID, logs); err != nil {
			return nil, fmt.Errorf("joining replica: %w", err)
		}
		raftLogs = &gatedLogs{LogStore: logs, gate: r.gate, id: cfg.ID, log: cfg.Logger.Info, term: func() uint64 {
			if ra := started.Load(); ra != nil {
				return ra.CurrentTerm()
			}
			return 0
		}}
	}
	ra, err := raft.NewRaft(&rc, r.fsm, raftLogs, stable, snaps, gateTransport(cfg.Transport, r.gate, cfg.ID, r.stop, &r.wg))
	if err != nil {
		close(r.stop) // ends the gated transport's filter, if any
		r.wg.Wait()
		return nil, err
	}
	started.Store(ra)
	r.raft = ra
	logs.SetFloor(r.cacheFloor)
	// A follower far behind is caught up by plain AppendEntries, not a
	// pipeline that an idle leader feeds one batch per CommitTimeout, and
	// a pipelined append carries what the log holds after it
	// (transport.GroupTransport.SetLocalLog).
	if l, ok := cfg.Transport.(interface {
		SetLocalLog(func() uint64, int, func(uint64, *raft.Log) error)
	}); ok {
		l.SetLocalLog(ra.LastIndex, rc.MaxAppendEntries, raftLogs.GetLog)
	}
	r.obsReg = raft.NewObserver(r.obs, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation:
			return true
		}
		return false
	})
	ra.RegisterObserver(r.obsReg)
	r.watchPeers()
	r.wg.Add(2)
	go r.monitor()
	go r.seedLoop()
	if deferBootstrap {
		r.wg.Add(1)
		go r.bootstrapLater()
	}
	if cfg.Meter != nil {
		r.wg.Add(1)
		go r.meterLoop()
	}
	if bootstrapped {
		r.wg.Add(1)
		go r.campaignFirst()
	}
	return r, nil
}

// bootstrapLater writes the group's initial configuration on a
// non-preferred replica of a new group if, after BootstrapGrace, no leader
// has given it one. Raft refuses the bootstrap once the replica holds any
// state, so a configuration that arrives meanwhile wins.
func (r *Replica) bootstrapLater() {
	defer r.wg.Done()
	if !r.sleep(r.cfg.BootstrapGrace) {
		return
	}
	f := r.raft.GetConfiguration()
	if stopped, err := r.await(f); stopped || err != nil || len(f.Configuration().Servers) > 0 {
		return
	}
	r.cfg.Logger.Info("preferred replica has not reached this new group; bootstrapping it here", "replica", r.cfg.ID, "preferred", r.cfg.Peers[0].ID)
	if stopped, err := r.await(r.raft.BootstrapCluster(raft.Configuration{Servers: r.cfg.Peers})); !stopped && err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		r.cfg.Logger.Warn("bootstrap of new group failed", "replica", r.cfg.ID, "error", err)
	}
}

// ID is the replica's server id.
func (r *Replica) ID() raft.ServerID { return r.cfg.ID }

// Raft exposes the Raft member for membership changes and tests.
func (r *Replica) Raft() *raft.Raft { return r.raft }

// Store is the replica's log store.
func (r *Replica) Store() *raftlog.Store { return r.store }

// ready reports whether this replica is the leader and has applied every
// entry of earlier terms (its barrier completed in the current term).
func (r *Replica) ready() bool {
	_, ok := r.readyEpoch()
	return ok
}

// readyEpoch is ready plus the term it holds for.
func (r *Replica) readyEpoch() (uint64, bool) {
	r.mu.Lock()
	t := r.readyTerm
	r.mu.Unlock()
	return t, t != 0 && r.raft.State() == raft.Leader && r.raft.CurrentTerm() == t
}

// IsLeader reports whether this replica leads and serves produce and fetch.
func (r *Replica) IsLeader() bool { return r.ready() }

// LeaderID returns the leader this replica knows of, or "" if none,
// including while the transport finds the leader's broker down (see
// leaderDown).
func (r *Replica) LeaderID() (raft.ServerID, raft.ServerAddress) {
	addr, id := r.raft.LeaderWithID()
	if r.leaderDown(id) {
		return "", ""
	}
	return id, addr
}

// Leader is the broker node id of the serving leader as far as this
// replica knows; ok is false while there is none, including while this
// replica is elected but has not yet passed its barrier.
func (r *Replica) Leader() (node int, ok bool) {
	if r.ready() {
		return r.cfg.NodeID(r.cfg.ID)
	}
	id, _ := r.LeaderID()
	if id == "" || id == r.cfg.ID {
		return -1, false
	}
	return r.cfg.NodeID(id)
}

// LeaderEpoch is the current Raft term as a Kafka leader epoch, plus a
// promoted mirror's epoch base (mirror_epoch.go); -1 if it no longer fits
// an int32 (the store refuses such terms).
func (r *Replica) LeaderEpoch() int32 { return r.epochAt(r.raft.CurrentTerm()) }

// HighWatermark is the Kafka offset after the last committed batch this
// replica applied. It never decreases while the replica runs. Only the
// leader's value is what consumers may read up to; a follower's lags it.
func (r *Replica) HighWatermark() int64 { return r.fsm.highWatermark() }

// Epochs lists the first offset of every leader epoch applied so far.
func (r *Replica) Epochs() []EpochStart { return r.fsm.epochs() }

func (r *Replica) notLeader(cause error) error {
	r.mu.Lock()
	removed, shut := r.removed, r.shutdown
	r.mu.Unlock()
	if removed {
		return ErrRemoved
	}
	if shut {
		return ErrClosed
	}
	id, addr := r.LeaderID()
	if id == r.cfg.ID {
		id, addr = "", "" // elected but not yet serving: no better hint
	}
	node := -1
	if id != "" {
		if n, ok := r.cfg.NodeID(id); ok {
			node = n
		}
	}
	return &NotLeaderError{Leader: id, Addr: addr, Node: node, Majority: id == "" && r.NoQuorum(), Cause: cause}
}

// Produce appends one client record batch (as ValidateClientBatch accepts
// it) through Raft and returns its base offset once a majority of replicas
// have it durably and the leader applied it. Produce takes ownership of
// batch: its base offset and leader epoch are stamped in place. A context
// that ends first leaves the outcome unknown, like a lost connection.
//
// A batch with a producer id (idempotent producer) is checked first
// against the producer's state, in-flight batches included: a duplicate of
// a batch in the producer's window returns that batch's base offset and
// appends nothing; a sequence gap fails with ErrOutOfOrderSequence, an
// older epoch with ErrInvalidProducerEpoch.
func (r *Replica) Produce(ctx context.Context, batch []byte) (int64, error) {
	return r.Submit(ctx, batch)()
}

// Submit is Produce in two steps: it checks the batch and hands it to
// Raft, then returns a func that waits for the outcome, which the caller
// must call once. Batches submitted one after another, from one
// goroutine, are appended in that order, which lets a front door read a
// connection's next request before the previous one has committed. The
// first step does not wait for Raft (only for room in its apply queue).
func (r *Replica) Submit(ctx context.Context, batch []byte) (wait func() (int64, error)) {
	failed := func(err error) func() (int64, error) { return known(0, err) }
	// max.message.bytes, before Raft sees the batch.
	if err := r.checkBatchSize(batch); err != nil {
		return failed(err)
	}
	// The one whole validation of the batch on the leader's path: the
	// front doors check only its framing, and the store does not hash it
	// again (MarkChecked).
	h, err := log.ValidateClientBatch(batch)
	if err != nil {
		return failed(fmt.Errorf("produce: %w", err))
	}
	if !r.ready() {
		return failed(r.notLeader(nil))
	}
	if r.fsm.isBehind() {
		return failed(fmt.Errorf("produce: %w", ErrBehindLogStart))
	}
	release, err := r.admitProduce() // mirror.go: not while fenced or mirroring
	if err != nil {
		return failed(err)
	}
	forget := r.store.MarkChecked(batch)
	done := func() { forget(); release() }
	if h.ProducerID >= 0 {
		w := r.submitIdempotent(ctx, h, batch)
		return func() (int64, error) { defer done(); return w() }
	}
	f := r.applyBatch(batch, r.applyTimeout(ctx)) // mirror_epoch.go
	return func() (int64, error) {
		defer done()
		base, err, ctxErr := r.waitApply(ctx, f)
		if ctxErr != nil {
			return 0, fmt.Errorf("produce: %w", ctxErr)
		}
		return base, err
	}
}

// known is the wait of a produce whose outcome Submit already knows.
func known(base int64, err error) func() (int64, error) {
	return func() (int64, error) { return base, err }
}

// waitApply waits for f's result (applyResult), for ctx to end, or for
// Close, whichever comes first: Raft may never answer a future it took
// just before shutdown, which then fails as not leader. ctxErr is set,
// and the rest zero, when ctx ended first, so each caller names its own
// operation in that error.
func (r *Replica) waitApply(ctx context.Context, f raft.ApplyFuture) (res int64, err, ctxErr error) {
	// The goroutine writes its own variables, not the results: it may
	// still run after an early return.
	done := make(chan struct{})
	var applied int64
	var applyErr error
	go func() { applied, applyErr = r.applyResult(f); close(done) }()
	select {
	case <-done:
		return applied, applyErr, nil
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	case <-r.stop:
		return 0, r.notLeader(raft.ErrRaftShutdown), nil
	}
}

func (r *Replica) applyTimeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Millisecond)
	}
	return r.cfg.ApplyTimeout
}

// applyResult waits for an Apply future and returns the entry's base
// offset.
func (r *Replica) applyResult(f raft.ApplyFuture) (int64, error) {
	if err := f.Error(); err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
			errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrRaftShutdown):
			return 0, r.notLeader(err)
		}
		return 0, fmt.Errorf("produce: %w", err)
	}
	res, ok := f.Response().(applyResult)
	if !ok {
		return 0, fmt.Errorf("produce: unexpected apply result %T", f.Response())
	}
	if res.err != nil {
		return 0, fmt.Errorf("produce: %w", res.err)
	}
	return res.base, nil
}

// submitIdempotent checks an idempotent producer's batch against its
// state and its batches in flight, and hands it to Raft, all under seqMu,
// which orders the producer's batches; the returned func waits for the
// outcome (a duplicate's is the earlier batch's).
func (r *Replica) submitIdempotent(ctx context.Context, h log.Header, batch []byte) (wait func() (int64, error)) {
	pid, epoch, first, last := h.ProducerID, h.ProducerEpoch, h.BaseSequence, lastSeq(h)
	r.seqMu.Lock()
	if !r.ready() {
		r.seqMu.Unlock()
		return known(0, r.notLeader(nil))
	}
	pend := r.inflight[pid]
	// A retry of a batch still in flight gets that batch's outcome.
	for _, p := range pend {
		if p.epoch == epoch && p.first == first && p.last == last {
			r.seqMu.Unlock()
			return func() (int64, error) { return r.waitPending(ctx, p) }
		}
	}
	st := r.producerView(pid, pend)
	base, dup, err := st.check(pid, epoch, first, last)
	if err != nil || dup {
		r.seqMu.Unlock()
		return known(base, err)
	}
	p := &pendingBatch{epoch: epoch, first: first, last: last, done: make(chan struct{})}
	r.inflight[pid] = append(pend, p)
	f := r.applyBatch(batch, r.applyTimeout(ctx)) // mirror_epoch.go
	r.seqMu.Unlock()
	go func() {
		p.base, p.err = r.applyResult(f)
		r.seqMu.Lock()
		ps := r.inflight[pid]
		if i := slices.Index(ps, p); i >= 0 {
			ps = slices.Delete(ps, i, i+1)
		}
		if len(ps) == 0 {
			delete(r.inflight, pid)
		} else {
			r.inflight[pid] = ps
		}
		r.seqMu.Unlock()
		close(p.done)
	}()
	return func() (int64, error) { return r.waitPending(ctx, p) }
}

// producerView is the producer's applied state with its in-flight batches
// on top: those after the last batch the FSM has applied. A batch's future
// completes only after the FSM applied it, so every batch of this
// leader's term is in one of the two. The caller holds seqMu.
func (r *Replica) producerView(pid int64, pend []*pendingBatch) *ProducerState {
	st := r.fsm.producer(pid)
	if len(pend) == 0 {
		return st
	}
	from := 0
	if st != nil && len(st.Batches) > 0 {
		lb := st.Batches[len(st.Batches)-1]
		for i, p := range pend {
			if p.epoch == st.Epoch && p.first == lb.FirstSeq && p.last == lb.LastSeq {
				from = i + 1
			}
		}
	}
	for _, p := range pend[from:] {
		if st == nil {
			st = &ProducerState{Epoch: p.epoch}
		}
		st.record(p.epoch, p.first, p.last, -1) // base unknown until applied
	}
	return st
}

func (r *Replica) waitPending(ctx context.Context, p *pendingBatch) (int64, error) {
	select {
	case <-p.done:
		return p.base, p.err
	case <-ctx.Done():
		return 0, fmt.Errorf("produce: %w", ctx.Err())
	case <-r.stop:
		// Raft may never answer a future it took just before shutdown;
		// the outcome is unknown.
		return 0, r.notLeader(raft.ErrRaftShutdown)
	}
}

// Producer returns a copy of the applied state of a producer id on this
// replica; ok is false if it knows none.
func (r *Replica) Producer(pid int64) (ProducerState, bool) {
	st := r.fsm.producer(pid)
	if st == nil {
		return ProducerState{}, false
	}
	return *st, true
}

// FetchResult is what a fetch returns. The caller must Release Slice.
type FetchResult struct {
	Slice         log.Slice
	HighWatermark int64
	LeaderEpoch   int32 // the serving leader's epoch; set on fence errors too
}

// Fetch returns whole batches from offset, up to maxBytes (at least one
// batch), stopping at the high watermark, which it also returns. Only the
// serving leader answers: one whose barrier in its current term completed,
// so its high watermark is at least any an earlier leader exposed. A
// deposed leader that has not noticed yet may still answer; a reader that
// must never see its high watermark go back passes its newest epoch to
// FetchEpoch (the Kafka listener checks CurrentLeaderEpoch against
// LeaderEpoch, which is the same term). The caller must Release the Slice.
func (r *Replica) Fetch(offset int64, maxBytes int32) (log.Slice, int64, error) {
	res, err := r.FetchEpoch(-1, offset, int(max(maxBytes, 1)))
	return res.Slice, res.HighWatermark, err
}

// LogStartOffset is the partition's log start offset, the same on every
// replica that applied the same entries: the first offset Fetch serves.
// Retention and DeleteRecords move it (retention.go).
func (r *Replica) LogStartOffset() int64 { return r.fsm.logStart() }

// OffsetForTimestamp returns the base offset of the first batch holding a
// timestamp ≥ ts; found is false if there is none. Callers bound it by
// the high watermark.
func (r *Replica) OffsetForTimestamp(ts int64) (int64, bool, error) {
	off, found, err := r.store.Log().OffsetForTimestamp(ts)
	return max(off, r.LogStartOffset()), found, err
}

// EpochEnd answers OffsetForLeaderEpoch from the epoch checkpoints: the
// largest epoch ≤ epoch that wrote data here, and where it ends (the next
// such epoch's first offset, or the high watermark for the last one). ok
// is false when no epoch ≤ epoch wrote anything.
func (r *Replica) EpochEnd(epoch int32) (int32, int64, bool, error) {
	r.fsm.mu.Lock()
	defer r.fsm.mu.Unlock()
	eps := r.fsm.st.Epochs
	i := sort.Search(len(eps), func(i int) bool { return eps[i].Epoch > epoch }) - 1
	if i < 0 {
		return -1, -1, false, nil
	}
	end := r.fsm.st.HighWatermark
	if i+1 < len(eps) {
		end = eps[i+1].StartOffset
	}
	return eps[i].Epoch, end, true, nil
}

// Watch arranges a non-blocking send on wake once the high watermark is
// above hw or this replica's leadership changes; it sends at once if the
// high watermark already is. cancel removes the arrangement.
func (r *Replica) Watch(hw int64, wake chan<- struct{}) (cancel func()) {
	w := &watcher{above: hw, wake: wake}
	r.watchMu.Lock()
	r.watchers[w] = struct{}{}
	r.watchMu.Unlock()
	if r.fsm.highWatermark() > hw {
		r.wake(r.fsm.highWatermark())
	}
	return func() {
		r.watchMu.Lock()
		delete(r.watchers, w)
		r.watchMu.Unlock()
	}
}

// wake notifies the watchers waiting below hw; hw < 0 wakes them all.
func (r *Replica) wake(hw int64) {
	r.watchMu.Lock()
	defer r.watchMu.Unlock()
	for w := range r.watchers {
		if hw < 0 || hw > w.above {
			select {
			case w.wake <- struct{}{}:
			default:
			}
			delete(r.watchers, w)
		}
	}
}

// FetchEpoch is Fetch with Kafka's CurrentLeaderEpoch check: a caller that
// passes the newest epoch it has seen (-1 for none) is never served by a
// deposed leader that has not yet noticed, so the high watermarks it sees
// never go backwards.
func (r *Replica) FetchEpoch(currentLeaderEpoch int32, offset int64, maxBytes int) (FetchResult, error) {
	term, ok := r.readyEpoch()
	if !ok {
		return FetchResult{}, r.notLeader(nil)
	}
	res := FetchResult{LeaderEpoch: r.epochAt(term)} // mirror_epoch.go
	if currentLeaderEpoch >= 0 {
		switch {
		case currentLeaderEpoch < res.LeaderEpoch:
			return res, fmt.Errorf("fetch at epoch %d, leader epoch %d: %w", currentLeaderEpoch, res.LeaderEpoch, ErrFencedLeaderEpoch)
		case currentLeaderEpoch > res.LeaderEpoch:
			return res, fmt.Errorf("fetch at epoch %d, leader epoch %d: %w", currentLeaderEpoch, res.LeaderEpoch, ErrUnknownLeaderEpoch)
		}
	}
	if r.fsm.isBehind() {
		return res, fmt.Errorf("fetch: %w", ErrBehindLogStart)
	}
	res.HighWatermark = r.fsm.highWatermark()
	if start := r.LogStartOffset(); offset < start {
		return res, fmt.Errorf("fetch offset %d: %w: the log starts at %d", offset, log.ErrOffsetOutOfRange, start)
	}
	sl, err := r.store.Log().Read(offset, maxBytes, res.HighWatermark)
	if err != nil {
		return res, fmt.Errorf("fetch: %w", err)
	}
	res.Slice = sl
	return res, nil
}

// Removed reports whether the replica found itself removed from the group
// and shut down.
func (r *Replica) Removed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.removed
}

// monitor owns leadership bookkeeping: it starts a barrier on each
// election, clears readiness on step-down, tracks follower health, and on
// each tick checks for removal and for handing leadership back to the
// preferred replica.
func (r *Replica) monitor() {
	defer r.wg.Done()
	tick := time.NewTicker(r.cfg.CheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case leader := <-r.notify:
			r.mu.Lock()
			r.readyTerm = 0
			clear(r.failing)
			r.electedAt, r.unreadyTries = time.Time{}, 0
			if leader {
				r.electedAt = time.Now()
			}
			r.mu.Unlock()
			r.wake(-1) // long polls re-check who leads
			if leader {
				r.wg.Add(1)
				go r.barrier(r.raft.CurrentTerm())
			}
		case o := <-r.obs:
			r.mu.Lock()
			switch d := o.Data.(type) {
			case raft.FailedHeartbeatObservation:
				r.failing[d.PeerID] = true
			case raft.ResumedHeartbeatObservation:
				delete(r.failing, d.PeerID)
			}
			r.mu.Unlock()
		case id := <-r.peerDown:
			r.onPeerDown(id)
		case <-tick.C:
			if r.checkRemoved() {
				return
			}
			r.checkJoin(r.member.conf.Load())
			r.checkUnready(time.Now())
			r.retryFailover()
			r.converge()
			r.maybeTransfer()
		}
	}
}

// await waits for a Raft future or for Close. A future that Raft accepted
// just before it shut down may never be answered (its run loops exit without
// draining), so the replica's own goroutines never wait on one without also
// watching r.stop; the helper goroutine then ends with the future, if ever,
// and holds nothing of ours.
func (r *Replica) await(f raft.Future) (stopped bool, err error) {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return false, err
	case <-r.stop:
		return true, nil
	}
}

// checkRemoved shuts the replica down if the latest configuration it holds
// no longer lists it. A follower removed before it received that
// configuration cannot tell; the controller that removed it must close it.
func (r *Replica) checkRemoved() bool {
	if r.raft.State() == raft.Shutdown {
		// Only Close or ShutdownOnRemove stop Raft, and Close marks
		// shutdown first: otherwise a leader removed itself.
		r.mu.Lock()
		r.removed = !r.shutdown
		r.readyTerm = 0
		r.mu.Unlock()
		return true
	}
	f := r.raft.GetConfiguration()
	if stopped, err := r.await(f); err != nil || stopped {
		return false
	}
	r.noteConfiguration(f)
	servers := f.Configuration().Servers
	if len(servers) == 0 || r.gate.gated() || slices.ContainsFunc(servers, func(s raft.Server) bool { return s.ID == r.cfg.ID }) {
		return false
	}
	// A new replica seeded from a snapshot taken before it was added
	// holds that snapshot's configuration until the entry adding it
	// arrives: not a removal.
	if r.fsm.isBehind() || r.store.AwaitingConfiguration() {
		return false
	}
	r.cfg.Logger.Info("partition replica removed from its group; shutting down", "replica", r.cfg.ID)
	r.mu.Lock()
	r.removed = true
	r.readyTerm = 0
	r.mu.Unlock()
	_ = r.shutdownRaft()
	return true
}

// shutdownRaft shuts the Raft member down. A transport that sends vote
// requests again (transport.GroupTransport.Closing) is told first, since
// Raft's shutdown waits for its vote requests.
func (r *Replica) shutdownRaft() error {
	if c, ok := r.cfg.Transport.(interface{ Closing() }); ok {
		c.Closing()
	}
	return r.raft.Shutdown().Error()
}

// Close shuts the Raft member down, stops the replica's goroutines and
// closes the store. Everything acknowledged is already durable. Close is
// idempotent.
func (r *Replica) Close() error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.shutdown = true
		r.readyTerm = 0
		r.mu.Unlock()
		err := r.shutdownRaft()
		close(r.stop)
		r.wg.Wait()
		r.raft.DeregisterObserver(r.obsReg)
		if cerr := r.store.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			r.closeErr = fmt.Errorf("close replica %s: %w", r.cfg.ID, err)
		}
	})
	return r.closeErr
}
