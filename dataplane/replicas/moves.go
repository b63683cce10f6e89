package replicas

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// Replica moves (wire.Partition.Adding/Removing): the manager hands every
// open replica its partition's target (SetTarget; the leader converges the
// Raft configuration to it), opens the replicas of joining brokers with
// partition.Config.Join, and deletes the data of a replica this broker no
// longer holds only once its group's configuration no longer makes it a
// voter. See DESIGN.md, "Replica moves".

// targetServers is p's target (wire.Partition.Target) as Raft servers,
// or an error naming why the partition must not be touched: an empty
// target, or one naming a broker the cell state does not list with a
// Raft address.
func targetServers(v *cellview.View, p wire.Partition) ([]raft.Server, error) {
	target := p.Target()
	if len(target) == 0 {
		return nil, fmt.Errorf("partition %d has an empty target (replicas %v, removing %v)", p.Partition, p.Replicas, p.Removing)
	}
	out := make([]raft.Server, 0, len(target))
	for _, node := range target {
		b, ok := v.Broker(node)
		if !ok || b.RaftAddr == "" {
			return nil, fmt.Errorf("partition %d: target broker node %d is not in the cell state with a raft address", p.Partition, node)
		}
		out = append(out, raft.Server{Suffrage: raft.Voter, ID: ServerID(node), Address: raft.ServerAddress(b.RaftAddr)})
	}
	return out, nil
}

// setTarget hands r its partition's target, or logs once (per distinct
// reason) why the partition is left as it is.
func (m *Manager) setTarget(v *cellview.View, k key, p wire.Partition, r *partition.Replica) {
	t, err := targetServers(v, p)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		if m.badTarget[k] != err.Error() {
			m.badTarget[k] = err.Error()
			m.cfg.Logger.Warn("replica move not applied: the target is not usable; nothing moved", "topic_id", k.topic, "partition", k.part, "err", err)
		}
		return
	}
	delete(m.badTarget, k)
	r.SetTarget(t)
}

// joining reports whether this broker joins p's group rather than founds
// it: it is one of the brokers the move adds.
func (m *Manager) joining(p wire.Partition) bool {
	return slices.Contains(p.Adding, m.cfg.NodeID)
}

// mayDelete reports whether the data of r, a replica this broker no longer
// holds, may go: r shut down after its removal, or is still joining (it
// has stored no configuration entry making it a voter, so it has
// acknowledged no entry as one), or its latest configuration does not make
// this broker a voter (it is absent, or only a non-voter of a move that
// was cancelled). Another replica that has not read its configuration yet
// is kept.
func (m *Manager) mayDelete(r *partition.Replica) bool {
	if r.Removed() || r.JoinPending() {
		return true
	}
	voters, nonvoters := r.Membership()
	if voters == nil && nonvoters == nil {
		return false
	}
	return !slices.Contains(voters, ServerID(m.cfg.NodeID))
}

// present lists every partition the cell state places, on any broker:
// a replica of one of them that is no longer assigned here has moved away
// (and leaves once it is no voter); one of any other partition (its topic
// was deleted) goes at once.
func (m *Manager) present(v *cellview.View) map[key]bool {
	out := map[key]bool{}
	for _, t := range v.CellState.Topics {
		for _, p := range t.Partitions {
			out[key{t.ID, int32(p.Partition)}] = true
		}
	}
	for _, p := range m.offsetsPlaced(v) {
		out[key{groups.OffsetsTopicID, int32(p.Partition)}] = true
	}
	for _, p := range UsagePlacement(v, m.cfg.OffsetsReplicas) {
		out[key{UsageTopicID, int32(p.Partition)}] = true
	}
	return out
}

// checkEvery is the manager's check interval: Config.CheckInterval, one
// second when unset.
func (m *Manager) checkEvery() time.Duration {
	if m.cfg.CheckInterval > 0 {
		return m.cfg.CheckInterval
	}
	return time.Second
}

// leaveProbeAfter is how long a leaving replica that still names itself a
// voter waits for its removal to reach it before leaveLoop asks the
// target's members whether they still count it (partition.LeftGroup).
const leaveProbeAfter = 3 * time.Second

// leaveLoop deletes the replicas Apply kept because they were still
// voters, once they are not (by their own configuration, or, failing
// that, by a majority of the target's members refusing them), every check
// interval until Close.
func (m *Manager) leaveLoop() {
	defer m.wg.Done()
	every := m.checkEvery()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		m.applyMu.Lock()
		m.mu.RLock()
		var ready []key
		probe := map[key]*partition.Replica{}
		for k, since := range m.leaving {
			r, ok := m.replicas[k]
			switch {
			case !ok || m.mayDelete(r):
				ready = append(ready, k)
			case time.Since(since) >= leaveProbeAfter:
				probe[k] = r
			}
		}
		m.mu.RUnlock()
		for k, r := range probe {
			ctx, cancel := context.WithTimeout(context.Background(), every)
			if r.LeftGroup(ctx) {
				m.cfg.Logger.Info("replica's group no longer lists it though its removal never reached it; deleting it", "topic_id", k.topic, "partition", k.part)
				ready = append(ready, k)
			}
			cancel()
		}
		for _, k := range ready {
			if err := m.remove(k); err != nil {
				m.cfg.Logger.Warn("delete replica that left its group", "topic_id", k.topic, "partition", k.part, "err", err)
			}
		}
		m.applyMu.Unlock()
	}
}

// nodes maps server ids to node ids for a report, skipping ids that are
// not node ids.
func nodes(r *partition.Replica, ids []raft.ServerID) []int {
	out := make([]int, 0, len(ids))
	for _, id := range ids {
		if n, ok := r.NodeOf(id); ok {
			out = append(out, n)
		} else if n, err := strconv.Atoi(string(id)); err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// moveStatus fills the membership fields of a replica's report.
func moveStatus(r *partition.Replica, st *wire.PartitionStatus) {
	voters, nonvoters := r.Membership()
	if voters == nil && nonvoters == nil {
		return
	}
	st.Voters, st.Nonvoters = nodes(r, voters), nodes(r, nonvoters)
	for _, j := range r.Joining() {
		if n, ok := r.NodeOf(j.ID); ok {
			st.Joining = append(st.Joining, wire.JoinStatus{Node: n, BytesBehind: j.BytesBehind, EntriesBehind: j.EntriesBehind})
		}
	}
}
