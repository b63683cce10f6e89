package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/contract/wire"
)

// moveSoonEvery is how often the broker compares its replicas' Raft
// configurations with the last ones it saw.
const moveSoonEvery = 200 * time.Millisecond

// moveSoonFast is that interval while the broker's cell state names a
// tenant move: the moving tenant's producers wait from the fence to the
// switch, and the control plane takes each step between them on a
// report, so each step's report should leave within tens of
// milliseconds.
const moveSoonFast = 25 * time.Millisecond

// watchEvery is watchChanges' comparison interval: moveSoonFast while fast
// (when set) reports true, else moveSoonEvery.
func watchEvery(fast func() bool) time.Duration {
	if fast != nil && fast() {
		return moveSoonFast
	}
	return moveSoonEvery
}

// tenantMoving reports whether tenants (a cell state's) name a move.
func tenantMoving(tenants []wire.Tenant) bool {
	for _, t := range tenants {
		if t.Move != nil {
			return true
		}
	}
	return false
}

// watchMoves asks the reporter for a report soon (on soon, which never
// blocks) whenever a replica's leader or Raft configuration changes: a
// step of a replica move (a joiner added or promoted, leadership handed
// over, an old replica removed), an election, or a step of a tenant move
// (a fence, a mirror's start or promotion). The control plane then
// sees a move's progress, and its end, within the reporter's MinGap
// rather than at its interval; a drain no longer waits a report interval
// per step. status is the broker's replicas' report (cheap: no I/O).
// fast, when set, says when to compare every moveSoonFast.
func watchMoves(ctx context.Context, status func() []wire.PartitionStatus, fast func() bool, soon chan<- struct{}) error {
	return watchChanges(ctx, func() string { return configurations(status()) }, fast, soon)
}

// watchChanges asks for a report soon whenever text's answer changes,
// compared every moveSoonEvery, or every moveSoonFast while fast (when
// set) reports true.
func watchChanges(ctx context.Context, text func() string, fast func() bool, soon chan<- struct{}) error {
	t := time.NewTimer(moveSoonEvery)
	defer t.Stop()
	last := text()
	for {
		t.Reset(watchEvery(fast))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		now := text()
		if now != last {
			select {
			case soon <- struct{}{}:
			default:
			}
		}
		last = now
	}
}

// tenantMoveSteps is a canonical text of the tenant moves this broker
// takes part in: each moving tenant of the applied state with its role,
// whether its groups are held and whether an import was asked, and the
// offsets partitions whose import is acknowledged. It changes when a
// source's state drops a tenant at the switch (the control plane waits
// for a report of that state), when an import is asked, and when one is
// durable, so each of those steps reaches the control plane within the
// reporter's MinGap rather than its interval.
func tenantMoveSteps(tenants []wire.Tenant, imported []wire.OffsetsImport) string {
	var lines []string
	for _, t := range tenants {
		if m := t.Move; m != nil {
			lines = append(lines, fmt.Sprintf("%s %s %s hold=%v import=%v", t.ID, m.Role, m.Peer, m.HoldGroups, m.GroupOffsets != nil))
		}
	}
	for _, i := range imported {
		lines = append(lines, fmt.Sprintf("imported %s %v", i.TenantID, slices.Sorted(slices.Values(i.Partitions))))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// configurations is a canonical text of every replica's leader, voters,
// non-voters and tenant-move step (not how far joiners or a mirror are
// behind, which changes all the time), skipping replicas without a
// configuration yet.
func configurations(ps []wire.PartitionStatus) string {
	lines := make([]string, 0, len(ps))
	for _, p := range ps {
		if len(p.Voters) == 0 && len(p.Nonvoters) == 0 {
			continue // no configuration yet: its first one asks
		}
		step := ""
		if m := p.Mirror; m != nil {
			step = fmt.Sprintf(" fenced=%v@%d mirroring=%v promoted=%v", m.Fenced, m.FencedEnd, m.Mirroring, m.Promoted)
		}
		lines = append(lines, fmt.Sprintf("%s/%d %d %d %v %v%s", p.TopicID, p.Partition, p.LeaderNode, p.LeaderEpoch,
			slices.Sorted(slices.Values(p.Voters)), slices.Sorted(slices.Values(p.Nonvoters)), step))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
