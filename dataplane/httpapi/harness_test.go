package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/admission"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/celltest/cellstack"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/frontdoor"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/httpapi"
	"github.com/sluicehq/sluice/dataplane/kafka"
	dlog "github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/partition"
	"github.com/sluicehq/sluice/dataplane/peercert"
	"github.com/sluicehq/sluice/dataplane/raftlog"
	"github.com/sluicehq/sluice/dataplane/replicas"
	"github.com/sluicehq/sluice/dataplane/transport"
	"github.com/sluicehq/sluice/dataplane/usage"
	"github.com/sluicehq/sluice/quotas"
)

const wait = 30 * time.Second

// cell is a control plane and three brokers wired as tenantd wires them:
// Raft transport, replica manager following the cell state, a Kafka
// listener and the HTTP data API on each. A broker can be killed (every
// part of it stops, as when its process exits) and restarted from its
// data directory on the same addresses.
type cell struct {
	t       testing.TB
	cp      *cptest.Env
	o       cellOpts
	logger  *slog.Logger
	ids     *kafka.ProducerIDBlocks
	brokers []*broker
	// peerKey is the brokers' shared forwarding key (httpapi.Config.PeerKey).
	peerKey []byte
	// With cellOpts.tls: every broker's listener configuration, and the
	// pool of the CA that issued its certificate.
	serverTLS *tls.Config
	caPool    *x509.CertPool
}

// broker is one broker of the cell. Its running parts are replaced by a
// restart; tests read them from the test goroutine only.
type broker struct {
	node     int
	dir      string // its data directory, kept across restarts
	raftAddr string
	httpAddr string
	kafka    string

	syncer *cellview.Syncer
	http   *httpapi.Server
	reg    *prometheus.Registry // http's metrics
	coord  *groups.Coordinator
	// adm is the broker's own tenant isolation when the cell runs with
	// cellOpts.isolation, as tenantd gives every broker one.
	adm     *admission.Admission
	buckets *quotas.Buckets // adm's, with cellOpts.isolation

	// mu guards manager, which the front doors and the coordinator read.
	mu      sync.Mutex
	manager *replicas.Manager

	// stop ends everything started by start; nil while the broker is down.
	stop func()
	// stopRaft ends the Raft side (replicas, committer, transport); nil
	// while it is down.
	stopRaft func()
}

// replicas is the broker's replica manager, nil while its Raft side is
// down.
func (b *broker) replicas() *replicas.Manager {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.manager
}

// replica is partition part of topicID on the broker, if the broker's Raft
// side is up and holds it.
func (b *broker) replica(topicID string, part int32) (*partition.Replica, bool) {
	m := b.replicas()
	if m == nil {
		return nil, false
	}
	return m.Get(topicID, part)
}

// partitions adapts the replica manager for both front doors, as tenantd
// does.
type partitions struct{ b *broker }

func (p partitions) Get(topicID string, part int32) (frontdoor.Partition, bool) {
	r, ok := p.b.replica(topicID, part)
	if !ok {
		return nil, false
	}
	return r, true
}

type cellOpts struct {
	maxBodyBytes  int64
	retryAttempts int
	// retryBackoff and retryMaxBackoff are the nack backoffs; default 50
	// and 200 ms, to keep tests short.
	retryBackoff, retryMaxBackoff time.Duration
	// admission, when set, is every broker's tenant isolation.
	admission *admission.Admission
	// isolation gives every broker its own admission.Admission following
	// its cell state, as tenantd does: the tenants' request rates are an
	// even share of their max_requests_per_sec per broker. Throughput is
	// not limited (no quota sharer sets the buckets' rates).
	isolation bool
	// tls serves the HTTP data API and the Kafka listener over TLS with a
	// certificate of a test CA for the loopback host.
	tls bool
	// meters, when set, is each broker's usage meter (node i+1's at i),
	// its HTTP API's Config.Usage.
	meters []*usage.Meter
}

func startCell(t testing.TB, o cellOpts) *cell {
	t.Helper()
	if o.retryBackoff == 0 {
		o.retryBackoff = 50 * time.Millisecond
	}
	if o.retryMaxBackoff == 0 {
		o.retryMaxBackoff = max(200*time.Millisecond, o.retryBackoff)
	}
	if testing.Short() {
		t.Skip("starts a control plane on Postgres and a three-broker cell")
	}
	var httpLns, kafkaLns []net.Listener
	var addrs cptest.Brokers
	host := celltest.LoopbackHost() // brokers restart on their ports
	for range 3 {
		h, k := listenOn(t, net.JoinHostPort(host, "0")), listenOn(t, net.JoinHostPort(host, "0"))
		httpLns, kafkaLns = append(httpLns, h), append(kafkaLns, k)
		addrs.HTTPAddrs = append(addrs.HTTPAddrs, h.Addr().String())
		addrs.KafkaAddrs = append(addrs.KafkaAddrs, k.Addr().String())
	}
	c := &cell{t: t, cp: cptest.Start(t, addrs), o: o, peerKey: make([]byte, 32)}
	if _, err := rand.Read(c.peerKey); err != nil {
		t.Fatal(err)
	}
	c.logger = celltest.Logger(t, slog.LevelWarn)
	if o.tls {
		c.serverTLS, c.caPool = serverTLS(t, host)
	}
	nodes := make([]*transport.Node, 3)
	for i := range nodes {
		tn, err := transport.New(transport.Config{ID: replicas.ServerID(i + 1), ListenAddr: net.JoinHostPort(host, "0"), Credentials: celltest.PeerCredentials(t, replicas.ServerID(i+1))})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = tn
		addr := string(tn.Addr())
		if _, err := c.cp.Operator.AdminUpdateBroker(context.Background(), fmt.Sprintf("%s-b%d", cptest.Cell, i+1), api.UpdateBrokerRequest{RaftAddr: &addr}); err != nil {
			t.Fatal(err)
		}
	}
	cellAPI := c.cp.CellClient()
	c.ids = &kafka.ProducerIDBlocks{Size: 100, Allocate: func(ctx context.Context, n int) (int64, error) {
		return cellAPI.AllocateProducerIDs(ctx, cptest.Cell, n)
	}}
	for i, tn := range nodes {
		b := &broker{node: i + 1, dir: t.TempDir(), raftAddr: string(tn.Addr()), httpAddr: addrs.HTTPAddrs[i], kafka: addrs.KafkaAddrs[i]}
		c.brokers = append(c.brokers, b)
		c.start(b, tn, httpLns[i], kafkaLns[i])
	}
	// Registered after the directories, so it runs before they are removed.
	t.Cleanup(func() {
		for _, b := range c.brokers {
			if b.stop != nil {
				b.stop()
				b.stop = nil
			}
		}
	})
	return c
}

// serverTLS is a listener configuration with a certificate for host,
// issued by a new CA, and the pool of that CA.
func serverTLS(t testing.TB, host string) (*tls.Config, *x509.CertPool) {
	t.Helper()
	ca, err := peercert.NewCA("tls-test", 0)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.IssueServer([]string{host}, 0)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := kp.TLS()
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{*cert}}, ca.Pool()
}

// listenOn listens on addr, as a restarted broker does.
func listenOn(t testing.TB, addr string) net.Listener { return cellstack.Listen(t, addr) }

// start runs broker b on its transport and listeners: replicas from its
// data directory, the state syncer from its cache, the group
// coordinator, the Kafka listener and the HTTP data API.
func (c *cell) start(b *broker, tn *transport.Node, httpLn, kafkaLn net.Listener) {
	t := c.t
	t.Helper()
	syncer := cellstack.Syncer(t, c.cp.CellClient(), cptest.Cell, b.dir, 2*time.Second, c.logger)
	b.syncer = syncer
	c.startRaft(b, tn)
	coord, err := groups.New(groups.Config{NodeID: b.node, Logger: c.logger, Offsets: func(p int32) (groups.Log, bool) {
		m := b.replicas()
		if m == nil {
			return nil, false
		}
		r, ok := m.Get(groups.OffsetsTopicID, p)
		if !ok {
			return nil, false
		}
		return r, true
	}})
	if err != nil {
		t.Fatal(err)
	}
	ks, err := kafka.New(kafka.Config{Listener: kafkaLn, NodeID: b.node, State: syncer, Partitions: partitions{b},
		ProducerIDs: c.ids, Groups: coord, Logger: c.logger, MaxFetchWait: 2 * time.Second, TLS: c.serverTLS})
	if err != nil {
		t.Fatal(err)
	}
	var admit func(context.Context, httpapi.Admission) error
	var record func(httpapi.Admission)
	adm := c.o.admission
	if c.o.isolation {
		buckets, err := quotas.New(quotas.Config{})
		if err != nil {
			t.Fatal(err)
		}
		b.buckets = buckets
		if adm, err = admission.New(admission.Config{BrokerID: fmt.Sprintf("%s-b%d", cptest.Cell, b.node), Buckets: buckets, Logger: c.logger}); err != nil {
			t.Fatal(err)
		}
		adm.SetState(syncer.View().CellState)
	}
	b.adm = adm
	if adm != nil {
		admit, record = httpapi.AdmitWith(adm)
	}
	b.reg = prometheus.NewRegistry()
	hs, err := httpapi.New(httpapi.Config{Listener: httpLn, Registerer: b.reg, NodeID: b.node, State: syncer, Partitions: partitions{b},
		ProducerIDs: c.ids, Logger: c.logger, MaxBodyBytes: c.o.maxBodyBytes, MaxWait: 10 * time.Second,
		Groups: coord, ControlPlane: client.New(c.cp.URL), RetryAttempts: c.o.retryAttempts,
		RetryBackoff: c.o.retryBackoff, RetryMaxBackoff: c.o.retryMaxBackoff, Admit: admit, Record: record, PeerKey: c.peerKey,
		TLS: c.serverTLS, ForwardCAs: c.caPool, Usage: c.meter(b.node)})
	if err != nil {
		t.Fatal(err)
	}
	b.coord, b.http = coord, hs
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if c.o.isolation {
		wg.Add(2)
		go func() { defer wg.Done(); adm.FollowState(ctx, syncer) }()
		go func() { defer wg.Done(); _ = adm.Run(ctx) }()
	}
	wg.Add(3)
	go func() { defer wg.Done(); _ = syncer.Run(ctx) }()
	go func() { defer wg.Done(); _ = ks.Serve(ctx) }()
	go func() { defer wg.Done(); _ = hs.Serve(ctx) }()
	// The syncer stops first, then the front doors, the coordinator, and
	// last the Raft side.
	b.stop = func() {
		cancel()
		wg.Wait()
		ks.Close()
		hs.Close()
		coord.Close()
		if b.stopRaft != nil {
			b.stopRaft()
		}
	}
}

// startRaft opens broker b's replicas from its data directory on
// transport tn and keeps them following the cell state.
func (c *cell) startRaft(b *broker, tn *transport.Node) {
	t := c.t
	t.Helper()
	com := raftlog.NewCommitter(dlog.SyncFiles)
	m, err := replicas.New(replicas.Config{NodeID: b.node, DataDir: filepath.Join(b.dir, "replicas"), Transport: tn, Committer: com,
		Raft: raftConfig, CheckInterval: 100 * time.Millisecond, Logger: c.logger})
	if err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	b.manager = m
	b.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	syncer := b.syncer
	go func() {
		defer close(done)
		for {
			changed := syncer.Changed()
			if err := m.Apply(ctx, syncer.View()); err != nil && ctx.Err() == nil {
				t.Logf("broker %d apply: %v", b.node, err)
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
	}()
	b.stopRaft = func() {
		cancel()
		<-done
		b.mu.Lock()
		b.manager = nil
		b.mu.Unlock()
		if err := m.Close(); err != nil && !errors.Is(err, raft.ErrRaftShutdown) {
			t.Errorf("close replicas %d: %v", b.node, err)
		}
		com.Close()
		_ = tn.Close()
		b.stopRaft = nil
	}
}

// newTransport listens for broker b's Raft peers on its old address.
func (c *cell) newTransport(b *broker) *transport.Node {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tn, err := transport.New(transport.Config{ID: replicas.ServerID(b.node), ListenAddr: b.raftAddr, Credentials: celltest.PeerCredentials(c.t, replicas.ServerID(b.node))})
		if err == nil {
			return tn
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("broker %d transport: %v", b.node, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// isolate cuts broker i off its Raft peers as a network partition would:
// its replicas and Raft transport stop, so it leads nothing, while its
// HTTP and Kafka listeners and group coordinator (with whatever they keep
// in memory) go on. reconnect undoes it.
func (c *cell) isolate(i int) {
	c.t.Helper()
	b := c.brokers[i]
	if b.stopRaft == nil {
		c.t.Fatalf("broker %d is not connected", b.node)
	}
	b.stopRaft()
}

// reconnect starts isolated broker i's replicas again from its data
// directory, on its old Raft address.
func (c *cell) reconnect(i int) {
	c.t.Helper()
	b := c.brokers[i]
	if b.stopRaft != nil {
		c.t.Fatalf("broker %d is connected", b.node)
	}
	c.startRaft(b, c.newTransport(b))
}

// kill stops broker i as a crash would: its listeners, coordinator (and
// with it every HTTP member session it kept in memory), replicas and
// Raft transport. What it acknowledged is on disk already.
func (c *cell) kill(i int) {
	c.t.Helper()
	b := c.brokers[i]
	if b.stop == nil {
		c.t.Fatalf("broker %d is not running", b.node)
	}
	b.stop()
	b.stop = nil
}

// restart starts killed broker i again from its data directory, on its
// old Raft, Kafka and HTTP addresses.
func (c *cell) restart(i int) {
	c.t.Helper()
	b := c.brokers[i]
	if b.stop != nil {
		c.t.Fatalf("broker %d is running", b.node)
	}
	c.start(b, c.newTransport(b), listenOn(c.t, b.httpAddr), listenOn(c.t, b.kafka))
}

// tenant signs up a tenant with an admin key and waits until every broker
// knows the key.
func (c *cell) tenant(name string) *cptest.Tenant {
	c.t.Helper()
	tn := c.cp.Signup(name, "admin")
	c.waitKey(tn.KeyID, tn.Secret, true)
	return tn
}

func (c *cell) waitKey(id, secret string, valid bool) {
	c.t.Helper()
	celltest.WaitFor(c.t, wait, "key state on every broker", func() bool {
		for _, b := range c.brokers {
			_, err := b.syncer.View().Authenticate(id, secret, time.Now())
			if (err == nil) != valid {
				return false
			}
		}
		return true
	})
}

// topic creates a topic and waits until every partition has a serving
// leader that every broker's replica knows.
func (c *cell) topic(tn *cptest.Tenant, name string, parts int, config map[string]string) *wire.Topic {
	c.t.Helper()
	if _, err := tn.Key.CreateTopic(context.Background(), api.CreateTopicRequest{Name: name, Partitions: parts, Config: config}); err != nil {
		c.t.Fatalf("create topic %s: %v", name, err)
	}
	var wt *wire.Topic
	celltest.WaitFor(c.t, wait, "topic "+name+" led on every broker", func() bool {
		for _, b := range c.brokers {
			tp, ok := b.syncer.View().Topic(tn.Tenant.ID, name)
			if !ok {
				return false
			}
			wt = tp
			for p := range parts {
				r, ok := b.manager.Get(tp.ID, int32(p))
				if !ok {
					return false
				}
				if _, ok := r.Leader(); !ok {
					return false
				}
				// Leadership settles on the preferred replica first.
				if pref := tp.Partitions[p].Replicas[0]; pref == b.node && !r.IsLeader() {
					return false
				}
			}
		}
		return true
	})
	return wt
}

// leader is the index of the broker leading a partition, and of one that
// does not.
func (c *cell) leader(topicID string, p int32) (leader, follower int) {
	c.t.Helper()
	leader = -1
	celltest.WaitFor(c.t, wait, "a leader", func() bool {
		for i, b := range c.brokers {
			if r, ok := b.manager.Get(topicID, p); ok && r.IsLeader() {
				leader = i
				return true
			}
		}
		return false
	})
	return leader, (leader + 1) % 3
}

// call is one HTTP request to broker b as key id:secret (no credentials
// when id is empty); it returns the status and the raw body.
// meter is node's usage meter, nil without cellOpts.meters.
func (c *cell) meter(node int) *usage.Meter {
	if node-1 < len(c.o.meters) {
		return c.o.meters[node-1]
	}
	return nil
}

func (c *cell) call(b int, method, path, id, secret string, body any, hdr ...string) (int, []byte) {
	c.t.Helper()
	status, _, out := c.callWithHeaders(b, method, path, id, secret, body, hdr...)
	return status, out
}

// callWithHeaders is call that also returns the answer's headers.
func (c *cell) callWithHeaders(b int, method, path, id, secret string, body any, hdr ...string) (int, http.Header, []byte) {
	c.t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	case []byte:
		rd = bytes.NewReader(v)
	default:
		j, err := json.Marshal(v)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	scheme, hc := "http://", http.DefaultClient
	if c.o.tls {
		scheme = "https://"
		hc = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.caPool}}}
	}
	req, err := http.NewRequest(method, scheme+c.brokers[b].httpAddr+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if id != "" {
		req.SetBasicAuth(id, secret)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, out
}

// as calls as the tenant's key and decodes a 2xx answer into out.
func (c *cell) as(tn *cptest.Tenant, b int, method, path string, body, out any) int {
	c.t.Helper()
	status, raw := c.call(b, method, path, tn.KeyID, tn.Secret, body)
	if out != nil && status/100 == 2 {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
	if status != http.StatusOK && status != http.StatusCreated && status != http.StatusNoContent {
		c.t.Logf("%s %s → %d %s", method, path, status, raw)
	}
	return status
}

// kafkaClient is a franz-go client of the tenant.
func (c *cell) kafkaClient(tn *cptest.Tenant, opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	if c.o.tls {
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{RootCAs: c.caPool}))
	}
	return cellstack.Client(c.t, cellstack.Key{TenantID: tn.Tenant.ID, ID: tn.KeyID, Secret: tn.Secret}, []string{c.brokers[0].kafka, c.brokers[1].kafka, c.brokers[2].kafka}, wait, opts...)
}

type apiError struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retriable bool   `json:"retriable"`
}

func decodeError(t testing.TB, raw []byte) apiError {
	t.Helper()
	var e apiError
	if err := json.Unmarshal(raw, &e); err != nil || e.Code == "" {
		t.Fatalf("not a catalogue error: %s", raw)
	}
	return e
}

func timeNow() time.Time { return time.Now() }

// raftConfig is celltest's short-timeout Raft config with timeouts long
// enough that a busy two-core machine does not make leaders flap.
func raftConfig() *raft.Config {
	c := celltest.TestRaftConfig()
	c.HeartbeatTimeout = time.Second
	c.ElectionTimeout = time.Second
	c.LeaderLeaseTimeout = 500 * time.Millisecond
	return c
}

// coordinator waits until the group's preferred coordinator (the
// preferred leader of its offsets partition, where leadership settles)
// coordinates it, and returns its index.
func (c *cell) coordinator(tn *cptest.Tenant, group string) int {
	c.t.Helper()
	idx := int(groups.Partition(tn.Tenant.ID, group, groups.DefaultPartitions)) % 3
	waitFor(c.t, "the preferred coordinator for group "+group, func() bool {
		_, local, err := c.brokers[idx].coord.Locate(tn.Tenant.ID, group)
		return err == nil && local
	})
	return idx
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	celltest.WaitFor(t, wait, what, cond)
}

// metrics is broker b's HTTP data API metrics in Prometheus's text format,
// as the broker's metrics listener would serve them.
func (c *cell) metrics(b int) string {
	c.t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(c.brokers[b].reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}
