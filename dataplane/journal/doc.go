// Package journal is a broker's write-ahead journal: one pair of files
// that makes the appends of many partition logs durable with one
// fdatasync a round, where syncing each log's own segment file costs one
// disk flush per partition.
//
// A record is physical: a file path relative to the broker's data
// directory, an offset and the bytes written there. At the broker's start,
// before any log opens, Open replays the records into their files and
// syncs them; a log's own files are synced later, when the journal file
// that holds its records is about to be reused (a checkpoint), when the
// log closes, and before anything removes, truncates or replaces its
// files (a fence: records of a fenced directory written before the fence
// are not replayed).
//
// It imports nothing of Sluice; dataplane/log uses it, and tenantd wires
// it through raftlog's Committer.
package journal
