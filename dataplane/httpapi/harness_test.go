package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluicehq/sluice/controlplane/api"
	"github.com/sluicehq/sluice/controlplane/client"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/controlplane/wire"
	"github.com/sluicehq/sluice/dataplane/admission"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/httpapi"
	"github.com/sluicehq/sluice/dataplane/kafka"
	dlog "github.com/sluicehq/sluice/dataplane/log"
	"github.com/sluicehq/sluice/dataplane/raftlog"
	"github.com/sluicehq/sluice/dataplane/replicas"
	"github.com/sluicehq/sluice/dataplane/state"
	"github.com/sluicehq/sluice/dataplane/transport"
)

const wait = 30 * time.Second

// cell is a control plane and three brokers wired as tenantd wires them:
// Raft transport, replica manager following the cell state, a Kafka
// listener and the HTTP data API on each.
type cell struct {
	t       testing.TB
	cp      *cptest.Env
	brokers []*broker
}

type broker struct {
	node     int
	syncer   *state.Syncer
	manager  *replicas.Manager
	http     *httpapi.Server
	coord    *groups.Coordinator
	httpAddr string
	kafka    string
}

// httpPartitions and kafkaPartitions adapt the replica manager, as tenantd does.
type httpPartitions struct{ m *replicas.Manager }

func (p httpPartitions) Get(topicID string, part int32) (httpapi.Partition, bool) {
	r, ok := p.m.Get(topicID, part)
	if !ok {
		return nil, false
	}
	return r, true
}

type kafkaPartitions struct{ m *replicas.Manager }

func (p kafkaPartitions) Get(topicID string, part int32) (kafka.Partition, bool) {
	r, ok := p.m.Get(topicID, part)
	if !ok {
		return nil, false
	}
	return r, true
}

type cellOpts struct {
	maxBodyBytes  int64
	retryAttempts int
	// admission, when set, is every broker's tenant isolation.
	admission *admission.Admission
}

func startCell(t testing.TB, o cellOpts) *cell {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane on Postgres and a three-broker cell")
	}
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	var httpLns, kafkaLns []net.Listener
	var addrs cptest.Brokers
	for range 3 {
		h, k := listen(), listen()
		httpLns, kafkaLns = append(httpLns, h), append(kafkaLns, k)
		addrs.HTTPAddrs = append(addrs.HTTPAddrs, h.Addr().String())
		addrs.KafkaAddrs = append(addrs.KafkaAddrs, k.Addr().String())
	}
	c := &cell{t: t, cp: cptest.Start(t, addrs)}
	logger := slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	nodes := make([]*transport.Node, 3)
	for i := range nodes {
		tn, err := transport.New(transport.Config{ID: replicas.ServerID(i + 1), ListenAddr: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = tn
		addr := string(tn.Addr())
		if _, err := c.cp.Operator.AdminUpdateBroker(ctx, fmt.Sprintf("%s-b%d", cptest.Cell, i+1), api.UpdateBrokerRequest{RaftAddr: &addr}); err != nil {
			t.Fatal(err)
		}
	}
	cellAPI := c.cp.CellClient()
	ids := &kafka.ProducerIDBlocks{Size: 100, Allocate: func(ctx context.Context, n int) (int64, error) {
		return cellAPI.AllocateProducerIDs(ctx, cptest.Cell, n)
	}}
	for i, tn := range nodes {
		b := &broker{node: i + 1, httpAddr: addrs.HTTPAddrs[i], kafka: addrs.KafkaAddrs[i]}
		dir := t.TempDir()
		com := raftlog.NewCommitter(dlog.SyncFiles)
		m, err := replicas.New(replicas.Config{NodeID: b.node, DataDir: filepath.Join(dir, "replicas"), Transport: tn, Committer: com,
			Raft: raftConfig, CheckInterval: 100 * time.Millisecond, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		b.manager = m
		b.syncer, err = state.New(state.Config{Cell: cptest.Cell, API: c.cp.CellClient(), CacheFile: filepath.Join(dir, "state.json"),
			Wait: 2 * time.Second, RetryEvery: 100 * time.Millisecond, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		b.coord, err = groups.New(groups.Config{NodeID: b.node, Logger: logger, Offsets: func(p int32) (groups.Log, bool) {
			r, ok := m.Get(groups.OffsetsTopicID, p)
			if !ok {
				return nil, false
			}
			return r, true
		}})
		if err != nil {
			t.Fatal(err)
		}
		ks, err := kafka.New(kafka.Config{Listener: kafkaLns[i], NodeID: b.node, State: b.syncer, Partitions: kafkaPartitions{m},
			ProducerIDs: ids, Groups: b.coord, Logger: logger, MaxFetchWait: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var admit func(context.Context, httpapi.Admission) error
		var record func(httpapi.Admission)
		if o.admission != nil {
			admit, record = httpapi.AdmitWith(o.admission)
		}
		b.http, err = httpapi.New(httpapi.Config{Listener: httpLns[i], NodeID: b.node, State: b.syncer, Partitions: httpPartitions{m},
			ProducerIDs: ids, Logger: logger, MaxBodyBytes: o.maxBodyBytes, MaxWait: 10 * time.Second,
			Groups: b.coord, ControlPlane: client.New(c.cp.URL), RetryAttempts: o.retryAttempts,
			RetryBackoff: 50 * time.Millisecond, RetryMaxBackoff: 200 * time.Millisecond, Admit: admit, Record: record})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(4)
		go func() { defer wg.Done(); _ = b.syncer.Run(ctx) }()
		go func() {
			defer wg.Done()
			for {
				changed := b.syncer.Changed()
				if err := m.Apply(ctx, b.syncer.View()); err != nil && ctx.Err() == nil {
					t.Logf("broker %d apply: %v", b.node, err)
				}
				select {
				case <-ctx.Done():
					return
				case <-changed:
				}
			}
		}()
		go func() { defer wg.Done(); _ = ks.Serve(ctx) }()
		go func() { defer wg.Done(); _ = b.http.Serve(ctx) }()
		// Cleanups run last-in first-out: the front doors stop before the
		// replicas, the replicas before the committer and transport.
		t.Cleanup(func() { _ = tn.Close() })
		t.Cleanup(com.Close)
		t.Cleanup(func() {
			if err := m.Close(); err != nil {
				t.Errorf("close replicas %d: %v", b.node, err)
			}
		})
		t.Cleanup(func() { ks.Close(); b.http.Close(); b.coord.Close() })
		c.brokers = append(c.brokers, b)
	}
	// Registered last, so it runs first: the syncers and appliers stop
	// before the replicas close and the directories are removed.
	t.Cleanup(func() { cancel(); wg.Wait() })
	return c
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
func (c *cell) call(b int, method, path, id, secret string, body any, hdr ...string) (int, []byte) {
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
	req, err := http.NewRequest(method, "http://"+c.brokers[b].httpAddr+path, rd)
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
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, out
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
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(c.brokers[0].kafka, c.brokers[1].kafka, c.brokers[2].kafka),
		kgo.SASL(plain.Auth{User: tn.KeyID, Pass: tn.Secret}.AsMechanism()),
		kgo.RetryTimeout(wait),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
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

type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
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
