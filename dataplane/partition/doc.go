// Package partition runs one replica of a replicated partition: a
// hashicorp/raft group member whose log store is the partition's Kafka log
// (dataplane/raftlog) and whose state machine tracks the high watermark and
// leader epochs. It gives the Kafka and HTTP front doors Produce and Fetch
// with the delivery contract of design.md §3: an acknowledged batch is on a
// durable majority, reads stop at the high watermark, and the high
// watermark never goes backwards. It is imported by the front doors and
// wired by tenantd.
package partition
