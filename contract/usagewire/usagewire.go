// Package usagewire is the part of a usage record (one flush of a
// broker's usage counters, a Kafka record in a usage partition) that the
// brokers' writer (dataplane/usage) and the billing ledger's reader
// (billing) share: the meter names, a counter entry and a produce range,
// with their JSON names. The record around them is each side's: the
// ledger also reads version 1 records, which no broker writes any more.
//
// Any package may import it.
package usagewire

// Meter names, as the ledger stores them. The time-based meters are in
// seconds: partition-hours and storage byte-hours are these over 3,600.
const (
	BytesIn            = "bytes_in"
	BytesOut           = "bytes_out"
	MessagesIn         = "messages_in"
	MessagesOut        = "messages_out"
	PartitionSeconds   = "partition_seconds"
	StorageByteSeconds = "storage_byte_seconds"
)

// Meters are every meter, in display order.
var Meters = []string{BytesIn, BytesOut, MessagesIn, MessagesOut, PartitionSeconds, StorageByteSeconds}

// Entry is one counter of a record.
type Entry struct {
	Tenant string `json:"tenant"`
	// Topic is the topic id; empty for usage not attributed to one topic
	// (an HTTP group fetch reads many).
	Topic string `json:"topic,omitempty"`
	Meter string `json:"meter"`
	// Hour is the start of the hour the usage happened in, unix seconds.
	Hour  int64 `json:"hour"`
	Value int64 `json:"value"`
}

// Range is a partition's closed produce range (partition.MeterRange) on
// behalf of its tenant: Bytes and Messages are the bytes_in and
// messages_in the partition's ranges attributed to Hour up to End, this
// range included (cumulative over the hour). Brokers take them from the
// partition's replicated log, so a range recorded twice (by a leader and
// by the next one, which records its last range again) is the same
// range.
type Range struct {
	Tenant    string `json:"tenant"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	End       int64  `json:"end"`
	Hour      int64  `json:"hour"`
	Bytes     int64  `json:"bytes"`
	Messages  int64  `json:"messages"`
}
