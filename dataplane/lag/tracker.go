package lag

import (
	"errors"
	"io"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/sluicehq/sluice/contract/topicspec"
	"github.com/sluicehq/sluice/contract/wire"
)

// Config configures a Tracker.
type Config struct {
	// Committed returns every committed offset this broker coordinates;
	// required. Its result is read, never kept or changed.
	Committed func() []Committed
	// Consumed returns the topics groups consume beyond those they have
	// committed offsets on (their members' subscriptions and assignments);
	// optional. Every partition of a consumed topic, or of a topic a group
	// committed on, is measured: those without a commit from the log start.
	Consumed func() []Consumed
	// Partition returns this broker's replica of a partition; required.
	Partition func(topicID string, partition int32) (Partition, bool)
	// Topic returns a topic of the cell (its name and effective config);
	// required.
	Topic func(topicID string) (*wire.Topic, bool)
	// MaxSeries caps the per-partition series of each metric; above it the
	// metrics aggregate per (tenant, group, topic) with partition="all".
	// Default 10,000.
	MaxSeries int
	// Every is how long a measurement is reused, so scrapes and reports
	// share one pass over the logs. Default 1 s.
	Every time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

func (c *Config) validate() error {
	if c.Committed == nil || c.Partition == nil || c.Topic == nil {
		return errors.New("lag config: Committed, Partition and Topic are required")
	}
	if c.MaxSeries == 0 {
		c.MaxSeries = 10_000
	}
	if c.MaxSeries < 0 {
		return errors.New("lag config: MaxSeries must be positive")
	}
	if c.Every == 0 {
		c.Every = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Consumed is a topic a group consumes (a member subscribes to it or is
// assigned some of its partitions).
type Consumed struct {
	TenantID, Group, TopicID string
}

// Lag is one partition a group consumes, with its measurement.
type Lag struct {
	// Committed is the group's committed offset of the partition; with
	// NoCommit, only its tenant, group, topic id and partition are set and
	// Offset is -1.
	Committed
	// NoCommit: the group has committed no offset on the partition yet;
	// the lag is the whole retained log, what a consumer starting from
	// the earliest offset would read.
	NoCommit bool
	// Topic is the topic's name; empty if the cell state does not know the
	// topic (deleted since the commit).
	Topic string
	// Measured is false when this broker holds no replica of the partition
	// (or measuring failed); Measurement is then zero.
	Measured bool
	Measurement
}

// Tracker measures the lag of the committed offsets a broker coordinates.
// It is safe for concurrent use.
type Tracker struct {
	cfg Config

	// mu guards the fields below.
	mu   sync.Mutex
	at   time.Time
	last []Lag
	// orphans are the commits of Lag's round on topics the cell state
	// no longer has (Report sends them).
	orphans []Committed
}

// New checks cfg and returns a Tracker.
func New(cfg Config) (*Tracker, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Tracker{cfg: cfg}, nil
}

// Lag measures every partition the groups consume (reusing a measurement
// younger than Config.Every), sorted by tenant, group, topic id and
// partition: each committed offset, and every other partition of the
// topics the groups committed on or consume (NoCommit). Partitions of
// topics the cell state no longer has are left out.
func (t *Tracker) Lag() []Lag {
	ls, _ := t.pass(false)
	return ls
}

// pass returns the last measurement and its orphans, measuring again
// unless fresh is false and the last is younger than Config.Every.
func (t *Tracker) pass(fresh bool) ([]Lag, []Committed) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Now()
	if !fresh && t.last != nil && now.Sub(t.at) < t.cfg.Every && now.Sub(t.at) >= 0 {
		return t.last, t.orphans
	}
	cs := t.cfg.Committed()
	out := make([]Lag, 0, len(cs))
	type gtopic struct{ tenant, group, topic string }
	type gpart struct {
		gtopic
		part int32
	}
	topics := map[gtopic]bool{}
	committed := make(map[gpart]bool, len(cs))
	var orphans []Committed
	for _, c := range cs {
		topics[gtopic{c.TenantID, c.Group, c.TopicID}] = true
		committed[gpart{gtopic{c.TenantID, c.Group, c.TopicID}, c.Partition}] = true
		if l, ok := t.measure(c, now); ok {
			out = append(out, l)
		} else {
			orphans = append(orphans, c)
		}
	}
	if t.cfg.Consumed != nil {
		for _, c := range t.cfg.Consumed() {
			topics[gtopic{c.TenantID, c.Group, c.TopicID}] = true
		}
	}
	for gt := range topics {
		topic, ok := t.cfg.Topic(gt.topic)
		if !ok {
			continue
		}
		for _, p := range topic.Partitions {
			if committed[gpart{gt, int32(p.Partition)}] {
				continue
			}
			c := Committed{TenantID: gt.tenant, Group: gt.group, TopicID: gt.topic, Partition: int32(p.Partition), Offset: -1}
			if l, ok := t.measure(c, now); ok {
				l.NoCommit = true
				out = append(out, l)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return less(out[i].Committed, out[j].Committed) })
	sort.Slice(orphans, func(i, j int) bool { return less(orphans[i], orphans[j]) })
	t.at, t.last, t.orphans = now, out, orphans
	return out, orphans
}

// measure measures one partition of a group from c.Offset; ok is false
// when the cell state no longer has the topic.
func (t *Tracker) measure(c Committed, now time.Time) (Lag, bool) {
	topic, ok := t.cfg.Topic(c.TopicID)
	if !ok {
		return Lag{}, false
	}
	l := Lag{Committed: c, Topic: topic.Name}
	if p, ok := t.cfg.Partition(c.TopicID, c.Partition); ok {
		m, err := Measure(p, c.Offset, retentionOf(topic), now)
		if err != nil {
			t.cfg.Logger.Warn("measure group lag", "tenant_id", c.TenantID, "group", c.Group,
				"topic_id", c.TopicID, "partition", c.Partition, "err", err)
		} else {
			l.Measured, l.Measurement = true, m
		}
	}
	return l, true
}

func less(a, b Committed) bool {
	if a.TenantID != b.TenantID {
		return a.TenantID < b.TenantID
	}
	if a.Group != b.Group {
		return a.Group < b.Group
	}
	if a.TopicID != b.TopicID {
		return a.TopicID < b.TopicID
	}
	return a.Partition < b.Partition
}

// retentionOf reads a topic's effective retention.ms and retention.bytes;
// a missing or unparsable value counts as no limit.
func retentionOf(t *wire.Topic) Retention {
	c := topicspec.Config(t.Config)
	ms, _ := c.RetentionMs()
	bytes, _ := c.RetentionBytes()
	return Retention{Ms: ms, Bytes: bytes}
}

// Report returns the lag in the shape the broker's report carries: a
// partition without a commit has CommittedOffset -1 and no CommittedAt.
//
// It also carries, unmeasured, the commits on topics the cell state no
// longer lists: a tenant that moved to another cell leaves this cell's
// state at the switch, and the control plane takes its groups' final
// offsets from the report this broker makes after that (the control
// plane keeps such rows only for a tenant moving out; a deleted topic's
// are dropped there).
//
// Unlike Lag it always measures afresh: the final offsets of a tenant
// moving away are those of the first report after the switch, so it must
// hold every commit acknowledged before it (a pass cached from before the
// last commits would hand the destination older offsets, and the group
// would read again what it had committed).
func (t *Tracker) Report() []wire.GroupLag {
	ls, orphans := t.pass(true)
	out := make([]wire.GroupLag, len(ls), len(ls)+len(orphans))
	for i, l := range ls {
		out[i] = wire.GroupLag{TenantID: l.TenantID, Group: l.Group, TopicID: l.TopicID, Partition: int(l.Partition),
			CommittedOffset: l.Offset, CommittedAt: l.CommittedAt, Measured: l.Measured,
			HighWatermark: l.HighWatermark, LogStartOffset: l.LogStartOffset, LagRecords: l.Records, LagBytes: l.Bytes,
			LagSeconds: l.Seconds, RetentionFraction: l.RetentionFraction, Expired: l.Expired}
	}
	for _, c := range orphans {
		out = append(out, wire.GroupLag{TenantID: c.TenantID, Group: c.Group, TopicID: c.TopicID, Partition: int(c.Partition),
			CommittedOffset: c.Offset, CommittedAt: c.CommittedAt})
	}
	return out
}
