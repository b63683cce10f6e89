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
	var mu sync.Mutex
	failedIn := map[int]uint64{} // broker → the term its failed barrier was sent in
	for b := range c.Brokers() {
		if b == first {
			continue
		}
		r := c.Replica(b, 0)
		r.SetBarrier(func(timeout time.Duration) raft.Future {
			mu.Lock()
			defer mu.Unlock()
			if _, failed := failedIn[b]; !failed {
				failedIn[b] = r.Raft().CurrentTerm()
				return errFuture{raft.ErrLeadershipTransferInProgress}
			}
			return r.Raft().Barrier(timeout)
		})
	}
	c.StopBroker(first)
	leader := c.WaitLeader(0, 60*time.Second)
	term := c.Replica(leader, 0).Raft().CurrentTerm()
	mu.Lock()
	defer mu.Unlock()
	failed, ok := failedIn[leader]
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
			var mu sync.Mutex
			hung := map[int]bool{} // brokers whose first barrier hangs
			for b := range c.Brokers() {
				if b == first {
					continue
				}
				r := c.Replica(b, 0)
				r.SetBarrier(func(timeout time.Duration) raft.Future {
					mu.Lock()
					defer mu.Unlock()
					if !hung[b] {
						hung[b] = true
						return hungFuture{done: done}
					}
					return r.Raft().Barrier(timeout)
				})
				if !tc.transfers {
					r.SetTransfer(func(raft.ServerID, raft.ServerAddress) raft.Future {
						return errFuture{raft.ErrLeadershipTransferInProgress}
					})
				}
			}
			c.StopBroker(first)
			leader := c.WaitLeader(0, 60*time.Second)
			mu.Lock()
			n := len(hung)
			mu.Unlock()
			if n == 0 {
				t.Fatalf("broker %d serves, but no barrier went through the test's hook", leader)
			}
			if got := c.Reopened() > 0; got != tc.wantReopen {
				t.Fatalf("replicas reopened: %d, want reopening %v", c.Reopened(), tc.wantReopen)
			}
		})
	}
}
