package log

import (
	"fmt"
	"time"
)

// Settings are the parts of a Config that may change while the log is open:
// a topic's segment.bytes, segment.ms, retention.ms and retention.bytes,
// and whether it is compacted. Zero values mean the defaults, as in Config.
type Settings struct {
	SegmentBytes   int64
	SegmentAge     time.Duration
	RetentionAge   time.Duration
	RetentionBytes int64
	// Compacted is Config.Compacted. Turning it on marks the log
	// compacted for good (compacted.go); turning it off stops Clean and
	// brings back local rolls, but recovery still accepts the gaps.
	Compacted bool
}

// ApplySettings sets c's fields that s holds.
func (c *Config) ApplySettings(s Settings) {
	c.SegmentBytes, c.SegmentAge, c.RetentionAge, c.RetentionBytes = s.SegmentBytes, s.SegmentAge, s.RetentionAge, s.RetentionBytes
	c.Compacted = s.Compacted
}

// Settings returns the settings in force.
func (l *Log) Settings() Settings {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return Settings{SegmentBytes: l.cfg.SegmentBytes, SegmentAge: l.cfg.SegmentAge,
		RetentionAge: l.cfg.RetentionAge, RetentionBytes: l.cfg.RetentionBytes, Compacted: l.cfg.Compacted}
}

// Reconfigure applies new settings to the open log, checked as Open checks
// a Config. The next append rolls by the new segment size and age; the next
// retention pass uses the new retention. Nothing already written changes.
func (l *Log) Reconfigure(s Settings) error {
	c := l.cfg
	c.ApplySettings(s)
	if err := c.validate(); err != nil {
		return fmt.Errorf("reconfigure log: %w", err)
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if c.Compacted && !l.gaps {
		if err := markCompacted(l.cfg.Dir, l.dir); err != nil {
			return fmt.Errorf("reconfigure log: %w", err)
		}
	}
	l.mu.Lock()
	l.cfg.SegmentBytes, l.cfg.SegmentAge, l.cfg.RetentionAge, l.cfg.RetentionBytes = c.SegmentBytes, c.SegmentAge, c.RetentionAge, c.RetentionBytes
	l.cfg.Compacted = c.Compacted
	l.gaps = l.gaps || c.Compacted
	l.mu.Unlock()
	return nil
}
