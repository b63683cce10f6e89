package groups

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/wire"
)

// A tenant moving to this cell (wire.TenantMove with role destination)
// has its groups held and its source's committed offsets imported:
//
//   - While HoldGroups is set, every group call of the tenant answers
//     COORDINATOR_LOAD_IN_PROGRESS: its consumers wait and retry instead of
//     joining empty groups here and starting from their reset policy while
//     the source still serves them (no rebalance storm, no rewind).
//   - When GroupOffsets is listed, the leader of each offsets partition
//     commits the entries of the groups living there, through Raft like
//     any commit, with an import marker (kindImport: the entries' digest
//     and the time) as the last record. A partition whose marker has the
//     list's digest is done: a repeated state, or a new leader replaying
//     the partition, writes nothing again. An import cut short by a leader
//     change is redone by the next leader, skipping the entries it finds
//     committed with the same value. A list that differs from the one a
//     marker was written for is imported again, except into the groups
//     that committed on their own since that import.
//   - OffsetsImported lists, per tenant, the partitions this broker leads
//     whose import is durable, for the broker's report; the control plane
//     clears HoldGroups once every partition is covered.

// moveSet is the tenants moving to this cell, as one cell state lists them.
type moveSet map[string]*tenantMove

// tenantMove is one tenant's move marker as the coordinator uses it.
type tenantMove struct {
	hold bool
	// imports has an entry per offsets partition when the state lists
	// the tenant's offsets to import; nil otherwise.
	imports []partImport
}

// partImport is the part of an import that lives in one offsets
// partition, with its digest.
type partImport struct {
	offsets []importOffset
	digest  string
}

type importOffset struct {
	group    string
	tp       TopicPartition
	offset   int64
	metadata string
}

// errHeld is what a held tenant's group calls answer.
func errHeld() error {
	return catalog.CoordinatorLoading.New("the tenant is moving to this cell: its consumer groups are held until their committed offsets are imported; retry shortly")
}

// SetMoves takes the tenants of a new cell state: the move markers of
// those moving to this cell decide which tenants' groups are held and
// which offsets are imported (by the coordinator's next check, within
// CheckInterval). tenantd calls it for every state it applies.
func (c *Coordinator) SetMoves(tenants []wire.Tenant) {
	c.setGone(tenants)
	set := moveSet{}
	for _, t := range tenants {
		if t.Move == nil || t.Move.Role != wire.MoveDestination {
			continue
		}
		tm := &tenantMove{hold: t.Move.HoldGroups}
		if t.Move.GroupOffsets != nil {
			tm.imports = c.splitImport(t.ID, t.Move.GroupOffsets)
		}
		set[t.ID] = tm
	}
	c.moves.Store(&set)
}

// A tenant moving away from this cell (role source) leaves its state at
// the switch, and the control plane takes its groups' final offsets from
// each broker's first report of that state or a later one (the report
// reads the state version before the commits). So a commit that becomes
// durable after this coordinator saw that state must not be
// acknowledged: movedAway refuses it, checked at the start of a commit
// and again under the shard's lock after its offsets are set, which
// orders every acknowledged commit before the report's read of the
// offsets. The client gets NOT_COORDINATOR, looks for the group's
// coordinator again and commits at the tenant's new home.

// setGone notes, from a new state's tenants, those marked as moving away
// and those that have gone (marked before, absent now); a tenant listed
// again (moved back) is no longer gone.
func (c *Coordinator) setGone(tenants []wire.Tenant) {
	c.leavingMu.Lock()
	defer c.leavingMu.Unlock()
	present := make(map[string]bool, len(tenants))
	leaving := map[string]bool{}
	for _, t := range tenants {
		present[t.ID] = true
		if t.Move != nil && t.Move.Role == wire.MoveSource {
			leaving[t.ID] = true
		}
	}
	gone := map[string]bool{}
	if old := c.gone.Load(); old != nil {
		for id := range *old {
			if !present[id] {
				gone[id] = true
			}
		}
	}
	for id := range c.leaving {
		if !present[id] {
			gone[id] = true
		}
	}
	c.leaving = leaving
	c.gone.Store(&gone)
}

// movedAway returns NOT_COORDINATOR for a tenant that moved away from
// this cell, nil otherwise.
func (c *Coordinator) movedAway(tenantID string) error {
	if gone := c.gone.Load(); gone != nil && (*gone)[tenantID] {
		return catalog.NotCoordinator.New("the tenant has moved to another cell: its groups are coordinated there; look for the coordinator again")
	}
	return nil
}

// held returns errHeld for a tenant whose groups are held, nil otherwise.
func (c *Coordinator) held(tenantID string) error {
	if set := c.moves.Load(); set != nil {
		if tm := (*set)[tenantID]; tm != nil && tm.hold {
			return errHeld()
		}
	}
	return nil
}

// splitImport sorts a tenant's listed offsets into their offsets
// partitions, the last entry of a group's partition winning, and digests
// each partition's share. An entry that no commit could make is dropped
// with an error in the log rather than failing the whole import.
func (c *Coordinator) splitImport(tenantID string, list []wire.CommittedOffset) []partImport {
	type ek struct {
		group string
		tp    TopicPartition
	}
	last := map[ek]importOffset{}
	for _, o := range list {
		if err := c.checkImported(o); err != nil {
			c.cfg.Logger.Error("tenant move: an imported offset is dropped", "tenant_id", tenantID, "topic_id", o.TopicID,
				"partition", o.Partition, "err", err)
			continue
		}
		tp := TopicPartition{TopicID: o.TopicID, Partition: int32(o.Partition)}
		last[ek{o.Group, tp}] = importOffset{group: o.Group, tp: tp, offset: o.Offset, metadata: o.Metadata}
	}
	parts := make([]partImport, c.cfg.Partitions)
	for _, o := range last {
		p := Partition(tenantID, o.group, c.cfg.Partitions)
		parts[p].offsets = append(parts[p].offsets, o)
	}
	for i := range parts {
		offs := parts[i].offsets
		sort.Slice(offs, func(a, b int) bool {
			x, y := offs[a], offs[b]
			if x.group != y.group {
				return x.group < y.group
			}
			if x.tp.TopicID != y.tp.TopicID {
				return x.tp.TopicID < y.tp.TopicID
			}
			return x.tp.Partition < y.tp.Partition
		})
		if len(offs) > 0 {
			h := sha256.New()
			for _, o := range offs {
				fmt.Fprintf(h, "%q %q %d %d %q\n", o.group, o.tp.TopicID, o.tp.Partition, o.offset, o.metadata)
			}
			parts[i].digest = hex.EncodeToString(h.Sum(nil)[:16])
		}
	}
	return parts
}

// checkImported checks an imported offset as CommitOffsets checks a
// commit.
func (c *Coordinator) checkImported(o wire.CommittedOffset) error {
	if err := checkGroupID(o.Group); err != nil {
		return err
	}
	if o.TopicID == "" || o.Partition < 0 || o.Partition > math.MaxInt32 {
		return catalog.InvalidRequest.New("an imported offset needs a topic id and a partition ≥ 0")
	}
	if len(o.Metadata) > c.cfg.MaxMetadataBytes {
		return catalog.OffsetMetadataTooLarge.Newf("offset commit metadata is limited to %d bytes", c.cfg.MaxMetadataBytes)
	}
	return nil
}

// importRetry is how long a shard waits after a failed import before the
// next try (a variable for tests).
var importRetry = time.Second

// importChunkBytes bounds one batch of an import, well below any
// partition's batch limit; the marker is in the last one (a variable for
// tests).
var importChunkBytes = 256 << 10

// startImports starts the imports sh's partition still needs, one at a
// time per tenant. sh.mu is held and sh is loaded.
func (c *Coordinator) startImports(sh *shard, now time.Time) {
	set := c.moves.Load()
	if set == nil || now.Before(sh.importAfter) {
		return
	}
	for tenant, tm := range *set {
		if tm.imports == nil || sh.importing[tenant] {
			continue
		}
		pi := tm.imports[sh.id]
		if len(pi.offsets) == 0 || sh.imports[tenant].digest == pi.digest {
			continue
		}
		sh.importing[tenant] = true
		c.wg.Add(1)
		go c.importOffsets(sh, sh.session, tenant, pi)
	}
}

// importOffsets commits a tenant's imported offsets of sh's partition and
// its marker, then applies them, if sh is still loaded in session sess.
func (c *Coordinator) importOffsets(sh *shard, sess uint64, tenant string, pi partImport) {
	defer c.wg.Done()
	done := false
	defer func() {
		sh.mu.Lock()
		delete(sh.importing, tenant)
		if !done {
			sh.importAfter = c.cfg.Now().Add(importRetry)
		}
		sh.mu.Unlock()
	}()
	sh.mu.Lock()
	l, err := c.ready(sh)
	if err != nil || sh.session != sess {
		sh.mu.Unlock()
		return
	}
	prev := sh.imports[tenant]
	now := c.cfg.Now().Truncate(time.Millisecond)
	var recs []kv
	var sets []importOffset
	for _, o := range pi.offsets {
		if g := sh.groups[gkey{tenant, o.group}]; g != nil {
			if !prev.at.IsZero() && g.lastCommit.After(prev.at) {
				continue // the group committed on its own since the last import
			}
			if cur, had := g.offsets[o.tp]; had && cur.Offset == o.offset && cur.Metadata == o.metadata {
				continue // an earlier, interrupted try committed it
			}
		}
		sets = append(sets, o)
		recs = append(recs, kv{key: encodeKey(recordKey{kind: kindOffset, tenant: tenant, group: o.group, tp: o.tp}),
			value: encodeOffset(Committed{Offset: o.offset, LeaderEpoch: -1, Metadata: o.metadata, CommittedAt: now})})
	}
	mark := importMark{digest: pi.digest, at: now}
	recs = append(recs, kv{key: encodeKey(recordKey{kind: kindImport, tenant: tenant}), value: encodeImport(mark)})
	sh.mu.Unlock()

	ctx, cancel := c.backgroundContext()
	defer cancel()
	for len(recs) > 0 {
		n, size := 0, 0
		for n < len(recs) && (n == 0 || size+len(recs[n].key)+len(recs[n].value) <= importChunkBytes) {
			size += len(recs[n].key) + len(recs[n].value)
			n++
		}
		if err := c.write(ctx, l, recs[:n]); err != nil {
			c.cfg.Logger.Warn("tenant move: import offsets; will retry", "tenant_id", tenant, "offsets_partition", sh.id, "err", err)
			return
		}
		recs = recs[n:]
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.session != sess {
		return // durable: the next leader's replay has it
	}
	for _, o := range sets {
		k := gkey{tenant, o.group}
		g := sh.groups[k]
		if g == nil {
			g = newGroup(tenant, o.group, c.cfg.InitialRebalanceDelay)
			sh.groups[k] = g
		}
		g.setOffset(o.tp, Committed{Offset: o.offset, LeaderEpoch: -1, Metadata: o.metadata, CommittedAt: now})
	}
	sh.imports[tenant] = mark
	done = true
	c.cfg.Changed()
	c.cfg.Logger.Info("tenant move: offsets imported", "tenant_id", tenant, "offsets_partition", sh.id, "offsets", len(sets))
}

// OffsetsImported lists, for every tenant moving to this cell whose
// offsets the state lists, the offsets partitions this broker leads whose
// import is durable: its marker is committed, or the partition has none
// of the tenant's groups. The broker's report carries it
// (wire.Report.OffsetsImported).
func (c *Coordinator) OffsetsImported() []wire.OffsetsImport {
	set := c.moves.Load()
	if set == nil {
		return nil
	}
	var out []wire.OffsetsImport
	for tenant, tm := range *set {
		if tm.imports == nil {
			continue
		}
		imp := wire.OffsetsImport{TenantID: tenant}
		for _, sh := range c.shards {
			pi := tm.imports[sh.id]
			sh.mu.Lock()
			if _, err := c.ready(sh); err == nil && (len(pi.offsets) == 0 || sh.imports[tenant].digest == pi.digest) {
				imp.Partitions = append(imp.Partitions, int(sh.id))
			}
			sh.mu.Unlock()
		}
		if len(imp.Partitions) > 0 {
			out = append(out, imp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TenantID < out[j].TenantID })
	return out
}
