package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/controlplane/mail"
	"github.com/sluicehq/sluice/dataplane/peercert"
)

// sluiceConfig says where the Sluice cell's parts come from.
type sluiceConfig struct {
	Tenantd  string // the tenantd binary
	AdminURL string // a Postgres database that may create databases
	Dir      string // data and logs
	Pprof    bool   // serve pprof on every broker (addresses in the log)
}

// sluiceCell is a control plane and a cell of three brokers, each its own
// tenantd process, over a scratch Postgres database dropped at close.
type sluiceCell struct {
	cfg       sluiceConfig
	db        string
	cp        *proc
	brokers   []*proc
	debug     []string // pprof addresses, if cfg.Pprof
	bootstrap []string
	user      string // the tenant's API key id and secret (SASL/PLAIN)
	pass      string
	tenant    *client.Client
}

func (c *sluiceCell) name() string { return "Sluice" }

// pids counts the brokers and the control plane (Postgres is left out).
func (c *sluiceCell) pids() []int {
	out := []int{c.cp.pid()}
	for _, b := range c.brokers {
		out = append(out, b.pid())
	}
	return out
}

// startSluice creates a scratch database, applies the migrations and makes
// an operator key (tenantd migrate), starts tenantd controlplane, registers
// a shared pool with one cell of three brokers on free loopback ports,
// starts the three tenantd broker processes with the cell's key, and signs
// up one tenant with an API key for the clients.
func startSluice(ctx context.Context, cfg sluiceConfig) (_ *sluiceCell, err error) {
	c := &sluiceCell{cfg: cfg, db: fmt.Sprintf("sluice_compare_%d_%d", os.Getpid(), time.Now().Unix())}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	admin, err := pgx.Connect(ctx, cfg.AdminURL)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres at %s: %w", cfg.AdminURL, err)
	}
	_, err = admin.Exec(ctx, "CREATE DATABASE "+c.db)
	admin.Close(ctx)
	if err != nil {
		return nil, fmt.Errorf("create scratch database: %w", err)
	}
	dbURL, err := withDatabase(cfg.AdminURL, c.db)
	if err != nil {
		return nil, err
	}
	keyFile := filepath.Join(cfg.Dir, "operator-key")
	out, err := exec.CommandContext(ctx, cfg.Tenantd, "migrate", "-database-url", dbURL, "-operator-key-file", keyFile).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("tenantd migrate: %w\n%s", err, out)
	}
	opKey, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	opID, opSecret, _ := strings.Cut(strings.TrimSpace(string(opKey)), ":")

	addrs, err := freeAddrs(1 + 3*4)
	if err != nil {
		return nil, err
	}
	apiURL := "http://" + addrs[0]
	env := []string{"SLUICE_LOG_LEVEL=warn"}
	c.cp, err = startProc("tenantd controlplane", filepath.Join(cfg.Dir, "controlplane.log"), env,
		cfg.Tenantd, "controlplane", "-database-url", dbURL, "-listen", addrs[0], "-mail-dir", filepath.Join(cfg.Dir, "mail"))
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, "control plane healthy", 60*time.Second, func() error {
		if err := c.cp.exited(); err != nil {
			return err
		}
		resp, err := http.Get(apiURL + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("healthz: %s", resp.Status)
		}
		return nil
	}); err != nil {
		return nil, err
	}

	op := client.New(apiURL, client.WithAPIKey(opID, opSecret))
	if _, err := op.AdminCreatePool(ctx, api.CreatePoolRequest{ID: "compare", Kind: "shared", Description: "comparison pool"}); err != nil {
		return nil, fmt.Errorf("create pool: %w", err)
	}
	if _, err := op.AdminCreateCell(ctx, api.CreateCellRequest{ID: "compare-cell", PoolID: "compare"}); err != nil {
		return nil, fmt.Errorf("create cell: %w", err)
	}
	kafkaAddrs, raftAddrs, debugAddrs, httpAddrs := addrs[1:4], addrs[4:7], addrs[7:10], addrs[10:13]
	for i := range 3 {
		if _, err := op.AdminCreateBroker(ctx, api.CreateBrokerRequest{ID: fmt.Sprintf("b%d", i+1), CellID: "compare-cell",
			NodeID: i + 1, KafkaAddr: kafkaAddrs[i], HTTPAddr: httpAddrs[i], RaftAddr: raftAddrs[i]}); err != nil {
			return nil, fmt.Errorf("create broker: %w", err)
		}
	}
	cellKey, err := op.AdminCreateCellKey(ctx, "compare-cell")
	if err != nil {
		return nil, fmt.Errorf("create cell key: %w", err)
	}
	peers, err := peercert.EnsureDir(filepath.Join(cfg.Dir, "peer-certs"), "compare-cell", []string{"1", "2", "3"})
	if err != nil {
		return nil, fmt.Errorf("make peer certificates: %w", err)
	}
	for i := range 3 {
		id := fmt.Sprintf("b%d", i+1)
		peer := peers[strconv.Itoa(i+1)] // the broker's node id
		args := []string{"broker", "-cell", "compare-cell", "-broker-id", id, "-api", apiURL,
			"-data-dir", filepath.Join(cfg.Dir, "sluice"),
			"-peer-ca-file", peer.CA, "-peer-cert-file", peer.Cert, "-peer-key-file", peer.Key}
		if cfg.Pprof {
			args = append(args, "-debug-listen", debugAddrs[i])
			c.debug = append(c.debug, debugAddrs[i])
		}
		b, err := startProc("tenantd broker "+id, filepath.Join(cfg.Dir, id+".log"),
			append(env, "SLUICE_CELL_KEY="+cellKey.ID+":"+cellKey.Secret), cfg.Tenantd, args...)
		if err != nil {
			return nil, err
		}
		c.brokers = append(c.brokers, b)
	}
	c.bootstrap = kafkaAddrs

	anon := client.New(apiURL)
	if _, err := anon.Signup(ctx, api.SignupRequest{TenantName: "compare", Email: "bench@compare.test", Password: "compare compare 1"}); err != nil {
		return nil, fmt.Errorf("sign up: %w", err)
	}
	// The control plane sends no mail: its -mail-dir has the token.
	text, err := mail.Last(filepath.Join(cfg.Dir, "mail"), "bench@compare.test")
	if err != nil {
		return nil, fmt.Errorf("read the signup mail: %w", err)
	}
	su, err := anon.ConfirmSignup(ctx, mail.Token(text))
	if err != nil {
		return nil, fmt.Errorf("confirm the signup: %w", err)
	}
	// The plan's quotas would cap the run if the brokers enforced them;
	// lift them so only the servers' own speed counts.
	if _, err := op.AdminSetQuotas(ctx, su.Tenant.ID, api.Quotas{ProduceBytesPerSec: 1 << 40, ProduceMessagesPerSec: 1 << 30,
		FetchBytesPerSec: 1 << 40, MaxPartitions: 10_000, MaxTopics: 1_000, MaxConnections: 10_000, MaxStorageBytes: 1 << 50,
		MaxMessageBytes: 8 << 20, MaxRequestsPerSec: 1 << 30, MaxRetentionMs: 365 * 24 * 3600 * 1000}); err != nil {
		return nil, fmt.Errorf("set quotas: %w", err)
	}
	owner := client.New(apiURL, client.WithSession(su.Session.Token))
	key, err := owner.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Description: "compare"})
	if err != nil {
		return nil, fmt.Errorf("create api key: %w", err)
	}
	c.user, c.pass = key.ID, key.Secret
	c.tenant = client.New(apiURL, client.WithAPIKey(key.ID, key.Secret))
	return c, nil
}

// withDatabase returns the Postgres URL u pointing at database db.
func withDatabase(u, db string) (string, error) {
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "postgres" && parsed.Scheme != "postgresql") {
		return "", fmt.Errorf("postgres url %q: want postgres://user@host:port/db", u)
	}
	parsed.Path = "/" + db
	parsed.RawPath = ""
	return parsed.String(), nil
}

// close stops the brokers, then the control plane, and drops the database.
func (c *sluiceCell) close() {
	for _, b := range c.brokers {
		b.stop(15 * time.Second)
	}
	c.cp.stop(15 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if admin, err := pgx.Connect(ctx, c.cfg.AdminURL); err == nil {
		_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+c.db+" WITH (FORCE)")
		admin.Close(ctx)
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
// defaults (idempotent, acks=all, linger 10 ms, batches up to 1 MB, five
// requests in flight per broker) except compression, which is off because
// NATS does not compress either.
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
	cl   *kgo.Client
	part int32
}

func (c *sluiceCell) asyncPublisher(ctx context.Context, log string, part, window int) (asyncPublisher, error) {
	cl, err := kgo.NewClient(c.producerOpts(log, window, 10*time.Millisecond)...)
	if err != nil {
		return nil, err
	}
	return &kgoAsync{cl: cl, part: int32(part)}, nil
}

func (p *kgoAsync) publish(ctx context.Context, value []byte, done func(error)) error {
	p.cl.Produce(ctx, &kgo.Record{Value: value, Partition: p.part}, func(_ *kgo.Record, err error) { done(err) })
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
// and measure the hand-over, not the steady state.
func (c *sluiceCell) settle(ctx context.Context, log string, parts int) error {
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return waitFor(ctx, "partitions of "+log+" led by their preferred replicas", 2*time.Minute, func() error {
		for node := int32(1); node <= 3; node++ {
			req := kmsg.NewPtrMetadataRequest()
			t := kmsg.NewMetadataRequestTopic()
			t.Topic = kmsg.StringPtr(log)
			req.Topics = append(req.Topics, t)
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := req.RequestWith(rctx, cl.Broker(int(node)))
			cancel()
			if err != nil {
				return fmt.Errorf("metadata from broker %d: %w", node, err)
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
