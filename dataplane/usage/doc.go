// Package usage is a broker's metering: per-tenant counters of what the
// front doors fetched (bytes and messages, by topic and hour), the
// partitions' closed produce ranges, and the sampled partition- and
// storage-seconds, flushed as usage records into the cell's internal,
// Raft-replicated usage partitions, and shipped from those partitions to
// the control plane's billing ledger.
//
// Exactness rests on these. Produce is metered from the partitions'
// replicated logs (partition/meter.go): a partition's leader records
// each closed range, which names its end offset, with RecordRange, and
// a new leader records its last one again; the ledger keeps, per
// (topic, partition, hour), the range with the highest end. No produce
// answer waits for metering. A front door counts a fetch once its
// response is written to the connection, as the stored batch bytes of
// the records delivered (BatchShare for part of a batch), then calls
// Meter.Sync before the connection's next request, which returns once a
// usage record holding the count is committed in a usage partition: an
// answer never written is never billed, and one written just before a
// crash may go uncounted. Each
// record names its source (broker node id, a random per-boot id and a
// sequence number); a flush whose outcome is unknown is retried with the
// same source and sequence, and the ledger applies a source sequence
// once. The shipper sends a usage partition's records with the offset
// range they cover; the ledger applies a range only if it starts where
// the last applied one ended, in the same transaction.
//
// tenantd wires it; the front doors and the replica manager call Meter.
// It imports the data plane's log and records packages only.
package usage
