package transport

import (
	"time"

	"github.com/hashicorp/raft"
)

// RaftConfig returns a raft.Config for one partition group on broker id,
// with timeouts raised for hundreds of groups per broker sharing this
// transport. An idle group's cost is its heartbeats (each follower every
// HeartbeatTimeout/10 to /5) and its empty AppendEntries (each follower every
// CommitTimeout to 2×CommitTimeout), about 65–70 µs of CPU each. Dead
// brokers are detected per broker, not per group (liveness.go: a follower
// whose leader's broker stops answering probes for DownAfter campaigns at
// once), so these timeouts are only the fallback and can be long:
//
//   - HeartbeatTimeout 10s: 0.5–1 heartbeat/s per follower. A follower
//     whose leader's broker is alive but whose leader replica is gone
//     (closed alone) campaigns after 10–20 s.
//   - ElectionTimeout 10s (≥ HeartbeatTimeout): a candidate that lost its
//     election (a split vote, a log behind) retries after 10–20 s; the
//     staggered campaigns after a broker failure avoid split votes.
//   - CommitTimeout 5s (default 50ms, where it alone is 27 RPC/s per idle
//     group): it only delays when followers learn the commit index of an
//     idle log; new entries replicate immediately, and reads are served by
//     leaders.
//   - LeaderLeaseTimeout 5s (≤ HeartbeatTimeout, which hashicorp/raft
//     enforces, and above the 2 s longest heartbeat interval): a
//     partitioned leader steps down after 5 s without a quorum, while its
//     followers, finding its broker down, have elected another after
//     about 1 s.
//
// Measured with 1,000 idle groups on a 3-broker cell (go test -run '^$'
// -bench 'IdleCell/groups=1000$' -benchtime 5x ./dataplane/transport/),
// same load (5–7): 29.4 % of a core at 5 s/2 s timeouts, 24.0 % at these,
// with half the RPCs (1,614/s instead of 3,068/s); docs/benchmarks.md.
// With QuiesceHeartbeats (quiesce.go), which replicas turn on, most of the
// heartbeats and empty appends these timeouts imply are answered without
// a frame; the timeouts themselves are unchanged.
//
// NoLegacyTelemetry is set: hashicorp/raft then skips the duplicate
// per-peer timing it otherwise reports through go-metrics on every
// heartbeat and AppendEntries to each follower (keys ending in the peer's
// id, so unbounded), one go-metrics call fewer per RPC; the unsuffixed
// series with a peer_id label stay, and tenantd's sink keeps neither.
//
// BatchApplyCh is set: the apply channel is buffered (MaxAppendEntries),
// so entries one goroutine proposes in a row (a mirror's pull of many
// batches) reach the leader loop together and are stored in one round,
// where the unbuffered channel handed it one entry at a time, one store
// round (two syncs for a mirror entry) each. In process, one partition
// (go test -run '^$' -bench Mirror -benchtime 3x ./dataplane/mirror/): a
// mirror of 4 KiB batches copied 38 MB/s instead of 5, of 64 KiB batches
// 114 instead of 67; a 20 MB/s tenant's move completed where it had never
// left mirroring (docs/benchmarks.md).
//
// The caller sets Logger (hashicorp/raft logs at debug level to stderr
// otherwise) and the store-related fields.
func RaftConfig(id raft.ServerID) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = id
	c.HeartbeatTimeout = 10 * time.Second
	c.ElectionTimeout = 10 * time.Second
	c.CommitTimeout = 5 * time.Second
	c.LeaderLeaseTimeout = 5 * time.Second
	c.NoLegacyTelemetry = true
	c.BatchApplyCh = true
	return c
}
