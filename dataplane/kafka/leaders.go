package kafka

import (
	"context"
	"slices"
	"time"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/frontdoor"
)

// leaderWait bounds how long CreateTopics waits for the new partitions'
// first leaders. They normally come within milliseconds; if the preferred
// replica's campaign failed and the group waits for a Raft election
// timeout (10 s), CreateTopics answers anyway and Metadata says
// LEADER_NOT_AVAILABLE until then.
const leaderWait = 5 * time.Second

// waitForLeaders waits, up to leaderWait or ctx, until every partition of
// the named topics that this broker hosts knows a serving leader, so that
// the client's first Metadata after CreateTopics names leaders instead of
// LEADER_NOT_AVAILABLE. A new partition's leader is normally there within
// milliseconds (its preferred replica campaigns as it opens); a client
// such as franz-go that sees LEADER_NOT_AVAILABLE may otherwise wait for
// its next metadata refresh (up to its 5 s metadata min age) before it
// produces.
func (c *conn) waitForLeaders(ctx context.Context, topics []string) {
	if len(topics) == 0 {
		return
	}
	pollFor(ctx, leaderWait, func() bool { return c.leadersKnown(topics) })
}

// pollFor calls done at once and then every 5 ms, up to d or ctx, until
// it reports true.
func pollFor(ctx context.Context, d time.Duration, done func() bool) {
	if done() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		if done() {
			return
		}
	}
}

func (c *conn) leadersKnown(topics []string) bool {
	v := c.s.cfg.State.View()
	for _, name := range topics {
		t, ok := v.Topic(c.tenant(), name)
		if !ok {
			return false
		}
		for _, wp := range t.Partitions {
			if !slices.Contains(wp.Replicas, c.s.cfg.NodeID) {
				continue // not hosted here: nothing to ask
			}
			p, ok := c.s.cfg.Partitions.Get(t.ID, int32(wp.Partition))
			if !ok {
				return false // hosted here, not opened yet
			}
			if _, ok := p.Leader(); !ok {
				return false
			}
		}
	}
	return true
}

// electedHere reports whether p's replica on this broker has won its
// election and is about to serve (partition.Replica.ElectedHere).
func electedHere(p Partition) bool {
	e, ok := p.(interface{ ElectedHere() bool })
	return ok && e.ElectedHere()
}

// fencedHere reports whether p refuses produce here because it is fenced,
// or being fenced, for a move of its tenant to another cell.
func fencedHere(p Partition) bool {
	f, ok := p.(interface{ MoveRefusesProduce() bool })
	return ok && f.MoveRefusesProduce()
}

// electionWait bounds how long a Produce or a Metadata answer waits for a
// partition hosted here to learn its new leader (an election or a
// leadership transfer in progress, with a majority up). Kafka clients
// that hear "no leader" refresh their metadata, and franz-go does so at
// most once per metadata min age (5 s by default): answering a moment
// later with the new leader named (KIP-951 on Produce, the leader on
// Metadata) costs less than that wait. A partition without a majority
// is not waited for (frontdoor.NoLeader says so at once).
const electionWait = 1500 * time.Millisecond

// awaitLeader waits, up to electionWait or ctx, until p knows a serving
// leader, and reports it. It answers at once when p has one or when its
// majority is gone. A replica that has won and is applying its
// predecessors' entries (ElectedHere) is waited for too: answered
// NOT_LEADER_OR_FOLLOWER naming itself, franz-go (1.22) did not retry it
// but waited for a metadata refresh, 5 s, before a new partition's first
// record.
func awaitLeader(ctx context.Context, p Partition) (node int, ok bool) {
	pollFor(ctx, electionWait, func() bool {
		node, ok = p.Leader()
		return ok || frontdoor.PartitionNoQuorum(p)
	})
	return node, ok
}

// awaitOpened returns partition part of t as this broker holds it,
// waiting up to electionWait or ctx for it to open when the cell state
// places a replica here that has not opened yet. A new topic reaches the
// brokers' cell state a few milliseconds before their replicas open, and
// Metadata names a partition's preferred replica as its leader until a
// replica here knows better: a produce that arrived in that moment was
// answered NOT_LEADER_OR_FOLLOWER, and franz-go then waited for its next
// metadata refresh (its 5 s metadata min age) before its first record.
func (c *conn) awaitOpened(ctx context.Context, t *wire.Topic, part int32) (Partition, bool) {
	if p, ok := c.s.cfg.Partitions.Get(t.ID, part); ok {
		return p, true
	}
	i := slices.IndexFunc(t.Partitions, func(wp wire.Partition) bool { return int32(wp.Partition) == part })
	if i < 0 || !slices.Contains(t.Partitions[i].Replicas, c.s.cfg.NodeID) {
		return nil, false
	}
	var p Partition
	var ok bool
	pollFor(ctx, electionWait, func() bool {
		p, ok = c.s.cfg.Partitions.Get(t.ID, part)
		return ok
	})
	return p, ok
}

// awaitLeaders waits, up to electionWait or ctx, until every partition of
// topics hosted here that has a majority knows its leader, so one
// Metadata answer names them instead of LEADER_NOT_AVAILABLE. A partition
// the cell state places here that has not opened yet is waited for too
// (awaitOpened): skipped, it opened while the answer was being built and
// was answered without a leader.
func (c *conn) awaitLeaders(ctx context.Context, topics []*wire.Topic) {
	ctx, cancel := context.WithTimeout(ctx, electionWait)
	defer cancel()
	for _, t := range topics {
		for _, wp := range t.Partitions {
			if p, ok := c.awaitOpened(ctx, t, int32(wp.Partition)); ok {
				awaitLeader(ctx, p)
			}
		}
	}
}
