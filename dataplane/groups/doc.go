// Package groups is a broker's consumer-group coordinator: Kafka's classic
// group protocol (join, sync, heartbeat, leave, with client-side assignors
// and static membership) and committed offsets, for every front door (the
// Kafka listener, the HTTP data API) and the lag reporter.
//
// Group state and committed offsets live in the cell's internal offsets
// partitions: Raft-replicated partitions (topic id OffsetsTopicID) whose
// records this package encodes (records.go). A tenant's group belongs to
// one offsets partition (a hash of tenant id and group name) and is
// coordinated by that partition's leader, which rebuilds the state of all
// its groups from the partition's log when it becomes leader and drops it
// when it stops leading. Names are tenant scoped: every call takes the
// caller's tenant id, and another tenant's group is indistinguishable from
// one that does not exist. Offsets are keyed by topic id, never by name.
//
// tenantd wires it; the front doors import it. It imports the data plane's
// log package, the catalogue and the wire contract (a moving tenant's
// marker: move.go) only.
package groups
