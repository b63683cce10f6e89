package mirror_test

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/mirror"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/transport"
)

// newCellNet is a network of the real transport for a cell of its own:
// its own peer CA named cell, broker b's Node certified as
// celltest.BrokerID(b) of that cell. onNode runs on every Node it starts
// (a restarted broker gets a new one), before any replica uses it.
func newCellNet(t testing.TB, cell string, brokers int, onNode func(int, *transport.Node)) *celltest.TransportNetwork {
	t.Helper()
	n, err := celltest.NewTransportNetworkFrom(celltest.TransportNetworkConfig{Brokers: brokers, Cell: cell, OnNode: onNode})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// remoteBrokers is the source cell's broker list as a destination knows
// it.
func (x *crossCells) remoteBrokers() []mirror.RemoteBroker {
	var out []mirror.RemoteBroker
	for b := range 3 {
		out = append(out, mirror.RemoteBroker{ID: celltest.BrokerID(b), Addr: x.srcNet.Addr(b, 0)})
	}
	return out
}

// crossCells is a source cell "cell-a" serving its partition 0 (topic
// "topic-a" of tenant "ten") to mirrors, and a destination cell "cell-b"
// whose replicas mirror it through the source brokers' transport, each
// cell with its own CA.
type crossCells struct {
	srcNet, dstNet *celltest.TransportNetwork
	src, dst       *celltest.Cell
	grants         atomic.Pointer[[]transport.MirrorGrant]
}

func newCrossCells(t *testing.T) *crossCells {
	t.Helper()
	x := &crossCells{}
	var srcCell atomic.Pointer[celltest.Cell]
	x.grants.Store(&[]transport.MirrorGrant{})
	x.srcNet = newCellNet(t, "cell-a", 3, func(b int, n *transport.Node) {
		mirror.Serve(n, "p0", "ten", "topic-a", func() *partition.Replica {
			if c := srcCell.Load(); c != nil {
				return c.Replica(b, 0)
			}
			return nil
		})
		if err := n.SetMirrorGrants(*x.grants.Load()); err != nil {
			t.Error(err)
		}
	})
	x.dstNet = newCellNet(t, "cell-b", 3, nil)
	x.setGrants(t, []transport.MirrorGrant{{Cell: "cell-b", Tenant: "ten", Topics: []string{"topic-a"}, CAs: []*x509.Certificate{x.dstNet.CA().Cert}}})
	x.src = celltest.New(t, celltest.Options{Network: x.srcNet})
	srcCell.Store(x.src)
	x.dst = celltest.New(t, celltest.Options{Network: x.dstNet, Mirror: true})
	x.src.WaitLeader(0, waitLong)
	x.dst.WaitLeader(0, waitLong)
	return x
}

// setGrants publishes a new cell state's grants to every source broker.
func (x *crossCells) setGrants(t *testing.T, gs []transport.MirrorGrant) {
	t.Helper()
	x.grants.Store(&gs)
	for b := range 3 {
		if n := x.srcNet.Node(b); n != nil {
			if err := n.SetMirrorGrants(gs); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// remote is a RemoteSource of the source partition from destination
// broker b's transport.
func (x *crossCells) remote(t *testing.T, b int) *mirror.RemoteSource {
	t.Helper()
	c, err := x.dstNet.Node(b).MirrorClient("cell-a", x.srcNet.CA().Pool())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	rs, err := mirror.NewRemoteSource(mirror.RemoteConfig{Client: c, Brokers: x.remoteBrokers(), Group: "p0", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestRemoteMirrorAcrossCells: a destination cell mirrors a source
// partition of another cell (another CA) over the source brokers'
// transport while it is written to; the source leader is stopped midway
// and the mirror follows the new one; the source is fenced, the mirror
// promoted through the remote source, and the two logs are the same byte
// for byte. Revoking the grant then refuses the destination.
func TestRemoteMirrorAcrossCells(t *testing.T) {
	x := newCrossCells(t)
	ctx := ctxLong(t)
	fill(t, x.src, 20, func(i int) []byte { return celltest.Batch(fmt.Appendf(nil, "before-%d", i)) })
	var pullers []*mirror.Puller
	var sources []*mirror.RemoteSource
	for b := range 3 {
		rs := x.remote(t, b)
		p, err := mirror.Start(mirror.Config{Replica: x.dst.Replica(b, 0), Source: rs, MaxBytes: 2 << 10, Poll: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		pullers, sources = append(pullers, p), append(sources, rs)
	}
	mirrored := func() int64 {
		if r := leaderOf(x.dst); r != nil {
			return r.HighWatermark()
		}
		return -1
	}
	celltest.WaitFor(t, waitLong, "the mirror to copy the first batches", func() bool { return mirrored() >= 20 })

	// The source leader goes away; the mirror follows its successor.
	old := x.src.WaitLeader(0, waitLong)
	x.src.StopBroker(old)
	fill(t, x.src, 20, func(i int) []byte { return celltest.Batch(fmt.Appendf(nil, "after-%d", i)) })
	src := leaderOf(x.src)
	if src == nil {
		t.Fatal("no source leader after the fill")
	}
	celltest.WaitFor(t, waitLong, "the mirror to follow the new source leader", func() bool { return mirrored() >= src.HighWatermark() })
	lead := x.dst.WaitLeader(0, waitLong)
	if got := sources[lead].Leader().ID; got == celltest.BrokerID(old) {
		t.Fatalf("the leading puller still asks the stopped source broker %s", got)
	}

	src, end := fenceLeader(t, ctx, x.src)
	celltest.WaitFor(t, waitLong, "the mirror's promotion", func() bool {
		dst := leaderOf(x.dst)
		if dst == nil {
			return false
		}
		err := mirror.Promote(ctx, dst, sources[lead])
		if err != nil {
			t.Logf("promote: %v", err)
		}
		return err == nil
	})
	dst := leaderOf(x.dst)
	src = leaderOf(x.src)
	if dst.HighWatermark() != end || src.LogStartOffset() != dst.LogStartOffset() {
		t.Fatalf("destination holds [%d, %d), the source [%d, %d) fenced at %d", dst.LogStartOffset(), dst.HighWatermark(), src.LogStartOffset(), src.HighWatermark(), end)
	}
	if a, b := raw(t, src, src.LogStartOffset()), raw(t, dst, dst.LogStartOffset()); !bytes.Equal(a, b) {
		t.Fatalf("destination log differs from the source's: %d and %d bytes", len(a), len(b))
	}
	if off, err := sendRetrying(ctx, x.dst, celltest.Batch([]byte("promoted"))); err != nil || off != end {
		t.Fatalf("produce to the promoted mirror: offset %d, %v; want %d", off, err, end)
	}

	// A new cell state without the grant: the destination is refused.
	x.setGrants(t, nil)
	celltest.WaitFor(t, waitLong, "the revoked destination to be refused", func() bool {
		_, err := sources[lead].State(ctx)
		return err != nil
	})
	if _, err := sources[lead].Read(ctx, 0, 1<<10); err == nil {
		t.Fatal("a revoked destination read the source")
	}
}

// TestRemoteSourceRefusedTopic: a granted cell's remote source of a
// partition whose topic it was not granted is refused, and the puller
// copies nothing.
func TestRemoteSourceRefusedTopic(t *testing.T) {
	x := newCrossCells(t)
	fill(t, x.src, 3, func(i int) []byte { return celltest.Batch(fmt.Appendf(nil, "v-%d", i)) })
	x.setGrants(t, []transport.MirrorGrant{{Cell: "cell-b", Tenant: "ten", Topics: []string{"topic-other"}, CAs: []*x509.Certificate{x.dstNet.CA().Cert}}})
	rs := x.remote(t, 0)
	ctx := ctxLong(t)
	if _, err := rs.State(ctx); !errors.Is(err, transport.ErrNotGranted) {
		t.Fatalf("state of a topic not granted: %v, want ErrNotGranted", err)
	}
	if _, err := rs.Snapshot(ctx); !errors.Is(err, transport.ErrNotGranted) {
		t.Fatalf("snapshot of a topic not granted: %v, want ErrNotGranted", err)
	}
	if _, err := rs.Read(ctx, 0, 1<<10); !errors.Is(err, transport.ErrNotGranted) {
		t.Fatalf("read of a topic not granted: %v, want ErrNotGranted", err)
	}
}

// TestRemoteSourceFollowsLeaderHint: asked first, a source follower names
// its leader and the remote source goes there directly, never trying the
// broker listed between them (a listener that counts what reaches it).
func TestRemoteSourceFollowsLeaderHint(t *testing.T) {
	x := newCrossCells(t)
	fill(t, x.src, 1, func(int) []byte { return celltest.Batch([]byte("v")) })
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	var reached atomic.Int64
	go func() {
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			reached.Add(1)
			_ = c.Close()
		}
	}()
	c, err := x.dstNet.Node(0).MirrorClient("cell-a", x.srcNet.CA().Pool())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxLong(t)
	all := x.remoteBrokers()
	celltest.WaitFor(t, waitLong, "a state answer through a follower's hint", func() bool {
		lead := x.src.Leader(0)
		if lead < 0 {
			return false
		}
		f := (lead + 1) % 3
		if r := x.src.Replica(f, 0); r == nil {
			return false
		} else if id, _ := r.LeaderID(); id != celltest.BrokerID(lead) {
			return false // the follower does not know the leader yet
		}
		rs, err := mirror.NewRemoteSource(mirror.RemoteConfig{Client: c, Group: "p0", Timeout: 2 * time.Second,
			Brokers: []mirror.RemoteBroker{all[f], {ID: "hole", Addr: raft.ServerAddress(hole.Addr().String())}, all[lead]}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rs.State(ctx); err != nil {
			t.Logf("state: %v", err) // leadership moved meanwhile: again
			return false
		}
		return rs.Leader().ID == celltest.BrokerID(lead) && reached.Load() == 0
	})
	if n := reached.Load(); n != 0 {
		t.Fatalf("the broker listed after the follower was dialled %d times", n)
	}
}
