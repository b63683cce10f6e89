// Package lag measures how far consumer groups are behind: per partition a
// group consumes (tenant, group, topic, partition) the records, bytes and
// seconds between its committed offset and the partition's high watermark,
// and how near retention is to deleting records the group has not read. A
// group consumes every partition of the topics it committed on or its
// members subscribe to (ConsumerTopics reads Kafka's consumer protocol); a
// partition without a commit lags by its whole retained log.
//
// The broker that coordinates a group measures its lag: the committed
// offsets are its own, and it holds a replica of every partition of its cell
// (each partition is replicated on the cell's three brokers), so it needs
// nothing from other brokers. A Tracker exports the figures as Prometheus
// metrics and hands them to the broker's report to the control plane.
//
// tenantd wires it; it imports dataplane/log, dataplane/partition and the
// control plane's wire package (and franz-go's kmsg for the consumer
// protocol), and nothing imports it but tenantd.
package lag
