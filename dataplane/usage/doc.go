// Package usage is a broker's metering: per-tenant counters of what the
// front doors moved (bytes and messages produced and fetched, by topic and
// hour), flushed as usage records into the cell's internal,
// Raft-replicated usage partitions, and shipped from those partitions to
// the control plane's billing ledger.
//
// Exactness rests on three things. A front door counts a produce after
// its batch committed and a fetch before its response is written, then
// calls Meter.Sync, which returns once a usage record holding the count
// is committed in a usage partition: an acknowledged produce or a sent
// fetch is in the replicated usage log before the client hears of it.
// Each record names its source (broker node id, a random per-boot id and
// a sequence number); a flush whose outcome is unknown is retried with
// the same source and sequence, and the ledger applies a source sequence
// once. The shipper sends a usage partition's records with the offset
// range they cover; the ledger applies a range only if it starts where
// the last applied one ended, in the same transaction.
//
// tenantd wires it; the front doors call Meter. It imports the data
// plane's log package only.
package usage
