package log

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/dataplane/journal"
)

// Defaults follow Kafka's topic configuration defaults.
const (
	DefaultSegmentBytes       = 1 << 30            // segment.bytes
	DefaultSegmentAge         = 7 * 24 * time.Hour // segment.ms
	DefaultRetentionAge       = 7 * 24 * time.Hour // retention.ms
	DefaultIndexIntervalBytes = 4096               // index.interval.bytes
	DefaultMaxBatchBytes      = 1<<20 + 12         // message.max.bytes
	maxSegmentBytes           = 1 << 30            // with MaxBatchBytes, positions fit the uint32 index
)

// Config configures one partition log. Zero values mean the default.
type Config struct {
	// Dir is the partition directory. It is created if missing. Required.
	Dir string
	// SegmentBytes rolls the active segment before it would grow past this
	// size (segment.bytes). Default 1 GiB, at most 1 GiB.
	SegmentBytes int64
	// SegmentAge rolls a non-empty active segment this long after it was
	// created or opened (segment.ms). Default 7 days.
	SegmentAge time.Duration
	// RetentionAge deletes a segment once its newest batch timestamp is older
	// than this (retention.ms). Default 7 days; negative means keep forever.
	RetentionAge time.Duration
	// RetentionBytes deletes the oldest segments while the log stays at least
	// this big without them (retention.bytes). Zero or negative: no size limit.
	RetentionBytes int64
	// IndexIntervalBytes is the number of log bytes between offset index
	// entries (index.interval.bytes). Default 4096.
	IndexIntervalBytes int
	// MaxBatchBytes rejects larger batches on append (message.max.bytes).
	// Default 1 MiB + 12.
	MaxBatchBytes int
	// Logger receives recovery and retention lines. Nil discards them.
	Logger *slog.Logger
	// Now is the clock for segment age and retention. Default time.Now.
	Now func() time.Time
	// Compacted says the log may hold the offset gaps a cleaner leaves
	// (cleanup.policy=compact): recovery accepts a batch that starts above
	// the previous one's end and segments that end below the next one's
	// base, and Clean runs. Default false: at open such a gap is damage,
	// and the log is cut there, as for any log before compaction existed.
	Compacted bool
	// Journal, when set, is the broker's write-ahead journal: a Syncer in
	// journal mode makes this log's appends durable by writing them there
	// (journal.go), and Dir must lie under the journal's root. Default
	// none: each sync round fdatasyncs the log's own files.
	Journal *journal.Journal
}

func (c *Config) validate() error {
	if c.Dir == "" {
		return errors.New("config: Dir is required: the partition directory")
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.SegmentBytes < HeaderSize || c.SegmentBytes > maxSegmentBytes {
		return fmt.Errorf("config: SegmentBytes is %d; it must be between %d and %d", c.SegmentBytes, HeaderSize, maxSegmentBytes)
	}
	if c.SegmentAge == 0 {
		c.SegmentAge = DefaultSegmentAge
	}
	if c.SegmentAge < 0 {
		return fmt.Errorf("config: SegmentAge is %s; it must be positive", c.SegmentAge)
	}
	if c.RetentionAge == 0 {
		c.RetentionAge = DefaultRetentionAge
	}
	if c.RetentionBytes < 0 {
		c.RetentionBytes = 0
	}
	if c.IndexIntervalBytes == 0 {
		c.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if c.IndexIntervalBytes < 0 {
		return fmt.Errorf("config: IndexIntervalBytes is %d; it must be positive", c.IndexIntervalBytes)
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.MaxBatchBytes < HeaderSize || c.MaxBatchBytes > 1<<30 {
		return fmt.Errorf("config: MaxBatchBytes is %d; it must be between %d and 1 GiB", c.MaxBatchBytes, HeaderSize)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}
