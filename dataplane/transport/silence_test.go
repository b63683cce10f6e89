package transport

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/contract/testkit"
)

// controlConn is a's live control connection to b, nil if none.
func controlConn(a, b *Node) *conn {
	l := a.peer(b.Addr()).control
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c
}

// stallHeartbeats makes group id on n answer heartbeats only after
// release: its heartbeat handler runs on the receiving connection's read
// goroutine, so every frame behind a held heartbeat waits too, as if the
// receiving broker had stopped. entered gets a value when a heartbeat is
// held. Released at the latest when the test ends, before the Nodes close.
func stallHeartbeats(t *testing.T, n *Node, id string) (entered chan struct{}, release func()) {
	g := mustGroup(t, n, id)
	entered, released := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(released) }) }
	t.Cleanup(release)
	g.SetHeartbeatHandler(func(rpc raft.RPC) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-released
		rpc.Respond(&raft.AppendEntriesResponse{Term: rpc.Command.(*raft.AppendEntriesRequest).Term, Success: true}, nil)
	})
	return entered, release
}

func heartbeat(g *GroupTransport, to *Node) error {
	var resp raft.AppendEntriesResponse
	if err := g.AppendEntries(to.ID(), to.Addr(), heartbeatReq(1), &resp); err != nil {
		return err
	}
	if !resp.Success {
		return fmt.Errorf("heartbeat of %s: %+v", g.ID(), resp)
	}
	return nil
}

// TestSlowCallFailsAlone: on one shared control connection, a call whose
// handler is slow past the call timeout fails with ErrTimeout alone, its
// late answer is dropped by request id, and the connection stays open.
// First a vote held inside the receiving group's Raft while heartbeats of
// other groups keep succeeding on the same connection; then a heartbeat
// held on the receiver's read goroutine, so that for longer than the call
// timeout the peer sends nothing at all (as a starved or paused broker
// would): the held call and those queued behind it time out one by one,
// none fails with a closed connection, and once the peer answers again
// every group's heartbeats succeed on the same connection. Whatever the
// machine's speed, each step waits for the one before: the only timing
// is a 300 ms call timeout against a 30 s liveness window.
func TestSlowCallFailsAlone(t *testing.T) {
	const callTimeout = 300 * time.Millisecond
	nodes := newNodes(t, 2, nil, func(c *Config) {
		c.ControlTimeout, c.LivenessWindow, c.ProbeInterval = callTimeout, 30*time.Second, -1
	})
	a, b := nodes[0], nodes[1]

	// b's Raft of group "vote" holds the first vote until released and
	// answers the others at once, each with its request's term.
	voteB := mustGroup(t, b, "vote")
	held, releaseVote := make(chan struct{}), make(chan struct{})
	done, exited := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(done); <-exited })
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(releaseVote) }) }
	t.Cleanup(release) // runs first: the serving loop may be holding a vote
	go func() {
		defer close(exited)
		first := true
		for {
			select {
			case rpc := <-voteB.Consumer():
				req := rpc.Command.(*raft.RequestVoteRequest)
				if first {
					first = false
					close(held)
					select {
					case <-releaseVote:
					case <-done:
						return
					}
				}
				rpc.Respond(&raft.RequestVoteResponse{Term: req.Term, Granted: true}, nil)
			case <-done:
				return
			}
		}
	}()
	stallEntered, releaseStall := stallHeartbeats(t, b, "stall")
	var others []*GroupTransport
	for i := range 4 {
		id := fmt.Sprintf("hb%d", i)
		serveFake(t, b, id, nil)
		others = append(others, mustGroup(t, a, id))
	}
	voteA, stallA := mustGroup(t, a, "vote"), mustGroup(t, a, "stall")
	if err := heartbeat(others[0], b); err != nil {
		t.Fatal(err)
	}
	c0 := controlConn(a, b)
	vote := func(term uint64) (raft.RequestVoteResponse, error) {
		var resp raft.RequestVoteResponse
		err := voteA.RequestVote(b.ID(), b.Addr(), &raft.RequestVoteRequest{RPCHeader: testHeader(), Term: term}, &resp)
		return resp, err
	}

	// 1. A slow vote, heartbeats succeeding beside it.
	voteErr := make(chan error, 1)
	go func() { _, err := vote(1); voteErr <- err }()
	<-held
	beats := 0
	for waiting := true; waiting; {
		select {
		case err := <-voteErr:
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("held vote: %v, want ErrTimeout", err)
			}
			waiting = false
		default:
			for _, g := range others {
				if err := heartbeat(g, b); err != nil {
					t.Fatalf("heartbeat beside a slow vote: %v", err)
				}
				beats++
			}
		}
	}
	if beats == 0 {
		t.Fatal("no heartbeat ran beside the slow vote")
	}
	release()
	// The held vote's late answer (term 1) comes first on the connection
	// and must not be taken for the next vote's.
	if resp, err := vote(2); err != nil || resp.Term != 2 || !resp.Granted {
		t.Fatalf("vote after a timed-out one: %+v %v, want term 2 granted", resp, err)
	}
	if c := controlConn(a, b); c != c0 || c0.isClosed() {
		t.Fatal("the control connection was closed by one call's timeout while the peer answered others")
	}

	// 2. The peer sends nothing for longer than the call timeout.
	stallErr := make(chan error, 1)
	go func() { stallErr <- heartbeat(stallA, b) }()
	<-stallEntered
	queued := make(chan error, len(others))
	for _, g := range others {
		go func() { queued <- heartbeat(g, b) }()
	}
	if err := <-stallErr; !errors.Is(err, ErrTimeout) {
		t.Fatalf("held heartbeat: %v, want ErrTimeout", err)
	}
	if c0.isClosed() {
		t.Fatal("one heartbeat's timeout closed the control connection every group shares")
	}
	releaseStall()
	for range others {
		if err := <-queued; err != nil && !errors.Is(err, ErrTimeout) {
			t.Fatalf("heartbeat queued behind a held one: %v, want success or its own timeout", err)
		}
	}
	for _, g := range append(others, stallA) {
		if err := heartbeat(g, b); err != nil {
			t.Fatalf("heartbeat of %s once the peer answers again: %v", g.ID(), err)
		}
	}
	if c := controlConn(a, b); c != c0 || c0.isClosed() {
		t.Fatal("the control connection was replaced")
	}
	if st := a.Stats(); st.Silent != 0 || st.TimedOut < 2 {
		t.Fatalf("stats: silent %d timed out %d, want 0 and at least 2", st.Silent, st.TimedOut)
	}
}

// TestSilentPeerClosed: a peer that sends nothing at all while it owes
// answers (its read goroutine held, the head-of-line case of a stuck
// broker) has its connection closed once the liveness window has passed,
// never sooner; the calls still waiting fail naming the silence, and the
// next call dials a new connection. The bound on "soon enough" is loose
// (a busy machine delays timers); the bound on "never sooner" is exact.
func TestSilentPeerClosed(t *testing.T) {
	const window = 400 * time.Millisecond
	nodes := newNodes(t, 2, nil, func(c *Config) {
		c.ControlTimeout, c.LivenessWindow, c.ProbeInterval, c.DownAfter = 100*time.Millisecond, window, -1, time.Minute
	})
	a, b := nodes[0], nodes[1]
	entered, _ := stallHeartbeats(t, b, "stall")
	serveFake(t, b, "hb", nil)
	stallA, hbA := mustGroup(t, a, "stall"), mustGroup(t, a, "hb")
	if err := heartbeat(hbA, b); err != nil {
		t.Fatal(err)
	}
	c0 := controlConn(a, b)

	start := time.Now()
	stallErr := make(chan error, 1)
	go func() { stallErr <- heartbeat(stallA, b) }()
	<-entered
	// A ping waits a minute (DownAfter): it is still waiting when the
	// window closes the connection.
	pingErr := make(chan error, 1)
	go func() {
		_, err := a.ping(&liveness{id: b.ID(), addr: b.Addr()})
		pingErr <- err
	}()
	if err := <-stallErr; !errors.Is(err, ErrTimeout) {
		t.Fatalf("held heartbeat: %v, want ErrTimeout", err)
	}
	testkit.WaitFor(t, 30*time.Second, "the silent peer's connection closed", c0.isClosed)
	closedAfter := time.Since(start)
	if closedAfter < window {
		t.Fatalf("closed after %s, before the %s liveness window", closedAfter, window)
	}
	t.Logf("closed %s after the peer fell silent (window %s)", closedAfter.Round(time.Millisecond), window)
	if err := <-pingErr; !errors.Is(err, errSilent) || !strings.Contains(err.Error(), "control connection to b2 closed") {
		t.Fatalf("ping waiting on the silent connection: %v, want it closed for silence", err)
	}
	if err := heartbeat(hbA, b); err != nil {
		t.Fatalf("heartbeat after the silent connection closed: %v", err)
	}
	if c := controlConn(a, b); c == c0 || c == nil {
		t.Fatal("no new connection after the silent one closed")
	}
	if st := a.Stats(); st.Silent != 1 {
		t.Fatalf("silent closes %d, want 1", st.Silent)
	}
}

// TestSilenceSeenTwice drives checkAlive with an injected clock: a check
// that first finds the window passed (a timer that fires late, after the
// whole process stalled) does not close the connection, so that its reader
// can read what waits; a frame read before the next check starts the
// silence again, and only a silence seen twice, a quarter window apart,
// closes it.
func TestSilenceSeenTwice(t *testing.T) {
	nodes := newNodes(t, 2, nil, func(c *Config) { c.ProbeInterval = -1 })
	a, b := nodes[0], nodes[1]
	serveFake(t, b, "hb", nil)
	if err := heartbeat(mustGroup(t, a, "hb"), b); err != nil {
		t.Fatal(err)
	}
	c := controlConn(a, b)
	w := c.window
	owe := func(now int64) {
		c.mu.Lock()
		c.pending[1<<62] = &call{ch: make(chan result, 1)} // a call that waits
		c.owe(now)
		c.mu.Unlock()
	}
	heard := func(now int64) {
		c.mu.Lock()
		c.heard(now)
		c.mu.Unlock()
	}
	t0 := time.Now().UnixNano()
	owe(t0)
	for _, tc := range []struct {
		name  string
		at    int64
		read  bool // a frame is read just before the check
		close bool
	}{
		{"half a window", t0 + w/2, false, false},
		{"first seen past the window, after a stall", t0 + 5*w, false, false},
		{"read before the second check", t0 + 5*w + w/4, true, false},
		{"silent again, first seen", t0 + 5*w + w/4 + w, false, false},
		{"too soon for the second look", t0 + 5*w + w/4 + w + w/8, false, false},
		{"seen twice a quarter window apart", t0 + 5*w + w/4 + w + w/4, false, true},
	} {
		if tc.read {
			heard(tc.at)
		}
		c.checkAlive(tc.at)
		if c.isClosed() != tc.close {
			t.Fatalf("%s: closed %v, want %v", tc.name, c.isClosed(), tc.close)
		}
	}
}

// TestLivenessWindowConfig: the window defaults to twice ControlTimeout,
// an append lane's adds AppendTimeout, and a window below ControlTimeout,
// which would let one slow call close the shared connection, is refused.
func TestLivenessWindowConfig(t *testing.T) {
	for _, tc := range []struct {
		name          string
		control, live time.Duration
		want          time.Duration // control lane; 0: refused
	}{
		{"default", 0, 0, 4 * time.Second},
		{"from ControlTimeout", time.Second, 0, 2 * time.Second},
		{"set", time.Second, 3 * time.Second, 3 * time.Second},
		{"equal to ControlTimeout", time.Second, time.Second, time.Second},
		{"below ControlTimeout", 2 * time.Second, time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{ID: "b1", ListenAddr: "127.0.0.1:0", Credentials: testCredentials(t, "b1"), ControlTimeout: tc.control, LivenessWindow: tc.live}
			err := cfg.validate()
			if tc.want == 0 {
				if err == nil || !strings.Contains(err.Error(), "LivenessWindow") {
					t.Fatalf("validate: %v, want LivenessWindow refused", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n := &Node{cfg: cfg}
			if got := n.laneWindow(laneControl); got != tc.want {
				t.Fatalf("control lane window %s, want %s", got, tc.want)
			}
			if got := n.laneWindow(laneAppend); got != cfg.AppendTimeout+tc.want {
				t.Fatalf("append lane window %s, want %s", got, cfg.AppendTimeout+tc.want)
			}
		})
	}
}
