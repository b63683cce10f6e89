package replicated

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/admission"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/kafka"
	"github.com/sluicehq/sluice/dataplane/quotashare"
	"github.com/sluicehq/sluice/quotas"
)

// redisServer is a redis-server of the test's own, so that it can be
// stopped and started again.
type redisServer struct {
	t    testing.TB
	host string
	port int
	dir  string

	// mu guards cmd.
	mu  sync.Mutex
	cmd *exec.Cmd
}

const redisBinary = "/usr/bin/redis-server"

func init() {
	// go-redis logs every failed dial; the outage test makes many.
	redis.SetLogger(quietRedis{})
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func startRedis(t testing.TB) *redisServer {
	t.Helper()
	// Restarted on the same port after an outage: see LoopbackHost.
	host := celltest.LoopbackHost()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	r := &redisServer{t: t, host: host, port: port, dir: t.TempDir()}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *redisServer) addr() string { return net.JoinHostPort(r.host, strconv.Itoa(r.port)) }

// start runs redis-server and waits until it answers PING.
func (r *redisServer) start() {
	r.t.Helper()
	cmd := exec.Command(redisBinary, "--port", strconv.Itoa(r.port), "--bind", r.host,
		"--save", "", "--appendonly", "no", "--dir", r.dir)
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("start %s: %v", redisBinary, err)
	}
	r.mu.Lock()
	r.cmd = cmd
	r.mu.Unlock()
	rdb := redis.NewClient(&redis.Options{Addr: r.addr()})
	defer rdb.Close()
	celltest.WaitFor(r.t, 20*time.Second, "redis-server answering", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		return rdb.Ping(ctx).Err() == nil
	})
}

// stop kills redis-server (an outage, not a shutdown) and reaps it.
func (r *redisServer) stop() {
	r.mu.Lock()
	cmd := r.cmd
	r.cmd = nil
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	cmd.Wait()
}

// injectedDisk is a broker's disk-usage source the test sets.
type injectedDisk struct{ used, total atomic.Int64 }

func (d *injectedDisk) usage() (int64, int64, error) { return d.used.Load(), d.total.Load(), nil }

// setPercent sets usage to p% of a 100 GiB disk.
func (d *injectedDisk) setPercent(p int64) {
	d.total.Store(100 << 30)
	d.used.Store(p << 30)
}

// quotaBroker is one broker's tenant isolation.
type quotaBroker struct {
	id      string
	buckets *quotas.Buckets
	adm     *admission.Admission
	share   *quotashare.Sharer
	disk    *injectedDisk
	reg     *prometheus.Registry
}

// quotaCell is a cell whose brokers enforce quotas, sharing them through
// Redis at redisAddr.
type quotaCell struct {
	*cell
	tn      *cptest.Tenant
	brokers []*quotaBroker
	second  atomic.Pointer[string] // the second topic's id, once set
}

// secondTopic serves the first topic as the harness does and a second
// topic's partition p from Raft group first+p.
type secondTopic struct {
	qc    *quotaCell
	base  kafka.Partitions
	b     int
	first int
}

func (s secondTopic) Get(topicID string, part int32) (kafka.Partition, bool) {
	if id := s.qc.second.Load(); id != nil && *id == topicID {
		g := s.first + int(part)
		if part < 0 || g >= s.qc.cell.cell.Partitions() {
			return nil, false
		}
		r := s.qc.cell.cell.Replica(s.b, g)
		if r == nil {
			return nil, false
		}
		return r, true
	}
	return s.base.Get(topicID, part)
}

// startQuotaCell starts a cell of parts partitions of topic for tenant
// acme, every broker with admission over an injected disk (at 10%) and a
// quota sharer on redisAddr with a 500ms round, demand averaged
// over 2 s and boosted by half while throttled. Raft timeouts are a
// second, not celltest's 300ms: these tests measure rates, and a busy
// machine would otherwise move leaders (and the load's skew) mid-run. egress is each broker's
// fetch egress budget (0: none).
func startQuotaCell(t testing.TB, redisAddr string, parts int, topic string, egress float64) *quotaCell {
	t.Helper()
	return startQuotaCellGroups(t, redisAddr, parts, parts, topic, egress)
}

// startQuotaCellGroups is startQuotaCell with groups Raft groups: groups
// beyond parts serve a second topic set later with setSecondTopic.
func startQuotaCellGroups(t testing.TB, redisAddr string, parts, groups int, topic string, egress float64) *quotaCell {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	qc := &quotaCell{}
	prefix := fmt.Sprintf("sluice:test:%s:%d", t.Name(), time.Now().UnixNano())
	for b := 0; b < 3; b++ {
		qb := &quotaBroker{id: fmt.Sprintf("%s-b%d", cptest.Cell, b+1), disk: &injectedDisk{}, reg: prometheus.NewRegistry()}
		qb.disk.setPercent(10)
		var err error
		if qb.buckets, err = quotas.New(quotas.Config{}); err != nil {
			t.Fatal(err)
		}
		if qb.share, err = quotashare.New(quotashare.Config{Redis: rdb, Prefix: prefix, BrokerID: qb.id, Buckets: qb.buckets,
			Interval: 500 * time.Millisecond, DemandRounds: 4, ThrottledBoost: 1.5}); err != nil {
			t.Fatal(err)
		}
		if qb.adm, err = admission.New(admission.Config{BrokerID: qb.id, Buckets: qb.buckets, Disk: qb.disk.usage,
			Every: 100 * time.Millisecond, EgressBytesPerSec: egress, Registerer: qb.reg,
			ShareMode: func() bool { return qb.share.Mode() == quotashare.ModeShared }}); err != nil {
			t.Fatal(err)
		}
		qc.brokers = append(qc.brokers, qb)
	}
	qc.cell, qc.tn = startCellWith(t, parts, topic, cellOptions{
		configure: func(b int, cfg *kafka.Config) {
			cfg.Admission = qc.brokers[b].adm
			cfg.Partitions = secondTopic{qc, cfg.Partitions, b, parts}
		},
		raft:   steadyRaft,
		groups: groups,
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for b, qb := range qc.brokers {
		for _, run := range []func(){
			func() { qb.adm.Run(ctx) },
			func() { qb.share.Run(ctx) },
			func() { qb.adm.FollowState(ctx, qc.states[b], qb.share.SetState) },
		} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				run()
			}()
		}
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	celltest.WaitFor(t, 30*time.Second, "every partition led by its preferred broker", func() bool {
		for p := 0; p < groups; p++ {
			if qc.cell.cell.Leader(p) != p%3 {
				return false
			}
		}
		return true
	})
	return qc
}

// setProduceQuota gives a tenant a produce-bytes quota and record and
// request rates high enough never to bind, so only the bytes are measured.
func (qc *quotaCell) setProduceQuota(t testing.TB, tenantID string, bytesPerSec int64) {
	t.Helper()
	qc.setQuotas(t, tenantID, func(q *api.Quotas) {
		q.ProduceBytesPerSec, q.ProduceMessagesPerSec, q.MaxRequestsPerSec = bytesPerSec, 1_000_000, 100_000
	})
}

// logShares waits out window, logging line() every interval: the shares
// a measurement ran under.
func (qc *quotaCell) logShares(t testing.TB, window, every time.Duration, line func() string) {
	t.Helper()
	end := time.NewTimer(window)
	defer end.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-end.C:
			return
		case <-tick.C:
			t.Logf("%s", line())
		}
	}
}

// setQuotas changes a tenant's quotas and waits until every broker's
// buckets follow.
func (qc *quotaCell) setQuotas(t testing.TB, tenantID string, change func(*api.Quotas)) {
	t.Helper()
	ctx := context.Background()
	q, err := qc.cp.Operator.AdminQuotas(ctx, tenantID)
	if err != nil {
		t.Fatal(err)
	}
	change(&q)
	if _, err := qc.cp.Operator.AdminSetQuotas(ctx, tenantID, q); err != nil {
		t.Fatalf("set quotas: %v", err)
	}
	// Every broker's state shows them and its share of the produce quota
	// is applied: the shares add up to about the quota (brokers compute
	// theirs at slightly different times).
	celltest.WaitFor(t, 20*time.Second, "quotas on every broker", func() bool {
		var sum float64
		for b, qb := range qc.brokers {
			tn, ok := qc.states[b].View().Tenant(tenantID)
			if !ok || tn.Quotas != wireQuotas(q) {
				return false
			}
			l, ok := qb.buckets.Limits(tenantID)
			if !ok {
				return false
			}
			sum += l[quotas.ProduceBytes].Rate
		}
		want := float64(q.ProduceBytesPerSec)
		return sum > 0.8*want && sum < 1.2*want
	})
}

func wireQuotas(q api.Quotas) wire.Quotas {
	return wire.Quotas{ProduceBytesPerSec: q.ProduceBytesPerSec, ProduceMessagesPerSec: q.ProduceMessagesPerSec,
		FetchBytesPerSec: q.FetchBytesPerSec, MaxPartitions: q.MaxPartitions, MaxTopics: q.MaxTopics,
		MaxConnections: q.MaxConnections, MaxStorageBytes: q.MaxStorageBytes, MaxMessageBytes: q.MaxMessageBytes,
		MaxRequestsPerSec: q.MaxRequestsPerSec}
}

// batchOverhead is a v2 record batch's header: what the broker records on
// top of the records' bytes franz-go reports.
const batchOverhead = 61

// ackedBytes counts acknowledged record-batch bytes (what the brokers
// record against the quota) as franz-go reports them.
type ackedBytes struct{ n atomic.Int64 }

func (a *ackedBytes) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	a.n.Add(int64(m.CompressedBytes + batchOverhead))
}

// steadyRaft is celltest's Raft config with one-second timeouts.
func steadyRaft() *raft.Config {
	c := celltest.TestRaftConfig()
	c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
	return c
}
