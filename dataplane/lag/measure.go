package lag

import (
	"errors"
	"fmt"
	"time"

	dlog "github.com/sluicehq/sluice/dataplane/log"
)

// Committed is one committed offset of a group, as its coordinator holds it
// (the shape of the coordinator's snapshot of all its committed offsets).
type Committed struct {
	TenantID    string
	Group       string
	TopicID     string
	Partition   int32
	Offset      int64
	CommittedAt time.Time
}

// Partition is the read-only view of a local replica that lag needs.
// ReplicaPartition adapts a *partition.Replica.
type Partition interface {
	// HighWatermark is the offset after the last committed record.
	HighWatermark() int64
	// LogStartOffset is the first retained offset.
	LogStartOffset() int64
	// BytesBetween is the size of the batches holding [from, to).
	BytesBetween(from, to int64) (int64, error)
	// BatchMaxTimestamp is the newest timestamp (ms) of the batch holding offset.
	BatchMaxTimestamp(offset int64) (int64, error)
}

// Retention is a topic's retention.ms and retention.bytes; zero or negative
// means no limit of that kind.
type Retention struct {
	Ms    int64
	Bytes int64
}

// Measurement is the lag of one committed offset.
type Measurement struct {
	HighWatermark  int64
	LogStartOffset int64
	// Records and Bytes count the retained records from the committed
	// offset (or the log start, if later) to the high watermark; Bytes
	// counts whole batches, so a committed offset inside a batch counts
	// that batch, which the consumer will fetch again.
	Records int64
	Bytes   int64
	// Seconds is how old the first unconsumed record is: now minus the
	// newest timestamp of its batch (the timestamp retention judges a
	// segment by); 0 when caught up or when the timestamp is in the future.
	Seconds float64
	// RetentionFraction is the larger of Seconds/retention.ms and
	// Bytes/retention.bytes: 1 means retention may delete unconsumed
	// records now. Retention deletes whole segments, judged by a segment's
	// newest timestamp and by the bytes after it, so both ratios are upper
	// bounds: the alarm comes early, never late. At least 1 when Expired.
	RetentionFraction float64
	// Expired: the committed offset is below the log start, so records were
	// deleted before the group read them. Records counts only the retained
	// part.
	Expired bool
}

// measureTries bounds the retries when retention moves the log start
// between reading it and reading the log.
const measureTries = 3

// Measure computes the lag of committed offset against p at now.
func Measure(p Partition, committed int64, r Retention, now time.Time) (Measurement, error) {
	var err error
	for range measureTries {
		var m Measurement
		if m, err = measure(p, committed, r, now); !errors.Is(err, dlog.ErrOffsetOutOfRange) {
			return m, err
		}
	}
	return Measurement{}, err
}

func measure(p Partition, committed int64, r Retention, now time.Time) (Measurement, error) {
	m := Measurement{HighWatermark: p.HighWatermark(), LogStartOffset: p.LogStartOffset()}
	start := min(m.LogStartOffset, m.HighWatermark)
	from := committed
	if from < start {
		// A negative offset names no position (nothing committed): the
		// whole retained log is unread, and nothing was lost to retention.
		m.Expired = from >= 0
		from = start
	}
	// A committed offset beyond the high watermark (a follower's view that
	// trails the leader, or an admin commit past the end) has nothing to read.
	from = min(from, m.HighWatermark)
	m.Records = m.HighWatermark - from
	if m.Records == 0 {
		if m.Expired {
			m.RetentionFraction = 1
		}
		return m, nil
	}
	var err error
	if m.Bytes, err = p.BytesBetween(from, m.HighWatermark); err != nil {
		return m, fmt.Errorf("measure lag bytes from %d: %w", from, err)
	}
	ts, err := p.BatchMaxTimestamp(from)
	if err != nil {
		return m, fmt.Errorf("measure lag age at %d: %w", from, err)
	}
	if age := now.UnixMilli() - ts; age > 0 {
		m.Seconds = float64(age) / 1000
	}
	if r.Ms > 0 {
		m.RetentionFraction = m.Seconds * 1000 / float64(r.Ms)
	}
	if r.Bytes > 0 {
		m.RetentionFraction = max(m.RetentionFraction, float64(m.Bytes)/float64(r.Bytes))
	}
	if m.Expired {
		m.RetentionFraction = max(m.RetentionFraction, 1)
	}
	return m, nil
}
