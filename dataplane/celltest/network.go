package celltest

import (
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// Network gives each replica its Raft transport and cuts links between
// brokers. TransportNetwork (dataplane/transport on loopback, the default)
// is what brokers run; InmemNetwork is raft.InmemTransport, kept for
// comparing against the transport's cost in benchmarks.
type Network interface {
	// Addr is the Raft ServerAddress of the replica of part on broker b.
	Addr(b, part int) raft.ServerAddress
	// Attach returns a fresh transport for the replica of partition part on
	// broker b, connected to the other brokers' replicas unless cut off.
	Attach(b, part int) (raft.Transport, error)
	// Detach disconnects that replica, as when its broker stops.
	Detach(b, part int)
	// Isolate cuts every link between broker b and the others.
	Isolate(b int)
	// Heal restores every link between attached replicas.
	Heal()
}

// inmemAddr is the in-memory Raft address of the replica of part on broker b.
func inmemAddr(b, part int) raft.ServerAddress {
	return raft.ServerAddress(fmt.Sprintf("b%d/p%d", b, part))
}

// InmemNetwork is a Network over raft.InmemTransport.
type InmemNetwork struct {
	brokers int

	// mu guards the fields below.
	mu       sync.Mutex
	trans    map[[2]int]*raft.InmemTransport
	isolated map[int]bool
}

// NewInmemNetwork returns an in-memory network for brokers brokers.
func NewInmemNetwork(brokers int) *InmemNetwork {
	return &InmemNetwork{brokers: brokers, trans: map[[2]int]*raft.InmemTransport{}, isolated: map[int]bool{}}
}

func (n *InmemNetwork) linked(a, b int) bool { return a != b && !n.isolated[a] && !n.isolated[b] }

// Addr implements Network.
func (n *InmemNetwork) Addr(b, part int) raft.ServerAddress { return inmemAddr(b, part) }

// Attach implements Network.
func (n *InmemNetwork) Attach(b, part int) (raft.Transport, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if old := n.trans[[2]int{b, part}]; old != nil {
		n.detachLocked(b, part, old)
	}
	_, t := raft.NewInmemTransport(inmemAddr(b, part))
	n.trans[[2]int{b, part}] = t
	for o := 0; o < n.brokers; o++ {
		if p := n.trans[[2]int{o, part}]; p != nil && n.linked(b, o) {
			t.Connect(inmemAddr(o, part), p)
			p.Connect(inmemAddr(b, part), t)
		}
	}
	return &copyTransport{InmemTransport: t}, nil
}

// Detach implements Network.
func (n *InmemNetwork) Detach(b, part int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if t := n.trans[[2]int{b, part}]; t != nil {
		n.detachLocked(b, part, t)
		delete(n.trans, [2]int{b, part})
	}
}

func (n *InmemNetwork) detachLocked(b, part int, t *raft.InmemTransport) {
	t.DisconnectAll()
	for o := 0; o < n.brokers; o++ {
		if p := n.trans[[2]int{o, part}]; p != nil && o != b {
			p.Disconnect(inmemAddr(b, part))
		}
	}
}

// Isolate implements Network.
func (n *InmemNetwork) Isolate(b int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.isolated[b] = true
	for k, t := range n.trans {
		if k[0] != b {
			continue
		}
		for o := 0; o < n.brokers; o++ {
			if p := n.trans[[2]int{o, k[1]}]; p != nil && o != b {
				t.Disconnect(inmemAddr(o, k[1]))
				p.Disconnect(inmemAddr(b, k[1]))
			}
		}
	}
}

// Heal implements Network.
func (n *InmemNetwork) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.isolated)
	for k, t := range n.trans {
		for o := 0; o < n.brokers; o++ {
			if p := n.trans[[2]int{o, k[1]}]; p != nil && o != k[0] {
				t.Connect(inmemAddr(o, k[1]), p)
			}
		}
	}
}

// copyTransport hands each follower its own copy of appended entries, as a
// network would: InmemTransport passes the leader's *raft.Log values
// through, and the log store stamps batches in place. It also turns off
// pipelining, whose in-memory version does not survive Disconnect well.
type copyTransport struct {
	*raft.InmemTransport
}

var (
	_ raft.WithPreVote = (*copyTransport)(nil)
	_ raft.WithClose   = (*copyTransport)(nil)
)

func (c *copyTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

func (c *copyTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	cp := *args
	cp.Entries = make([]*raft.Log, len(args.Entries))
	for i, e := range args.Entries {
		l := *e
		l.Data = append([]byte(nil), e.Data...)
		l.Extensions = append([]byte(nil), e.Extensions...)
		cp.Entries[i] = &l
	}
	return c.InmemTransport.AppendEntries(id, target, &cp, resp)
}

func (c *copyTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	return c.InmemTransport.InstallSnapshot(id, target, args, resp, data)
}
