package transport

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// BenchmarkIdleCell measures the CPU that a 3-broker cell of idle Raft
// groups costs in this process (three Nodes, every raft.Raft, the Go
// runtime): after elections, leaders are spread evenly with leadership
// transfers, then user+system CPU is read with getrusage(RUSAGE_SELF) over
// b.N seconds of idleness and reported as % of one core, with the garbage
// collector's share of it (gc-%core: runtime/metrics' estimate of the CPU
// its workers and assists used) and the cycles that ended in the interval:
// with thousands of goroutine stacks to scan, one cycle in a short window
// moves the figure by several points, so read %core with gc-cycles. Set
// IDLE_CPUPROFILE=file to write a CPU profile of the idle interval only,
// IDLE_ALLOCPROFILE=file for allocation profiles at its start and end.
// It also reports the idle interval's pre-votes and votes (an idle group
// that elects), why (elections_bench_test.go), the calls that timed out
// and the connections closed because a peer was silent for the liveness
// window (silence.go).
func BenchmarkIdleCell(b *testing.B) {
	for _, groups := range []int{300, 1000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			ev := newEventLog()
			c := newCell(b, 3, groups, 0, ev.nodeLogger, ev.raftLogger)
			// A cell that never settles is reported, not failed: its
			// CPU and leaderless-groups figures are the finding.
			if c.settle(3 * time.Minute) {
				c.balanceLeaders(b, 3*time.Minute)
			} else {
				b.Logf("%d of %d groups still without one leader after 3m", c.leaderless(), groups)
			}
			spread := c.leaderSpread()
			// Let replication settle into its idle rhythm: two commit
			// timeouts, so every follower has had the empty append that
			// tells it the commit index of the leaders' first entries.
			time.Sleep(2*RaftConfig("").CommitTimeout + 2*time.Second)

			var sent0, timedOut0, silent0 uint64
			kinds0 := map[string]uint64{}
			for _, n := range c.nodes {
				sent0 += totalSent(n)
				addSent(kinds0, n)
				st := n.Stats()
				timedOut0, silent0 = timedOut0+st.TimedOut, silent0+st.Silent
			}
			if p := os.Getenv("IDLE_CPUPROFILE"); p != "" {
				f, err := os.Create(p)
				if err != nil {
					b.Fatal(err)
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					b.Fatal(err)
				}
				defer pprof.StopCPUProfile()
			}
			writeAllocs(b, "IDLE_ALLOCPROFILE", ".start")
			defer writeAllocs(b, "IDLE_ALLOCPROFILE", ".end")
			gc0 := readGC()
			ev.on.Store(true)
			before, start := cpuTime(b), time.Now()
			b.ResetTimer()
			for range b.N {
				time.Sleep(time.Second) // measuring an idle interval
			}
			b.StopTimer()
			used, wall := cpuTime(b)-before, time.Since(start)
			ev.on.Store(false)
			events := ev.snapshot()
			gc := readGC()
			var sent uint64
			kinds := map[string]uint64{}
			for _, n := range c.nodes {
				sent += totalSent(n)
				addSent(kinds, n)
			}
			for k, v := range kinds {
				kinds[k] = v - kinds0[k]
			}
			b.Logf("sent in %s by kind (quiesced: heartbeats answered without sending): %v", wall.Round(time.Millisecond), kinds)
			b.ReportMetric(100*used.Seconds()/wall.Seconds(), "%core")
			b.ReportMetric(float64(sent-sent0)/wall.Seconds(), "rpc/s")
			b.ReportMetric(100*(gc.cpu-gc0.cpu)/wall.Seconds(), "gc-%core")
			b.ReportMetric(float64(gc.cycles-gc0.cycles), "gc-cycles")
			b.ReportMetric(float64(slices.Min(spread)), "min-leaders/node")
			b.ReportMetric(float64(slices.Max(spread)), "max-leaders/node")
			b.ReportMetric(float64(c.leaderless()), "leaderless-groups")
			b.Logf("raft and transport warnings in the idle interval: %v", events)
			b.ReportMetric(float64(count(events, msgFollowerTimeout)), "follower-timeouts")
			b.ReportMetric(float64(count(events, msgLeaseStepDown)), "lease-stepdowns")
			b.ReportMetric(float64(count(events, msgHeartbeatFailed)), "failed-heartbeats")
			b.ReportMetric(float64(count(events, msgPeerDown)), "peers-down")
			b.ReportMetric(float64(kinds["request_pre_vote"]), "pre-votes")
			b.ReportMetric(float64(kinds["request_vote"]), "votes")
			// Calls that timed out (each failing alone) and connections
			// closed because a peer sent nothing for the liveness window.
			var timedOut, silent uint64
			for _, n := range c.nodes {
				st := n.Stats()
				timedOut, silent = timedOut+st.TimedOut, silent+st.Silent
			}
			b.ReportMetric(float64(timedOut-timedOut0), "timed-out-calls")
			b.ReportMetric(float64(silent-silent0), "silent-closes")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// gcStats is the garbage collector's work so far: CPU seconds (marking,
// assists and pauses, as runtime/metrics estimates them) and cycles.
type gcStats struct {
	cpu    float64
	cycles uint64
}

func readGC() gcStats {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return gcStats{cpu: s[0].Value.Float64(), cycles: s[1].Value.Uint64()}
}

// writeAllocs writes the allocation profile to the file named by the
// environment variable env, with suffix appended; nothing if env is unset.
// The idle interval's allocations are the difference of the two
// (go tool pprof -sample_index alloc_space -base f.start f.end).
func writeAllocs(b *testing.B, env, suffix string) {
	p := os.Getenv(env)
	if p == "" {
		return
	}
	runtime.GC() // the profile is as of the last GC
	f, err := os.Create(p + suffix)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

func addSent(m map[string]uint64, n *Node) {
	st := n.Stats()
	for k, v := range st.Sent {
		m[k] += v
	}
	m["quiesced"] += st.Quiesced
}

func totalSent(n *Node) uint64 {
	var s uint64
	for _, v := range n.Stats().Sent {
		s += v
	}
	return s
}

func cpuTime(b testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// balanceLeaders moves the leadership of group i to node i%len(nodes).
func (c *cell) balanceLeaders(t testing.TB, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		moved := 0
		for gi, g := range c.groups {
			want := gi % len(c.nodes)
			l := c.leader(g)
			if l < 0 || l == want {
				continue
			}
			moved++
			to := c.nodes[want]
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				_ = c.rafts[g][l].LeadershipTransferToServer(to.ID(), to.Addr()).Error()
			})
		}
		wg.Wait()
		if moved == 0 {
			return
		}
	}
	t.Logf("leaders not fully balanced after %s: %v", timeout, c.leaderSpread())
}

// BenchmarkAppendThroughput sends AppendEntries of 64 KiB entries from one
// Node to another whose group acknowledges at once (no Raft, no disk): the
// transport's own ceiling, synchronous and pipelined.
func BenchmarkAppendThroughput(b *testing.B) {
	for _, tc := range []struct {
		name    string
		entries int
		window  int // 0 = synchronous AppendEntries
	}{
		{"entries=1/sync", 1, 0},
		{"entries=1/pipeline=2", 1, 2},
		{"entries=1/pipeline=8", 1, 8},
		{"entries=16/sync", 16, 0},
		{"entries=16/pipeline=2", 16, 2},
		{"entries=16/pipeline=8", 16, 8},
	} {
		b.Run(tc.name, func(b *testing.B) {
			nodes := newNodes(b, 2, nil, func(c *Config) {
				if tc.window > 0 {
					c.PipelineWindow = tc.window
				}
			})
			a, dst := nodes[0], nodes[1]
			serveFake(b, dst, "g", nil)
			g := mustGroup(b, a, "g")
			req := bigAppend(1, 1, tc.entries, 64<<10)
			b.SetBytes(int64(tc.entries) << 16)
			b.ReportAllocs()
			b.ResetTimer()
			if tc.window == 0 {
				var resp raft.AppendEntriesResponse
				for range b.N {
					if err := g.AppendEntries(dst.ID(), dst.Addr(), req, &resp); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			p, err := g.AppendEntriesPipeline(dst.ID(), dst.Addr())
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			errc := make(chan error, 1)
			go func() {
				for range b.N {
					f := <-p.Consumer()
					if err := f.Error(); err != nil {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
			for range b.N {
				if _, err := p.AppendEntries(req, &raft.AppendEntriesResponse{}); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkHeartbeatUnderLoad measures heartbeat round trips between two
// Nodes, alone and while another group streams 8 MiB AppendEntries to the
// same peer back to back, and reports their p50/p99/max. Linger is off so
// the figures show lane isolation, not write coalescing.
func BenchmarkHeartbeatUnderLoad(b *testing.B) {
	for _, load := range []bool{false, true} {
		b.Run(fmt.Sprintf("load=%v", load), func(b *testing.B) {
			nodes := newNodes(b, 2, nil, func(c *Config) { c.Linger = -1 })
			a, dst := nodes[0], nodes[1]
			serveFake(b, dst, "hb", nil)
			serveFake(b, dst, "bulk", nil)
			hb, bulk := mustGroup(b, a, "hb"), mustGroup(b, a, "bulk")
			stop, stopped := make(chan struct{}), make(chan struct{})
			var bulkBytes int64
			go func() {
				defer close(stopped)
				if !load {
					return
				}
				req := bigAppend(1, 1, 8, 1<<20)
				var resp raft.AppendEntriesResponse
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := bulk.AppendEntries(dst.ID(), dst.Addr(), req, &resp); err == nil {
						bulkBytes += 8 << 20
					}
				}
			}()
			lat := make([]time.Duration, 0, b.N)
			req := heartbeatReq(1)
			var resp raft.AppendEntriesResponse
			start := time.Now()
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				if err := hb.AppendEntries(dst.ID(), dst.Addr(), req, &resp); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			close(stop)
			<-stopped
			elapsed := time.Since(start)
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
			b.ReportMetric(float64(bulkBytes)/elapsed.Seconds()/(1<<20), "bulk-MiB/s")
		})
	}
}
