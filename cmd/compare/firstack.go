package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// firstAckLimit bounds the wait for one new log's first acknowledgements.
const firstAckLimit = time.Minute

// firstAckResult is one run of the new-log workload: for each of its new
// logs, the time from asking for it to the first acknowledged record on
// every one of its partitions (streams).
type firstAckResult struct {
	Parts   int
	Latency latencySummary
}

// runFirstAck creates n new logs of parts partitions (NATS: streams), one
// after another, and times each from the create call until a record is
// acknowledged on every partition: the create, the partitions' first
// leaders and a new client's first metadata (franz-go's defaults; a
// partition without a leader yet is retried after its metadata refresh).
// Each partition gets its own new synchronous publisher, as a client that
// starts using a new topic would.
func runFirstAck(ctx context.Context, s system, prefix string, n, parts int, pl payloads) (firstAckResult, error) {
	res := firstAckResult{Parts: parts}
	lat := make([]time.Duration, 0, n)
	for i := range n {
		log := fmt.Sprintf("%s-%d", prefix, i)
		d, err := firstAck(ctx, s, log, parts, pl)
		if err != nil {
			return res, err
		}
		lat = append(lat, d)
	}
	res.Latency = summarize(lat)
	return res, nil
}

// firstAck is the time from creating log to a record acknowledged on each
// of its parts partitions.
func firstAck(ctx context.Context, s system, log string, parts int, pl payloads) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, firstAckLimit)
	defer cancel()
	start := time.Now()
	if err := s.createLog(ctx, log, parts); err != nil {
		return 0, err
	}
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[p] = publishOnce(ctx, s, log, p, pl.get(p))
		}()
	}
	wg.Wait()
	d := time.Since(start)
	for p, err := range errs {
		if err != nil {
			return 0, fmt.Errorf("%s: first record on %s/%d: %w", s.name(), log, p, err)
		}
	}
	return d, nil
}

// publishOnce publishes value to part of log with a new publisher, again
// after each failure until ctx ends (the client's own retries come first:
// franz-go's until its delivery timeout), and returns nil once one is
// acknowledged.
func publishOnce(ctx context.Context, s system, log string, part int, value []byte) error {
	p, err := s.syncPublisher(ctx, log, part)
	if err != nil {
		return err
	}
	defer p.close()
	for {
		err := p.publish(ctx, value)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
}
