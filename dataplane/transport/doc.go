// Package transport owns the broker-to-broker Raft transport of the data
// plane: one listener per broker, a few shared TCP connections ("lanes") per
// peer broker, and a per-group raft.Transport that tags every frame with its
// Raft group id so the hundreds of partition groups of a broker share those
// connections. It also owns the wire codec of the Raft RPCs, the fault
// injection used by cell tests (Faults) and the Raft timeouts suited to many
// groups per broker (RaftConfig).
//
// Only dataplane packages (the partition replication layer and the cell test
// harness) and tenantd's wiring may import it; the control plane never does.
package transport
