package kafka

import (
	"context"
	"slices"
	"time"
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
	ctx, cancel := context.WithTimeout(ctx, leaderWait)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if c.leadersKnown(topics) {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
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
