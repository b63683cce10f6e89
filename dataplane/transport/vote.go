package transport

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"
)

// voteRetryEvery is the wait between two sends of a vote request.
const voteRetryEvery = 200 * time.Millisecond

// retryVote sends a vote or pre-vote request with call and, while it fails
// without an answer from the receiving Raft and its peer answers probes,
// sends it again, for up to Config.VoteRetry.
//
// hashicorp/raft asks each voter once per election: a request that fails
// (the voter's broker restarted a moment ago and its group is not open
// yet, more than OpenWait; the connection to its previous process was
// cut) counts as a refusal, and a candidate short of a majority then
// waits out its whole election timeout (10–20 s here). Sending the
// request again is safe: a voter grants at most one candidate per term
// and answers the same candidate again alike. A peer that answers no
// probe (dead) is not asked again, nor is a receiver that answered
// (refused, seeding), nor anyone once the group's Raft is shutting down
// (Closing), which waits for its vote requests.
func (g *GroupTransport) retryVote(id raft.ServerID, call func() error) error {
	deadline := time.Now().Add(g.node.cfg.VoteRetry)
	for {
		err := call()
		if err == nil || !retriable(err) || !g.node.PeerAnswering(id) || time.Now().Add(voteRetryEvery).After(deadline) {
			return err
		}
		g.node.stats.voteRetries.Add(1)
		t := time.NewTimer(voteRetryEvery)
		select {
		case <-t.C:
		case <-g.closing:
			t.Stop()
			return err
		}
	}
}

// retriable reports whether a failed RPC got no answer from the receiving
// Raft, so that sending it again may succeed.
func retriable(err error) bool {
	var remote *RemoteError
	switch {
	case errors.Is(err, ErrClosed), errors.Is(err, ErrSeeding), errors.Is(err, ErrRefused), errors.As(err, &remote):
		return false
	}
	return true
}
