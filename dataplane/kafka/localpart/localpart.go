// Package localpart holds partitions on this broker's disk with a single
// replica each: one dataplane/log.Log per partition, no replication. It
// implements kafka.Partitions for the Kafka listener's tests and for
// `tenantd dev` until the replicated cell takes over; a broker of a real
// cell never uses it, because an acknowledged record here survives only as
// long as this one disk.
//
// Produce appends and fsyncs before it acknowledges (concurrent produces
// share one fsync); the high watermark is the durable end of the log.
package localpart

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/sluicehq/sluice/contract/topicspec"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/frontdoor"
	"github.com/sluicehq/sluice/dataplane/kafka"
	"github.com/sluicehq/sluice/dataplane/log"
)

// Config configures a Store.
type Config struct {
	// Dir holds one subdirectory per partition; required.
	Dir string
	// NodeID is this broker's node id: the leader of every local partition.
	NodeID int
	// State says which topics and partitions exist; required.
	State *cellview.Syncer
	// Logger; nil discards.
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.Dir == "" {
		return errors.New("localpart config: Dir is required")
	}
	if c.NodeID < 1 {
		return fmt.Errorf("localpart config: NodeID must be at least 1, got %d", c.NodeID)
	}
	if c.State == nil {
		return errors.New("localpart config: State is required")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// Store is the set of local partitions, opened on first use.
type Store struct {
	cfg Config

	// mu guards the fields below.
	mu     sync.Mutex
	parts  map[key]*Partition
	closed bool
}

type key struct {
	topic     string
	partition int32
}

var _ kafka.Partitions = (*Store)(nil)

// New returns a Store over cfg.Dir.
func New(cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Store{cfg: cfg, parts: map[key]*Partition{}}, nil
}

// Get returns the partition if the cell state has it, opening its log on
// first use.
func (s *Store) Get(topicID string, partition int32) (kafka.Partition, bool) {
	p, err := s.Open(topicID, partition)
	if err != nil {
		if !errors.Is(err, errNoSuchPartition) {
			s.cfg.Logger.Error("open local partition", "topic_id", topicID, "partition", partition, "err", err)
		}
		return nil, false
	}
	return p, true
}

var errNoSuchPartition = errors.New("no such partition in the cell state")

// Open is Get with the reason for a failure.
func (s *Store) Open(topicID string, partition int32) (*Partition, error) {
	k := key{topicID, partition}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, log.ErrClosed
	}
	if p, ok := s.parts[k]; ok {
		return p, nil
	}
	t, ok := s.cfg.State.View().TopicByID(topicID)
	if !ok || !hasPartition(t, partition) {
		return nil, errNoSuchPartition
	}
	// Opening under mu keeps one Log per directory; it is quick for the
	// small logs of tests and development.
	l, err := log.Open(context.Background(), logConfig(filepath.Join(s.cfg.Dir, fmt.Sprintf("%s-%d", topicID, partition)), t, s.cfg.Logger))
	if err != nil {
		return nil, fmt.Errorf("open partition %s-%d: %w", topicID, partition, err)
	}
	p := &Partition{log: l, node: s.cfg.NodeID, watchers: map[*watcher]struct{}{}}
	p.hw = l.DurableOffset()
	s.parts[k] = p
	return p, nil
}

func hasPartition(t *wire.Topic, p int32) bool {
	for _, wp := range t.Partitions {
		if int32(wp.Partition) == p {
			return true
		}
	}
	return false
}

// logConfig maps the topic's effective configuration onto the log's.
func logConfig(dir string, t *wire.Topic, logger *slog.Logger) log.Config {
	cfg := log.Config{Dir: dir, Logger: logger.With("topic_id", t.ID)}
	tc := topicspec.Config(t.Config)
	if n, ok := tc.SegmentBytes(); ok {
		cfg.SegmentBytes = n
	}
	if n, ok := tc.MaxMessageBytes(); ok {
		cfg.MaxBatchBytes = max(n, log.DefaultMaxBatchBytes)
	}
	return cfg
}

// Close syncs and closes every partition; later calls do nothing.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, p := range s.parts {
		errs = append(errs, p.close())
	}
	return errors.Join(errs...)
}

// Partition is one local, single-replica partition.
type Partition struct {
	log  *log.Log
	node int

	syncMu sync.Mutex // one fsync at a time; waiters behind it usually find their data durable

	// mu guards the fields below.
	mu       sync.Mutex
	hw       int64
	watchers map[*watcher]struct{}
}

type watcher struct {
	above int64
	wake  chan<- struct{}
}

var (
	_ kafka.Partition     = (*Partition)(nil)
	_ frontdoor.Submitter = (*Partition)(nil)
)

// Produce appends the batch, waits until it is on stable storage and
// returns its base offset.
func (p *Partition) Produce(ctx context.Context, batch []byte) (int64, error) {
	return p.Submit(ctx, batch)()
}

// Submit appends the batch and returns a func that waits until it is on
// stable storage and returns its base offset (frontdoor.Submitter).
func (p *Partition) Submit(ctx context.Context, batch []byte) (wait func() (int64, error)) {
	if err := ctx.Err(); err != nil {
		return func() (int64, error) { return 0, err }
	}
	base, last, err := p.log.Append(batch, p.LeaderEpoch())
	if err != nil {
		return func() (int64, error) { return 0, fmt.Errorf("append: %w", err) }
	}
	return func() (int64, error) {
		if err := p.syncTo(last + 1); err != nil {
			return 0, err
		}
		return base, nil
	}
}

// syncTo returns once every offset below end is durable, and advances the
// high watermark to match.
func (p *Partition) syncTo(end int64) error {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	if p.log.DurableOffset() < end {
		if err := p.log.Sync(); err != nil {
			return fmt.Errorf("sync: %w", err)
		}
	}
	p.advance(p.log.DurableOffset())
	return nil
}

func (p *Partition) advance(hw int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if hw <= p.hw {
		return
	}
	p.hw = hw
	for w := range p.watchers {
		if hw > w.above {
			notify(w.wake)
			delete(p.watchers, w)
		}
	}
}

func notify(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Fetch reads committed batches from offset.
func (p *Partition) Fetch(offset int64, maxBytes int32) (log.Slice, int64, error) {
	hw := p.HighWatermark()
	s, err := p.log.Read(offset, int(max(maxBytes, 1)), hw)
	if err != nil {
		return log.Slice{}, hw, fmt.Errorf("read at %d: %w", offset, err)
	}
	return s, hw, nil
}

// HighWatermark is the durable end of the log.
func (p *Partition) HighWatermark() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hw
}

// LogStartOffset is the log's start offset.
func (p *Partition) LogStartOffset() int64 { return p.log.LogStartOffset() }

// DeleteRecords moves the log start forward to offset (-1: the high
// watermark), deleting the segments wholly below it; an offset above the
// high watermark is log.ErrOffsetOutOfRange.
func (p *Partition) DeleteRecords(ctx context.Context, offset int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	hw := p.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return 0, fmt.Errorf("delete records to %d: %w: the high watermark is %d", offset, log.ErrOffsetOutOfRange, hw)
	}
	if err := p.log.DeleteHead(offset); err != nil {
		return 0, fmt.Errorf("delete records: %w", err)
	}
	return p.log.LogStartOffset(), nil
}

// LeaderEpoch is always 0: a single replica never changes leader.
func (p *Partition) LeaderEpoch() int32 { return 0 }

// Leader is this broker.
func (p *Partition) Leader() (int, bool) { return p.node, true }

// InSync holds for this broker's node, the one replica.
func (p *Partition) InSync(node int) bool { return node == p.node }

// Offline never holds: the one replica is this broker's.
func (p *Partition) Offline(int) bool { return false }

// OffsetForTimestamp looks the timestamp up in the log's time index.
func (p *Partition) OffsetForTimestamp(ts int64) (int64, bool, error) {
	return p.log.OffsetForTimestamp(ts)
}

// EpochEnd knows the one epoch, 0, which ends at the high watermark.
func (p *Partition) EpochEnd(epoch int32) (int32, int64, bool, error) {
	if epoch != 0 {
		return -1, -1, false, nil
	}
	return 0, p.HighWatermark(), true, nil
}

// Watch wakes the caller once the high watermark is above hw.
func (p *Partition) Watch(hw int64, wake chan<- struct{}) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hw > hw {
		notify(wake)
		return func() {}
	}
	w := &watcher{above: hw, wake: wake}
	p.watchers[w] = struct{}{}
	return func() {
		p.mu.Lock()
		delete(p.watchers, w)
		p.mu.Unlock()
	}
}

func (p *Partition) close() error {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	err := p.log.Sync()
	if cerr := p.log.Close(); err == nil {
		err = cerr
	}
	return err
}
