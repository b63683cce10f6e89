// Command chaos runs a Sluice cell of real tenantd processes — a control
// plane on a scratch Postgres database and three brokers, or four with the
// move nemesis — under faults (SIGKILL, SIGSTOP/SIGCONT, restarts, Raft
// network partitions through a fault-injecting proxy, and replica moves
// started and cancelled through the control plane), with keyed idempotent producers and consumers
// recording every acknowledgement and poll, and checks the history against
// Jepsen's Kafka properties: lost-write, duplicate, inconsistent-offsets,
// nonmonotonic-poll and poll-skip. It prints a summary and exits non-zero
// on any violation. `make chaos` runs it; its test runs a short one. Nothing
// imports it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest/history"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config is one chaos run.
type Config struct {
	Tenantd     string        // path of the tenantd binary
	DatabaseURL string        // Postgres server on which to create the scratch database
	Dir         string        // logs and broker data
	KeepDB      bool          // keep the scratch database after the run
	Duration    time.Duration // how long faults are injected
	Interval    time.Duration // how long each fault lasts, and each quiet spell between
	Seed        int64
	Nemeses     []string
	Topic       string
	Partitions  int
	Producers   int
	Consumers   int // consumers assigned every partition directly
	// GroupConsumers are members of one consumer group, committing.
	GroupConsumers int
	Keys           int
	Rate           int // records per second, all producers together
	// SessionLength is a consumer session's mean length, after which it
	// starts a new client from where it stopped.
	SessionLength time.Duration
	FinalTimeout  time.Duration // bound on the post-heal read to the end
	// Retention is the topic's retention.ms (0: the default, retention
	// off); with it the topic's segments are segment.bytes 1 MiB, the
	// floor, so that whole segments age out during a run.
	Retention time.Duration
	// DeleteEvery is how often DeleteRecords moves every partition's log
	// start halfway to its high watermark (0: never).
	DeleteEvery time.Duration
	// RecordPad is the size of a header of random padding on every
	// record, so that segments fill at a modest record rate.
	RecordPad      int
	BrokerLogLevel string
	// DiskEvery, when positive, samples each broker's bytes on disk at
	// this interval and prints them as a table (the soak).
	DiskEvery time.Duration
	// Compact creates the topic with cleanup.policy=compact (1 MiB
	// segments, min.compaction.lag.ms CompactLag) and brokers whose
	// cleaner passes every CompactInterval, and checks the compaction
	// model (history.NewCompacted) instead of dense offsets. Retention and
	// DeleteRecords are off with it.
	Compact         bool
	CompactLag      time.Duration
	CompactInterval time.Duration
	// Tombstones, with Compact, makes about one produce in Tombstones a
	// delete (a null value, its id in a header) instead of an update (0:
	// none); DeleteRetention is the topic's delete.retention.ms, after
	// which the cleaner may remove a tombstone and with it its key.
	Tombstones      int
	DeleteRetention time.Duration
	// Brokers is the cell's size: 3 (a partition's replicas), or 4 with
	// the move nemesis, which needs a broker to move a replica to.
	Brokers int
}

func (c *Config) validate() error {
	switch {
	case c.Tenantd == "":
		return errors.New("-tenantd: the path of a tenantd binary is required (make build)")
	case c.Duration <= 0 || c.Interval <= 0:
		return errors.New("-duration and -interval must be positive")
	case c.Partitions < 1 || c.Producers < 1 || c.Consumers < 0 || c.GroupConsumers < 0 || c.Keys < 1 || c.Rate < 1:
		return errors.New("-partitions, -producers, -keys and -rate must be at least 1")
	case c.SessionLength <= 0 || c.FinalTimeout <= 0:
		return errors.New("-session and -final-timeout must be positive")
	case c.Retention != 0 && c.Retention < time.Second:
		return errors.New("-retention must be 0 (off) or at least 1s (the retention.ms floor)")
	case c.DeleteEvery < 0 || c.RecordPad < 0 || c.DiskEvery < 0:
		return errors.New("-delete-records, -record-pad and -disk-every must not be negative")
	case c.Compact && (c.Retention != 0 || c.DeleteEvery != 0):
		return errors.New("-compact checks the compaction model alone: give -retention 0 and -delete-records 0 (the defaults with -compact)")
	case c.Compact && (c.CompactLag < 0 || c.CompactInterval <= 0):
		return errors.New("-compact-lag must not be negative and -compact-interval must be positive")
	case c.Tombstones < 0 || c.DeleteRetention < 0:
		return errors.New("-tombstones and -delete-retention must not be negative")
	case c.Brokers != 0 && c.Brokers < 3:
		return errors.New("-brokers must be at least 3 (a partition's replicas)")
	case c.Brokers == 3 && slices.Contains(c.Nemeses, Move):
		return errors.New("the move nemesis needs -brokers 4 or more: a replica moves to a broker that holds none of its partition")
	}
	if c.Brokers == 0 {
		c.Brokers = 3
		if slices.Contains(c.Nemeses, Move) {
			c.Brokers = 4
		}
	}
	if c.Dir == "" {
		d, err := os.MkdirTemp("", "sluice-chaos-")
		if err != nil {
			return err
		}
		c.Dir = d
	}
	if c.Topic == "" {
		c.Topic = "chaos"
	}
	if c.BrokerLogLevel == "" {
		c.BrokerLogLevel = "info"
	}
	return os.MkdirAll(c.Dir, 0o755)
}

func main() {
	cfg := Config{}
	var nemeses, level string
	flag.StringVar(&cfg.Tenantd, "tenantd", "bin/tenantd", "tenantd binary")
	flag.StringVar(&cfg.DatabaseURL, "database-url", firstNonEmpty(os.Getenv("SLUICE_TEST_DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "Postgres server for the scratch database (env SLUICE_TEST_DATABASE_URL)")
	flag.StringVar(&cfg.Dir, "dir", "", "directory for logs and broker data (default a new temporary one)")
	flag.BoolVar(&cfg.KeepDB, "keep-db", false, "keep the scratch database")
	flag.DurationVar(&cfg.Duration, "duration", 10*time.Minute, "how long to inject faults")
	flag.DurationVar(&cfg.Interval, "interval", 10*time.Second, "how long each fault lasts, and each quiet spell between faults")
	flag.Int64Var(&cfg.Seed, "seed", time.Now().UnixNano(), "seed for faults, keys and sessions")
	flag.StringVar(&nemeses, "nemeses", "all", "comma-separated faults: "+strings.Join(Nemeses, ", ")+", or all")
	flag.IntVar(&cfg.Partitions, "partitions", 4, "partitions of the topic")
	flag.IntVar(&cfg.Producers, "producers", 3, "idempotent producers")
	flag.IntVar(&cfg.Consumers, "consumers", 1, "consumers assigned every partition directly")
	flag.IntVar(&cfg.GroupConsumers, "group-consumers", 2, "members of one consumer group")
	flag.IntVar(&cfg.Keys, "keys", 16, "distinct record keys")
	flag.IntVar(&cfg.Rate, "rate", 300, "records per second, all producers together")
	flag.DurationVar(&cfg.SessionLength, "session", 30*time.Second, "mean length of a consumer session")
	flag.DurationVar(&cfg.FinalTimeout, "final-timeout", 3*time.Minute, "bound on the final read after healing")
	flag.DurationVar(&cfg.Retention, "retention", 20*time.Second, "the topic's retention.ms, with 1 MiB segments (0: retention off)")
	flag.DurationVar(&cfg.DeleteEvery, "delete-records", 30*time.Second, "how often DeleteRecords moves each partition's log start halfway to its high watermark (0: never)")
	flag.IntVar(&cfg.RecordPad, "record-pad", 1024, "bytes of random padding header on every record (batches are compressed)")
	flag.StringVar(&cfg.BrokerLogLevel, "broker-log-level", "info", "tenantd log level")
	flag.DurationVar(&cfg.DiskEvery, "disk-every", 0, "sample each broker's bytes on disk (all, and raft.entries) this often and print them as a table (0: off); with -nemeses none, a soak")
	flag.BoolVar(&cfg.Compact, "compact", false, "create the topic with cleanup.policy=compact and check the compaction model (offsets never reused, a record vanishes only below a newer one of its key); retention and DeleteRecords default to off")
	flag.DurationVar(&cfg.CompactLag, "compact-lag", time.Second, "with -compact: the topic's min.compaction.lag.ms")
	flag.DurationVar(&cfg.CompactInterval, "compact-interval", 3*time.Second, "with -compact: the brokers' cleaner interval (tenantd broker -compact-interval)")
	flag.IntVar(&cfg.Tombstones, "tombstones", 10, "with -compact: about one produce in this many is a delete (a tombstone); 0: none")
	flag.DurationVar(&cfg.DeleteRetention, "delete-retention", 10*time.Second, "with -compact: the topic's delete.retention.ms, how long a tombstone stays")
	flag.IntVar(&cfg.Brokers, "brokers", 0, "brokers in the cell (default 3, or 4 with the move nemesis)")
	flag.StringVar(&level, "log-level", "info", "the harness's log level")
	flag.Parse()
	if cfg.Compact {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["retention"] {
			cfg.Retention = 0
		}
		if !set["delete-records"] {
			cfg.DeleteEvery = 0
		}
	}
	var err error
	if cfg.Nemeses, err = ParseNemeses(nemeses); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := Run(ctx, cfg, log, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	if !res.Valid() {
		os.Exit(1)
	}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// Run starts the cluster and the workload, injects faults for cfg.Duration,
// heals everything, reads every partition to the end, checks the history
// and writes a summary to out. An error means the run could not be
// completed (it is not a verdict); the Result says what was violated.
func Run(ctx context.Context, cfg Config, log *slog.Logger, out io.Writer) (Outcome, error) {
	if err := cfg.validate(); err != nil {
		return Outcome{}, err
	}
	start := time.Now()
	log.Info("chaos: starting", "seed", cfg.Seed, "dir", cfg.Dir, "duration", cfg.Duration, "interval", cfg.Interval, "nemeses", cfg.Nemeses)
	c, err := StartCluster(ctx, cfg, log)
	if err != nil {
		return Outcome{}, err
	}
	defer c.Close()
	chk := history.New()
	if cfg.Compact {
		chk = history.NewCompacted()
		chk.DeleteRetention(cfg.DeleteRetention, nil)
	}
	var tr *Trimmer
	if cfg.Retention > 0 || cfg.DeleteEvery > 0 {
		if tr, err = NewTrimmer(cfg, c, chk, log); err != nil {
			return Outcome{}, err
		}
		defer tr.Close()
	}
	if err := waitReady(ctx, cfg, c, chk, tr, log); err != nil {
		return Outcome{}, err
	}
	w := StartWorkload(cfg, c, chk, tr, log)
	stopTr, trDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(trDone)
		if tr != nil {
			tr.Run(stopTr)
		}
	}()
	var disk *DiskSampler
	if cfg.DiskEvery > 0 {
		disk = StartDiskSampler(c.DataDirs(), cfg.DiskEvery)
	}
	nem := NewNemesis(c, cfg.Seed, cfg.Nemeses, log)
	stopNem := make(chan struct{})
	nemDone := make(chan struct{})
	go func() {
		defer close(nemDone)
		nem.Run(stopNem, cfg.Interval)
	}()
	select {
	case <-ctx.Done():
	case <-time.After(cfg.Duration):
	}
	close(stopNem)
	<-nemDone
	if err := c.HealAll(); err != nil {
		w.Stop()
		close(stopTr)
		<-trDone
		return Outcome{}, fmt.Errorf("heal: %w", err)
	}
	log.Info("chaos: healed; letting the workload run a quiet spell", "for", cfg.Interval)
	select {
	case <-ctx.Done():
	case <-time.After(cfg.Interval):
	}
	w.Stop()
	close(stopTr)
	<-trDone
	if disk != nil {
		disk.Stop()
	}
	moves, stuck := "", 0
	if slices.Contains(cfg.Nemeses, Move) {
		var err error
		if moves, stuck, err = c.SettleMoves(ctx, 3*time.Minute); err != nil {
			return Outcome{}, fmt.Errorf("settle moves: %w", err)
		}
	}
	if cfg.Compact && !awaitCompaction(ctx, cfg, c, compactionWait, log) {
		log.Warn("chaos: no read found a compacted offset before the final read", "waited", compactionWait)
	}
	gaps, err := FinalRead(context.Background(), cfg, c, chk, tr, log)
	if err != nil {
		return Outcome{Result: chk.Result()}, err
	}
	res := chk.Result()
	trimmed, starts := "", map[int32]int64(nil)
	if tr != nil {
		trimmed, starts = tr.Report(&res)
	}
	faults, kinds := nem.Counts()
	fmt.Fprintf(out, "chaos: seed %d, %v of faults every %v, %v in all, dir %s\n", cfg.Seed, cfg.Duration, cfg.Interval, time.Since(start).Round(time.Second), cfg.Dir)
	fmt.Fprintf(out, "  ops:      %d produces attempted, %d acknowledged (with the %d readiness probes), %d not acknowledged; %d polls returned %d records (%d by group members) in %d consumer sessions, %d group assignments (%d fetch errors)\n",
		w.produced.Load(), res.Acks, cfg.Partitions, w.failed.Load(), res.Polls, res.Records, res.GroupRecords, w.sessions.Load(), w.assigns.Load(), w.fetchErrs.Load())
	if k := w.FetchErrors(); k != "" {
		fmt.Fprintf(out, "  fetch errors (retried by the clients): %s\n", k)
	}
	fmt.Fprintf(out, "  faults:   %d injected (%s); %d raft connections cut\n", faults, kinds, c.net.Cuts())
	for _, p := range history.Properties {
		fmt.Fprintf(out, "  %-21s %d\n", p+":", res.Counts[p])
		for _, e := range res.Examples[p] {
			fmt.Fprintf(out, "      %s\n", e)
		}
	}
	if cfg.Compact {
		fmt.Fprintf(out, "  compaction: the final reads lack %d offsets below the high watermarks (compacted away) of %d acknowledged\n", gaps, res.Acks)
		acked, read, expired := chk.TombstoneCounts()
		fmt.Fprintf(out, "  tombstones: %d acknowledged (delete.retention.ms %v), %d in the final reads, %d expired with their key\n", acked, cfg.DeleteRetention, read, expired)
	}
	if tr != nil {
		fmt.Fprintf(out, "  trimming: %s; %d consumer skips past a moved log start\n", trimmed, w.skips.Load())
		fmt.Fprintf(out, "  %-21s %d\n", EarlyDeletion+":", res.Counts[EarlyDeletion])
		for _, e := range res.Examples[EarlyDeletion] {
			fmt.Fprintf(out, "      %s\n", e)
		}
	}
	if moves != "" {
		fmt.Fprintf(out, "  moves:    %s\n", moves)
	}
	if len(res.Unchecked) > 0 {
		fmt.Fprintf(out, "  partitions without a final read: %v\n", res.Unchecked)
	}
	if disk != nil {
		fmt.Fprintf(out, "  disk: at most %.1f MiB on one broker; per broker over time:\n\n", float64(disk.Max())/(1<<20))
		disk.Write(out)
		fmt.Fprintln(out)
	}
	out2 := Outcome{Result: res, LogStarts: starts, Skips: w.skips.Load(), StuckMoves: stuck, Compacted: gaps}
	out2.Tombstones, out2.TombstonesRead, out2.TombstonesExpired = chk.TombstoneCounts()
	if out2.Valid() {
		fmt.Fprintln(out, "  valid: yes")
	} else {
		fmt.Fprintln(out, "  valid: NO")
	}
	return out2, nil
}

// Outcome is a run's verdict and what its trimming did.
type Outcome struct {
	history.Result
	LogStarts map[int32]int64 // the highest log start reported per partition (trimming on)
	Skips     int64           // consumer skips past a moved log start
	// StuckMoves counts moves still unfinished 3 minutes after the heal.
	StuckMoves int
	// Compacted counts offsets below the final high watermarks missing
	// from the final reads (-compact: what the cleaner removed).
	Compacted int64
	// Tombstones counts the acknowledged tombstones (-compact),
	// TombstonesRead those in the final reads and TombstonesExpired those
	// gone past delete.retention.ms with their key.
	Tombstones, TombstonesRead, TombstonesExpired int
}

// Valid: the history holds every property and no move is stuck.
func (o Outcome) Valid() bool { return o.Result.Valid() && o.StuckMoves == 0 }

// waitReady waits, bounded, until the tenant's key reaches the brokers,
// every partition of the topic has a leader (one record produced to each
// partition is acknowledged, and becomes part of the history) and, with
// group consumers, the group coordinator serves a join, a read and a commit.
func waitReady(ctx context.Context, cfg Config, c *Cluster, chk *history.Checker, tr *Trimmer, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(c.clientOpts(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(cfg.Topic))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for p := 0; p < cfg.Partitions; p++ {
		for try := 0; ; try++ {
			v := fmt.Sprintf("probe-%d-%d", p, try)
			pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
			at := time.Now()
			// Keyed: a compacted topic refuses keyless records.
			r, err := cl.ProduceSync(pctx, &kgo.Record{Partition: int32(p), Key: []byte("probe"), Value: []byte(v)}).First()
			pcancel()
			if err == nil {
				chk.AckedKey(r.Partition, r.Offset, "probe", v)
				if tr != nil {
					tr.Acked(r.Partition, r.Offset, at)
				}
				break
			}
			log.Debug("waiting for partition", "partition", p, "err", err)
			select {
			case <-ctx.Done():
				return fmt.Errorf("partition %d of %s did not take a write within 2 minutes: %w", p, cfg.Topic, err)
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	log.Info("chaos: every partition takes writes")
	if cfg.GroupConsumers == 0 {
		return nil
	}
	// The group's coordinator works: a member joins, reads the probes of
	// every partition and commits.
	g, err := kgo.NewClient(c.clientOpts(kgo.ConsumerGroup("chaos"), kgo.ConsumeTopics(cfg.Topic), kgo.DisableAutoCommit())...)
	if err != nil {
		return err
	}
	defer g.Close()
	seen := map[int32]bool{}
	for len(seen) < cfg.Partitions {
		fs := g.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("a group member read the probes of %d of %d partitions within 2 minutes", len(seen), cfg.Partitions)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[r.Partition] = true })
	}
	if err := g.CommitUncommittedOffsets(ctx); err != nil {
		return fmt.Errorf("the group's first commit: %w", err)
	}
	log.Info("chaos: the consumer group reads and commits")
	return nil
}
