package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// memSegments serves segment files held in memory: the transport is what
// these tests exercise; dataplane/partition's seeding tests serve real logs.
type memSegments map[int64][]byte

func (m memSegments) SeedSegments(from, to int64) (int64, []SegmentInfo, error) {
	if from > to {
		return 0, nil, errors.New("bad range")
	}
	var out []SegmentInfo
	for _, base := range []int64{0, 100} {
		if b, ok := m[base]; ok {
			out = append(out, SegmentInfo{Base: base, Size: int64(len(b))})
		}
	}
	return from, out, nil
}

func (m memSegments) ReadSegment(base, pos, limit int64, p []byte) (int, error) {
	b, ok := m[base]
	if !ok || pos > int64(len(b)) {
		return 0, fmt.Errorf("segment %d at %d: out of range", base, pos)
	}
	return copy(p, b[pos:min(limit, int64(len(b)))]), nil
}

// TestSegmentRPCs: a member of the group lists and reads the source's
// segment files byte for byte; a broker outside the configuration, and a
// member whose request names another broker, are refused; a group without
// a source says so.
func TestSegmentRPCs(t *testing.T) {
	nodes := newNodes(t, 3, nil, nil)
	members := func() []raft.Server {
		return []raft.Server{{ID: brokerID(0), Address: nodes[0].Addr()}, {ID: brokerID(1), Address: nodes[1].Addr()}}
	}
	src := memSegments{0: bytes.Repeat([]byte("a"), 3<<20), 100: []byte("tail of the log")}
	groups := make([]*GroupTransport, 3)
	for i, n := range nodes {
		g, err := n.Group("p0")
		if err != nil {
			t.Fatal(err)
		}
		g.SetMembers(members)
		t.Cleanup(func() { _ = g.Close() })
		groups[i] = g
	}
	groups[0].SetSegmentSource(src)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	source, addr := brokerID(0), nodes[0].Addr()

	start, segs, err := groups[1].SegmentList(ctx, source, addr, 7, 150)
	if err != nil || start != 7 || len(segs) != 2 || segs[0] != (SegmentInfo{0, 3 << 20}) || segs[1] != (SegmentInfo{100, 15}) {
		t.Fatalf("segment list: start %d, %+v, %v", start, segs, err)
	}
	for _, s := range segs {
		var got []byte
		buf := make([]byte, 1<<20)
		for int64(len(got)) < s.Size {
			k, err := groups[1].SegmentRead(ctx, source, addr, s.Base, int64(len(got)), s.Size, buf)
			if err != nil || k == 0 {
				t.Fatalf("segment read %d at %d: %d, %v", s.Base, len(got), k, err)
			}
			got = append(got, buf[:k]...)
		}
		if !bytes.Equal(got, src[s.Base]) {
			t.Fatalf("segment %d read back differs", s.Base)
		}
	}
	if _, err := groups[1].SegmentRead(ctx, source, addr, 5, 0, 10, make([]byte, 10)); err == nil {
		t.Fatal("a read of a segment the source does not hold succeeded")
	}

	refusedBefore := nodes[0].Stats().Refused
	if _, _, err := groups[2].SegmentList(ctx, source, addr, 0, 150); !errors.Is(err, ErrRefused) {
		t.Fatalf("segment list from a broker outside the group: %v, want ErrRefused", err)
	}
	if _, err := groups[2].SegmentRead(ctx, source, addr, 0, 0, 10, make([]byte, 10)); !errors.Is(err, ErrRefused) {
		t.Fatalf("segment read from a broker outside the group: %v, want ErrRefused", err)
	}
	// Broker 3 claims to be broker 2, a member: its certificate says otherwise.
	forged := &SegmentReadRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(brokerID(1)), Addr: []byte(nodes[1].Addr())},
		Base: 0, Pos: 0, Limit: 10, Max: 10}
	if _, err := groups[2].segmentCall(ctx, source, addr, kindSegmentRead, forged); !errors.Is(err, ErrRefused) {
		t.Fatalf("segment read naming another broker: %v, want ErrRefused", err)
	}
	if got := nodes[0].Stats().Refused - refusedBefore; got != 3 {
		t.Fatalf("the source counted %d refusals, want 3", got)
	}
	if _, _, err := groups[0].SegmentList(ctx, brokerID(1), nodes[1].Addr(), 0, 150); !errors.Is(err, ErrNoSegmentSource) {
		t.Fatalf("segment list to a group serving none: %v, want ErrNoSegmentSource", err)
	}
}

// TestSeedingRefusesEntriesAndVotes: a group marked seeding answers
// AppendEntries with entries and TimeoutNow with ErrSeeding while
// heartbeats still reach it, and sends no vote requests and does not
// campaign; unmarked, it takes entries again.
func TestSeedingRefusesEntriesAndVotes(t *testing.T) {
	nodes := newNodes(t, 2, nil, nil)
	leader := mustGroup(t, nodes[0], "p0")
	fake := serveFake(t, nodes[1], "p0", nil)
	fake.g.SetSeeding(true)
	target, id := nodes[1].Addr(), brokerID(1)
	var resp raft.AppendEntriesResponse
	if err := leader.AppendEntries(id, target, bigAppend(3, 10, 2, 100), &resp); !errors.Is(err, ErrSeeding) {
		t.Fatalf("append to a seeding replica: %v, want ErrSeeding", err)
	}
	if err := leader.AppendEntries(id, target, heartbeatReq(3), &resp); err != nil || !resp.Success {
		t.Fatalf("heartbeat to a seeding replica: %+v, %v", resp, err)
	}
	var tn raft.TimeoutNowResponse
	if err := leader.TimeoutNow(id, target, &raft.TimeoutNowRequest{RPCHeader: testHeaderOf(nodes[0])}, &tn); !errors.Is(err, ErrSeeding) {
		t.Fatalf("timeout now to a seeding replica: %v, want ErrSeeding", err)
	}
	var vr raft.RequestVoteResponse
	if err := fake.g.RequestVote(brokerID(0), nodes[0].Addr(), &raft.RequestVoteRequest{RPCHeader: testHeaderOf(nodes[1]), Term: 4}, &vr); !errors.Is(err, ErrSeeding) {
		t.Fatalf("vote request from a seeding replica: %v, want ErrSeeding", err)
	}
	var pv raft.RequestPreVoteResponse
	if err := fake.g.RequestPreVote(brokerID(0), nodes[0].Addr(), &raft.RequestPreVoteRequest{RPCHeader: testHeaderOf(nodes[1]), Term: 4}, &pv); !errors.Is(err, ErrSeeding) {
		t.Fatalf("pre-vote request from a seeding replica: %v, want ErrSeeding", err)
	}
	if err := fake.g.Campaign(context.Background()); !errors.Is(err, ErrSeeding) {
		t.Fatalf("campaign of a seeding replica: %v, want ErrSeeding", err)
	}
	fake.g.SetSeeding(false)
	if err := leader.AppendEntries(id, target, bigAppend(3, 10, 2, 100), &resp); err != nil || !resp.Success {
		t.Fatalf("append after seeding: %+v, %v", resp, err)
	}
}

func testHeaderOf(n *Node) raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(n.cfg.ID), Addr: []byte(n.addr)}
}
