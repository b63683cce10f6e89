// Package raftlog stores one partition's hashicorp/raft log inside its Kafka
// partition log, so produced bytes reach the disk once. A Raft entry of type
// LogCommand is exactly one Kafka record batch, appended to the partition's
// dataplane/log with a base offset assigned from the log prefix and the
// leader epoch set to the Raft term. Raft's own entries (no-op, barrier,
// configuration) and every entry's Raft index and term live in a small
// side file, so they never take a Kafka offset.
//
// It also provides the per-broker Committer that makes the appends of many
// partitions durable in one round, and a file-backed StableStore for Raft's
// term and vote. It is imported by dataplane/partition and wired by tenantd;
// it imports dataplane/log, dataplane/journal and hashicorp/raft only.
package raftlog
