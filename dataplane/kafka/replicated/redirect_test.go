package replicated

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/celltest/cellstack"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/kafka"
	"github.com/sluicehq/sluice/dataplane/kafka/localpart"
)

const otherCell = "cell-2"

// other is a second cell of the same pool: one Kafka listener (node 1,
// single-replica local partitions) whose unknown keys go to the control
// plane's key-home lookup; its nodes 2 and 3 have no Kafka address.
type other struct {
	addr  string
	state *cellview.Syncer
}

// startOtherCell creates cell-2 in the control plane and starts its
// listener. Tenants signed up afterwards are homed there (the emptier cell).
func (c *cell) startOtherCell(t *testing.T) *other {
	t.Helper()
	ctx := context.Background()
	op := c.cp.Operator
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &other{addr: ln.Addr().String()}
	if _, err := op.AdminCreateCell(ctx, api.CreateCellRequest{ID: otherCell, PoolID: cptest.Pool}); err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 3; n++ {
		req := api.CreateBrokerRequest{ID: fmt.Sprintf("%s-b%d", otherCell, n), CellID: otherCell, NodeID: n}
		if n == 1 {
			req.KafkaAddr = o.addr
		}
		if _, err := op.AdminCreateBroker(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	k, err := op.AdminCreateCellKey(ctx, otherCell)
	if err != nil {
		t.Fatal(err)
	}
	api := client.New(c.cp.URL, client.WithAPIKey(k.ID, k.Secret))
	o.state, err = cellview.New(cellview.Config{Cell: otherCell, API: api, CacheFile: filepath.Join(t.TempDir(), "state.json"),
		Wait: 5 * time.Second, RetryEvery: 100 * time.Millisecond, Logger: c.logger})
	if err != nil {
		t.Fatal(err)
	}
	store, err := localpart.New(localpart.Config{Dir: t.TempDir(), NodeID: 1, State: o.state, Logger: c.logger})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := kafka.New(kafka.Config{Listener: ln, NodeID: 1, State: o.state, Partitions: store, Logger: c.logger,
		ProducerIDs: &kafka.ProducerIDBlocks{Size: 100, Allocate: func(ctx context.Context, n int) (int64, error) {
			return api.AllocateProducerIDs(ctx, otherCell, n)
		}},
		Homes: kafka.HomesFunc(func(ctx context.Context, keyID, secret string) (wire.KeyHome, error) {
			return api.KeyHome(ctx, otherCell, keyID, secret)
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { o.state.Run(runCtx); done <- struct{}{} }()
	go func() {
		if err := srv.Serve(runCtx); err != nil {
			t.Errorf("serve cell-2: %v", err)
		}
		done <- struct{}{}
	}()
	t.Cleanup(func() {
		cancel()
		srv.Close()
		<-done
		<-done
		if err := store.Close(); err != nil {
			t.Errorf("close cell-2 partitions: %v", err)
		}
	})
	return o
}

// startReporters reports every broker's replicas of the cell's topic to
// the control plane, as tenantd's brokers do, so partition_status holds
// the leaders.
func (c *cell) startReporters(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 3)
	for b := 0; b < 3; b++ {
		r, err := cellview.NewReporter(cellview.ReporterConfig{Cell: cptest.Cell, BrokerID: fmt.Sprintf("%s-b%d", cptest.Cell, b+1),
			API: c.cp.CellClient(), DataDir: t.TempDir(), Every: 200 * time.Millisecond, Logger: c.logger,
			Partitions: func() []wire.PartitionStatus { return c.status(b) }})
		if err != nil {
			t.Fatal(err)
		}
		go func() { r.Run(ctx); done <- struct{}{} }()
	}
	t.Cleanup(func() {
		cancel()
		for range 3 {
			<-done
		}
	})
}

// status is broker b's replicas as replicas.Manager.Status reports them.
func (c *cell) status(b int) []wire.PartitionStatus {
	out := []wire.PartitionStatus{}
	for p := 0; p < c.cell.Partitions(); p++ {
		r := c.cell.Replica(b, p)
		if r == nil {
			continue
		}
		st := wire.PartitionStatus{TopicID: c.topicID, Partition: p, LeaderEpoch: int64(r.LeaderEpoch()), HighWatermark: r.HighWatermark()}
		if id, _ := r.LeaderID(); id != "" {
			st.LeaderNode, _ = celltest.NodeOf(id)
		}
		out = append(out, st)
	}
	return out
}

// A client of a tenant homed on cell-1 that knows only a cell-2 broker
// is sent home by that broker's Metadata and produces and consumes there;
// wrong and unknown keys fail on cell-2 exactly as on cell-1; and neither
// cell's tenant learns anything of the other's.
func TestRedirectToHomeCell(t *testing.T) {
	const (
		topic = "orders"
		parts = 2
		n     = 2000
	)
	c, acme := startCell(t, parts, topic)
	c.startReporters(t)
	o := c.startOtherCell(t)
	local := c.cp.Signup("local", "admin")
	if local.Tenant.HomeCellID != otherCell {
		t.Fatalf("local is homed on %s", local.Tenant.HomeCellID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := local.Key.CreateTopic(ctx, api.CreateTopicRequest{Name: "ledger", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	cellstack.WaitKnown(t, 20*time.Second, keyOf(local), "ledger", o.state) // on cell-2
	leaders := make([]int32, parts)
	for p := range leaders {
		leaders[p] = int32(c.cell.WaitLeader(p, 20*time.Second) + 1)
	}

	// Metadata from cell-2 names cell-1's brokers and the leaders they
	// report, and only acme's topics.
	seeded := func(tn *cptest.Tenant, opts ...kgo.Opt) *kgo.Client {
		t.Helper()
		return seededClient(t, o.addr, tn, opts...)
	}
	celltest.WaitFor(t, 30*time.Second, "cell-2's metadata to name cell-1's reported leaders", func() bool {
		mr := rawMetadata(t, o.addr, acme, nil)
		if mr.ClusterID == nil || *mr.ClusterID != cptest.Cell || len(mr.Brokers) != 3 || len(mr.Topics) != 1 || *mr.Topics[0].Topic != topic {
			t.Fatalf("acme's metadata from cell-2: cluster %v, brokers %+v, topics %+v", mr.ClusterID, mr.Brokers, mr.Topics)
		}
		// cell-1's brokers under the redirect session's own node ids,
		// which no broker of cell-2 holds.
		for i, b := range mr.Brokers {
			if b.NodeID != kafka.RedirectNodeID(i+1) || net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) != c.addrs[i] {
				t.Fatalf("broker %d at %s:%d, want %d at %s", b.NodeID, b.Host, b.Port, kafka.RedirectNodeID(i+1), c.addrs[i])
			}
		}
		for _, p := range mr.Topics[0].Partitions {
			if p.Leader != kafka.RedirectNodeID(int(leaders[p.Partition])) || p.LeaderEpoch < 1 {
				return false
			}
		}
		return true
	})

	// Produce (idempotent, acks=all) and consume with only cell-2's address.
	prod := seeded(acme, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := 0; i < n; i++ {
		r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%31), Value: strconv.AppendInt(nil, int64(i), 10)}
		prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce %d: %v", i, err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	var onCell1 int64
	for p := 0; p < parts; p++ {
		onCell1 += c.cell.Replica(c.cell.WaitLeader(p, 20*time.Second), p).HighWatermark()
	}
	if onCell1 != n {
		t.Fatalf("cell-1's partitions hold %d records, want %d", onCell1, n)
	}
	cons := seeded(acme, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: cellstack.FromStart(parts)}), kgo.FetchMaxWait(500*time.Millisecond))
	seen := make([]bool, n)
	for got := 0; got < n; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", got, n)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s/%d: %v (retried)", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			i, err := strconv.Atoi(string(r.Value))
			if err != nil || i < 0 || i >= n || seen[i] {
				t.Fatalf("record %q at %d/%d: unexpected or read twice", r.Value, r.Partition, r.Offset)
			}
			seen[i] = true
			got++
		})
	}

	// Data requests on the redirect session itself: retriable NOT_LEADER.
	rc := dialSASL(t, o.addr, acme.KeyID, acme.Secret)
	if code, _ := rc.sasl(); code != 0 {
		t.Fatalf("acme on cell-2: SASL code %d", code)
	}
	lo := listOffsetsRequest(topic, 0, -1)
	lo.Version = 4
	resp, err := rc.roundTrip(lo)
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; p.ErrorCode != catalog.NotLeader.KafkaCode {
		t.Fatalf("ListOffsets on a redirect session: code %d", p.ErrorCode)
	}
	// A v10 produce there names the leader at home and its address
	// (KIP-951), so a client moves the partition without a metadata
	// refresh.
	pr := produceRequest(topic, 0, celltest.Batch([]byte("redirected")))
	if resp, err = rc.roundTrip(pr); err != nil {
		t.Fatal(err)
	}
	presp := resp.(*kmsg.ProduceResponse)
	hinted := kafka.RedirectNodeID(int(leaders[0]))
	if p := presp.Topics[0].Partitions[0]; p.ErrorCode != catalog.NotLeader.KafkaCode || p.CurrentLeader.LeaderID != hinted || p.CurrentLeader.LeaderEpoch < 1 {
		t.Fatalf("produce v10 on a redirect session: code %d, current leader %+v; want NOT_LEADER naming node %d", p.ErrorCode, p.CurrentLeader, hinted)
	}
	if len(presp.Brokers) != 1 || presp.Brokers[0].NodeID != hinted ||
		net.JoinHostPort(presp.Brokers[0].Host, strconv.Itoa(int(presp.Brokers[0].Port))) != c.addrs[leaders[0]-1] {
		t.Fatalf("produce v10 on a redirect session: endpoints %+v, want node %d at %s", presp.Brokers, hinted, c.addrs[leaders[0]-1])
	}

	// Isolation: acme sees nothing of local's from cell-2, local nothing of
	// acme's, either way.
	for _, tc := range []struct {
		name   string
		tn     *cptest.Tenant
		own    string
		others string
	}{
		{"acme redirected", acme, topic, "ledger"},
		{"local at home", local, "ledger", topic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := rawMetadata(t, o.addr, tc.tn, nil)
			if len(all.Topics) != 1 || *all.Topics[0].Topic != tc.own {
				t.Fatalf("all topics: %+v", all.Topics)
			}
			named := rawMetadata(t, o.addr, tc.tn, []string{tc.others, "never-created"})
			for _, mt := range named.Topics {
				if mt.ErrorCode != catalog.TopicNotFound.KafkaCode || len(mt.Partitions) != 0 {
					t.Fatalf("%s: code %d, %d partitions; want UNKNOWN_TOPIC_OR_PARTITION like a topic never created", *mt.Topic, mt.ErrorCode, len(mt.Partitions))
				}
			}
		})
	}

	// Wrong and unknown keys fail on cell-2 exactly as on cell-1 (whose
	// listeners do no lookups), and the connection closes.
	for _, tc := range []struct{ name, id, secret string }{
		{"wrong secret", acme.KeyID, "not-the-secret"},
		{"unknown key", "SLKAAAAAAAAAAAAAAAA", acme.Secret},
		{"local's key with a wrong secret", local.KeyID, acme.Secret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, wantMsg := dialSASL(t, c.addrs[0], tc.id, tc.secret).sasl()
			rc := dialSASL(t, o.addr, tc.id, tc.secret)
			got, gotMsg := rc.sasl()
			if got != catalog.Unauthenticated.KafkaCode || got != want || gotMsg != wantMsg {
				t.Fatalf("cell-2 answered %d %q, cell-1 %d %q", got, gotMsg, want, wantMsg)
			}
			rc.expectClosed()
		})
	}

	// Revoking acme's key ends its redirect sessions at their next
	// request once the cached answer expires, and new ones fail.
	if _, err := acme.Owner.RevokeAPIKey(ctx, acme.KeyID); err != nil {
		t.Fatal(err)
	}
	celltest.WaitFor(t, 30*time.Second, "the revoked key's redirect session to close", func() bool {
		rc.send(kmsg.NewPtrMetadataRequest())
		_, err := rc.readFrame()
		return err != nil
	})
	if code, _ := dialSASL(t, o.addr, acme.KeyID, acme.Secret).sasl(); code != catalog.Unauthenticated.KafkaCode {
		t.Fatalf("revoked key on cell-2: SASL code %d", code)
	}

	// The other way: with lookups on cell-1's (replicated) listeners too,
	// cell-2's tenant bootstraps there. Cell-2 reports no leaders, so
	// Metadata names the preferred replica, node 1, its only listener.
	cell1API := c.cp.CellClient()
	c.homes = kafka.HomesFunc(func(ctx context.Context, keyID, secret string) (wire.KeyHome, error) {
		return cell1API.KeyHome(ctx, cptest.Cell, keyID, secret)
	})
	for b := 0; b < 3; b++ {
		c.stopServer(b)
		c.startServer(b, nil)
	}
	mr := rawMetadata(t, c.addrs[1], local, nil)
	if len(mr.Brokers) != 1 || mr.Brokers[0].NodeID != kafka.RedirectNodeID(1) || len(mr.Topics) != 1 || *mr.Topics[0].Topic != "ledger" ||
		mr.Topics[0].Partitions[0].Leader != kafka.RedirectNodeID(1) {
		t.Fatalf("local's metadata from cell-1: brokers %+v, topics %+v", mr.Brokers, mr.Topics)
	}
	lprod := seededClient(t, c.addrs[1], local, kgo.DefaultProduceTopic("ledger"))
	const m = 100
	for i := 0; i < m; i++ {
		if err := lprod.ProduceSync(ctx, &kgo.Record{Value: strconv.AppendInt(nil, int64(i), 10)}).FirstErr(); err != nil {
			t.Fatalf("local produce %d through cell-1: %v", i, err)
		}
	}
	lc := seededClient(t, c.addrs[2], local, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"ledger": {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(500*time.Millisecond))
	for next := 0; next < m; {
		fs := lc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("local consumed %d of %d through cell-1", next, m)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != strconv.Itoa(next) {
				t.Fatalf("local read %q at offset %d, want %d", r.Value, r.Offset, next)
			}
			next++
		})
	}
}

// seededClient is a franz-go client of tn that knows only addr.
func seededClient(t *testing.T, addr string, tn *cptest.Tenant, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	backoff := kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })
	return cellstack.Client(t, keyOf(tn), []string{addr}, 60*time.Second, append([]kgo.Opt{backoff}, opts...)...)
}

// rawMetadata asks addr for metadata as tn over a fresh connection (all
// topics when names is nil).
func rawMetadata(t *testing.T, addr string, tn *cptest.Tenant, names []string) *kmsg.MetadataResponse {
	t.Helper()
	rc := dialSASL(t, addr, tn.KeyID, tn.Secret)
	if code, msg := rc.sasl(); code != 0 {
		t.Fatalf("SASL as %s at %s: %d %s", tn.Tenant.Name, addr, code, msg)
	}
	req := metadataRequest(names...)
	req.Version = 12
	resp, err := rc.roundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	rc.c.Close()
	mr := resp.(*kmsg.MetadataResponse)
	slices.SortFunc(mr.Brokers, func(a, b kmsg.MetadataResponseBroker) int { return int(a.NodeID - b.NodeID) })
	return mr
}

// saslConn is a hand-driven Kafka connection for SASL/PLAIN answers.
type saslConn struct {
	t          *testing.T
	c          net.Conn
	fmt        *kmsg.RequestFormatter
	corr       int32
	id, secret string
}

func dialSASL(t *testing.T, addr, id, secret string) *saslConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &saslConn{t: t, c: nc, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("redirect-test")), id: id, secret: secret}
}

// sasl runs SaslHandshake v1 and SaslAuthenticate v1 and returns the
// authentication's code and message.
func (r *saslConn) sasl() (int16, string) {
	r.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	if resp, err := r.roundTrip(hs); err != nil || resp.(*kmsg.SASLHandshakeResponse).ErrorCode != 0 {
		r.t.Fatalf("handshake: %v %+v", err, resp)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version = 1
	au.SASLAuthBytes = []byte("\x00" + r.id + "\x00" + r.secret)
	resp, err := r.roundTrip(au)
	if err != nil {
		r.t.Fatalf("authenticate: %v", err)
	}
	ar := resp.(*kmsg.SASLAuthenticateResponse)
	msg := ""
	if ar.ErrorMessage != nil {
		msg = *ar.ErrorMessage
	}
	return ar.ErrorCode, msg
}

func (r *saslConn) send(req kmsg.Request) {
	r.corr++
	r.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	r.c.Write(r.fmt.AppendRequest(nil, req, r.corr))
}

func (r *saslConn) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	r.t.Helper()
	r.send(req)
	return r.receive(req, r.corr)
}

// receive reads the next response, which must answer req, sent with
// correlation id corr, and decodes it.
func (r *saslConn) receive(req kmsg.Request, corr int32) (kmsg.Response, error) {
	r.t.Helper()
	body, err := r.readFrame()
	if err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		r.t.Fatalf("response to request %d, want %d: out of order", got, corr)
	}
	body = body[4:] // correlation id
	if req.IsFlexible() && req.Key() != 18 {
		body = body[1:] // empty header tags
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(body); err != nil {
		r.t.Fatalf("decode %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

func (r *saslConn) readFrame() ([]byte, error) {
	r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var sz [4]byte
	if _, err := io.ReadFull(r.c, sz[:]); err != nil {
		return nil, err
	}
	b := make([]byte, int(sz[0])<<24|int(sz[1])<<16|int(sz[2])<<8|int(sz[3]))
	_, err := io.ReadFull(r.c, b)
	return b, err
}

// expectClosed waits (bounded) for the server to close the connection.
func (r *saslConn) expectClosed() {
	r.t.Helper()
	r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var ne net.Error
	if _, err := r.c.Read(make([]byte, 1)); err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		r.t.Fatalf("connection still open: %v", err)
	}
}
