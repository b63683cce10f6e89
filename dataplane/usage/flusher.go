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
	// RetryInterval is the first wait before a failed flush is tried
	// again, doubled after each failure up to 1 s; default 20ms.
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

// maxInflight is how many flushes may be in flight at once: a Sync that
// arrives during a flush starts the next one at once instead of waiting
// for it, and Raft pipelines their appends.
const maxInflight = 4

// Flusher writes a Meter's counts into the usage partitions: every
// Interval, and at once when a Sync waits, up to maxInflight flushes at a
// time. Its goroutine, which Close waits for, owns the sequence and takes
// the counts; each flush's goroutine (which the same goroutine waits for)
// appends its records, retrying each with its sequence number until it
// is committed.
type Flusher struct {
	cfg  FlusherConfig
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
	// quit ends flushes that still retry, shortly after stop.
	quit   context.Context
	cancel context.CancelFunc

	// Owned by run: the last sequence number used, the flushes in flight
	// and the generations they carry.
	seq       uint64
	inflight  int
	done      chan uint64
	completed map[uint64]bool
	upTo      uint64 // every generation up to it is committed
}

// NewFlusher checks cfg and starts flushing.
func NewFlusher(cfg FlusherConfig) (*Flusher, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	f := &Flusher{cfg: cfg, stop: make(chan struct{}), done: make(chan uint64, maxInflight), completed: map[uint64]bool{}}
	f.quit, f.cancel = context.WithCancel(context.Background())
	f.wg.Add(1)
	go f.run()
	return f, nil
}

func (f *Flusher) run() {
	defer f.wg.Done()
	tick := time.NewTicker(f.cfg.Interval)
	defer tick.Stop()
	var flushes sync.WaitGroup
	wanted := false // a flush was asked for while maxInflight were in flight
	for {
		select {
		case <-f.stop:
			// A last flush, bounded: what it cannot write is lost with
			// the process, as on a crash.
			t := time.AfterFunc(2*time.Second, f.cancel)
			if f.inflight == maxInflight {
				f.inflight--
				f.complete(<-f.done)
			}
			f.start(&flushes)
			for f.inflight > 0 {
				f.inflight--
				f.complete(<-f.done)
			}
			flushes.Wait()
			t.Stop()
			f.cancel()
			return
		case g := <-f.done:
			f.inflight--
			f.complete(g)
			if !wanted {
				continue
			}
		case <-tick.C:
		case <-f.cfg.Meter.want:
		}
		wanted = f.inflight >= maxInflight
		if !wanted {
			f.start(&flushes)
		}
	}
}

// start takes the meter's counts and starts a flush of them.
func (f *Flusher) start(flushes *sync.WaitGroup) {
	counts, ranges, gen := f.cfg.Meter.take()
	recs := f.records(counts, ranges)
	if len(recs) == 0 {
		f.complete(gen)
		return
	}
	f.inflight++
	flushes.Add(1)
	go func() {
		defer flushes.Done()
		for _, r := range recs {
			f.append(r)
		}
		f.done <- gen
	}()
}

// append commits one record, retrying until it is or quit ends.
func (f *Flusher) append(r Record) {
	wait := f.cfg.RetryInterval
	for f.quit.Err() == nil {
		err := errors.New("this broker leads no usage partition")
		if p, ok := f.cfg.Partition(); ok {
			var batch []byte
			if batch, err = EncodeBatch(r); err != nil {
				f.cfg.Logger.Error("encode usage record", "seq", r.Seq, "err", err)
				return
			}
			ctx, cancel := context.WithTimeout(f.quit, 10*time.Second)
			_, err = p.Produce(ctx, batch)
			cancel()
			if err == nil {
				return
			}
		}
		f.cfg.Logger.Debug("flush usage record; will retry", "seq", r.Seq, "err", err)
		select {
		case <-f.quit.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second) // a cell without usage partitions waits long
	}
	f.cfg.Logger.Warn("usage record not flushed before shutdown; its counts are lost", "seq", r.Seq)
}

// complete records that generation g's flush ended, and tells the meter
// how far every generation is committed.
func (f *Flusher) complete(g uint64) {
	f.completed[g] = true
	for f.completed[f.upTo+1] {
		delete(f.completed, f.upTo+1)
		f.upTo++
	}
	f.cfg.Meter.markFlushed(f.upTo)
}

// records turns counts into records of at most maxEntries entries, in a
// stable order.
func (f *Flusher) records(counts map[key]int64, ranges []Range) []Record {
	if len(counts) == 0 && len(ranges) == 0 {
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
	for len(keys) > 0 || len(ranges) > 0 {
		n := min(len(keys), maxEntries)
		nr := min(len(ranges), maxEntries-n)
		f.seq++
		r := Record{Version: RecordVersion, Node: f.cfg.NodeID, Boot: f.cfg.Boot, Seq: f.seq, At: at, Ranges: ranges[:nr:nr]}
		for _, k := range keys[:n] {
			r.Entries = append(r.Entries, Entry{Tenant: k.tenant, Topic: k.topic, Meter: k.meter, Hour: k.hour, Value: counts[k]})
		}
		out = append(out, r)
		keys, ranges = keys[n:], ranges[nr:]
	}
	return out
}

// Close makes a last bounded flush and stops. It is idempotent.
func (f *Flusher) Close() error {
	f.once.Do(func() { close(f.stop) })
	f.wg.Wait()
	return nil
}
