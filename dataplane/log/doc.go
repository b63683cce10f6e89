// Package log owns one partition's log on disk: a directory of segment files
// that hold Kafka record batches (magic v2) byte for byte as they are served,
// each with a sparse offset index and a time index, plus the log start offset
// checkpoint. It assigns Kafka offsets, stamps leader epochs, makes appends
// durable (alone or in a group commit across partitions), recovers torn tails
// after a crash, and applies retention. With a broker journal
// (dataplane/journal) a group commit writes small appends there instead of
// syncing each segment (journal.go).
//
// It is imported by the Raft log store and the Kafka produce and fetch paths
// in dataplane, and wired up by tenantd; of Sluice it imports only
// dataplane/journal.
package log
