package quotas

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// DiskState is where a broker's data disk stands against its watermarks.
type DiskState uint8

// Disk states, from best to worst.
const (
	// DiskOK: place partitions and admit produce as usual.
	DiskOK DiskState = iota
	// DiskSoft: stop placing new partitions on the broker and throttle the
	// heaviest writers first (see HeaviestWriters).
	DiskSoft
	// DiskHard: reject produce with a retriable error naming the cause.
	DiskHard
)

func (s DiskState) String() string {
	switch s {
	case DiskOK:
		return "ok"
	case DiskSoft:
		return "soft"
	case DiskHard:
		return "hard"
	}
	return fmt.Sprintf("disk_state(%d)", uint8(s))
}

// WatermarkConfig sets the thresholds, as fractions of the disk's size.
// Zero fields take their defaults.
type WatermarkConfig struct {
	Soft float64 // default 0.80
	Hard float64 // default 0.90
	// Margin is the hysteresis: a state is left only once usage is Margin
	// below the threshold that entered it, so a disk hovering at a
	// threshold does not flap. Default 0.02.
	Margin float64
}

func (c *WatermarkConfig) validate() error {
	c.Soft = cmp.Or(c.Soft, 0.80)
	c.Hard = cmp.Or(c.Hard, 0.90)
	c.Margin = cmp.Or(c.Margin, 0.02)
	if !(c.Soft > 0 && c.Soft < c.Hard && c.Hard <= 1) {
		return fmt.Errorf("watermarks must satisfy 0 < soft < hard <= 1, got soft %v and hard %v", c.Soft, c.Hard)
	}
	if !(c.Margin > 0 && c.Margin < c.Soft) {
		return fmt.Errorf("watermark margin must be above 0 and below soft (%v), got %v", c.Soft, c.Margin)
	}
	return nil
}

// Watermarks is the state machine of one data disk. Feed it usage with
// Update; it enters DiskSoft at Soft and DiskHard at Hard, steps down from
// hard to soft below Hard − Margin, and returns to DiskOK only below
// Soft − Margin. It is not safe for concurrent use: the disk monitor owns it
// and publishes its state.
type Watermarks struct {
	cfg         WatermarkConfig
	state       DiskState
	used, total int64
}

// NewWatermarks returns a state machine in DiskOK.
func NewWatermarks(cfg WatermarkConfig) (*Watermarks, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("watermarks config: %w", err)
	}
	return &Watermarks{cfg: cfg}, nil
}

// Update takes the disk's used and total bytes and returns the new state.
// A total of zero or less is not a measurement and leaves the state as is.
func (w *Watermarks) Update(used, total int64) DiskState {
	if total <= 0 {
		return w.state
	}
	w.used, w.total = used, total
	f := float64(used) / float64(total)
	c := w.cfg
	switch {
	case f >= c.Hard:
		w.state = DiskHard
	case w.state == DiskHard && f >= c.Hard-c.Margin:
		// stay hard
	case f >= c.Soft:
		w.state = DiskSoft
	case w.state != DiskOK && f >= c.Soft-c.Margin:
		w.state = DiskSoft
	default:
		w.state = DiskOK
	}
	return w.state
}

// State is the current state.
func (w *Watermarks) State() DiskState { return w.state }

// PlacePartitions reports whether new partitions may be placed on the disk.
func (w *Watermarks) PlacePartitions() bool { return w.state == DiskOK }

// ThrottleWriters reports whether the heaviest writers must be throttled.
func (w *Watermarks) ThrottleWriters() bool { return w.state != DiskOK }

// ErrDiskFull is matched (errors.Is) by every *DiskFullError.
var ErrDiskFull = errors.New("disk above hard watermark")

// DiskFullError is why a produce was rejected: the broker's disk is above
// its hard watermark. It is retriable: produce is admitted again once
// usage falls, by retention or by partitions moving away. It names only the
// broker's own disk, never another tenant.
type DiskFullError struct {
	UsedBytes, TotalBytes int64
	Hard, Resume          float64 // fractions: the hard watermark, and below what produce resumes
}

func (e *DiskFullError) Error() string {
	return fmt.Sprintf("broker disk is %.1f%% full, at or above the %.0f%% hard watermark: produce is rejected until usage falls below %.0f%%; retry later",
		100*float64(e.UsedBytes)/float64(e.TotalBytes), 100*e.Hard, 100*e.Resume)
}

// Retriable is true: the condition clears without the client changing anything.
func (e *DiskFullError) Retriable() bool { return true }

// Is makes errors.Is(err, ErrDiskFull) hold.
func (e *DiskFullError) Is(target error) bool { return target == ErrDiskFull }

// AdmitProduce returns nil when produce may proceed, or a *DiskFullError in
// DiskHard.
func (w *Watermarks) AdmitProduce() error {
	if w.state != DiskHard {
		return nil
	}
	return &DiskFullError{UsedBytes: w.used, TotalBytes: w.total, Hard: w.cfg.Hard, Resume: w.cfg.Hard - w.cfg.Margin}
}

// HeaviestWriters picks which tenants to throttle first when the disk is
// above its soft watermark: the fewest heaviest writers whose write rates
// add up to at least fraction of all writes, heaviest first (ties by id, so
// the choice is deterministic). Tenants not writing are never picked.
func HeaviestWriters(rates map[string]float64, fraction float64) []string {
	if fraction <= 0 {
		return nil
	}
	type tr struct {
		id   string
		rate float64
	}
	var all []tr
	var total float64
	for id, r := range rates {
		if r > 0 {
			all = append(all, tr{id, r})
			total += r
		}
	}
	slices.SortFunc(all, func(a, b tr) int {
		if c := cmp.Compare(b.rate, a.rate); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	var out []string
	var sum float64
	for _, t := range all {
		if sum >= fraction*total {
			break
		}
		out = append(out, t.id)
		sum += t.rate
	}
	return out
}
