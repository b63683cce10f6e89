package partition_test

import (
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
)

// errFuture is a Raft future that has failed.
type errFuture struct{ err error }

func (f errFuture) Error() error { return f.err }

// hungFuture is a Raft future that is never answered while the test runs,
// as a barrier whose entry never commits.
type hungFuture struct{ done <-chan struct{} }

func (f hungFuture) Error() error { <-f.done; return raft.ErrRaftShutdown }

// firstBarriers replaces the first barrier of each replica of partition 0
// other than broker skip's with first's future (with every, all of that
// replica's barriers); later barriers are Raft's. A reopened replica is a
// new one, whose barriers are Raft's. It records, by broker, the term each
// first barrier was sent in.
type firstBarriers struct {
	mu    sync.Mutex
	every bool
	terms map[int]uint64
}

func hookFirstBarriers(c *celltest.Cell, skip int, every bool, first func() raft.Future) *firstBarriers {
	h := &firstBarriers{every: every, terms: map[int]uint64{}}
	for b := range c.Brokers() {
		if b == skip {
			continue
		}
		r := c.Replica(b, 0)
		r.SetBarrier(func(timeout time.Duration) raft.Future {
			h.mu.Lock()
			defer h.mu.Unlock()
			if _, done := h.terms[b]; done && !h.every {
				return r.Raft().Barrier(timeout)
			} else if !done {
				h.terms[b] = r.Raft().CurrentTerm()
			}
			return first()
		})
	}
	return h
}

// term is the term broker b's first barrier was sent in, if it was.
func (h *firstBarriers) term(b int) (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.terms[b]
	return t, ok
}

// count is how many first barriers were sent.
func (h *firstBarriers) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.terms)
}

// slowCell is a cell whose Raft timeouts leave room for a retry within one
// term on a busy machine.
func slowCell(t *testing.T) *celltest.Cell {
	return celltest.New(t, celltest.Options{Partitions: 1, Raft: func() *raft.Config {
		c := celltest.TestRaftConfig()
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
		return c
	}})
}

// TestLeaderServesAfterFailedBarrier: a new leader whose first barrier
// fails, while it still leads the same term, sends it again and serves in
// that term. It used to give up: Raft kept it leader, its followers heard
// from it and never campaigned, and the partition served nothing.
func TestLeaderServesAfterFailedBarrier(t *testing.T) {
	c := slowCell(t)
	first := c.WaitLeader(0, 60*time.Second)
	hooks := hookFirstBarriers(c, first, false, func() raft.Future { return errFuture{raft.ErrLeadershipTransferInProgress} })
	c.StopBroker(first)
	leader := c.WaitLeader(0, 60*time.Second)
	term := c.Replica(leader, 0).Raft().CurrentTerm()
	failed, ok := hooks.term(leader)
	if !ok {
		t.Fatalf("broker %d serves without having sent a barrier through the test's hook", leader)
	}
	if failed != term {
		t.Fatalf("broker %d's barrier failed in term %d and it serves in term %d: it was not sent again in the same term", leader, failed, term)
	}
}

// TestLeaderThatNeverServesHandsOver: a leader whose barrier never
// completes hands leadership to another live voter after
// partition.Replica's unready limit, and one that still does not serve is
// reopened, so the partition gets a serving leader either way.
func TestLeaderThatNeverServesHandsOver(t *testing.T) {
	for _, tc := range []struct {
		name       string
		transfers  bool // whether the hand-over transfer works
		wantReopen bool
	}{
		{name: "transfer", transfers: true},
		{name: "reopen", transfers: false, wantReopen: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := celltest.New(t, celltest.Options{Partitions: 1})
			first := c.WaitLeader(0, 60*time.Second)
			done := make(chan struct{})
			t.Cleanup(func() { close(done) })
			// Without a working transfer, every barrier of the first
			// replicas hangs: a busy machine's extra elections must not
			// give a leader a second, working barrier, so only a
			// reopened replica can serve.
			hooks := hookFirstBarriers(c, first, !tc.transfers, func() raft.Future { return hungFuture{done: done} })
			if !tc.transfers {
				for b := range c.Brokers() {
					if b != first {
						c.Replica(b, 0).SetTransfer(func(raft.ServerID, raft.ServerAddress) raft.Future {
							return errFuture{raft.ErrLeadershipTransferInProgress}
						})
					}
				}
			}
			c.StopBroker(first)
			leader := c.WaitLeader(0, 3*time.Minute) // up to four unready limits of 10 s, and elections
			if hooks.count() == 0 {
				t.Fatalf("broker %d serves, but no barrier went through the test's hook", leader)
			}
			if got := c.Reopened() > 0; got != tc.wantReopen {
				t.Fatalf("replicas reopened: %d, want reopening %v", c.Reopened(), tc.wantReopen)
			}
		})
	}
}
