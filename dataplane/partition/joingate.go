package partition

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/log"
)

// A joining replica (Config.Join) is added to a group that exists
// elsewhere. Until it has stored a configuration entry of its own join
// (of the term in which a leader first sent it entries, or later) that
// makes it a voter, it neither campaigns nor grants votes: every
// configuration it holds before that may be a stale one (the seed
// snapshot's, or an old entry replayed from the start of the leader's
// log, from a time this broker was a voter with a log it no longer has).
// See DESIGN.md, "Replica moves", for the argument.

// joinFile marks a replica that is joining; it holds the term of the
// first entries a leader sent it ("0" before).
const joinFile = "join.pending"

// errJoining refuses a joining replica's vote requests.
var errJoining = errors.New("partition: joining replica does not vote yet")

// joinGate is a joining replica's state.
type joinGate struct {
	dir    string
	on     atomic.Bool
	term   atomic.Uint64 // the term of the first entries a leader sent; 0: none yet
	peers  []raft.Server // admitted while gated (Config.Peers)
	logged bool          // the monitor logged the gate's opening
	// votes: the replica holds a configuration of its join's term or
	// later that lists it (its addition as a non-voter, from a stored
	// entry or its latest snapshot), so its log is past every stale
	// configuration; from then on it grants votes by Raft's rules while
	// still not campaigning.
	votes atomic.Bool
}

// openJoinGate returns the gate of a replica opened with cfg: on if the
// replica is joining (cfg.Join with no Raft state yet, or a join begun
// before a restart), nil otherwise.
func openJoinGate(cfg Config, hasState bool) (*joinGate, error) {
	path := filepath.Join(cfg.Dir, joinFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("read join mark: %w", err)
	case !cfg.Join || hasState:
		return nil, nil
	default:
		b = []byte("0")
		if err := writeJoinFile(cfg.Dir, 0); err != nil {
			return nil, err
		}
	}
	term, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("read join mark %q: %w", b, err)
	}
	g := &joinGate{dir: cfg.Dir, peers: cfg.Peers}
	g.on.Store(true)
	g.term.Store(term)
	return g, nil
}

func writeJoinFile(dir string, term uint64) error {
	tmp := filepath.Join(dir, joinFile+".tmp")
	if err := os.WriteFile(tmp, []byte(strconv.FormatUint(term, 10)), 0o644); err != nil {
		return fmt.Errorf("write join mark: %w", err)
	}
	f, err := os.Open(tmp)
	if err != nil {
		return fmt.Errorf("write join mark: %w", err)
	}
	serr := f.Sync()
	f.Close()
	if serr != nil {
		return fmt.Errorf("write join mark: %w", serr)
	}
	if err := os.Rename(tmp, filepath.Join(dir, joinFile)); err != nil {
		return fmt.Errorf("write join mark: %w", err)
	}
	return log.SyncDir(dir)
}

// gated reports whether the replica is still joining.
func (g *joinGate) gated() bool { return g != nil && g.on.Load() }

// JoinPending reports whether this replica was opened to join a group and has
// not yet become a voter of a configuration of its own join: it does not
// campaign or vote, and a configuration that does not list it is no
// removal.
func (r *Replica) JoinPending() bool { return r.gate.gated() }

// checkJoin runs on the monitor's tick: it lets a gated replica vote once
// its latest snapshot is of its join (see joinGate.votes), and logs the
// gate's opening once.
func (r *Replica) checkJoin(c *confView) {
	g := r.gate
	if g == nil {
		return
	}
	if g.gated() && !g.votes.Load() && g.term.Load() > 0 {
		if metas, err := r.snaps.List(); err == nil && len(metas) > 0 && metas[0].Term >= g.term.Load() &&
			slices.ContainsFunc(metas[0].Configuration.Servers, func(s raft.Server) bool { return s.ID == r.cfg.ID }) {
			g.votes.Store(true)
		}
	}
	if g.gated() || g.logged {
		return
	}
	g.logged = true
	if c != nil {
		r.cfg.Logger.Info("joining replica is a voter of its group", "replica", r.cfg.ID, "configuration", confString(c))
	}
}

// open clears the gate for good, its mark first: a mark a crash left
// behind is cleared at the next open by scanLog, which finds the entry
// again.
func (g *joinGate) open() error {
	if err := os.Remove(filepath.Join(g.dir, joinFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("clear join mark: %w", err)
	}
	if err := log.SyncDir(g.dir); err != nil {
		return fmt.Errorf("clear join mark: %w", err)
	}
	g.on.Store(false)
	return nil
}

// opens reports whether entry e, stored by this replica, ends its join: a
// configuration entry of the join's term or later that makes id a voter.
// One that lists id at all lets it vote (joinGate.votes).
func (g *joinGate) opens(id raft.ServerID, e *raft.Log) bool {
	if e.Type != raft.LogConfiguration || e.Term < g.term.Load() {
		return false
	}
	c, err := decodeConfiguration(e.Data)
	if err != nil {
		return false
	}
	i := slices.IndexFunc(c.Servers, func(s raft.Server) bool { return s.ID == id })
	if i >= 0 {
		g.votes.Store(true)
	}
	return i >= 0 && c.Servers[i].Suffrage == raft.Voter
}

// decodeConfiguration is raft.DecodeConfiguration without its panic on
// bad bytes.
func decodeConfiguration(b []byte) (c raft.Configuration, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("decode configuration: %v", p)
		}
	}()
	return raft.DecodeConfiguration(b), nil
}

// gatedLogs is the LogStore Raft writes through while a replica joins: it
// notes the term of the first entries a leader sends (the join's term,
// persisted before they are stored) and opens the gate once an entry that
// ends the join is stored.
type gatedLogs struct {
	raft.LogStore
	gate *joinGate
	id   raft.ServerID
	term func() uint64 // Raft's current term
	log  func(msg string, args ...any)
}

func (l *gatedLogs) StoreLog(e *raft.Log) error { return l.StoreLogs([]*raft.Log{e}) }

func (l *gatedLogs) StoreLogs(es []*raft.Log) error {
	g := l.gate
	if !g.gated() {
		return l.LogStore.StoreLogs(es)
	}
	if g.term.Load() == 0 {
		// Raft adopts the sender's term before it stores its entries.
		t := l.term()
		if t == 0 {
			// Raft is not started yet: no judging these entries.
			return l.LogStore.StoreLogs(es)
		}
		if err := writeJoinFile(g.dir, t); err != nil {
			return err
		}
		g.term.Store(t)
		l.log("joining replica reached by its leader", "replica", l.id, "term", t)
	}
	if err := l.LogStore.StoreLogs(es); err != nil {
		return err
	}
	for _, e := range es {
		if g.opens(l.id, e) {
			if err := g.open(); err != nil {
				l.log("joining replica: clear join mark", "replica", l.id, "err", err)
				return nil // stays gated; the next open's scan ends it
			}
			break
		}
	}
	return nil
}

// scanLog ends a join a restart interrupted: it looks back through the
// entries of the join's term and later for one that ends it.
func (g *joinGate) scanLog(id raft.ServerID, logs raft.LogStore) error {
	if !g.gated() || g.term.Load() == 0 {
		return nil
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return err
	}
	last, err := logs.LastIndex()
	if err != nil {
		return err
	}
	for i := last; i >= first && i > 0; i-- {
		var e raft.Log
		if err := logs.GetLog(i, &e); err != nil {
			return nil
		}
		if e.Term < g.term.Load() {
			return nil
		}
		if e.Type == raft.LogConfiguration {
			// The latest configuration entry decides.
			if g.opens(id, &e) {
				return g.open()
			}
			return nil
		}
	}
	return nil
}

// members is the transport's admission list: Raft's latest configuration
// and, while joining, also Peers (the replica set the cell state names),
// so that a leader missing from a stale snapshot configuration still
// reaches the joiner.
func (g *joinGate) members(raftMembers func() []raft.Server) func() []raft.Server {
	if g == nil {
		return raftMembers
	}
	return func() []raft.Server {
		s := raftMembers()
		if !g.gated() {
			return s
		}
		out := slices.Clone(s)
		for _, p := range g.peers {
			if !slices.ContainsFunc(out, func(x raft.Server) bool { return x.ID == p.ID }) {
				out = append(out, p)
			}
		}
		return out
	}
}

// gatedTransport is the Raft transport of a joining replica: while the
// gate is on, its own vote requests fail unsent, and the vote requests and
// TimeoutNow it receives are refused before Raft sees them.
type gatedTransport struct {
	raft.Transport
	pre  raft.WithPreVote
	gate *joinGate
	id   raft.ServerID
	in   chan raft.RPC
}

// gateTransport wraps t for a gated replica; it returns t itself when the
// replica is not joining or t lacks what Raft needs of a wrapper
// (pre-vote and Close).
func gateTransport(t raft.Transport, g *joinGate, id raft.ServerID, stop <-chan struct{}, wg *sync.WaitGroup) raft.Transport {
	pre, ok := t.(raft.WithPreVote)
	_, closes := t.(raft.WithClose)
	if g == nil || !ok || !closes {
		return t
	}
	gt := &gatedTransport{Transport: t, pre: pre, gate: g, id: id, in: make(chan raft.RPC)}
	wg.Add(1)
	go func() {
		defer wg.Done()
		gt.filter(t.Consumer(), stop)
	}()
	return gt
}

func (t *gatedTransport) header() raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(t.id), Addr: []byte(t.LocalAddr())}
}

func (t *gatedTransport) Consumer() <-chan raft.RPC { return t.in }

func (t *gatedTransport) Close() error { return t.Transport.(raft.WithClose).Close() }

func (t *gatedTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if t.gate.gated() {
		return errJoining
	}
	return t.Transport.RequestVote(id, target, args, resp)
}

func (t *gatedTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if t.gate.gated() {
		return errJoining
	}
	return t.pre.RequestPreVote(id, target, args, resp)
}

// filter hands Raft every incoming RPC but, while gated, TimeoutNow
// (refused) and, until the replica may vote (joinGate.votes), the vote
// requests (answered "not granted" at the candidate's term). It ends when
// the replica stops.
func (t *gatedTransport) filter(from <-chan raft.RPC, stop <-chan struct{}) {
	for {
		var rpc raft.RPC
		select {
		case <-stop:
			return
		case rpc = <-from:
		}
		if t.gate.gated() {
			votes := t.gate.votes.Load()
			switch req := rpc.Command.(type) {
			case *raft.RequestVoteRequest:
				if votes {
					break
				}
				rpc.Respond(&raft.RequestVoteResponse{RPCHeader: t.header(), Term: req.Term, Granted: false}, nil)
				continue
			case *raft.RequestPreVoteRequest:
				if votes {
					break
				}
				rpc.Respond(&raft.RequestPreVoteResponse{RPCHeader: t.header(), Term: req.Term, Granted: false}, nil)
				continue
			case *raft.TimeoutNowRequest:
				rpc.Respond(nil, errJoining)
				continue
			}
		}
		select {
		case <-stop:
			return
		case t.in <- rpc:
		}
	}
}
