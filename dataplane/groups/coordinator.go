package groups

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/contract/catalog"
)

// Config configures a Coordinator.
type Config struct {
	// NodeID is this broker's node id; required.
	NodeID int
	// Partitions is the number of offsets partitions of the cell; every
	// broker of a cell must use the same number, and it must never change
	// (it decides where each group lives). Default DefaultPartitions.
	Partitions int
	// Offsets returns this broker's replica of an offsets partition, if
	// it holds one; required.
	Offsets func(partition int32) (Log, bool)
	// Placement, when set, returns the replicas the cell places an
	// offsets partition on, the preferred leader first (nil while none
	// are placed). A broker that is not among them (a cell of more than
	// three brokers) names the preferred leader as a group's coordinator,
	// as Metadata names a partition's preferred leader on a broker
	// without a replica: the client asks there, and is told
	// NOT_COORDINATOR there if leadership has moved, then asks again.
	Placement func(partition int32) []int
	// MinSessionTimeout and MaxSessionTimeout bound the session timeouts
	// members may ask for (Kafka's group.min/max.session.timeout.ms).
	// Defaults 6 s and 30 min.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// InitialRebalanceDelay is how long the first rebalance of an empty
	// group waits for more members, extended by as much for each member
	// that joins meanwhile, up to the rebalance timeout (Kafka's
	// group.initial.rebalance.delay.ms). Default 100 ms; negative = none.
	InitialRebalanceDelay time.Duration
	// MaxMetadataBytes bounds an offset commit's metadata. Default 4096.
	MaxMetadataBytes int
	// OffsetsRetention is how long a group without members keeps its
	// committed offsets after its last commit and after it became empty
	// (Kafka's offsets.retention.minutes); then the offsets and the group
	// are deleted. Default 7 days; negative keeps them forever.
	OffsetsRetention time.Duration
	// CheckInterval is how often leadership of the offsets partitions,
	// sessions and rebalance timeouts are checked. Default 100 ms.
	CheckInterval time.Duration
	// Changed, when set, is called when what a group consumes may have
	// changed: a group committed a partition for the first time, a new
	// generation's assignment was written, offsets or groups were deleted,
	// or an offsets partition was loaded. The lag reporter uses it to
	// report sooner than its interval. It is called with a shard's lock
	// held and must not block (a non-blocking send on a channel of one).
	Changed func()
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

func (c *Config) validate() error {
	switch {
	case c.NodeID < 1:
		return fmt.Errorf("groups config: NodeID must be at least 1, got %d", c.NodeID)
	case c.Offsets == nil:
		return errors.New("groups config: Offsets is required: this broker's replicas of the offsets partitions")
	case c.Partitions < 0:
		return fmt.Errorf("groups config: Partitions must not be negative, got %d", c.Partitions)
	}
	c.Partitions = cmp.Or(c.Partitions, DefaultPartitions)
	c.MinSessionTimeout = cmp.Or(c.MinSessionTimeout, 6*time.Second)
	c.MaxSessionTimeout = cmp.Or(c.MaxSessionTimeout, 30*time.Minute)
	if c.MinSessionTimeout > c.MaxSessionTimeout {
		return fmt.Errorf("groups config: MinSessionTimeout %s is above MaxSessionTimeout %s", c.MinSessionTimeout, c.MaxSessionTimeout)
	}
	switch {
	case c.InitialRebalanceDelay == 0:
		c.InitialRebalanceDelay = 100 * time.Millisecond
	case c.InitialRebalanceDelay < 0:
		c.InitialRebalanceDelay = 0
	}
	c.MaxMetadataBytes = cmp.Or(c.MaxMetadataBytes, 4096)
	c.OffsetsRetention = cmp.Or(c.OffsetsRetention, DefaultOffsetsRetention)
	if c.CheckInterval <= 0 {
		c.CheckInterval = 100 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Changed == nil {
		c.Changed = func() {}
	}
	return nil
}

// Coordinator is one broker's group coordinator: it coordinates the
// groups of the offsets partitions this broker leads.
type Coordinator struct {
	cfg    Config
	shards []*shard
	stop   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
	checks atomic.Int64 // periodic checks run, for tests
	// moves are the tenants moving to this cell (SetMoves).
	moves atomic.Pointer[moveSet]
	// gone are the tenants that moved away from this cell (SetMoves);
	// leaving, those whose last state marked them as moving away.
	gone      atomic.Pointer[map[string]bool]
	leavingMu sync.Mutex
	leaving   map[string]bool
}

// Partitions is the cell's offsets partition count, which decides where
// each group lives.
func (c *Coordinator) Partitions() int { return c.cfg.Partitions }

// A shard's states.
const (
	shardNotLeader = iota
	shardLoading
	shardLoaded
)

// shard is the coordinator's side of one offsets partition.
type shard struct {
	id int32

	// mu guards the fields below and every group's state machine.
	mu      sync.Mutex
	status  int
	epoch   int32  // the leader epoch loaded (or loading)
	session uint64 // bumped at every load and unload
	log     Log
	groups  map[gkey]*group
	// imports are the moving tenants' import markers of the partition
	// (move.go); importing, the tenants whose import is being written.
	imports     map[string]importMark
	importing   map[string]bool
	importAfter time.Time // no import starts before, after a failed one
}

type gkey struct{ tenant, group string }

// New checks cfg and starts the coordinator's goroutine, which loads the
// groups of every offsets partition this broker comes to lead. Close
// stops it.
func New(cfg Config) (*Coordinator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Coordinator{cfg: cfg, stop: make(chan struct{})}
	for p := range cfg.Partitions {
		c.shards = append(c.shards, &shard{id: int32(p), groups: map[gkey]*group{}, importing: map[string]bool{}})
	}
	c.wg.Add(1)
	go c.run()
	return c, nil
}

// Close stops the coordinator and waits for its goroutines; waiting
// calls return ErrNotCoordinator. Idempotent.
func (c *Coordinator) Close() error {
	c.once.Do(func() {
		close(c.stop)
		c.wg.Wait()
		for _, sh := range c.shards {
			sh.mu.Lock()
			c.unload(sh)
			sh.mu.Unlock()
		}
	})
	return nil
}

// Partition is the offsets partition of a tenant's group: FNV-1a of
// tenant id, a zero byte and the group name, modulo the partition count.
// It is part of the on-disk format: never change it.
func Partition(tenantID, group string, partitions int) int32 {
	h := fnv.New32a()
	h.Write([]byte(tenantID))
	h.Write([]byte{0})
	h.Write([]byte(group))
	return int32(h.Sum32() % uint32(partitions))
}

func (c *Coordinator) shardOf(tenantID, group string) *shard {
	return c.shards[Partition(tenantID, group, c.cfg.Partitions)]
}

// Locate says which broker coordinates a tenant's group: the leader of
// the group's offsets partition, or, on a broker the cell places no
// replica of it on, its preferred leader (Config.Placement). local is
// true when this broker is that leader and has loaded the partition's
// state.
func (c *Coordinator) Locate(tenantID, group string) (node int, local bool, err error) {
	sh := c.shardOf(tenantID, group)
	l, ok := c.cfg.Offsets(sh.id)
	if !ok {
		if node, ok := c.placedElsewhere(sh.id); ok {
			return node, false, nil
		}
		return -1, false, catalog.CoordinatorNotReady.New("the group's offsets partition has no replica on this broker yet")
	}
	node, ok = l.Leader()
	if !ok {
		return -1, false, catalog.CoordinatorNotReady.New("the group's offsets partition is electing a leader")
	}
	if node != c.cfg.NodeID {
		return node, false, nil
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	_, err = c.ready(sh)
	return node, err == nil, nil
}

// placedElsewhere is the preferred leader of offsets partition p when the
// cell places p on other brokers only; false when p is not placed yet or
// this broker is among its replicas (its replica is still opening).
func (c *Coordinator) placedElsewhere(p int32) (int, bool) {
	if c.cfg.Placement == nil {
		return 0, false
	}
	placed := c.cfg.Placement(p)
	if len(placed) == 0 || slices.Contains(placed, c.cfg.NodeID) {
		return 0, false
	}
	return placed[0], true
}

// Loaded reports whether this broker coordinates the groups of offsets
// partition p now: it leads the partition and has loaded it.
func (c *Coordinator) Loaded(p int32) bool {
	if p < 0 || int(p) >= len(c.shards) {
		return false
	}
	sh := c.shards[p]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	_, err := c.ready(sh)
	return err == nil
}

// Epoch is the leader epoch of the group's offsets partition in which
// this broker coordinates the group; ok is false when it does not now.
// A broker that loses a group and later coordinates it again does so in
// a later epoch, so state kept outside the coordinator for a group
// (such as the HTTP API's member positions) is valid only within the
// epoch it was built in.
func (c *Coordinator) Epoch(tenantID, group string) (epoch int32, ok bool) {
	sh := c.shardOf(tenantID, group)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, err := c.ready(sh); err != nil {
		return 0, false
	}
	return sh.epoch, true
}

// ready checks, with sh.mu held, that this broker leads sh's partition in
// the epoch it loaded and has loaded it.
// pin takes g's write lock for one write, marking it busy first so that
// it is never dropped as empty meanwhile. sh.mu is held on entry
// and released before waiting on g.wmu; the returned func undoes both, in
// the reverse order.
func (sh *shard) pin(g *group) (unpin func()) {
	g.busy++
	sh.mu.Unlock()
	g.wmu.Lock()
	return func() {
		sh.mu.Lock()
		g.busy--
		sh.mu.Unlock()
		g.wmu.Unlock()
	}
}

func (c *Coordinator) ready(sh *shard) (Log, error) {
	switch sh.status {
	case shardLoading:
		return nil, ErrCoordinatorLoading
	case shardNotLeader:
		return nil, ErrNotCoordinator
	}
	if node, ok := sh.log.Leader(); !ok || node != c.cfg.NodeID || sh.log.LeaderEpoch() != sh.epoch {
		return nil, ErrNotCoordinator
	}
	return sh.log, nil
}

// errNoGroup marks a group lookup that found none.
var errNoGroup = errors.New("no such group")

func checkGroupID(group string) error {
	if group == "" || len(group) > 255 {
		return catalog.InvalidGroupID.New("a consumer group id must be 1 to 255 bytes")
	}
	return nil
}

// write appends recs to sh's partition and waits for a majority; any
// failure but the caller's context ending means this broker no longer
// coordinates the group (the outcome may be unknown: the client retries
// at the coordinator).
func (c *Coordinator) write(ctx context.Context, l Log, recs []kv) error {
	if _, err := l.Produce(ctx, makeBatch(c.cfg.Now().UnixMilli(), recs)); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return catalog.NotCoordinator.Wrap(err, "")
	}
	return nil
}

// Join handles a member's JoinGroup; it blocks until the rebalance
// completes (or ctx ends).
func (c *Coordinator) Join(ctx context.Context, r JoinRequest) (JoinResult, error) {
	if err := c.held(r.TenantID); err != nil {
		return JoinResult{MemberID: r.MemberID}, err
	}
	if err := checkGroupID(r.Group); err != nil {
		return JoinResult{MemberID: r.MemberID}, err
	}
	if r.SessionTimeout < c.cfg.MinSessionTimeout || r.SessionTimeout > c.cfg.MaxSessionTimeout {
		return JoinResult{MemberID: r.MemberID}, catalog.InvalidSessionTimeout.Newf("the session timeout must be between %s and %s",
			c.cfg.MinSessionTimeout, c.cfg.MaxSessionTimeout)
	}
	if r.RebalanceTimeout <= 0 {
		r.RebalanceTimeout = r.SessionTimeout // JoinGroup v0
	}
	sh := c.shardOf(r.TenantID, r.Group)
	sh.mu.Lock()
	if _, err := c.ready(sh); err != nil {
		sh.mu.Unlock()
		return JoinResult{MemberID: r.MemberID}, err
	}
	k := gkey{r.TenantID, r.Group}
	g := sh.groups[k]
	if g == nil {
		g = newGroup(r.TenantID, r.Group, c.cfg.InitialRebalanceDelay)
		sh.groups[k] = g
	}
	res, wait, err := g.join(c.cfg.Now(), r)
	sh.mu.Unlock()
	if wait == nil {
		return res, err
	}
	select {
	case o := <-wait:
		return o.res, o.err
	case <-ctx.Done():
		return JoinResult{MemberID: r.MemberID}, ctx.Err()
	}
}

// group returns a loaded shard's group, or err.
func (c *Coordinator) group(tenantID, group string, missing error) (*shard, *group, Log, error) {
	if err := checkGroupID(group); err != nil {
		return nil, nil, nil, err
	}
	sh := c.shardOf(tenantID, group)
	sh.mu.Lock()
	l, err := c.ready(sh)
	if err != nil {
		sh.mu.Unlock()
		return nil, nil, nil, err
	}
	g := sh.groups[gkey{tenantID, group}]
	if g == nil {
		sh.mu.Unlock()
		return nil, nil, nil, missing
	}
	return sh, g, l, nil // sh.mu held
}

// Sync handles a SyncGroup: the leader passes the assignments (member id
// → bytes), which are written to the offsets partition before anyone gets
// its own.
func (c *Coordinator) Sync(ctx context.Context, tenantID, group, memberID, instanceID string, generation int32, assignments map[string][]byte) ([]byte, error) {
	if err := c.held(tenantID); err != nil {
		return nil, err
	}
	sh, g, l, err := c.group(tenantID, group, ErrUnknownMember)
	if err != nil {
		return nil, err
	}
	step, err := g.sync(c.cfg.Now(), memberID, instanceID, generation, assignments)
	sess := sh.session
	if step.persist != nil {
		g.busy++
	}
	sh.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if rec := step.persist; rec != nil {
		g.wmu.Lock()
		werr := c.write(ctx, l, []kv{{key: encodeKey(recordKey{kind: kindGroup, tenant: tenantID, group: group}), value: encodeGroup(*rec)}})
		sh.mu.Lock()
		g.busy--
		if sh.session == sess {
			if werr == nil {
				g.assigned(c.cfg.Now(), *rec)
				c.cfg.Changed()
			} else {
				g.syncFailed(*rec, werr)
			}
		}
		sh.mu.Unlock()
		g.wmu.Unlock()
	}
	if step.wait == nil {
		return step.assignment, nil
	}
	select {
	case o := <-step.wait:
		return o.assignment, o.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Heartbeat handles a member's Heartbeat.
func (c *Coordinator) Heartbeat(ctx context.Context, tenantID, group, memberID, instanceID string, generation int32) error {
	if err := c.held(tenantID); err != nil {
		return err
	}
	sh, g, _, err := c.group(tenantID, group, ErrUnknownMember)
	if err != nil {
		return err
	}
	defer sh.mu.Unlock()
	return g.heartbeat(c.cfg.Now(), memberID, instanceID, generation)
}

// Leave removes members from a group (LeaveGroup): the first error, of
// the group or of a member, is returned.
func (c *Coordinator) Leave(ctx context.Context, tenantID, group string, members []MemberIdentity) error {
	errs, err := c.LeaveMembers(ctx, tenantID, group, members)
	if err != nil {
		return err
	}
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// LeaveMembers is Leave with an outcome per member (LeaveGroup v3+); err
// is for the group as a whole.
func (c *Coordinator) LeaveMembers(ctx context.Context, tenantID, group string, members []MemberIdentity) ([]error, error) {
	if err := c.held(tenantID); err != nil {
		return nil, err
	}
	errs := make([]error, len(members))
	sh, g, _, err := c.group(tenantID, group, errNoGroup)
	if err == errNoGroup {
		for i := range errs {
			errs[i] = ErrUnknownMember // as Kafka answers: per member
		}
		return errs, nil
	}
	if err != nil {
		return nil, err
	}
	defer sh.mu.Unlock()
	now := c.cfg.Now()
	for i, m := range members {
		errs[i] = g.leave(now, m)
	}
	return errs, nil
}

// CommitOffsets commits offsets for a group's member. Generation -1 with
// no member id commits as a simple consumer or admin tool, allowed only
// while the group has no members; otherwise the generation and member
// must match (ErrIllegalGeneration, ErrUnknownMember). It returns once the
// commit is durable on a majority of the offsets partition's replicas.
func (c *Coordinator) CommitOffsets(ctx context.Context, tenantID, group, memberID, instanceID string, generation int32, offsets []OffsetCommit) error {
	if err := c.held(tenantID); err != nil {
		return err
	}
	if err := c.movedAway(tenantID); err != nil {
		return err
	}
	if err := checkGroupID(group); err != nil {
		return err
	}
	for _, o := range offsets {
		if len(o.Metadata) > c.cfg.MaxMetadataBytes {
			return catalog.OffsetMetadataTooLarge.Newf("offset commit metadata is limited to %d bytes", c.cfg.MaxMetadataBytes)
		}
		// Any offset is kept as committed, as Kafka keeps it: a negative
		// one names no position, and clients read it back as none (kafkajs's
		// resetOffsets commits -2, its "earliest"; librdkafka reads -2 as
		// the beginning).
		if o.Partition < 0 || o.TopicID == "" {
			return catalog.InvalidRequest.New("an offset commit needs a topic and a partition ≥ 0")
		}
	}
	sh := c.shardOf(tenantID, group)
	k := gkey{tenantID, group}
	sh.mu.Lock()
	if _, err := c.ready(sh); err != nil {
		sh.mu.Unlock()
		return err
	}
	g := sh.groups[k]
	if g == nil {
		if generation >= 0 {
			sh.mu.Unlock()
			return ErrIllegalGeneration
		}
		g = newGroup(tenantID, group, c.cfg.InitialRebalanceDelay)
		sh.groups[k] = g
	}
	defer sh.pin(g)()

	sh.mu.Lock()
	l, err := c.ready(sh)
	if err == nil && sh.groups[k] != g {
		err = ErrNotCoordinator // reloaded meanwhile
	}
	if err == nil {
		err = g.checkCommit(c.cfg.Now(), memberID, instanceID, generation)
	}
	sess := sh.session
	sh.mu.Unlock()
	if err != nil || len(offsets) == 0 {
		return err
	}
	now := c.cfg.Now()
	recs := make([]kv, len(offsets))
	vals := make([]Committed, len(offsets))
	for i, o := range offsets {
		vals[i] = Committed{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommittedAt: now.Truncate(time.Millisecond)}
		recs[i] = kv{key: encodeKey(recordKey{kind: kindOffset, tenant: tenantID, group: group, tp: o.TopicPartition}), value: encodeOffset(vals[i])}
	}
	if err := c.write(ctx, l, recs); err != nil {
		return err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.session != sess {
		return ErrNotCoordinator // durable, and the new leader's replay has it
	}
	first := false
	for i, o := range offsets {
		_, had := g.offsets[o.TopicPartition]
		first = first || !had
		g.setOffset(o.TopicPartition, vals[i])
	}
	if first {
		c.cfg.Changed()
	}
	// Checked again here, under the shard's lock with the offsets set: a
	// commit that is durable only after the switch of its tenant's move
	// away was applied may be missing from the final offsets the
	// destination imports, so it is not acknowledged (the client commits
	// again at the tenant's new home). See movedAway.
	return c.movedAway(tenantID)
}

// FetchOffsets returns a group's committed offsets of parts (nil: all of
// them). Partitions without a commit are absent; so is everything of a
// group that does not exist.
func (c *Coordinator) FetchOffsets(ctx context.Context, tenantID, group string, parts []TopicPartition) (map[TopicPartition]Committed, error) {
	if err := c.held(tenantID); err != nil {
		return nil, err
	}
	sh, g, _, err := c.group(tenantID, group, nil)
	if err != nil {
		return nil, err
	}
	out := map[TopicPartition]Committed{}
	if g == nil {
		return out, nil
	}
	defer sh.mu.Unlock()
	if parts == nil {
		for tp, o := range g.offsets {
			out[tp] = o
		}
		return out, nil
	}
	for _, tp := range parts {
		if o, ok := g.offsets[tp]; ok {
			out[tp] = o
		}
	}
	return out, nil
}

// DeleteOffsets deletes a group's committed offsets of parts
// (OffsetDelete). Whether the group's members still consume them is the
// caller's check: this package does not read the consumer protocol.
func (c *Coordinator) DeleteOffsets(ctx context.Context, tenantID, groupID string, parts []TopicPartition) error {
	if err := c.held(tenantID); err != nil {
		return err
	}
	return c.tombstone(ctx, tenantID, groupID, func(g *group) ([]TopicPartition, bool, error) {
		var del []TopicPartition
		for _, tp := range parts {
			if _, ok := g.offsets[tp]; ok {
				del = append(del, tp)
			}
		}
		return del, false, nil
	})
}

// DeleteGroups deletes empty groups and their offsets; the map holds each
// group's outcome (nil = deleted).
func (c *Coordinator) DeleteGroups(ctx context.Context, tenantID string, groups []string) map[string]error {
	out := map[string]error{}
	if err := c.held(tenantID); err != nil {
		for _, name := range groups {
			out[name] = err
		}
		return out
	}
	for _, name := range groups {
		out[name] = c.tombstone(ctx, tenantID, name, func(g *group) ([]TopicPartition, bool, error) {
			if g.state != StateEmpty || len(g.members) > 0 {
				return nil, false, ErrGroupNotEmpty
			}
			var del []TopicPartition
			for tp := range g.offsets {
				del = append(del, tp)
			}
			return del, true, nil
		})
	}
	return out
}

// tombstone writes tombstones for the offsets pick chooses (and the group
// itself if whole), then applies them.
func (c *Coordinator) tombstone(ctx context.Context, tenantID, name string, pick func(g *group) ([]TopicPartition, bool, error)) error {
	sh, g, _, err := c.group(tenantID, name, ErrGroupNotFound)
	if err != nil {
		return err
	}
	if g.empty() {
		sh.mu.Unlock()
		return ErrGroupNotFound
	}
	defer sh.pin(g)()
	k := gkey{tenantID, name}
	sh.mu.Lock()
	l, err := c.ready(sh)
	var del []TopicPartition
	var whole bool
	if err == nil && sh.groups[k] != g {
		err = ErrGroupNotFound
	}
	if err == nil {
		del, whole, err = pick(g)
	}
	sess := sh.session
	sh.mu.Unlock()
	if err != nil {
		return err
	}
	var recs []kv
	for _, tp := range del {
		recs = append(recs, kv{key: encodeKey(recordKey{kind: kindOffset, tenant: tenantID, group: name, tp: tp})})
	}
	if whole {
		recs = append(recs, kv{key: encodeKey(recordKey{kind: kindGroup, tenant: tenantID, group: name})})
	}
	if len(recs) == 0 {
		return nil
	}
	if err := c.write(ctx, l, recs); err != nil {
		return err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.session != sess {
		return ErrNotCoordinator
	}
	for _, tp := range del {
		delete(g.offsets, tp)
	}
	if whole && sh.groups[k] == g && g.state == StateEmpty && len(g.members) == 0 {
		g.state = StateDead
		delete(sh.groups, k)
	}
	c.cfg.Changed()
	return nil
}

// ListGroups lists the tenant's groups this broker coordinates; a held
// tenant's (move.go) get a retriable error instead.
func (c *Coordinator) ListGroups(tenantID string) ([]GroupSummary, error) {
	if err := c.held(tenantID); err != nil {
		return nil, err
	}
	var out []GroupSummary
	c.eachGroup(func(k gkey, g *group) {
		if k.tenant == tenantID && !g.empty() {
			out = append(out, GroupSummary{Group: g.name, ProtocolType: g.protocolType, State: g.state})
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, nil
}

// DescribeGroup describes a tenant's group. A group that does not exist
// is ErrGroupNotFound with a description in state Dead (what Kafka's
// DescribeGroups answers).
func (c *Coordinator) DescribeGroup(tenantID, group string) (GroupDescription, error) {
	dead := GroupDescription{GroupSummary: GroupSummary{Group: group, State: StateDead}}
	if err := c.held(tenantID); err != nil {
		return dead, err
	}
	sh, g, _, err := c.group(tenantID, group, ErrGroupNotFound)
	if err != nil {
		return dead, err
	}
	defer sh.mu.Unlock()
	if g.empty() {
		return dead, ErrGroupNotFound
	}
	return g.describe(), nil
}

// AllGroups is a snapshot of every group this broker coordinates, of
// every tenant, for lag reporting: each group's committed offsets and its
// members as DescribeGroup shows them (their metadata for the group's
// protocol and, once Stable, their assignments). Reading the consumer
// protocol in them is the caller's business.
func (c *Coordinator) AllGroups() []GroupSnapshot {
	var out []GroupSnapshot
	c.eachGroup(func(k gkey, g *group) {
		if g.empty() {
			return
		}
		s := GroupSnapshot{TenantID: k.tenant, GroupDescription: g.describe(),
			Offsets: make(map[TopicPartition]Committed, len(g.offsets))}
		for tp, o := range g.offsets {
			s.Offsets[tp] = o
		}
		out = append(out, s)
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].TenantID != out[j].TenantID {
			return out[i].TenantID < out[j].TenantID
		}
		return out[i].Group < out[j].Group
	})
	return out
}

// AllCommitted is a snapshot of every committed offset this broker
// coordinates, of every tenant, for lag reporting.
func (c *Coordinator) AllCommitted() []CommittedOffset {
	var out []CommittedOffset
	c.eachGroup(func(k gkey, g *group) {
		for tp, o := range g.offsets {
			out = append(out, CommittedOffset{TenantID: k.tenant, Group: k.group, TopicPartition: tp, Committed: o})
		}
	})
	return out
}

// eachGroup calls fn for every group of the shards this broker has
// loaded and leads, each shard's lock held while fn runs on its groups.
func (c *Coordinator) eachGroup(fn func(k gkey, g *group)) {
	for _, sh := range c.shards {
		sh.mu.Lock()
		if _, err := c.ready(sh); err == nil {
			for k, g := range sh.groups {
				fn(k, g)
			}
		}
		sh.mu.Unlock()
	}
}
