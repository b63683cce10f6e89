package partition_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// failedTransfer is a leadership transfer that refuses writes for took and
// then fails, as one whose target never takes over does (after up to two
// election timeouts in production).
type failedTransfer struct{ took time.Duration }

func (f failedTransfer) Error() error {
	time.Sleep(f.took)
	return errors.New("leadership transfer timeout")
}

func (failedTransfer) Index() uint64 { return 0 }

// TestFailedTransfersBackOff: a leader whose transfers to the preferred
// replica keep failing slowly waits twice as long after each failure in a
// row, so that a target that never takes over does not keep the partition
// refusing writes; once transfers work, leadership returns.
func TestFailedTransfersBackOff(t *testing.T) {
	c := celltest.New(t, celltest.Options{Partitions: 1})
	pref := c.WaitLeader(0, 60*time.Second)
	const took = 250 * time.Millisecond // over the cell's 200 ms check interval
	interval := 200 * time.Millisecond
	// Attempts are kept by the leader and term that made them: the
	// backoff is one leader's, in one term. On a busy machine an election
	// can move leadership between the two other brokers, and the new
	// leader starts with no failures behind it.
	type leadership struct {
		broker int
		term   uint64
	}
	var mu sync.Mutex
	attempts := map[leadership][]time.Time{}
	for b := range c.Brokers() {
		if b == pref {
			continue
		}
		r := c.Replica(b, 0)
		r.SetTransfer(func(raft.ServerID, raft.ServerAddress) raft.Future {
			k := leadership{b, r.Raft().CurrentTerm()}
			mu.Lock()
			attempts[k] = append(attempts[k], time.Now())
			mu.Unlock()
			return failedTransfer{took: took}
		})
	}
	c.StopBroker(pref)
	celltest.WaitFor(t, 60*time.Second, "a leader other than the stopped preferred broker", func() bool {
		l := c.Leader(0)
		return l >= 0 && l != pref
	})
	c.StartBroker(pref)
	const want = 4
	var got []time.Time
	celltest.WaitFor(t, 60*time.Second, "four transfer attempts by one leader in one term", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, at := range attempts {
			if len(at) >= want {
				got = append([]time.Time(nil), at[:want]...)
				return true
			}
		}
		return false
	})
	for k := 1; k < want; k++ {
		gap := got[k].Sub(got[k-1])
		if least := took + partition.TransferBackoff(k, interval); gap < least {
			t.Errorf("attempt %d came %v after attempt %d, want at least %v after %d slow failures in a row", k+1, gap, k, least, k)
		}
	}
	if l := c.Leader(0); l == pref {
		t.Fatalf("leadership is back on the preferred broker %d though every transfer to it failed", pref)
	}
	if got, want := partition.TransferBackoff(100, interval), 5*time.Minute; got != want {
		t.Fatalf("backoff after 100 failures %v, want the bound %v", got, want)
	}

	// Transfers that work again: the wait is at most the backoff of the
	// failures so far, and leadership returns to the preferred broker.
	for b := range c.Brokers() {
		if b != pref {
			c.Replica(b, 0).SetTransfer(nil)
		}
	}
	celltest.WaitFor(t, 60*time.Second, "leadership back on the preferred broker", func() bool { return c.Leader(0) == pref })
}
