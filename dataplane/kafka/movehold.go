package kafka

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/catalog"
)

// moveHold bounds how long a v10+ produce refused by a partition fenced
// for its tenant's move waits for the switch that sends the tenant to its
// new cell. The switch follows the fence by the time the destination
// needs to promote (a few hundred milliseconds, over a second on a busy
// machine); answering at once instead makes a client retry after its
// backoff (franz-go's: 250 ms, then 500 ms, then 1 s), which adds up to a
// second to the move's pause.
const moveHold = 3 * time.Second

// moveHoldRecheck is how often a held produce checks whether its
// partitions are still fenced.
const moveHoldRecheck = 100 * time.Millisecond

// msgMoveHeld is logged (at debug) when a produce starts waiting for its
// tenant's switch.
const msgMoveHeld = "kafka produce held for its tenant's move"

// awaitTenantSwitch holds a produce answer whose partitions are fenced
// for a move until the cell state stops serving the session's key (the
// switch dropped its tenant), for up to moveHold or until none of the
// fenced partitions refuses produce any more. The session then asks
// the key's home as a redirect session does (with the secret a PLAIN
// session keeps; SCRAM sessions never see it) and, if the home is another
// cell, becomes a redirect session, and resp's refused partitions name
// their leaders there (KIP-951), so the client produces at the new home
// without a metadata refresh. It reports whether it did; otherwise resp
// is unchanged. The key watcher leaves a holding session open: the
// switch is what it waits for.
func (c *conn) awaitTenantSwitch(resp *kmsg.ProduceResponse, fenced []Partition) bool {
	p := c.principal.Load()
	if p == nil || c.dev || c.redirect != nil || c.s.homes == nil || c.secret == "" {
		return false
	}
	c.holding.Store(true)
	defer c.holding.Store(false)
	c.s.cfg.Logger.Debug(msgMoveHeld, "remote", c.remote, "key_id", p.KeyID, "tenant_id", p.TenantID)
	deadline := time.NewTimer(moveHold)
	defer deadline.Stop()
	recheck := time.NewTicker(moveHoldRecheck) // an unfence shows in the replica, not the state
	defer recheck.Stop()
	for {
		changed := c.s.cfg.State.Changed()
		if !c.s.cfg.State.View().Valid(p, c.s.cfg.Now()) {
			break
		}
		if !slices.ContainsFunc(fenced, fencedHere) {
			return false // unfenced (a cancelled move): the retry is taken here
		}
		select {
		case <-changed:
		case <-recheck.C:
		case <-deadline.C:
			return false
		case <-c.s.ctx.Done():
			return false
		}
	}
	if !c.followHome(p) {
		return false
	}
	home := c.redirect.home
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if rp := &resp.Topics[i].Partitions[j]; rp.ErrorCode == catalog.NotLeader.KafkaCode {
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1 // this cell's leader no longer
			}
		}
	}
	resp.Brokers = nil
	hintHomeLeaders(resp, home)
	return true
}
