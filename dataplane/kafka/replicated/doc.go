// Package replicated runs the Kafka listener over replicated partitions: a
// real control plane (cptest), a three-broker celltest cell, and one
// kafka.Server per broker whose Partitions are that broker's Raft
// replicas. It holds tests and benchmarks only.
package replicated
