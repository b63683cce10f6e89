package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// msgSize is the payload of every message: 1 KiB.
const msgSize = 1024

// system is one of the two servers under comparison, as the workload sees
// it. A "log" is a Sluice topic (parts partitions, 3 replicas each) or a
// set of NATS JetStream streams (one stream of 3 replicas per part).
type system interface {
	name() string
	// pids are the server processes whose CPU time is counted.
	pids() []int
	createLog(ctx context.Context, log string, parts int) error
	// settle waits, after the warm-up, until log's leadership is where it
	// will stay, so that timed runs measure the steady state.
	settle(ctx context.Context, log string, parts int) error
	// asyncPublisher publishes to parts of log, in turn, one message
	// each.
	asyncPublisher(ctx context.Context, log string, parts []int, window int) (asyncPublisher, error)
	syncPublisher(ctx context.Context, log string, part int) (syncPublisher, error)
	// consume reads part of log from its first message until it has read
	// want messages, checking each is msgSize bytes.
	consume(ctx context.Context, log string, part int, want int) error
	// deleteLog deletes log and waits until its files are gone
	// (deletelog.go says why).
	deleteLog(ctx context.Context, log string, parts int) error
}

// asyncPublisher publishes without waiting; done runs once per message
// with the outcome, on a goroutine of the client.
type asyncPublisher interface {
	publish(ctx context.Context, value []byte, done func(error)) error
	close()
}

// syncPublisher publishes one message and waits for its acknowledgement.
type syncPublisher interface {
	publish(ctx context.Context, value []byte) error
	close()
}

// payloads hands out 1 KiB values cut from random bytes, so that nothing
// in the path (compression, deduplication) gains from repetition.
type payloads struct{ buf []byte }

func newPayloads() payloads {
	buf := make([]byte, 1<<20+msgSize)
	for i := range buf {
		buf[i] = byte(rand.Uint32())
	}
	return payloads{buf}
}

func (p payloads) get(i int) []byte {
	off := (i * 977) % (len(p.buf) - msgSize)
	return p.buf[off : off+msgSize]
}

// throughputConfig is the many-producer run.
type throughputConfig struct {
	Messages  int // in total, split evenly across producers
	Producers int
	Window    int // messages in flight per producer
	Parts     int // see partsOf
	Warmup    int // messages per part published (sync) before timing
}

// split returns how many messages producer i sends.
func (c throughputConfig) split(i int) int {
	n := c.Messages / c.Producers
	if i < c.Messages%c.Producers {
		n++
	}
	return n
}

// partsOf returns the parts producer i writes, in turn: part i mod Parts
// when there are at least as many producers as parts, else every part p
// with p mod Producers = i (so each part has one producer).
func (c throughputConfig) partsOf(i int) []int {
	if c.Producers >= c.Parts {
		return []int{i % c.Parts}
	}
	var ps []int
	for p := i; p < c.Parts; p += c.Producers {
		ps = append(ps, p)
	}
	return ps
}

// mapping says which parts each producer writes, for the report.
func (c throughputConfig) mapping() string {
	if c.Producers >= c.Parts {
		return fmt.Sprintf("producer i writing to number i mod %d", c.Parts)
	}
	return fmt.Sprintf("producer i writing to every number p with p mod %d = i, one message to each in turn", c.Producers)
}

// perPart returns how many messages each part holds after the run,
// warm-up included.
func (c throughputConfig) perPart() []int {
	out := make([]int, c.Parts)
	for p := range out {
		out[p] = c.Warmup
	}
	for i := range c.Producers {
		ps, n := c.partsOf(i), c.split(i)
		for k, p := range ps {
			out[p] += n / len(ps)
			if k < n%len(ps) {
				out[p]++
			}
		}
	}
	return out
}

// throughputResult is one many-producer run and the read-back after it.
type throughputResult struct {
	Produced   int
	Elapsed    time.Duration
	Latency    latencySummary
	CPUProduce float64 // server CPU seconds during the produce phase
	// WaitProduce is how long the servers' threads were runnable but
	// waiting for a CPU during the produce phase, in seconds: the cost of
	// everything else on the machine, and of their own parallelism.
	WaitProduce float64
	Consumed    int
	ConsumeDur  time.Duration
	CPUConsume  float64
}

func (r throughputResult) msgsPerSec() float64 { return rate(float64(r.Produced), r.Elapsed) }
func (r throughputResult) mbPerSec() float64 {
	return rate(float64(r.Produced)*msgSize, r.Elapsed) / 1e6
}
func (r throughputResult) consumeMsgsPerSec() float64 { return rate(float64(r.Consumed), r.ConsumeDur) }
func (r throughputResult) cpuPerGBProduced() float64 {
	return perGB(r.CPUProduce, int64(r.Produced)*msgSize)
}
func (r throughputResult) cpuPerGBConsumed() float64 {
	return perGB(r.CPUConsume, int64(r.Consumed)*msgSize)
}

// runThroughput creates log, warms it up, then runs cfg.Producers async
// producers at once, each keeping cfg.Window messages in flight, and times
// from the first publish to the last acknowledgement. Then one consumer per
// part reads everything back, timed the same way. Every acknowledgement
// must be a success: a failed publish fails the run.
//
// timed, if not nil, runs just before the timed produce phase starts.
func runThroughput(ctx context.Context, s system, log string, cfg throughputConfig, pl payloads, timed func()) (throughputResult, error) {
	var res throughputResult
	if err := s.createLog(ctx, log, cfg.Parts); err != nil {
		return res, err
	}
	if err := warmup(ctx, s, log, cfg.Parts, cfg.Warmup, pl); err != nil {
		return res, err
	}
	if err := s.settle(ctx, log, cfg.Parts); err != nil {
		return res, err
	}
	pubs := make([]asyncPublisher, cfg.Producers)
	defer func() {
		for _, p := range pubs {
			if p != nil {
				p.close()
			}
		}
	}()
	for i := range pubs {
		p, err := s.asyncPublisher(ctx, log, cfg.partsOf(i), cfg.Window)
		if err != nil {
			return res, err
		}
		pubs[i] = p
	}

	lats := make([][]time.Duration, cfg.Producers)
	errs := make([]error, cfg.Producers)
	if timed != nil {
		timed()
	}
	cpu0, wait0, err := cpuAndWait(s.pids())
	if err != nil {
		return res, err
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i, p := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lats[i], errs[i] = produce(ctx, p, cfg.split(i), cfg.Window, pl, i)
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	cpu1, wait1, err := cpuAndWait(s.pids())
	if err != nil {
		return res, err
	}
	res.WaitProduce = wait1 - wait0
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("%s produce: %w", s.name(), err)
	}
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	res.Produced = len(all)
	res.Latency = summarize(all)
	res.CPUProduce = cpu1 - cpu0

	want := cfg.perPart()
	cerrs := make([]error, cfg.Parts)
	cpu0, err = cpuSeconds(s.pids())
	if err != nil {
		return res, err
	}
	start = time.Now()
	for p := range cfg.Parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cerrs[p] = s.consume(ctx, log, p, want[p])
		}()
	}
	wg.Wait()
	res.ConsumeDur = time.Since(start)
	cpu1, err = cpuSeconds(s.pids())
	if err != nil {
		return res, err
	}
	if err := errors.Join(cerrs...); err != nil {
		return res, fmt.Errorf("%s consume: %w", s.name(), err)
	}
	for _, w := range want {
		res.Consumed += w
	}
	res.CPUConsume = cpu1 - cpu0
	return res, s.deleteLog(ctx, log, cfg.Parts)
}

// produce publishes n messages through p with at most window in flight and
// returns each one's latency, from just before the publish call to its
// acknowledgement.
func produce(ctx context.Context, p asyncPublisher, n, window int, pl payloads, seed int) ([]time.Duration, error) {
	sem := make(chan struct{}, window)
	var mu sync.Mutex
	lat := make([]time.Duration, 0, n)
	var firstErr error
	for j := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		mu.Lock()
		failed := firstErr
		mu.Unlock()
		if failed != nil {
			<-sem
			break
		}
		t0 := time.Now()
		err := p.publish(ctx, pl.get(seed*1_000_003+j), func(err error) {
			d := time.Since(t0)
			mu.Lock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			lat = append(lat, d)
			mu.Unlock()
			<-sem
		})
		if err != nil {
			return nil, err
		}
	}
	for range window {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return nil, firstErr
	}
	if len(lat) != n {
		return nil, fmt.Errorf("%d of %d messages acknowledged", len(lat), n)
	}
	return lat, nil
}

// warmup publishes n messages to every part, one at a time, so that leaders
// are elected, connections open and files created before anything is timed.
func warmup(ctx context.Context, s system, log string, parts, n int, pl payloads) error {
	for part := range parts {
		p, err := s.syncPublisher(ctx, log, part)
		if err != nil {
			return err
		}
		for i := range n {
			if err := p.publish(ctx, pl.get(i)); err != nil {
				p.close()
				return fmt.Errorf("%s warm-up publish: %w", s.name(), err)
			}
		}
		p.close()
	}
	return nil
}

// latencyResult is the single-producer run: one message in flight.
type latencyResult struct {
	Latency latencySummary
	Elapsed time.Duration
	CPU     float64
}

func (r latencyResult) msgsPerSec() float64 { return rate(float64(r.Latency.Count), r.Elapsed) }

// runLatency creates log with one part and publishes n messages one after
// another, each waiting for its acknowledgement, stopping early (and
// saying so in the count) if limit passes.
// timed, if not nil, runs just before the timed phase.
func runLatency(ctx context.Context, s system, log string, n, warm int, limit time.Duration, pl payloads, timed func()) (latencyResult, error) {
	var res latencyResult
	if err := s.createLog(ctx, log, 1); err != nil {
		return res, err
	}
	if err := warmup(ctx, s, log, 1, warm, pl); err != nil {
		return res, err
	}
	if err := s.settle(ctx, log, 1); err != nil {
		return res, err
	}
	p, err := s.syncPublisher(ctx, log, 0)
	if err != nil {
		return res, err
	}
	defer p.close()
	lat := make([]time.Duration, 0, n)
	if timed != nil {
		timed()
	}
	cpu0, err := cpuSeconds(s.pids())
	if err != nil {
		return res, err
	}
	start := time.Now()
	for i := range n {
		if time.Since(start) > limit {
			break
		}
		t0 := time.Now()
		if err := p.publish(ctx, pl.get(i)); err != nil {
			return res, fmt.Errorf("%s publish: %w", s.name(), err)
		}
		lat = append(lat, time.Since(t0))
	}
	res.Elapsed = time.Since(start)
	cpu1, err := cpuSeconds(s.pids())
	if err != nil {
		return res, err
	}
	res.CPU = cpu1 - cpu0
	res.Latency = summarize(lat)
	return res, nil
}
