package usage

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Appender is a usage partition this broker leads: partition.Replica.
type Appender interface {
	Produce(ctx context.Context, batch []byte) (int64, error)
}

// DefaultFlushInterval is how often counts are flushed when no Sync asks
// for it sooner.
const DefaultFlushInterval = 2 * time.Second

// maxEntries bounds the entries of one record, so that a record stays far
// below the usage partitions' batch limit (about 150 bytes an entry).
const maxEntries = 2000

// FlusherConfig configures a Flusher.
type FlusherConfig struct {
	// NodeID is this broker's node id. Required.
	NodeID int
	// Meter is the counters to flush. Required.
	Meter *Meter
	// Partition returns a usage partition this broker leads; ok is false
	// while it leads none. Required.
	Partition func() (Appender, bool)
	// Interval is the flush interval when no Sync waits; default
	// DefaultFlushInterval.
	Interval time.Duration
	// RetryInterval is the wait before a failed flush is tried again;
	// default 20ms.
	RetryInterval time.Duration
	// Boot names this process in its records; default a random id.
	Boot string
	// Logger; nil discards.
	Logger *slog.Logger
}

func (c *FlusherConfig) validate() error {
	switch {
	case c.NodeID <= 0:
		return errors.New("usage flusher config: NodeID is required")
	case c.Meter == nil:
		return errors.New("usage flusher config: Meter is required")
	case c.Partition == nil:
		return errors.New("usage flusher config: Partition is required")
	}
	if c.Interval <= 0 {
		c.Interval = DefaultFlushInterval
	}
	if c.RetryInterval <= 0 {
		c.RetryInterval = 20 * time.Millisecond
	}
	if c.Boot == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		c.Boot = hex.EncodeToString(b[:])
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// Flusher writes a Meter's counts into the usage partitions: every
// Interval, and at once when a Sync waits. One goroutine, which Close
// waits for, owns the sequence and the records in flight.
type Flusher struct {
	cfg  FlusherConfig
	seq  uint64
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup

	// pending are the records of generation pendingGen not yet known to
	// be committed; each keeps its sequence number across retries.
	pending    []Record
	pendingGen uint64
}

// NewFlusher checks cfg and starts flushing.
func NewFlusher(cfg FlusherConfig) (*Flusher, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	f := &Flusher{cfg: cfg, stop: make(chan struct{})}
	f.wg.Add(1)
	go f.run()
	return f, nil
}

func (f *Flusher) run() {
	defer f.wg.Done()
	tick := time.NewTicker(f.cfg.Interval)
	defer tick.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	for {
		select {
		case <-f.stop:
			// A last flush, bounded: what it cannot write is lost with
			// the process, as on a crash.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			for f.flush(ctx) != nil && ctx.Err() == nil {
				select {
				case <-ctx.Done():
				case <-time.After(f.cfg.RetryInterval):
				}
			}
			cancel()
			return
		case <-tick.C:
		case <-f.cfg.Meter.want:
		case <-retry.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := f.flush(ctx)
		cancel()
		if err != nil {
			retry.Reset(f.cfg.RetryInterval)
		}
	}
}

// flush commits the pending records, taking the meter's counts first if
// none are pending.
func (f *Flusher) flush(ctx context.Context) error {
	if len(f.pending) == 0 {
		counts, batches, gen := f.cfg.Meter.take()
		f.pendingGen = gen
		f.pending = f.records(counts, batches)
	}
	for len(f.pending) > 0 {
		p, ok := f.cfg.Partition()
		if !ok {
			return errors.New("this broker leads no usage partition")
		}
		batch, err := EncodeBatch(f.pending[0])
		if err != nil {
			return err
		}
		if _, err := p.Produce(ctx, batch); err != nil {
			f.cfg.Logger.Warn("flush usage record; will retry", "seq", f.pending[0].Seq, "err", err)
			return err
		}
		f.pending = f.pending[1:]
	}
	f.cfg.Meter.markFlushed(f.pendingGen)
	return nil
}

// records turns counts into records of at most maxEntries entries, in a
// stable order.
func (f *Flusher) records(counts map[key]int64, batches []Batch) []Record {
	if len(counts) == 0 && len(batches) == 0 {
		return nil
	}
	keys := make([]key, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		switch {
		case a.tenant != b.tenant:
			return cmp.Compare(a.tenant, b.tenant)
		case a.topic != b.topic:
			return cmp.Compare(a.topic, b.topic)
		case a.meter != b.meter:
			return cmp.Compare(a.meter, b.meter)
		}
		return cmp.Compare(a.hour, b.hour)
	})
	at := time.Now().UnixMilli()
	var out []Record
	for len(keys) > 0 || len(batches) > 0 {
		n := min(len(keys), maxEntries)
		nb := min(len(batches), maxEntries-n)
		f.seq++
		r := Record{Version: RecordVersion, Node: f.cfg.NodeID, Boot: f.cfg.Boot, Seq: f.seq, At: at, Batches: batches[:nb:nb]}
		for _, k := range keys[:n] {
			r.Entries = append(r.Entries, Entry{Tenant: k.tenant, Topic: k.topic, Meter: k.meter, Hour: k.hour, Value: counts[k]})
		}
		out = append(out, r)
		keys, batches = keys[n:], batches[nb:]
	}
	return out
}

// Close makes a last bounded flush and stops. It is idempotent.
func (f *Flusher) Close() error {
	f.once.Do(func() { close(f.stop) })
	f.wg.Wait()
	return nil
}
