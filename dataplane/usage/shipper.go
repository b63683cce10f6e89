package usage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/dataplane/log"
)

// Source is a usage partition this broker leads, read by the shipper:
// partition.Replica.
type Source interface {
	// Fetch returns committed batches from offset, up to maxBytes, and
	// the high watermark.
	Fetch(offset int64, maxBytes int32) (log.Slice, int64, error)
	LogStartOffset() int64
	// DeleteRecords moves the log start to offset through Raft (what the
	// ledger holds need not stay in the partition).
	DeleteRecords(ctx context.Context, offset int64) (int64, error)
}

// Shipment is one range of a usage partition's records for the ledger.
type Shipment struct {
	Partition int32
	// From and Next bound the offsets the records came from: the ledger
	// applies the shipment only if From is where its last one for this
	// partition ended.
	From, Next int64
	// Records are the records' values (JSON Record), in offset order.
	Records [][]byte
}

// Sink is the billing ledger, through the control plane.
type Sink interface {
	// Ship applies s if s.From is the ledger's position for the
	// partition, and returns the position after (s.Next, or the
	// ledger's own position if s was not applied). A shipment with no
	// records asks for the position.
	Ship(ctx context.Context, s Shipment) (position int64, err error)
}

// ShipperConfig configures a Shipper.
type ShipperConfig struct {
	// Led returns the usage partitions this broker leads, by partition
	// number. Required.
	Led func() map[int32]Source
	// Sink receives the records. Required.
	Sink Sink
	// Interval is how often each led partition is read; default 1s.
	Interval time.Duration
	// MaxBytes bounds one shipment's batches; default 512 KiB, so that
	// a shipment's JSON stays under the control plane's 1 MiB body limit
	// (a record is at most maxEntries entries, about 300 KiB).
	MaxBytes int32
	// TrimEvery is how often, at most, a led partition's log start is
	// moved up to what the ledger has applied, so that a usage partition
	// holds what is not yet billed rather than its whole retention;
	// default 30s.
	TrimEvery time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
}

// Shipper sends the records of the usage partitions this broker leads to
// the ledger. Two shippers of one partition (a leader deposed and not yet
// aware) cannot apply a range twice: the ledger takes a range only at its
// position. One goroutine, which Close waits for, owns the positions.
type Shipper struct {
	cfg  ShipperConfig
	pos  map[int32]int64     // the ledger's position, as last heard
	trim map[int32]time.Time // when each partition's log start was last moved
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// NewShipper checks cfg and starts shipping.
func NewShipper(cfg ShipperConfig) (*Shipper, error) {
	switch {
	case cfg.Led == nil:
		return nil, errors.New("usage shipper config: Led is required")
	case cfg.Sink == nil:
		return nil, errors.New("usage shipper config: Sink is required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 512 << 10
	}
	if cfg.TrimEvery <= 0 {
		cfg.TrimEvery = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Shipper{cfg: cfg, pos: map[int32]int64{}, trim: map[int32]time.Time{}, stop: make(chan struct{})}
	s.wg.Add(1)
	go s.run()
	return s, nil
}

func (s *Shipper) run() {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		led := s.cfg.Led()
		for p := range s.pos {
			if _, ok := led[p]; !ok {
				delete(s.pos, p) // ask again when led here again
			}
		}
		for p, src := range led {
			for ctx.Err() == nil {
				more, err := s.shipOnce(ctx, p, src)
				if err != nil {
					if ctx.Err() == nil {
						s.cfg.Logger.Warn("ship usage records; will retry", "usage_partition", p, "err", err)
					}
					delete(s.pos, p)
					break
				}
				if !more {
					break
				}
			}
		}
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

// shipOnce sends the next range of partition p; more reports that there
// may be more to send now.
func (s *Shipper) shipOnce(ctx context.Context, p int32, src Source) (more bool, err error) {
	pos, known := s.pos[p]
	if !known {
		pos, err = s.cfg.Sink.Ship(ctx, Shipment{Partition: p, From: -1, Next: -1})
		if err != nil {
			return false, err
		}
		s.pos[p] = pos
	}
	if start := src.LogStartOffset(); pos < start {
		// Only if the ledger fell behind the usage partition's
		// retention: those records are gone.
		s.cfg.Logger.Error("usage records deleted before they reached the ledger", "usage_partition", p, "from", pos, "log_start", start)
		pos = start
	}
	sl, hw, err := src.Fetch(pos, s.cfg.MaxBytes)
	if err != nil {
		return false, fmt.Errorf("read usage partition %d at %d: %w", p, pos, err)
	}
	if sl.Size == 0 {
		sl.Release()
		s.trimShipped(ctx, p, src, pos)
		return false, nil
	}
	b, err := sl.AppendTo(nil)
	sl.Release()
	if err != nil {
		return false, fmt.Errorf("read usage partition %d at %d: %w", p, pos, err)
	}
	sh := Shipment{Partition: p, From: s.pos[p]}
	next, err := EachValue(b, func(_ int64, v []byte) error {
		sh.Records = append(sh.Records, v)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("usage partition %d at %d: %w", p, pos, err)
	}
	sh.Next = min(next, hw)
	if len(sh.Records) == 0 {
		// Control batches only: nothing to bill, but the position
		// must move past them.
		sh.Records = [][]byte{}
	}
	got, err := s.cfg.Sink.Ship(ctx, sh)
	if err != nil {
		return false, err
	}
	s.pos[p] = got
	s.trimShipped(ctx, p, src, got)
	return got < hw, nil
}

// trimShipped moves partition p's log start up to shipped, the ledger's
// position, at most every TrimEvery: records the ledger applied are
// billed (the ledger's position only moves forward), so retention can
// delete their segments at once instead of after the usage retention.
// A failure is logged and retried at the next shipment.
func (s *Shipper) trimShipped(ctx context.Context, p int32, src Source, shipped int64) {
	if shipped <= src.LogStartOffset() || time.Since(s.trim[p]) < s.cfg.TrimEvery {
		return
	}
	if _, err := src.DeleteRecords(ctx, shipped); err != nil {
		s.cfg.Logger.Warn("move a usage partition's log start past shipped records", "usage_partition", p, "offset", shipped, "err", err)
		return
	}
	s.trim[p] = time.Now()
}

// Close stops shipping. It is idempotent.
func (s *Shipper) Close() error {
	s.once.Do(func() { close(s.stop) })
	s.wg.Wait()
	return nil
}
