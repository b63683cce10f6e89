package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/cmd/internal/launch"
)

// leaderKiller is a system whose servers the kill-gap workload SIGKILLs.
type leaderKiller interface {
	// killLeader SIGKILLs the server process leading the first partition
	// (stream) of log and returns a func that starts it again and waits
	// until log is led where it was before the kill.
	killLeader(ctx context.Context, log string) (restart func(context.Context) error, err error)
	// gapPublisher is a synchronous publisher to the first partition of
	// log; tuned asks for a client tuned to find a new leader quickly, where
	// the system's client has such a setting.
	gapPublisher(ctx context.Context, log string, tuned bool) (syncPublisher, error)
}

// killGapResult is one run of the kill-gap workload: for each kill, the
// longest interval in which the publisher had no acknowledgement.
type killGapResult struct {
	Gaps []time.Duration
}

func (r killGapResult) summary() latencySummary {
	return summarize(append([]time.Duration(nil), r.Gaps...))
}

// killGapBefore and killGapAfter are how long the publisher runs before a
// kill and after its acknowledgements resume; killGapLimit bounds the wait
// for them to resume.
const (
	killGapBefore = time.Second
	killGapAfter  = time.Second
	killGapLimit  = time.Minute
)

// runKillGap publishes one record at a time to a new one-partition log and,
// kills times, SIGKILLs the leader's server, measures the longest interval
// without an acknowledgement around the kill, restarts the server and
// waits for leadership to settle before the next kill.
func runKillGap(ctx context.Context, s system, k leaderKiller, log string, kills int, tuned bool, pl payloads) (killGapResult, error) {
	var res killGapResult
	if err := s.createLog(ctx, log, 1); err != nil {
		return res, err
	}
	if err := s.settle(ctx, log, 1); err != nil {
		return res, err
	}
	p, err := k.gapPublisher(ctx, log, tuned)
	if err != nil {
		return res, err
	}
	defer p.close()
	for i := range kills {
		gap, err := killOnce(ctx, s, k, p, log, pl.get(i))
		if err != nil {
			return res, fmt.Errorf("kill %d: %w", i+1, err)
		}
		res.Gaps = append(res.Gaps, gap)
	}
	return res, nil
}

// killOnce publishes for killGapBefore, kills the leader, publishes until
// acknowledgements have come again for killGapAfter, restarts the killed
// server and returns the longest interval between acknowledgements (from
// the last before the kill to the first after it, at least).
func killOnce(ctx context.Context, s system, k leaderKiller, p syncPublisher, log string, value []byte) (time.Duration, error) {
	var mu sync.Mutex
	var acks []time.Time
	var killed time.Time // zero until the kill
	stop := launch.Repeat(func() bool {
		pctx, cancel := context.WithTimeout(ctx, killGapLimit)
		err := p.publish(pctx, value)
		cancel()
		if err == nil {
			mu.Lock()
			acks = append(acks, time.Now())
			mu.Unlock()
		}
		return ctx.Err() == nil
	})
	defer stop()
	if !pause(ctx, killGapBefore) {
		return 0, ctx.Err()
	}
	restart, err := k.killLeader(ctx, log)
	if err != nil {
		return 0, err
	}
	mu.Lock()
	killed = time.Now()
	mu.Unlock()
	// Wait until acknowledgements have resumed for killGapAfter.
	deadline := time.Now().Add(killGapLimit)
	for {
		mu.Lock()
		var first time.Time
		for _, a := range acks {
			if a.After(killed) {
				first = a
				break
			}
		}
		mu.Unlock()
		if !first.IsZero() && time.Since(first) >= killGapAfter {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s: no acknowledgement within %v of killing the leader of %s", s.name(), killGapLimit, log)
		}
		if !pause(ctx, 20*time.Millisecond) {
			return 0, ctx.Err()
		}
	}
	stop()
	mu.Lock()
	gap := longestGap(acks)
	mu.Unlock()
	if err := restart(ctx); err != nil {
		return 0, fmt.Errorf("restart after the kill: %w", err)
	}
	return gap, nil
}

// longestGap is the longest interval between consecutive acknowledgements
// in acks (in time order); around a kill it is at least the time from the
// last acknowledgement before the kill to the first after it.
func longestGap(acks []time.Time) time.Duration {
	var longest time.Duration
	for i := 1; i < len(acks); i++ {
		if d := acks[i].Sub(acks[i-1]); d > longest {
			longest = d
		}
	}
	return longest
}

// pause waits d or until ctx ends; false if ctx ended.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
