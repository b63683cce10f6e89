// Package records converts between Kafka record batches (magic v2, the
// bytes the partition log stores and the Kafka front door serves) and
// individual records: Build encodes records into one uncompressed batch
// ready for a partition's Produce; Decode splits the batches a partition's
// Fetch returns into records, decompressing gzip, snappy (raw or the Java
// client's xerial framing), lz4 and zstd batches from Kafka clients.
//
// It also holds Kafka's default partitioner hash (murmur2), so that front
// doors other than Kafka place keyed records where Kafka clients do.
//
// The HTTP data API and the consumer-group code import it; it imports only
// dataplane/log.
package records
