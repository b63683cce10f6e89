package transport

import (
	"context"
	"fmt"

	"github.com/hashicorp/raft"
)

// Campaign makes this group's own Raft start an election at once, as a
// leader's TimeoutNow does in a leadership transfer: it hands the local
// Raft a TimeoutNow request, so the replica becomes a candidate without
// waiting out its heartbeat timeout, skips the pre-vote, and asks voters
// to grant even if they still believe in a leader.
//
// This is how a partition gets a leader in milliseconds with Raft
// timeouts long enough to keep a thousand idle groups cheap (see
// dataplane/DESIGN.md, "Leaders in milliseconds"). It cannot break Raft's
// safety: voters still grant one vote per term and only to a candidate
// whose log is at least as up to date as theirs; what it skips (pre-vote,
// leader stickiness) only protects a healthy leader from being disturbed.
// The caller must only call it on a follower that is a voter with a
// configuration (hashicorp/raft turns even a leader into a candidate on
// TimeoutNow), and only when no healthy leader is expected.
//
// A replica being seeded (SetSeeding) does not campaign: Campaign returns
// ErrSeeding.
func (g *GroupTransport) Campaign(ctx context.Context) error {
	if g.seeding.Load() {
		return fmt.Errorf("campaign in group %q: %w", g.id, ErrSeeding)
	}
	respCh := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{
		Command: &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{
			ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(g.node.cfg.ID), Addr: []byte(g.node.addr),
		}},
		RespChan: respCh,
	}
	select {
	case g.consume <- rpc:
	case <-g.done:
		return fmt.Errorf("campaign in group %q: %w", g.id, ErrClosed)
	case <-ctx.Done():
		return fmt.Errorf("campaign in group %q: %w", g.id, ctx.Err())
	}
	select {
	case r := <-respCh:
		if r.Error != nil {
			return fmt.Errorf("campaign in group %q: %w", g.id, r.Error)
		}
		return nil
	case <-g.done:
		return fmt.Errorf("campaign in group %q: %w", g.id, ErrClosed)
	case <-ctx.Done():
		return fmt.Errorf("campaign in group %q: %w", g.id, ctx.Err())
	}
}

// OnVoteRefused has fn called with the candidate's term each time this
// group's Raft answers a vote request (not a pre-vote) with a refusal:
// a candidate, most often one whose log is behind this replica's, that
// cannot count on this vote. The replica uses it to campaign at once
// where that refusal leaves the candidate short of a majority, instead of
// waiting out its stagger (partition.Replica.outranksCampaign). fn runs
// on the goroutine that sends the answer and must not block; nil removes
// it.
func (g *GroupTransport) OnVoteRefused(fn func(term uint64)) {
	if fn == nil {
		g.voteRefused.Store(nil)
		return
	}
	g.voteRefused.Store(&fn)
}

// noteVote passes a refused vote request to OnVoteRefused's fn.
func (g *GroupTransport) noteVote(f frame, resp raft.RPCResponse) {
	if f.kind != kindRequestVote {
		return
	}
	fn := g.voteRefused.Load()
	if fn == nil {
		return
	}
	vr, ok := resp.Response.(*raft.RequestVoteResponse)
	req, isReq := f.msg.(*raft.RequestVoteRequest)
	if ok && isReq && resp.Error == nil && !vr.Granted {
		(*fn)(req.Term)
	}
}
