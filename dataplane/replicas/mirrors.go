package replicas

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/mirror"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/transport"
)

// Tenant moves across cells (contract/wire/tenantmove.go; DESIGN.md,
// "Tenant moves across cells"): the cell state drives every step of a
// broker's part. Apply hands the transport the state's grants and serves
// the granted topics' replicas to the destination cell (mirror.Serve); it
// opens a destination topic's replicas in mirror mode, each with a
// mirror.Puller over a RemoteSource of the source cell. The move loop
// (moveloop.go) does what needs a leader: fence and unfence on the
// source, promote and the cancellation of a destination.

// DefaultMirrorRate is tenantd's default -mirror-rate: 8 MiB/s for each
// partition a destination broker's replicas pull, so that a move of a
// tenant with many partitions stays a fraction of a source broker's disk
// and network.
const DefaultMirrorRate = 8 << 20

// mirrorMarker, in a replica directory, says the replica was opened as the
// destination of a move: it is opened in mirror mode again after a
// restart, even once the state no longer says so (a cancelled move), until
// it is seen promoted.
const mirrorMarker = "mirror.destination"

// cancelledDir, under DataDir, holds a file per destination partition
// deleted because its move was cancelled, so that a state still listing
// the topic without its mirror does not open it again as an empty
// partition, also after a restart.
const cancelledDir = ".cancelled-mirrors"

// topicMove is one topic's part in a move, from the cell state.
type topicMove struct {
	tenant string
	fenced bool
	mirror *wire.TopicMirror // nil: not a destination
	bad    error             // why mirror is not usable (reported, no puller)
}

// pull is a running puller beside a destination replica.
type pull struct {
	sig     string // the source it pulls from, as the state named it
	replica *partition.Replica
	puller  *mirror.Puller
	source  *mirror.RemoteSource
	client  string // key of clients
	// promoteErr is the last promotion failure that is not a wait.
	promoteErr string
}

// sharedClient is a mirror client of a source cell shared by the pullers
// of one (cell, CA).
type sharedClient struct {
	c    *transport.MirrorClient
	refs int
}

// mirrors is the manager's move state.
type mirrors struct {
	// mu guards the fields below. Lock order: Manager.mu, then mu.
	mu      sync.Mutex
	topics  map[string]topicMove // by topic id, from the last Apply
	pulls   map[key]*pull
	clients map[string]*sharedClient
	served  map[key]bool
	// doomedAt is when a cancelled destination replica was first seen
	// fenced (moveloop.go).
	doomedAt  map[key]time.Time
	cancelled map[key]bool // as in cancelledDir
	unmarked  map[key]bool // promoted replicas whose marker is gone
	version   int64        // the state version last applied
}

func newMirrors() mirrors {
	return mirrors{topics: map[string]topicMove{}, pulls: map[key]*pull{}, clients: map[string]*sharedClient{},
		served: map[key]bool{}, doomedAt: map[key]time.Time{}, cancelled: map[key]bool{}, unmarked: map[key]bool{}}
}

// AppliedVersion is the version of the last cell state Apply reconciled
// the replicas with (wire.Report.StateVersion). A partition that failed
// to open does not hold it back: Apply tries it again, /readyz says so,
// and each step of a move shows in the partitions' own reports, never in
// the version alone.
func (m *Manager) AppliedVersion() int64 {
	m.mir.mu.Lock()
	defer m.mir.mu.Unlock()
	return m.mir.version
}

func (m *Manager) noteApplied(v int64) {
	m.mir.mu.Lock()
	m.mir.version = max(m.mir.version, v)
	m.mir.mu.Unlock()
}

// topicMoves reads every topic's move fields from v. A mirror that is not
// usable is kept with the reason, so its leader reports it.
func topicMoves(v *cellview.View) map[string]topicMove {
	out := map[string]topicMove{}
	for _, t := range v.CellState.Topics {
		mv := topicMove{tenant: t.TenantID, fenced: t.Fenced, mirror: t.Mirror}
		if t.Mirror != nil {
			mv.bad = checkMirror(*t.Mirror, v.CellState.Cell)
		}
		out[t.ID] = mv
	}
	return out
}

// checkMirror refuses a mirror the broker cannot follow as it says.
func checkMirror(tm wire.TopicMirror, cell string) error {
	if err := tm.Validate(); err != nil {
		return err
	}
	switch {
	case tm.SourceCell == cell:
		return fmt.Errorf("topic mirror: source cell %q is this cell", cell)
	case tm.BytesPerSec < 0:
		return fmt.Errorf("topic mirror: bytes_per_sec %d is negative; 0 is the broker's default", tm.BytesPerSec)
	}
	return nil
}

// mirrorSig names the source a mirror pulls from and at which rate: a
// puller whose signature changes starts over with the new one.
func mirrorSig(tm *wire.TopicMirror) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%d|", tm.SourceCell, tm.BytesPerSec)
	for _, s := range tm.SourceBrokers {
		fmt.Fprintf(&b, "%d=%s,", s.NodeID, s.RaftAddr)
	}
	b.WriteString("|" + tm.SourcePeerCA)
	return b.String()
}

// openAsMirror reports whether the replica of k opens in mirror mode: its
// topic is a destination and the replica is new, or it was opened as one
// before (the marker). A new destination replica gets the marker first.
func (m *Manager) openAsMirror(k key, mv topicMove) (bool, error) {
	dir := m.dir(k)
	if _, err := os.Stat(filepath.Join(dir, mirrorMarker)); err == nil {
		return true, nil
	}
	if mv.mirror == nil {
		return false, nil
	}
	if _, err := os.Stat(dir); err == nil {
		return false, nil // an existing ordinary replica stays one
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("create mirror replica dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, mirrorMarker), nil, 0o600); err != nil {
		return false, fmt.Errorf("mark mirror replica: %w", err)
	}
	return true, nil
}

// loadCancelled reads cancelledDir.
func (m *Manager) loadCancelled() error {
	names, err := os.ReadDir(filepath.Join(m.cfg.DataDir, cancelledDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list cancelled mirrors: %w", err)
	}
	for _, n := range names {
		i := strings.LastIndexByte(n.Name(), '@')
		if i <= 0 {
			continue // not one of ours
		}
		if part, err := strconv.ParseInt(n.Name()[i+1:], 10, 32); err == nil {
			m.mir.cancelled[key{n.Name()[:i], int32(part)}] = true
		}
	}
	return nil
}

func (m *Manager) cancelledFile(k key) string {
	return filepath.Join(m.cfg.DataDir, cancelledDir, fmt.Sprintf("%s@%d", k.topic, k.part))
}

// setCancelled records (or forgets) that k's destination replica was
// deleted by a cancelled move.
func (m *Manager) setCancelled(k key, on bool) error {
	m.mir.mu.Lock()
	was := m.mir.cancelled[k]
	if on {
		m.mir.cancelled[k] = true
	} else {
		delete(m.mir.cancelled, k)
	}
	m.mir.mu.Unlock()
	switch {
	case on && !was:
		if err := os.MkdirAll(filepath.Join(m.cfg.DataDir, cancelledDir), 0o700); err != nil {
			return fmt.Errorf("record cancelled mirror: %w", err)
		}
		if err := os.WriteFile(m.cancelledFile(k), nil, 0o600); err != nil {
			return fmt.Errorf("record cancelled mirror: %w", err)
		}
	case !on && was:
		if err := os.Remove(m.cancelledFile(k)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("forget cancelled mirror: %w", err)
		}
	}
	return nil
}

// skipOpen reports whether Apply must not open k: its destination replica
// was deleted by a cancelled move and the state still lists the topic
// without a mirror. A topic gone from the state, or a mirror again (a new
// move), clears the record.
func (m *Manager) skipOpen(k key, moves map[string]topicMove) bool {
	m.mir.mu.Lock()
	c := m.mir.cancelled[k]
	m.mir.mu.Unlock()
	if !c {
		return false
	}
	if mv, ok := moves[k.topic]; ok && mv.mirror == nil {
		return true
	}
	if err := m.setCancelled(k, false); err != nil {
		m.cfg.Logger.Warn("forget cancelled mirror", "topic_id", k.topic, "partition", k.part, "err", err)
	}
	return false
}

// forgetCancelled drops the records of topics v no longer lists.
func (m *Manager) forgetCancelled(moves map[string]topicMove) {
	m.mir.mu.Lock()
	var gone []key
	for k := range m.mir.cancelled {
		if _, ok := moves[k.topic]; !ok {
			gone = append(gone, k)
		}
	}
	m.mir.mu.Unlock()
	for _, k := range gone {
		if err := m.setCancelled(k, false); err != nil {
			m.cfg.Logger.Warn("forget cancelled mirror", "topic_id", k.topic, "partition", k.part, "err", err)
		}
	}
}

// syncMirrors applies v's move fields to the open replicas: the grants to
// the transport, the granted replicas served, and a puller beside every
// destination replica still mirroring (stopped for the others).
func (m *Manager) syncMirrors(v *cellview.View, moves map[string]topicMove) error {
	var errs []error
	gs, err := transport.GrantsFromWire(v.CellState.MirrorGrants)
	if err == nil {
		err = m.cfg.Transport.SetMirrorGrants(gs)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("apply mirror grants: %w", err))
	}
	granted := map[string]string{} // topic id → tenant
	for _, g := range v.CellState.MirrorGrants {
		for _, id := range g.Topics {
			if mv, ok := moves[id]; ok && mv.tenant == g.TenantID {
				granted[id] = g.TenantID
			}
		}
	}
	open := m.openReplicas(nil)

	m.mir.mu.Lock()
	m.mir.topics = moves
	for k := range m.mir.served {
		if _, ok := granted[k.topic]; !ok || open[k] == nil {
			m.cfg.Transport.SetMirrorSource(GroupID(k.topic, k.part), "", "", nil)
			delete(m.mir.served, k)
		}
	}
	for k := range open {
		if tenant, ok := granted[k.topic]; ok && !m.mir.served[k] {
			mirror.Serve(m.cfg.Transport, GroupID(k.topic, k.part), tenant, k.topic, m.leadReplica(k))
			m.mir.served[k] = true
		}
	}
	var stop []*pull
	for k, p := range m.mir.pulls {
		mv := moves[k.topic]
		r := open[k]
		if r != p.replica || mv.mirror == nil || mv.bad != nil || mirrorSig(mv.mirror) != p.sig || !r.Mirroring() || fencedMirror(r) {
			stop = append(stop, p)
			delete(m.mir.pulls, k)
		}
	}
	m.mir.mu.Unlock()
	for _, p := range stop {
		m.closePull(p)
	}

	for k, r := range open {
		mv := moves[k.topic]
		if mv.mirror == nil || mv.bad != nil || !r.Mirroring() {
			if r.MirrorStarted() && !r.Mirroring() {
				m.unmarkOnce(k) // promoted: an ordinary partition from now on
			}
			continue
		}
		m.mir.mu.Lock()
		_, running := m.mir.pulls[k]
		m.mir.mu.Unlock()
		if running {
			continue
		}
		if fencedMirror(r) {
			continue // a cancelled destination that the move loop deletes
		}
		p, err := m.startPull(k, r, mv.mirror)
		if err != nil {
			errs = append(errs, fmt.Errorf("mirror %s partition %d: %w", k.topic, k.part, err))
			continue
		}
		m.mir.mu.Lock()
		m.mir.pulls[k] = p
		m.mir.mu.Unlock()
		m.cfg.Logger.Info("mirror started beside replica", "topic_id", k.topic, "partition", k.part, "source_cell", mv.mirror.SourceCell)
	}
	return errors.Join(errs...)
}

// fencedMirror reports whether r is a mirror its group abandoned (a
// cancelled move, moveloop.go).
func fencedMirror(r *partition.Replica) bool {
	_, fenced := r.Fenced()
	return fenced && r.Mirroring()
}

// leadReplica is the replica mirror.Serve answers from: this broker's
// replica of k while it is open.
func (m *Manager) leadReplica(k key) func() *partition.Replica {
	return func() *partition.Replica {
		r, _ := m.Get(k.topic, k.part)
		return r
	}
}

// unmarkOnce removes the mirror marker of a promoted replica, so it opens
// as any other after a restart.
func (m *Manager) unmarkOnce(k key) {
	m.mir.mu.Lock()
	done := m.mir.unmarked[k]
	m.mir.mu.Unlock()
	if done {
		return
	}
	if err := os.Remove(filepath.Join(m.dir(k), mirrorMarker)); err != nil && !errors.Is(err, os.ErrNotExist) {
		m.cfg.Logger.Warn("remove mirror marker of a promoted replica", "topic_id", k.topic, "partition", k.part, "err", err)
		return
	}
	m.mir.mu.Lock()
	m.mir.unmarked[k] = true
	m.mir.mu.Unlock()
}

// startPull starts a puller beside r over the source tm names, dialled
// with this broker's own transport certificate.
func (m *Manager) startPull(k key, r *partition.Replica, tm *wire.TopicMirror) (*pull, error) {
	ck := tm.SourceCell + "|" + tm.SourcePeerCA
	m.mir.mu.Lock()
	sc := m.mir.clients[ck]
	if sc == nil {
		cas, err := wire.MirrorGrant{Cell: tm.SourceCell, TenantID: "-", Topics: []string{"-"}, PeerCA: tm.SourcePeerCA}.CAs()
		if err != nil {
			m.mir.mu.Unlock()
			return nil, err
		}
		pool := x509.NewCertPool()
		for _, c := range cas {
			pool.AddCert(c)
		}
		c, err := m.cfg.Transport.MirrorClient(tm.SourceCell, pool)
		if err != nil {
			m.mir.mu.Unlock()
			return nil, err
		}
		sc = &sharedClient{c: c}
		m.mir.clients[ck] = sc
	}
	sc.refs++
	m.mir.mu.Unlock()
	release := func() { m.releaseClient(ck) }
	brokers := make([]mirror.RemoteBroker, 0, len(tm.SourceBrokers))
	for _, b := range tm.SourceBrokers {
		brokers = append(brokers, mirror.RemoteBroker{ID: ServerID(b.NodeID), Addr: raft.ServerAddress(b.RaftAddr)})
	}
	src, err := mirror.NewRemoteSource(mirror.RemoteConfig{Client: sc.c, Brokers: brokers, Group: GroupID(k.topic, k.part)})
	if err != nil {
		release()
		return nil, err
	}
	rate := tm.BytesPerSec
	if rate == 0 {
		rate = m.cfg.MirrorRate
	}
	p, err := mirror.Start(mirror.Config{Replica: r, Source: src, BytesPerSecond: rate, Poll: m.mirrorPoll(),
		Logger: m.cfg.Logger.With("topic_id", k.topic, "partition", k.part)})
	if err != nil {
		release()
		return nil, err
	}
	return &pull{sig: mirrorSig(tm), replica: r, puller: p, source: src, client: ck}, nil
}

// mirrorPoll is how often an idle puller looks again: the check interval,
// at most the puller's default.
func (m *Manager) mirrorPoll() time.Duration {
	if m.cfg.CheckInterval > 0 && m.cfg.CheckInterval < 50*time.Millisecond {
		return m.cfg.CheckInterval
	}
	return 0
}

func (m *Manager) releaseClient(ck string) {
	m.mir.mu.Lock()
	sc := m.mir.clients[ck]
	var c *transport.MirrorClient
	if sc != nil {
		if sc.refs--; sc.refs <= 0 {
			delete(m.mir.clients, ck)
			c = sc.c
		}
	}
	m.mir.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// closePull stops a puller and waits for it.
func (m *Manager) closePull(p *pull) {
	_ = p.puller.Close()
	m.releaseClient(p.client)
}

// dropMirror stops k's puller and serving, before its replica closes.
func (m *Manager) dropMirror(k key) {
	m.mir.mu.Lock()
	p := m.mir.pulls[k]
	delete(m.mir.pulls, k)
	delete(m.mir.doomedAt, k)
	delete(m.mir.unmarked, k)
	if m.mir.served[k] {
		m.cfg.Transport.SetMirrorSource(GroupID(k.topic, k.part), "", "", nil)
		delete(m.mir.served, k)
	}
	m.mir.mu.Unlock()
	if p != nil {
		m.closePull(p)
	}
}

// closeMirrors stops every puller and serving (Close).
func (m *Manager) closeMirrors() {
	m.mir.mu.Lock()
	keys := make([]key, 0, len(m.mir.pulls)+len(m.mir.served))
	for k := range m.mir.pulls {
		keys = append(keys, k)
	}
	for k := range m.mir.served {
		if _, ok := m.mir.pulls[k]; !ok {
			keys = append(keys, k)
		}
	}
	m.mir.mu.Unlock()
	for _, k := range keys {
		m.dropMirror(k)
	}
}

// mirrorStatus is, on the leader, the partition's part in a move, or nil
// when it takes none.
func (m *Manager) mirrorStatus(k key, r *partition.Replica) *wire.MirrorStatus {
	if !r.IsLeader() {
		return nil
	}
	m.mir.mu.Lock()
	mv, listed := m.mir.topics[k.topic]
	var ps *mirror.Status
	var promoteErr string
	if p := m.mir.pulls[k]; p != nil {
		s := p.puller.Status()
		ps, promoteErr = &s, p.promoteErr
	}
	m.mir.mu.Unlock()
	var st wire.MirrorStatus
	some := false
	mirroring := r.Mirroring()
	if end, fenced := r.Fenced(); fenced && !mirroring {
		st.Fenced, st.FencedEnd, some = true, end, true
	}
	switch {
	case mirroring:
		st.Mirroring, some = true, true
		if ps != nil {
			if ps.Looked {
				st.Lag = new(ps.Lag)
			}
			st.BytesPerSec = ps.BytesPerSecond
			if ps.Err != nil {
				st.Error = ps.Err.Error()
			}
		}
	case r.MirrorStarted() && listed && mv.mirror != nil:
		st.Promoted, some = true, true
	}
	if promoteErr != "" {
		st.Error = promoteErr
	}
	if listed && mv.bad != nil {
		st.Error, some = mv.bad.Error(), true
	}
	if !some {
		return nil
	}
	return &st
}
