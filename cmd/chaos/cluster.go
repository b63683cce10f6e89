package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/credential"
	"github.com/sluicehq/sluice/controlplane/mail"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/peercert"
)

// Cluster is a control plane and one cell of brokers, each a real tenantd
// process, on a scratch Postgres database, with a fault-injecting proxy in
// front of every broker's Raft listener.
type Cluster struct {
	cfg     Config
	log     *slog.Logger
	dbName  string
	adminDB string
	cp      *proc
	brokers []*broker
	net     *Network
	host    string // the loopback address the processes listen on
	// APIURL is the control plane's URL; Bootstrap the brokers' Kafka
	// addresses; KeyID and Secret the tenant's API key.
	APIURL       string
	Bootstrap    []string
	KeyID        string
	Secret       string
	tenantClient *client.Client
}

// proc is one running tenantd process.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

type broker struct {
	idx        int
	id         string
	nodeID     int
	raftListen string
	raftProxy  string
	kafka      string
	http       string // the HTTP data API's address
	dataDir    string
	peer       peercert.Files // the Raft transport's certificates
	// mu guards p and stopped.
	mu      sync.Mutex
	p       *proc
	stopped bool // SIGSTOPped
}

const cellID = "chaos-cell"

// freeAddr reserves a free port on the loopback host and releases it for a
// process to listen on. A broker comes back on its ports after every kill,
// so host is one of celltest.LoopbackHost's: on 127.0.0.1 a client socket
// of anything else on the machine could take a port while it is down.
func freeAddr(host string) (string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("pick a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// StartCluster creates the scratch database, starts the control plane,
// seeds the pool, cell, brokers, a tenant and its topic, and starts the
// brokers. Close undoes all of it.
func StartCluster(ctx context.Context, cfg Config, log *slog.Logger) (_ *Cluster, err error) {
	c := &Cluster{cfg: cfg, log: log, net: NewNetwork(log), host: celltest.LoopbackHost()}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if err := c.createDB(ctx); err != nil {
		return nil, err
	}
	listen, err := freeAddr(c.host)
	if err != nil {
		return nil, err
	}
	c.APIURL = "http://" + listen
	c.cp, err = c.spawn("controlplane", filepath.Join(cfg.Dir, "controlplane.log"),
		"controlplane", "-database-url", c.dbURL(), "-listen", listen, "-log-level", "warn",
		"-mail-dir", filepath.Join(cfg.Dir, "mail"))
	if err != nil {
		return nil, err
	}
	if err := c.waitHealthy(ctx); err != nil {
		return nil, err
	}
	op, err := c.operatorClient(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.seed(ctx, op); err != nil {
		return nil, err
	}
	for _, b := range c.brokers {
		if err := c.StartBroker(b.idx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) dbURL() string {
	u, _ := url.Parse(c.adminDB)
	u.Path = "/" + c.dbName
	return u.String()
}

func (c *Cluster) createDB(ctx context.Context) error {
	c.adminDB = c.cfg.DatabaseURL
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "sluice_chaos_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, c.adminDB)
	if err != nil {
		return fmt.Errorf("connect to postgres at %s: %w", c.adminDB, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return fmt.Errorf("create scratch database: %w", err)
	}
	c.dbName = name
	return nil
}

func (c *Cluster) dropDB() {
	if c.dbName == "" || c.cfg.KeepDB {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.adminDB)
	if err != nil {
		c.log.Warn("drop scratch database", "db", c.dbName, "err", err)
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+c.dbName+" WITH (FORCE)"); err != nil {
		c.log.Warn("drop scratch database", "db", c.dbName, "err", err)
	}
}

// spawn starts tenantd with args, its output appended to logFile.
func (c *Cluster) spawn(name, logFile string, args ...string) (*proc, error) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	fmt.Fprintf(f, "---- %s start %s\n", time.Now().UTC().Format(time.RFC3339Nano), name)
	cmd := exec.Command(c.cfg.Tenantd, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), "SLUICE_CONFIG=")
	// Its own process group, so a signal to the harness is not also one to
	// the brokers, and a SIGSTOP reaches only the broker.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		fmt.Fprintf(f, "---- %s exit %s: %v\n", time.Now().UTC().Format(time.RFC3339Nano), name, p.err)
		f.Close()
		close(p.exited)
	}()
	return p, nil
}

func (c *Cluster) waitHealthy(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(c.APIURL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if !c.cp.running() {
			return fmt.Errorf("control plane exited: %v (see %s)", c.cp.err, filepath.Join(c.cfg.Dir, "controlplane.log"))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("control plane not healthy within 60 s: %v", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// operatorClient bootstraps an operator key in the scratch database, as
// `tenantd dev` does, and returns a client that uses it.
func (c *Cluster) operatorClient(ctx context.Context) (*client.Client, error) {
	conn, err := pgx.Connect(ctx, c.dbURL())
	if err != nil {
		return nil, fmt.Errorf("connect to scratch database: %w", err)
	}
	defer conn.Close(context.Background())
	id, secret := credential.NewAPIKey()
	if _, err := conn.Exec(ctx, `INSERT INTO api_keys (id, tenant_id, secret_hash, role, description, created_by)
		VALUES ($1, NULL, $2, 'operator', 'chaos', 'bootstrap')`, id, credential.HashSecret(secret)); err != nil {
		return nil, fmt.Errorf("bootstrap operator key: %w", err)
	}
	return client.New(c.APIURL, client.WithAPIKey(id, secret)), nil
}

// seed creates the pool, cell and brokers (advertising their Raft proxies),
// a cell key, a tenant with an API key, and the topic.
func (c *Cluster) seed(ctx context.Context, op *client.Client) error {
	if _, err := op.AdminCreatePool(ctx, api.CreatePoolRequest{ID: "chaos-shared", Kind: "shared", Description: "chaos"}); err != nil {
		return fmt.Errorf("seed pool: %w", err)
	}
	if _, err := op.AdminCreateCell(ctx, api.CreateCellRequest{ID: cellID, PoolID: "chaos-shared"}); err != nil {
		return fmt.Errorf("seed cell: %w", err)
	}
	peers, err := peercert.EnsureDir(filepath.Join(c.cfg.Dir, "peer-certs"), cellID, []string{"1", "2", "3"})
	if err != nil {
		return fmt.Errorf("seed peer certificates: %w", err)
	}
	for i := 0; i < 3; i++ {
		b := &broker{idx: i, id: fmt.Sprintf("b%d", i+1), nodeID: i + 1, dataDir: filepath.Join(c.cfg.Dir, "data")}
		b.peer = peers[strconv.Itoa(b.nodeID)]
		var err error
		if b.raftListen, err = freeAddr(c.host); err != nil {
			return err
		}
		if b.kafka, err = freeAddr(c.host); err != nil {
			return err
		}
		if b.http, err = freeAddr(c.host); err != nil {
			return err
		}
		if b.raftProxy, err = c.net.Listen(i, strconv.Itoa(b.nodeID), b.raftListen); err != nil {
			return err
		}
		if _, err := op.AdminCreateBroker(ctx, api.CreateBrokerRequest{ID: b.id, CellID: cellID, NodeID: b.nodeID,
			KafkaAddr: b.kafka, HTTPAddr: b.http, RaftAddr: b.raftProxy}); err != nil {
			return fmt.Errorf("seed broker %s: %w", b.id, err)
		}
		c.brokers = append(c.brokers, b)
		c.Bootstrap = append(c.Bootstrap, b.kafka)
	}
	ck, err := op.AdminCreateCellKey(ctx, cellID)
	if err != nil {
		return fmt.Errorf("seed cell key: %w", err)
	}
	c.cfg.cellKey = ck.ID + ":" + ck.Secret
	anon := client.New(c.APIURL)
	if _, err := anon.Signup(ctx, api.SignupRequest{TenantName: "chaos", Email: "chaos@sluice.test",
		Password: "chaos chaos chaos 1", Plan: "standard"}); err != nil {
		return fmt.Errorf("sign up the tenant: %w", err)
	}
	// The control plane sends no mail: its -mail-dir has the token.
	text, err := mail.Last(filepath.Join(c.cfg.Dir, "mail"), "chaos@sluice.test")
	if err != nil {
		return fmt.Errorf("read the signup mail: %w", err)
	}
	su, err := anon.ConfirmSignup(ctx, mail.Token(text))
	if err != nil {
		return fmt.Errorf("confirm the signup: %w", err)
	}
	owner := client.New(c.APIURL, client.WithSession(su.Session.Token))
	key, err := owner.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Description: "chaos workload"})
	if err != nil {
		return fmt.Errorf("create the tenant's api key: %w", err)
	}
	c.KeyID, c.Secret = key.ID, key.Secret
	c.tenantClient = client.New(c.APIURL, client.WithAPIKey(key.ID, key.Secret))
	if _, err := c.tenantClient.CreateTopic(ctx, api.CreateTopicRequest{Name: c.cfg.Topic, Partitions: c.cfg.Partitions}); err != nil {
		return fmt.Errorf("create topic %s: %w", c.cfg.Topic, err)
	}
	return nil
}

// Brokers is the number of brokers.
func (c *Cluster) Brokers() int { return len(c.brokers) }

// StartBroker starts broker i unless it runs.
func (c *Cluster) StartBroker(i int) error {
	b := c.brokers[i]
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.p != nil && b.p.running() {
		return nil
	}
	p, err := c.spawn(b.id, filepath.Join(c.cfg.Dir, b.id+".log"), "broker",
		"-cell", cellID, "-broker-id", b.id, "-api", c.APIURL, "-cell-key", c.cfg.cellKey,
		"-data-dir", b.dataDir, "-raft-listen", b.raftListen, "-raft-advertise", b.raftProxy,
		"-kafka-listen", b.kafka, "-log-level", c.cfg.BrokerLogLevel,
		"-peer-ca-file", b.peer.CA, "-peer-cert-file", b.peer.Cert, "-peer-key-file", b.peer.Key)
	if err != nil {
		return err
	}
	b.p, b.stopped = p, false
	return nil
}

// KillBroker sends SIGKILL to broker i and waits for it to exit.
func (c *Cluster) KillBroker(i int) { c.signalAndWait(i, syscall.SIGKILL, 30*time.Second) }

// TermBroker stops broker i gracefully (SIGTERM), killing it if it has not
// exited within 30 s.
func (c *Cluster) TermBroker(i int) {
	if !c.signalAndWait(i, syscall.SIGTERM, 30*time.Second) {
		c.log.Warn("broker did not stop within 30 s of SIGTERM; killing it", "broker", c.brokers[i].id)
		c.KillBroker(i)
	}
}

func (c *Cluster) signalAndWait(i int, sig syscall.Signal, limit time.Duration) bool {
	b := c.brokers[i]
	b.mu.Lock()
	p := b.p
	if p == nil || !p.running() {
		b.mu.Unlock()
		return true
	}
	_ = p.cmd.Process.Signal(sig)
	if b.stopped {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		b.stopped = false
	}
	b.mu.Unlock()
	select {
	case <-p.exited:
		return true
	case <-time.After(limit):
		return false
	}
}

// PauseBroker sends SIGSTOP to broker i; ResumeBroker sends SIGCONT.
func (c *Cluster) PauseBroker(i int) { c.stopCont(i, true) }

// ResumeBroker resumes a paused broker.
func (c *Cluster) ResumeBroker(i int) { c.stopCont(i, false) }

func (c *Cluster) stopCont(i int, stop bool) {
	b := c.brokers[i]
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.p == nil || !b.p.running() {
		return
	}
	if stop {
		_ = b.p.cmd.Process.Signal(syscall.SIGSTOP)
	} else {
		_ = b.p.cmd.Process.Signal(syscall.SIGCONT)
	}
	b.stopped = stop
}

// HealAll heals the network, resumes paused brokers and starts stopped ones.
func (c *Cluster) HealAll() error {
	c.net.Heal()
	var errs []error
	for i := range c.brokers {
		c.ResumeBroker(i)
		errs = append(errs, c.StartBroker(i))
	}
	return errors.Join(errs...)
}

// Exits is how many broker processes have exited (for the summary).
func (c *Cluster) running(i int) bool {
	b := c.brokers[i]
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.p != nil && b.p.running()
}

// Close stops every process, the proxies, and drops the scratch database.
func (c *Cluster) Close() {
	for i := range c.brokers {
		c.TermBroker(i)
	}
	if c.cp != nil && c.cp.running() {
		_ = c.cp.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.cp.exited:
		case <-time.After(20 * time.Second):
			_ = c.cp.cmd.Process.Kill()
			<-c.cp.exited
		}
	}
	c.net.Close()
	c.dropDB()
}
