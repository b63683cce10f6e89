package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluicehq/sluice/cmd/internal/launch"
	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
)

// sluiceConfig says where the Sluice cell's parts come from.
type sluiceConfig struct {
	Tenantd  string // the tenantd binary
	AdminURL string // a Postgres database that may create databases
	Dir      string // data and logs
	Pprof    bool   // serve pprof on every broker (addresses in the log)
	LogLevel string // the brokers' -log-level
	// InFlight is the throughput producers' produce requests in flight
	// per broker. franz-go allows more than one only without
	// idempotence, so above 1 the producers are not idempotent.
	InFlight int
}

// sluiceCell is a control plane and a cell of three brokers, each its own
// tenantd process (cmd/internal/launch), over a scratch Postgres database
// dropped at close.
type sluiceCell struct {
	cfg       sluiceConfig
	db        *launch.DB
	cp        *launch.ControlPlane
	brokers   []*launch.Proc
	specs     []*launch.Broker // how each broker is started, for restarts
	cellKey   string
	debug     []string // pprof addresses, if cfg.Pprof
	bootstrap []string
	user      string // the tenant's API key id and secret (SASL/PLAIN)
	pass      string
	tenant    *client.Client
	stuck     map[string]string // partitions settleCell gave up on; see there
}

func (c *sluiceCell) name() string { return "Sluice" }

// pids counts the brokers and the control plane (Postgres is left out).
func (c *sluiceCell) pids() []int {
	out := []int{c.cp.Proc.Pid()}
	for _, b := range c.brokers {
		out = append(out, b.Pid())
	}
	return out
}

// startSluice creates a scratch database, starts the control plane with an
// operator key, registers a shared pool with one cell of three brokers on
// free loopback ports, starts the three tenantd broker processes with the
// cell's key, and signs up one tenant with an API key for the clients.
func startSluice(ctx context.Context, cfg sluiceConfig) (_ *sluiceCell, err error) {
	c := &sluiceCell{cfg: cfg}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	if c.db, err = launch.CreateDB(ctx, cfg.AdminURL, "sluice_compare_"); err != nil {
		return nil, err
	}
	addrs, err := launch.FreeAddrs("127.0.0.1", 1+3*4)
	if err != nil {
		return nil, err
	}
	if c.cp, err = launch.StartControlPlane(ctx, cfg.Tenantd, c.db.URL, addrs[0], cfg.Dir, "warn"); err != nil {
		return nil, err
	}
	op := c.cp.Operator
	kafkaAddrs, raftAddrs, debugAddrs, httpAddrs := addrs[1:4], addrs[4:7], addrs[7:10], addrs[10:13]
	var brokers []*launch.Broker
	for i := range 3 {
		b := &launch.Broker{ID: fmt.Sprintf("b%d", i+1), NodeID: i + 1, Kafka: kafkaAddrs[i], HTTP: httpAddrs[i], Raft: raftAddrs[i],
			DataDir: filepath.Join(cfg.Dir, "sluice")}
		if cfg.Pprof {
			b.Debug = debugAddrs[i]
			c.debug = append(c.debug, debugAddrs[i])
		}
		brokers = append(brokers, b)
	}
	cellKey, err := launch.SeedCell(ctx, op, "compare", "compare-cell", filepath.Join(cfg.Dir, "peer-certs"), brokers)
	if err != nil {
		return nil, err
	}
	c.specs, c.cellKey = brokers, cellKey
	for _, b := range brokers {
		p, err := c.startBroker(b)
		if err != nil {
			return nil, err
		}
		c.brokers = append(c.brokers, p)
	}
	c.bootstrap = kafkaAddrs

	t, err := launch.SignUp(ctx, c.cp, "compare", "")
	if err != nil {
		return nil, err
	}
	// The plan's quotas would cap the run if the brokers enforced them;
	// lift them so only the servers' own speed counts.
	if _, err := op.AdminSetQuotas(ctx, t.ID, api.Quotas{ProduceBytesPerSec: 1 << 40, ProduceMessagesPerSec: 1 << 30,
		FetchBytesPerSec: 1 << 40, MaxPartitions: 10_000, MaxTopics: 1_000, MaxConnections: 10_000, MaxStorageBytes: 1 << 50,
		MaxMessageBytes: 8 << 20, MaxRequestsPerSec: 1 << 30, MaxRetentionMs: 365 * 24 * 3600 * 1000}); err != nil {
		return nil, fmt.Errorf("set quotas: %w", err)
	}
	c.user, c.pass, c.tenant = t.KeyID, t.Secret, t.Client
	return c, nil
}

// startBroker starts broker b's tenantd process, its output appended to
// its log file.
func (c *sluiceCell) startBroker(b *launch.Broker) (*launch.Proc, error) {
	return b.Start(c.cfg.Tenantd, c.cp.URL, "compare-cell", c.cellKey, c.cfg.LogLevel, filepath.Join(c.cfg.Dir, b.ID+".log"))
}

// close stops the brokers, then the control plane, and drops the database.
func (c *sluiceCell) close() {
	for _, b := range c.brokers {
		b.Stop(15 * time.Second)
	}
	if c.cp != nil {
		c.cp.Proc.Stop(15 * time.Second)
	}
	if c.db != nil {
		_ = c.db.Drop()
	}
}

func (c *sluiceCell) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(c.bootstrap...),
		kgo.SASL(plain.Auth{User: c.user, Pass: c.pass}.AsMechanism()),
	}, extra...)
}

// createLog creates a topic of parts partitions; the control plane places
// three replicas of each on the cell's three brokers.
func (c *sluiceCell) createLog(ctx context.Context, log string, parts int) error {
	if _, err := c.tenant.CreateTopic(ctx, api.CreateTopicRequest{Name: log, Partitions: parts}); err != nil {
		return fmt.Errorf("create topic %s: %w", log, err)
	}
	return nil
}

// producerOpts are the producer settings of both publishers: franz-go's
// defaults (idempotent, acks=all, linger 10 ms, batches up to 1 MB, and so
// one produce request in flight per broker, which franz-go enforces for an
// idempotent producer) except compression, which is off because NATS does
// not compress either.
func (c *sluiceCell) producerOpts(log string, window int, linger time.Duration) []kgo.Opt {
	return c.clientOpts(
		kgo.DefaultProduceTopic(log),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(linger),
		kgo.MaxBufferedRecords(2*window),
		// Retries while the new topic's leaders are elected.
		kgo.RecordDeliveryTimeout(2*time.Minute),
	)
}

type kgoAsync struct {
	cl    *kgo.Client
	parts []int32
	n     int // messages published: the next part is parts[n mod len]
}

func (c *sluiceCell) asyncPublisher(ctx context.Context, log string, parts []int, window int) (asyncPublisher, error) {
	opts := c.producerOpts(log, window, 10*time.Millisecond)
	if c.cfg.InFlight > 1 {
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(c.cfg.InFlight))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	p := &kgoAsync{cl: cl}
	for _, part := range parts {
		p.parts = append(p.parts, int32(part))
	}
	return p, nil
}

// publish is called from one goroutine at a time (produce's loop).
func (p *kgoAsync) publish(ctx context.Context, value []byte, done func(error)) error {
	part := p.parts[p.n%len(p.parts)]
	p.n++
	p.cl.Produce(ctx, &kgo.Record{Value: value, Partition: part}, func(_ *kgo.Record, err error) { done(err) })
	return nil
}

func (p *kgoAsync) close() { p.cl.Close() }

type kgoSync struct {
	cl   *kgo.Client
	part int32
}

// syncPublisher sends with no linger: with one message in flight a linger
// would only add its own length to every latency.
func (c *sluiceCell) syncPublisher(ctx context.Context, log string, part int) (syncPublisher, error) {
	cl, err := kgo.NewClient(c.producerOpts(log, 1, 0)...)
	if err != nil {
		return nil, err
	}
	return &kgoSync{cl: cl, part: int32(part)}, nil
}

func (p *kgoSync) publish(ctx context.Context, value []byte) error {
	return p.cl.ProduceSync(ctx, &kgo.Record{Value: value, Partition: p.part}).FirstErr()
}

func (p *kgoSync) close() { p.cl.Close() }

// consume reads one partition from offset 0 with franz-go's default fetch
// settings (up to 50 MB per fetch, 1 MB per partition).
func (c *sluiceCell) consume(ctx context.Context, log string, part int, want int) error {
	cl, err := kgo.NewClient(c.clientOpts(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		log: {int32(part): kgo.NewOffset().AtStart()},
	}))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	got := 0
	for got < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read %d of %d messages of %s/%d: %w", got, want, log, part, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = errors.Join(ferr, fmt.Errorf("fetch %s/%d: %w", t, p, err)) })
		if ferr != nil {
			return ferr
		}
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) != msgSize && bad == nil {
				bad = fmt.Errorf("offset %d of %s/%d has %d bytes, want %d", r.Offset, log, part, len(r.Value), msgSize)
			}
			got++
		})
		if bad != nil {
			return bad
		}
	}
	if got != want {
		return fmt.Errorf("read %d messages of %s/%d, want %d", got, log, part, want)
	}
	return nil
}

// settle waits until every broker reports each partition of log led by its
// preferred replica (the first in its replica list). A new partition elects
// whichever replica campaigns first, and a few seconds later the leader
// hands leadership to the preferred replica; a transfer inside a timed run
// would stall the clients (franz-go refreshes metadata at most every 5 s)
// and measure the hand-over, not the steady state. The whole cell settles
// first (settleCell), for the same reason.
func (c *sluiceCell) settle(ctx context.Context, log string, parts int) error {
	if err := c.settleCell(ctx); err != nil {
		return err
	}
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return launch.WaitFor(ctx, "partitions of "+log+" led by their preferred replicas", 2*time.Minute, func() error {
		for node := int32(1); node <= 3; node++ {
			resp, err := brokerMetadata(ctx, cl, node, log)
			if err != nil {
				return err
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != parts {
				return fmt.Errorf("broker %d does not list %d partitions of %s yet", node, parts, log)
			}
			for _, p := range resp.Topics[0].Partitions {
				if p.ErrorCode != 0 || len(p.Replicas) == 0 || p.Leader != p.Replicas[0] {
					return fmt.Errorf("broker %d: partition %d led by %d (error %d), preferred %v", node, p.Partition, p.Leader, p.ErrorCode, p.Replicas)
				}
			}
		}
		return nil
	})
}

// leaderOf is the node id of the broker leading partition 0 of log, as
// broker 1..3's Metadata says (the first that names one).
func (c *sluiceCell) leaderOf(ctx context.Context, log string) (int, error) {
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	leader := -1
	err = launch.WaitFor(ctx, "a leader of "+log, time.Minute, func() error {
		for i, b := range c.brokers {
			if !b.Running() {
				continue
			}
			req := kmsg.NewPtrMetadataRequest()
			t := kmsg.NewMetadataRequestTopic()
			t.Topic = kmsg.StringPtr(log)
			req.Topics = append(req.Topics, t)
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := req.RequestWith(rctx, cl.Broker(i+1))
			cancel()
			if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) == 0 {
				continue
			}
			if p := resp.Topics[0].Partitions[0]; p.ErrorCode == 0 && p.Leader > 0 {
				leader = int(p.Leader)
				return nil
			}
		}
		return fmt.Errorf("no broker names a leader of %s", log)
	})
	return leader, err
}

// killLeader SIGKILLs the broker leading partition 0 of log; restart
// starts it again from its data directory and waits until every broker
// names one serving leader of log. It does not wait for leadership to
// return to the preferred replica: on an idle partition that did not
// happen within 85 s here, so the next kill hits whichever broker leads.
func (c *sluiceCell) killLeader(ctx context.Context, log string) (func(context.Context) error, error) {
	node, err := c.leaderOf(ctx, log)
	if err != nil {
		return nil, err
	}
	i := node - 1
	c.brokers[i].Kill()
	return func(ctx context.Context) error {
		p, err := c.startBroker(c.specs[i])
		if err != nil {
			return err
		}
		c.brokers[i] = p
		if err := c.agreedLeader(ctx, log); err != nil {
			return err
		}
		// As NATS's restart waits for both other replicas to be current:
		// the next kill is a single fault on a healed cell, not one that
		// lands while the restarted broker is still opening its replicas
		// and catching them up, when the successor's only partner for a
		// majority is that broker (a 4.3 s gap, 3 s of it the new
		// leader's first commit waiting for it). Every partition led by
		// its preferred replica again means the restarted broker took
		// back the ones it prefers, which a transfer does only to a
		// caught-up replica: this topic's among them, since from the
		// second kill on each takes its preferred leader.
		return c.settleCell(ctx)
	}, nil
}

// gapPublisher is the latency run's publisher (franz-go defaults, no
// linger); tuned sets MetadataMinAge to 250 ms instead of franz-go's 5 s,
// so that a partition whose leader died is looked up again sooner.
func (c *sluiceCell) gapPublisher(ctx context.Context, log string, tuned bool) (syncPublisher, error) {
	opts := c.producerOpts(log, 1, 0)
	if tuned {
		opts = append(opts, kgo.MetadataMinAge(gapTunedMetadataMinAge))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &kgoSync{cl: cl, part: 0}, nil
}

// gapTunedMetadataMinAge is the tuned client's metadata min age.
const gapTunedMetadataMinAge = 250 * time.Millisecond

// brokerMetadata asks broker node alone for log's metadata (a client's
// own Metadata would ask any broker).
func brokerMetadata(ctx context.Context, cl *kgo.Client, node int32, log string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(log)
	req.Topics = append(req.Topics, t)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl.Broker(int(node)))
	if err != nil {
		return nil, fmt.Errorf("metadata from broker %d: %w", node, err)
	}
	return resp, nil
}

// agreedLeader waits until all three brokers' Metadata names the same
// serving leader of partition 0 of log.
func (c *sluiceCell) agreedLeader(ctx context.Context, log string) error {
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return launch.WaitFor(ctx, "every broker naming one leader of "+log, 2*time.Minute, func() error {
		leader := int32(-1)
		for node := int32(1); node <= 3; node++ {
			resp, err := brokerMetadata(ctx, cl, node, log)
			if err != nil {
				return err
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return fmt.Errorf("broker %d does not list %s yet", node, log)
			}
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != 0 || (leader >= 0 && p.Leader != leader) {
				return fmt.Errorf("broker %d: leader %d (error %d), others %d", node, p.Leader, p.ErrorCode, leader)
			}
			leader = p.Leader
		}
		return nil
	})
}
