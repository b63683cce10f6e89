package controlplane

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/contract/wire"
)

// What a tenant move adds to the two cells' states, derived from its row
// alone at every load (so a restarted control plane publishes exactly
// what the last one did):
//
//	source, mirroring..promoting: the tenant with Move{source}, half its
//	  rate quotas; a MirrorGrant of its topics to the destination (with
//	  the destination's peer CA); its topics Fenced from fencing on.
//	destination, mirroring..promoting: the tenant (half its rate
//	  quotas), keys and ACLs; its topics with the destination placement
//	  and Mirror (the source's brokers and peer CA, each partition's
//	  share of the move's copy rate, Promote from promoting on);
//	  Move{destination, HoldGroups}.
//	destination, switching and offsets: the tenant is homed here now;
//	  Move{destination, HoldGroups} stays, with GroupOffsets in offsets,
//	  and the quotas stay halved until done.
//	source from switching on: nothing (the tenant is no longer homed there).

// cellTenantMove is an unfinished tenant move from or to a cell.
type cellTenantMove struct {
	id                   int64
	tenant, source, dest string
	state                string
	bytesPerSec          int64 // the move's copy rate, over all its partitions
	offsets              []wire.CommittedOffset
	// placement is the destination replicas by topic id and partition.
	placement map[string]map[int][]int
}

type cellTenantMoves []cellTenantMove

// loadCellTenantMoves reads the unfinished tenant moves from or to cell,
// with their destination placement.
func loadCellTenantMoves(ctx context.Context, tx pgx.Tx, cell string) (cellTenantMoves, error) {
	rows, err := tx.Query(ctx, `SELECT m.id, m.tenant_id, m.source_cell_id, m.dest_cell_id, m.state, m.bytes_per_sec, m.group_offsets
		FROM tenant_moves m WHERE (m.source_cell_id = $1 OR m.dest_cell_id = $1) AND `+tmUnfinished+` ORDER BY m.id`, cell)
	if err != nil {
		return nil, err
	}
	var ms cellTenantMoves
	var m cellTenantMove
	var offsets []byte
	if _, err := pgx.ForEachRow(rows, []any{&m.id, &m.tenant, &m.source, &m.dest, &m.state, &m.bytesPerSec, &offsets}, func() error {
		var err error
		m.offsets, err = committedOffsets(offsets)
		m.placement = map[string]map[int][]int{}
		ms = append(ms, m)
		return err
	}); err != nil || len(ms) == 0 {
		return ms, err
	}
	idx := map[int64]int{}
	ids := make([]int64, len(ms))
	for i, m := range ms {
		idx[m.id], ids[i] = i, m.id
	}
	rows, err = tx.Query(ctx, `SELECT move_id, topic_id, partition, replicas FROM tenant_move_partitions WHERE move_id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	var id int64
	var topic string
	var part int
	var replicas []int
	_, err = pgx.ForEachRow(rows, []any{&id, &topic, &part, &replicas}, func() error {
		pl := ms[idx[id]].placement
		if pl[topic] == nil {
			pl[topic] = map[int][]int{}
		}
		pl[topic][part] = replicas
		return nil
	})
	return ms, err
}

// partitions is how many partitions the move places on the destination.
func (m cellTenantMove) partitions() int {
	n := 0
	for _, ps := range m.placement {
		n += len(ps)
	}
	return n
}

// incoming is the tenants moving to cell that are not homed there yet:
// the cell state lists them beside its own.
func (ms cellTenantMoves) incoming(cell string) []string {
	out := []string{}
	for _, m := range ms {
		if m.dest == cell && beforeSwitch(m.state) {
			out = append(out, m.tenant)
		}
	}
	return out
}

// applyTenantMoves adds the moves' fields to st (see the table above).
func applyTenantMoves(ctx context.Context, tx pgx.Tx, st *wire.CellState, ms cellTenantMoves) error {
	for _, m := range ms {
		var err error
		switch {
		case m.source == st.Cell && beforeSwitch(m.state):
			err = applySource(ctx, tx, st, m)
		case m.dest == st.Cell:
			err = applyDestination(ctx, tx, st, m)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func tenantOf(st *wire.CellState, id string) *wire.Tenant {
	for i := range st.Tenants {
		if st.Tenants[i].ID == id {
			return &st.Tenants[i]
		}
	}
	return nil
}

func applySource(ctx context.Context, tx pgx.Tx, st *wire.CellState, m cellTenantMove) error {
	if t := tenantOf(st, m.tenant); t != nil {
		t.Move = &wire.TenantMove{Role: wire.MoveSource, Peer: m.dest}
		halfRates(&t.Quotas)
	}
	var topics []string
	for i := range st.Topics {
		x := &st.Topics[i]
		if x.TenantID != m.tenant {
			continue
		}
		topics = append(topics, x.ID)
		x.Fenced = m.state == tmFencing || m.state == tmPromoting
	}
	if len(topics) == 0 {
		return nil // a grant names topics; a tenant without any needs none
	}
	var ca string
	if err := tx.QueryRow(ctx, `SELECT peer_ca FROM cells WHERE id = $1`, m.dest).Scan(&ca); err != nil {
		return err
	}
	st.MirrorGrants = append(st.MirrorGrants, wire.MirrorGrant{Cell: m.dest, TenantID: m.tenant, Topics: topics, PeerCA: ca})
	return nil
}

func applyDestination(ctx context.Context, tx pgx.Tx, st *wire.CellState, m cellTenantMove) error {
	t := tenantOf(st, m.tenant)
	if t == nil {
		return nil
	}
	t.Move = &wire.TenantMove{Role: wire.MoveDestination, Peer: m.source, HoldGroups: true}
	if m.state == tmOffsets {
		t.Move.GroupOffsets = m.offsets
	}
	halfRates(&t.Quotas)
	if !beforeSwitch(m.state) {
		return nil // the topics are the cell's own now, placed as partitions says
	}
	mirror := wire.TopicMirror{SourceCell: m.source, Promote: m.state == tmPromoting, BytesPerSec: partitionRate(m.bytesPerSec, m.partitions())}
	if err := tx.QueryRow(ctx, `SELECT peer_ca FROM cells WHERE id = $1`, m.source).Scan(&mirror.SourcePeerCA); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, `SELECT node_id, raft_addr FROM brokers WHERE cell_id = $1 AND status <> 'offline' AND raft_addr <> ''
		ORDER BY node_id`, m.source)
	if err != nil {
		return err
	}
	if mirror.SourceBrokers, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (wire.MirrorBroker, error) {
		var b wire.MirrorBroker
		return b, r.Scan(&b.NodeID, &b.RaftAddr)
	}); err != nil {
		return err
	}
	for i := range st.Topics {
		x := &st.Topics[i]
		if x.TenantID != m.tenant {
			continue
		}
		mr := mirror
		x.Mirror = &mr
		for j := range x.Partitions {
			p := &x.Partitions[j]
			replicas, ok := m.placement[x.ID][p.Partition]
			if !ok {
				// A partition added after the move started cannot
				// happen (lockTenant refuses topic changes meanwhile).
				return fmt.Errorf("tenant move %d has no destination placement of partition %d of topic %s", m.id, p.Partition, x.ID)
			}
			p.Replicas, p.Adding, p.Removing = replicas, nil, nil
		}
	}
	return nil
}
