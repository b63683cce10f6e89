package usage

import (
	"errors"
	"sync"
	"time"

	"github.com/sluicehq/sluice/contract/usagewire"
)

// Time-based meters, in seconds: partition-hours and storage byte-hours
// are these over 3,600.
const (
	PartitionSeconds   = usagewire.PartitionSeconds
	StorageByteSeconds = usagewire.StorageByteSeconds
)

// Sample is one partition this broker leads, as the sampler sees it.
type Sample struct {
	Tenant, Topic string
	// Bytes is the partition's log size now (after retention).
	Bytes int64
}

// SamplerConfig configures a Sampler.
type SamplerConfig struct {
	// Meter receives the counts. Required.
	Meter *Meter
	// Led lists the partitions this broker leads. Required.
	Led func() []Sample
	// Interval is the sampling interval; default 10 s.
	Interval time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Sampler meters partition-seconds and storage byte-seconds: every
// Interval, each partition this broker leads adds the time since the last
// sample, and its size times that time, to its tenant's topic. So a
// partition is counted by its leader; the time a partition has no leader
// (an election, about a second) is not counted, and a SIGKILL loses the
// last interval. Counts are flushed with the others, without a Sync.
type Sampler struct {
	cfg  SamplerConfig
	last time.Time
	// carry is the time below a millisecond the last samples left
	// uncounted, added to the next one: at a 100 ms interval dropping it
	// would lose up to 1% of partition- and byte-seconds.
	carry time.Duration
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

// NewSampler checks cfg and starts sampling; Close stops it.
func NewSampler(cfg SamplerConfig) (*Sampler, error) {
	switch {
	case cfg.Meter == nil:
		return nil, errors.New("usage sampler config: Meter is required")
	case cfg.Led == nil:
		return nil, errors.New("usage sampler config: Led is required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Sampler{cfg: cfg, last: cfg.Now(), stop: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				s.Sample()
				return
			case <-t.C:
				s.Sample()
			}
		}
	}()
	return s, nil
}

// Sample counts the time since the last sample for the partitions led
// now. Only the sampler's goroutine calls it, and tests with no goroutine
// running (Interval very long).
func (s *Sampler) Sample() {
	now := s.cfg.Now()
	elapsed := now.Sub(s.last)
	s.last = now
	if elapsed <= 0 {
		return
	}
	// Whole milliseconds, the rest carried to the next sample; the Meter
	// carries what is below a second (addMilli), so the time counted is
	// the time elapsed, exactly, but for the last sample's fraction of a
	// millisecond.
	elapsed += s.carry
	ms := elapsed.Milliseconds()
	s.carry = elapsed - time.Duration(ms)*time.Millisecond
	for _, p := range s.cfg.Led() {
		s.cfg.Meter.addMilli(p.Tenant, p.Topic, PartitionSeconds, ms)
		s.cfg.Meter.addMilli(p.Tenant, p.Topic, StorageByteSeconds, p.Bytes*ms)
	}
}

// Close takes a last sample and stops. It is idempotent.
func (s *Sampler) Close() error {
	s.once.Do(func() { close(s.stop) })
	s.wg.Wait()
	return nil
}
