// Command compare runs the same workload on a three-broker Sluice cell and
// a three-node NATS JetStream cluster, both real server processes on
// loopback with fsync before acknowledgement, and writes a table of
// throughput, publish latency, consumer throughput and server CPU per GB
// (`make bench`). Only the driver lives here; it talks to Sluice over the
// Kafka protocol and the control plane's public API, like any client.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

type options struct {
	tenantd, natsServer, postgres, dir, doc, out, commit string
	keep, pprof                                          bool
	profileDir, traceDir, brokerLogLevel                 string
	profileScale                                         bool
	profileSeconds                                       int
	runs, latencyMessages, warmup                        int
	latencyLimit                                         time.Duration
	tp                                                   throughputConfig
	only                                                 string
	// newLogs new logs are timed from creation to first acknowledgement,
	// once with one partition and once with newLogParts.
	newLogs, newLogParts int
	// kills is how many times each run SIGKILLs a log's leader, with a
	// default and with a tuned client.
	kills int
	// scaleParts is the partition (stream) count of the second throughput
	// run, right after the first in every run; 0 skips it.
	scaleParts int
	// scaleProducers is the producer count of that run; 0: one a
	// partition (and at least the first run's).
	scaleProducers int
	// inFlight is the Sluice throughput producers' requests in flight
	// per broker (sluiceConfig.InFlight).
	inFlight int
}

// scaled is the throughput run over scaleParts partitions: the same
// messages and window per producer, one producer per partition (at least
// as many producers as the first run), or scaleProducers each writing
// its share of the partitions in turn.
func (o options) scaled() throughputConfig {
	c := o.tp
	c.Parts = o.scaleParts
	c.Producers = max(o.tp.Producers, o.scaleParts)
	if o.scaleProducers > 0 {
		c.Producers = o.scaleProducers
	}
	c.Messages = max(c.Messages, c.Producers)
	return c
}

func main() {
	var o options
	flag.StringVar(&o.tenantd, "tenantd", "bin/tenantd", "the tenantd binary")
	flag.StringVar(&o.natsServer, "nats-server", ".cache/bin/nats-server", "the nats-server binary (v2.15.2)")
	flag.StringVar(&o.postgres, "postgres", defaultPostgres(), "Postgres URL of a role that may create databases (env SLUICE_TEST_DATABASE_URL)")
	flag.StringVar(&o.dir, "dir", "", "data and logs directory (default: a new temporary directory, removed afterwards unless -keep)")
	flag.BoolVar(&o.keep, "keep", false, "keep the data and logs directory")
	flag.StringVar(&o.doc, "doc", "", "Markdown file whose compare section gets the results (e.g. docs/benchmarks.md)")
	flag.StringVar(&o.out, "out", "", "also write the generated section to this file")
	flag.StringVar(&o.commit, "commit", "", "the source commit, for the report")
	flag.IntVar(&o.runs, "runs", 3, "repetitions of each workload on each system (interleaved)")
	flag.IntVar(&o.tp.Messages, "messages", 500_000, "messages per throughput run, across all producers (at 200,000 a Sluice run lasted about a second)")
	flag.IntVar(&o.tp.Producers, "producers", 4, "concurrent producers in the throughput run, each on its own connection")
	flag.IntVar(&o.tp.Window, "window", 1000, "messages in flight per producer in the throughput run")
	flag.IntVar(&o.tp.Parts, "partitions", 1, "Sluice partitions, and NATS streams, per log (each replicated 3 times)")
	flag.IntVar(&o.warmup, "warmup", 100, "messages published (one at a time) to each partition or stream before timing")
	flag.IntVar(&o.latencyMessages, "latency-messages", 5000, "messages of the single-producer latency run")
	flag.DurationVar(&o.latencyLimit, "latency-limit", time.Minute, "stop the latency run after this long")
	flag.BoolVar(&o.pprof, "pprof", false, "start the Sluice brokers with -debug-listen (pprof)")
	flag.StringVar(&o.brokerLogLevel, "broker-log-level", "warn", "the Sluice brokers' -log-level (info logs each election and leader change; logs in -dir, kept with -keep)")
	flag.BoolVar(&o.profileScale, "profile-scale", false, "take the -cpuprofile-dir profiles in the -scale-partitions run instead of the first")
	flag.StringVar(&o.profileDir, "cpuprofile-dir", "", "save a CPU profile of every broker, from the start of the first Sluice throughput run's timed produce phase, here (implies -pprof)")
	flag.StringVar(&o.traceDir, "trace-dir", "", "save an execution trace of every broker, from the start of the first Sluice latency run's timed phase, here (implies -pprof)")
	flag.IntVar(&o.profileSeconds, "profile-seconds", 10, "length of those profiles and traces")
	flag.StringVar(&o.only, "only", "both", "sluice, nats or both")
	flag.IntVar(&o.newLogs, "new-logs", 10, "new topics (NATS: streams) per run timed from creation to first acknowledged record, with 1 and with -new-log-partitions partitions; 0 skips")
	flag.IntVar(&o.kills, "kills", 2, "SIGKILLs of the leader's server per run and client (default and tuned), timing the longest interval without an acknowledgement; 0 skips")
	flag.IntVar(&o.newLogParts, "new-log-partitions", 12, "partitions (NATS: streams) of the second set of new logs")
	flag.IntVar(&o.scaleParts, "scale-partitions", 12, "partitions (NATS: streams) of a second throughput run right after the first, one producer each; 0 skips")
	flag.IntVar(&o.scaleProducers, "scale-producers", 0, "producers of that run, each writing its share of the partitions in turn; 0: one a partition")
	flag.IntVar(&o.inFlight, "in-flight", 1, "Sluice throughput producers' produce requests in flight per broker; above 1 they are not idempotent (franz-go allows more only then)")
	flag.Parse()
	o.tp.Warmup = o.warmup
	if o.profileDir != "" || o.traceDir != "" {
		o.pprof = true
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func defaultPostgres() string {
	if u := os.Getenv("SLUICE_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// runResults are every run's results of one system.
type runResults struct {
	tp []throughputResult
	// tpScale are the throughput runs over -scale-partitions partitions,
	// each made right after the tp run of the same index.
	tpScale []throughputResult
	lat     []latencyResult
	// newLog and newLogs are the new-log runs with 1 and with
	// -new-log-partitions partitions.
	newLog, newLogs []firstAckResult
	// gap and gapTuned are the kill-gap runs with the default and with the
	// tuned client.
	gap, gapTuned []killGapResult
}

func run(ctx context.Context, o options) error {
	if o.tp.Producers < 1 || o.tp.Parts < 1 || o.tp.Window < 1 || o.tp.Messages < o.tp.Producers || o.runs < 1 {
		return fmt.Errorf("need producers, partitions, window, runs >= 1 and messages >= producers")
	}
	if o.newLogs < 0 || o.newLogParts < 1 || o.kills < 0 || o.scaleParts < 0 || o.scaleProducers < 0 || o.inFlight < 1 {
		return fmt.Errorf("need -new-logs, -kills, -scale-partitions >= 0 and -new-log-partitions, -in-flight >= 1")
	}
	if o.only != "both" && o.only != "sluice" && o.only != "nats" {
		return fmt.Errorf("-only %q: want sluice, nats or both", o.only)
	}
	dir := o.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "sluice-compare-")
		if err != nil {
			return err
		}
		dir = d
		if !o.keep {
			defer os.RemoveAll(dir)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "compare: data and logs in %s\n", dir)
	load0 := loadavg()
	began := time.Now().UTC()

	var systems []system
	if o.only != "nats" {
		c, err := startSluice(ctx, sluiceConfig{Tenantd: o.tenantd, AdminURL: o.postgres, Dir: dir, Pprof: o.pprof, LogLevel: o.brokerLogLevel, InFlight: o.inFlight})
		if err != nil {
			return fmt.Errorf("start sluice: %w", err)
		}
		defer c.close()
		systems = append(systems, c)
	}
	if o.only != "sluice" {
		n, err := startNATS(ctx, o.natsServer, dir)
		if err != nil {
			return fmt.Errorf("start nats: %w", err)
		}
		defer n.close()
		systems = append(systems, n)
	}

	pl := newPayloads()
	results := make(map[string]*runResults)
	for _, s := range systems {
		results[s.name()] = &runResults{}
	}
	for r := range o.runs {
		order := systems
		if r%2 == 1 { // alternate who goes first, against drift in the machine's load
			order = []system{systems[len(systems)-1]}
			order = append(order, systems[:len(systems)-1]...)
		}
		for _, s := range order {
			timed, profiles := o.firstSluiceRun(ctx, s, r, o.profileDir, "profile")
			var scaleTimed func()
			if o.profileScale {
				scaleTimed, timed = timed, nil
			}
			fmt.Fprintf(os.Stderr, "compare: run %d/%d, %s: %d producers x %d in flight, %d messages, load %s\n",
				r+1, o.runs, s.name(), o.tp.Producers, o.tp.Window, o.tp.Messages, loadavg())
			tp, err := runThroughput(ctx, s, fmt.Sprintf("tp%d", r+1), o.tp, pl, timed)
			if err != nil {
				return fmt.Errorf("run %d, %s: %w", r+1, s.name(), err)
			}
			if !o.profileScale {
				if err := profiles(); err != nil {
					return err
				}
			}
			fmt.Fprintf(os.Stderr, "compare:   %.0f msgs/s, p50 %v p99 %v, consume %.0f msgs/s, %.1f / %.1f CPU s per GB, run-queue wait %.2f s per s\n",
				tp.msgsPerSec(), tp.Latency.P50, tp.Latency.P99, tp.consumeMsgsPerSec(), tp.cpuPerGBProduced(), tp.cpuPerGBConsumed(), tp.WaitProduce/tp.Elapsed.Seconds())
			if o.scaleParts > 0 {
				sc := o.scaled()
				tps, err := runThroughput(ctx, s, fmt.Sprintf("tp%d-%dp", r+1, sc.Parts), sc, pl, scaleTimed)
				if err != nil {
					return fmt.Errorf("run %d, %s, %d partitions: %w", r+1, s.name(), sc.Parts, err)
				}
				if o.profileScale {
					if err := profiles(); err != nil {
						return err
					}
				}
				fmt.Fprintf(os.Stderr, "compare:   %d partitions, %d producers: %.0f msgs/s (%.2f× the 1-partition run), p50 %v p99 %v, consume %.0f msgs/s, load %s\n",
					sc.Parts, sc.Producers, tps.msgsPerSec(), tps.msgsPerSec()/tp.msgsPerSec(), tps.Latency.P50, tps.Latency.P99, tps.consumeMsgsPerSec(), loadavg())
				results[s.name()].tpScale = append(results[s.name()].tpScale, tps)
			}
			latTimed, traces := o.firstSluiceRun(ctx, s, r, o.traceDir, "trace")
			lat, err := runLatency(ctx, s, fmt.Sprintf("lat%d", r+1), o.latencyMessages, o.warmup, o.latencyLimit, pl, latTimed)
			if err != nil {
				return fmt.Errorf("latency run %d, %s: %w", r+1, s.name(), err)
			}
			if err := traces(); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "compare:   single producer: %d messages, p50 %v p99 %v p99.9 %v\n",
				lat.Latency.Count, lat.Latency.P50, lat.Latency.P99, lat.Latency.P999)
			results[s.name()].tp = append(results[s.name()].tp, tp)
			results[s.name()].lat = append(results[s.name()].lat, lat)
			if o.newLogs > 0 {
				for _, parts := range []int{1, o.newLogParts} {
					fa, err := runFirstAck(ctx, s, fmt.Sprintf("new%d-%dp", r+1, parts), o.newLogs, parts, pl)
					if err != nil {
						return fmt.Errorf("new-log run %d, %s: %w", r+1, s.name(), err)
					}
					fmt.Fprintf(os.Stderr, "compare:   %d new logs of %d partition(s), creation to first ack on every partition: p50 %v p99 %v max %v\n",
						fa.Latency.Count, parts, fa.Latency.P50, fa.Latency.P99, fa.Latency.Max)
					if parts == 1 {
						results[s.name()].newLog = append(results[s.name()].newLog, fa)
					} else {
						results[s.name()].newLogs = append(results[s.name()].newLogs, fa)
					}
				}
			}
			if k, ok := s.(leaderKiller); ok && o.kills > 0 {
				for _, tuned := range []bool{false, true} {
					g, err := runKillGap(ctx, s, k, fmt.Sprintf("gap%d-%t", r+1, tuned), o.kills, tuned, pl)
					if err != nil {
						return fmt.Errorf("kill-gap run %d, %s: %w", r+1, s.name(), err)
					}
					sum := g.summary()
					fmt.Fprintf(os.Stderr, "compare:   %d leader kills (tuned client %t): longest interval without an ack p50 %v max %v, load %s\n",
						sum.Count, tuned, sum.P50, sum.Max, loadavg())
					if tuned {
						results[s.name()].gapTuned = append(results[s.name()].gapTuned, g)
					} else {
						results[s.name()].gap = append(results[s.name()].gap, g)
					}
				}
			}
		}
	}
	load1 := loadavg()

	section := renderSection(o, results, began, load0, load1)
	fmt.Print(section)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(section), 0o644); err != nil {
			return err
		}
	}
	if o.doc != "" {
		if o.only != "both" {
			return fmt.Errorf("-doc needs both systems measured (-only both)")
		}
		old, err := os.ReadFile(o.doc)
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		doc, err := replaceSection(string(old), section)
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.doc, []byte(doc), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "compare: wrote the results into %s\n", o.doc)
	}
	return nil
}

// firstSluiceRun returns, for the first run (r 0) of Sluice when dir is
// set, a func that starts taking profiles of kind into dir when the timed
// phase starts and one that waits for them and saves them; otherwise nil
// and a func that does nothing.
func (o options) firstSluiceRun(ctx context.Context, s system, r int, dir, kind string) (start func(), finish func() error) {
	finish = func() error { return nil }
	c, ok := s.(*sluiceCell)
	if !ok || r != 0 || dir == "" {
		return nil, finish
	}
	var done func() error
	return func() { done = startProfiles(ctx, c.debug, dir, kind, o.profileSeconds) }, func() error {
		if done == nil {
			return nil
		}
		return done()
	}
}

// startProfiles fetches a CPU profile (kind "profile") or an execution
// trace (kind "trace") from every broker's pprof endpoint at once; the
// returned func waits for them and saves them to dir.
func startProfiles(ctx context.Context, addrs []string, dir, kind string, seconds int) func() error {
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fetchProfile(ctx, a, kind, filepath.Join(dir, fmt.Sprintf("b%d.%s.pprof", i+1, kind)), seconds)
		}()
	}
	return func() error {
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		fmt.Fprintf(os.Stderr, "compare: broker %ss in %s\n", kind, dir)
		return nil
	}
}

func fetchProfile(ctx context.Context, addr, kind, file string, seconds int) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", addr, kind, seconds), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetch profile from %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetch profile from %s: %s", addr, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// machine describes the host for the report.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB", float64(kb)/(1<<20))
		}
	}
	return fmt.Sprintf("%d vCPU (%s)%s, %s/%s", runtime.NumCPU(), model, mem, runtime.GOOS, runtime.GOARCH)
}

func commandVersion(bin string, args ...string) string {
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(bytes.SplitN(out, []byte("\n"), 2)[0]))
}

// rowOf is one metric of the table: f of every Sluice run, then of every
// NATS run.
func rowOf[R any](metric string, sluice, nats []R, f func(R) float64, format func(float64) string) row {
	r := row{metric: metric, format: format}
	for _, x := range sluice {
		r.sluice = append(r.sluice, f(x))
	}
	for _, x := range nats {
		r.nats = append(r.nats, f(x))
	}
	return r
}

// renderSection is the generated part of the docs section: when, where,
// what exactly ran, and the table.
func renderSection(o options, res map[string]*runResults, began time.Time, load0, load1 string) string {
	s, n := res["Sluice"], res["NATS JetStream"]
	if s == nil {
		s = &runResults{}
	}
	if n == nil {
		n = &runResults{}
	}
	tpRow := func(metric string, f func(throughputResult) float64, format func(float64) string) row {
		return rowOf(metric, s.tp, n.tp, f, format)
	}
	latRow := func(metric string, f func(latencyResult) float64, format func(float64) string) row {
		return rowOf(metric, s.lat, n.lat, f, format)
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	rows := []row{
		tpRow(fmt.Sprintf("produce msgs/s (%d producers)", o.tp.Producers), throughputResult.msgsPerSec, fmtCount),
		tpRow("produce MB/s (10^6 B of payload)", throughputResult.mbPerSec, fmtMB),
		tpRow("publish latency p50, ms", func(r throughputResult) float64 { return ms(r.Latency.P50) }, fmtMs),
		tpRow("publish latency p99, ms", func(r throughputResult) float64 { return ms(r.Latency.P99) }, fmtMs),
		tpRow("publish latency p99.9, ms", func(r throughputResult) float64 { return ms(r.Latency.P999) }, fmtMs),
		tpRow(fmt.Sprintf("consumer msgs/s (%d consumer(s))", o.tp.Parts), throughputResult.consumeMsgsPerSec, fmtCount),
		tpRow("server CPU s per GB produced", throughputResult.cpuPerGBProduced, fmtCPU),
		tpRow("server CPU s per GB consumed", throughputResult.cpuPerGBConsumed, fmtCPU),
		tpRow("server threads' run-queue wait per s of produce", func(r throughputResult) float64 { return r.WaitProduce / r.Elapsed.Seconds() }, fmtMs),
	}
	if o.scaleParts > 0 {
		sc := o.scaled()
		scRow := func(metric string, f func(throughputResult) float64, format func(float64) string) row {
			return rowOf(metric, s.tpScale, n.tpScale, f, format)
		}
		// The ratio of each run's scaled figure to the 1-partition figure
		// measured just before it, on the same system.
		gain := func(sys *runResults) []float64 {
			var v []float64
			for i := range min(len(sys.tp), len(sys.tpScale)) {
				if one := sys.tp[i].msgsPerSec(); one > 0 {
					v = append(v, sys.tpScale[i].msgsPerSec()/one)
				}
			}
			return v
		}
		rows = append(rows,
			scRow(fmt.Sprintf("%d partitions / %d streams: produce msgs/s (%d producers)", sc.Parts, sc.Parts, sc.Producers), throughputResult.msgsPerSec, fmtCount),
			scRow(fmt.Sprintf("%d partitions / %d streams: produce MB/s", sc.Parts, sc.Parts), throughputResult.mbPerSec, fmtMB),
			row{metric: fmt.Sprintf("%d partitions / %d streams: produce msgs/s over the 1-partition run's, same run", sc.Parts, sc.Parts), sluice: gain(s), nats: gain(n), format: fmtRatio},
			scRow(fmt.Sprintf("%d partitions / %d streams: publish latency p50, ms", sc.Parts, sc.Parts), func(r throughputResult) float64 { return ms(r.Latency.P50) }, fmtMs),
			scRow(fmt.Sprintf("%d partitions / %d streams: publish latency p99, ms", sc.Parts, sc.Parts), func(r throughputResult) float64 { return ms(r.Latency.P99) }, fmtMs),
			scRow(fmt.Sprintf("%d partitions / %d streams: consumer msgs/s (%d consumers)", sc.Parts, sc.Parts, sc.Parts), throughputResult.consumeMsgsPerSec, fmtCount),
			scRow(fmt.Sprintf("%d partitions / %d streams: server CPU s per GB produced", sc.Parts, sc.Parts), throughputResult.cpuPerGBProduced, fmtCPU),
		)
	}
	rows = append(rows,
		latRow("single producer, p50 ms", func(r latencyResult) float64 { return ms(r.Latency.P50) }, fmtMs),
		latRow("single producer, p99 ms", func(r latencyResult) float64 { return ms(r.Latency.P99) }, fmtMs),
		latRow("single producer, p99.9 ms", func(r latencyResult) float64 { return ms(r.Latency.P999) }, fmtMs),
		latRow("single producer, msgs/s", latencyResult.msgsPerSec, fmtCount),
	)
	if o.newLogs > 0 {
		faRow := func(metric string, sl, na []firstAckResult, f func(firstAckResult) float64) row {
			return rowOf(metric, sl, na, f, fmtMs)
		}
		p50 := func(r firstAckResult) float64 { return ms(r.Latency.P50) }
		p99 := func(r firstAckResult) float64 { return ms(r.Latency.P99) }
		rows = append(rows,
			faRow("new topic to first ack, p50 ms", s.newLog, n.newLog, p50),
			faRow("new topic to first ack, p99 ms", s.newLog, n.newLog, p99),
			faRow(fmt.Sprintf("new %d-partition topic (%d streams) to an ack on each, p50 ms", o.newLogParts, o.newLogParts), s.newLogs, n.newLogs, p50),
			faRow(fmt.Sprintf("new %d-partition topic (%d streams) to an ack on each, p99 ms", o.newLogParts, o.newLogParts), s.newLogs, n.newLogs, p99),
		)
	}
	latCounts := func(rs []latencyResult) string {
		var c []string
		for _, r := range rs {
			c = append(c, fmt.Sprint(r.Latency.Count))
		}
		return strings.Join(c, " / ")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "- **Date:** %s (UTC), %d runs of each workload on each system, interleaved, alternating which system goes first.\n",
		began.Format("2006-01-02 15:04"), o.runs)
	fmt.Fprintf(&b, "- **Machine:** %s; load average (1/5/15 min) %s before, %s after. The machine was shared with other work.\n",
		machine(), load0, load1)
	commit := o.commit
	if commit == "" {
		commit = "unknown"
	}
	fmt.Fprintf(&b, "- **Software:** Sluice at commit %s (%s), %s, clients franz-go and nats.go from go.mod.\n",
		commit, runtime.Version(), commandVersion(o.natsServer, "--version"))
	doc := ""
	if o.doc != "" {
		doc = " -doc " + o.doc
	}
	fmt.Fprintf(&b, "- **Command:** `go run ./cmd/compare -runs %d -messages %d -producers %d -window %d -partitions %d -scale-partitions %d -scale-producers %d -warmup %d -latency-messages %d -new-logs %d -new-log-partitions %d -kills %d -in-flight %d%s`.\n",
		o.runs, o.tp.Messages, o.tp.Producers, o.tp.Window, o.tp.Parts, o.scaleParts, o.scaleProducers, o.warmup, o.latencyMessages, o.newLogs, o.newLogParts, o.kills, o.inFlight, doc)
	fmt.Fprintf(&b, "- **Workload:** %d messages of %d bytes (random) per throughput run, from %d producers at once, each on its own connection with %d messages in flight; %d Sluice partition(s) / NATS stream(s), 3 replicas each, producer i writing to number i mod %d; %d warm-up messages per partition or stream first (not timed). Then %d consumer(s), one per partition or stream, read everything from the start; then the log is deleted and its files removed, so that the next run does not write into a page cache full of this one's data. Then a single producer publishes up to %d messages one at a time (messages measured per run: Sluice %s, NATS %s).\n",
		o.tp.Messages, msgSize, o.tp.Producers, o.tp.Window, o.tp.Parts, o.tp.Parts, o.warmup, o.tp.Parts, o.latencyMessages, latCounts(s.lat), latCounts(n.lat))
	if o.scaleParts > 0 {
		sc := o.scaled()
		fmt.Fprintf(&b, "- **Partitions:** right after each 1-partition throughput run, the same %d messages over a new log of %d Sluice partitions / %d NATS streams, from %d producers (%s), %d in flight each, then one consumer per partition or stream; the ratio row divides each run's figure by the 1-partition figure measured just before it on the same system.\n",
			sc.Messages, sc.Parts, sc.Parts, sc.Producers, sc.mapping(), sc.Window)
	}
	if o.newLogs > 0 {
		fmt.Fprintf(&b, "- **New logs:** per run, %d new topics of 1 partition, then %d of %d partitions (NATS: %d new streams of 1, then %d sets of %d), one after another, each timed from the create call to a record acknowledged on every partition (stream), each partition published by its own new client with default settings (franz-go: a partition without a leader is retried after a metadata refresh, MetadataMinAge 5 s); percentiles over the run's topics, the table's cell the median of runs.\n",
			o.newLogs, o.newLogs, o.newLogParts, o.newLogs, o.newLogs, o.newLogParts)
	}
	if o.kills > 0 {
		gRow := func(metric string, sl, na []killGapResult, f func(latencySummary) time.Duration) row {
			return rowOf(metric, sl, na, func(r killGapResult) float64 { return ms(f(r.summary())) }, fmtMs)
		}
		p50 := func(l latencySummary) time.Duration { return l.P50 }
		mx := func(l latencySummary) time.Duration { return l.Max }
		rows = append(rows,
			gRow("leader SIGKILLed: longest gap without an ack, p50 ms", s.gap, n.gap, p50),
			gRow("leader SIGKILLed: longest gap without an ack, max ms", s.gap, n.gap, mx),
			gRow("same, tuned client, p50 ms", s.gapTuned, n.gapTuned, p50),
			gRow("same, tuned client, max ms", s.gapTuned, n.gapTuned, mx),
		)
		fmt.Fprintf(&b, "- **Leader kills:** per run and client, a new 1-partition topic (NATS: stream), one publisher sending one record at a time; %d times: publish %v, SIGKILL the server leading it, publish until acks have come again for %v, take the longest interval between acks, restart the server and wait until it is back (Sluice: every broker names one serving leader, then every partition of the cell is led by its preferred replica again, which a transfer hands only to a caught-up replica; NATS: the stream has a leader and both other replicas current). Default client: franz-go defaults (MetadataMinAge 5 s); nats.go with the latency run's 30 s per publish. Tuned: franz-go with MetadataMinAge %v; nats.go with %v per publish, published again after a failure. Cells: median over runs of each run's p50 and max over its kills.\n",
			o.kills, killGapBefore, killGapAfter, gapTunedMetadataMinAge, gapTunedNATSTimeout)
	}
	b.WriteString("\n")
	b.WriteString(renderTable(rows))
	return b.String()
}
