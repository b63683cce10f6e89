// Package lag measures how far consumer groups are behind: per committed
// offset of a group (tenant, group, topic, partition) the records, bytes and
// seconds between it and the partition's high watermark, and how near
// retention is to deleting records the group has not read.
//
// The broker that coordinates a group measures its lag: the committed
// offsets are its own, and it holds a replica of every partition of its cell
// (each partition is replicated on the cell's three brokers), so it needs
// nothing from other brokers. A Tracker exports the figures as Prometheus
// metrics and hands them to the broker's report to the control plane.
//
// tenantd wires it; it imports dataplane/log, dataplane/partition and the
// control plane's wire package, and nothing imports it but tenantd.
package lag
