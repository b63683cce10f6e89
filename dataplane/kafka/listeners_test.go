package kafka_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/dataplane/kafka"
)

func rawProduce(t *testing.T, rc *rawConn, topic string, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks, r.TimeoutMillis = 9, -1, 5000
	r.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: partition, Records: batch}}}}
	resp, err := rc.roundTrip(r)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

func rawFetch(t *testing.T, rc *rawConn, topic string, partition int32, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	r := kmsg.NewPtrFetchRequest()
	r.Version, r.MaxBytes, r.SessionEpoch = 12, 1<<20, -1
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition, p.FetchOffset, p.PartitionMaxBytes = partition, offset, 1<<20
	r.Topics = []kmsg.FetchRequestTopic{{Topic: topic, Partitions: []kmsg.FetchRequestTopicPartition{p}}}
	resp, err := rc.roundTrip(r)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	return resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
}

// TestNotLeader: a broker that holds no lead on a partition answers
// NOT_LEADER_OR_FOLLOWER to produce, fetch and list offsets, and its
// metadata names the leader.
func TestNotLeader(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	a := b.cp.Signup("alpha", "developer")
	b.createTopic(t, a, "orders", 1, nil)
	b.waitForKey(t, a)
	addr2 := b.startServer(t, func(c *kafka.Config) { c.NodeID = 2 })
	rc := dialRaw(t, addr2)
	rc.authenticate(a.KeyID, a.Secret)
	if p := rawProduce(t, rc, "orders", 0, makeBatch("x")); p.ErrorCode != 6 {
		t.Fatalf("produce on a follower: code %d", p.ErrorCode)
	}
	if p := rawFetch(t, rc, "orders", 0, 0); p.ErrorCode != 6 {
		t.Fatalf("fetch on a follower: code %d", p.ErrorCode)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("orders")}}
	resp, err := rc.roundTrip(md)
	if err != nil {
		t.Fatal(err)
	}
	if l := resp.(*kmsg.MetadataResponse).Topics[0].Partitions[0].Leader; l != 1 {
		t.Fatalf("metadata names leader %d, want 1", l)
	}
}

// TestDevTenant: a DevTenant listener serves loopback clients without
// SASL, as an admin of that one tenant; it refuses non-loopback addresses.
func TestDevTenant(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	a := b.cp.Signup("alpha", "developer")
	b.createTopic(t, a, "orders", 1, nil)
	addr := b.startServer(t, func(c *kafka.Config) { c.DevTenant = a.Tenant.ID })
	rc := dialRaw(t, addr)
	if p := rawProduce(t, rc, "orders", 0, makeBatch("dev")); p.ErrorCode != 0 {
		t.Fatalf("dev produce: code %d", p.ErrorCode)
	}
	if p := rawFetch(t, rc, "orders", 0, 0); p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("dev fetch: code %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := kafka.New(kafka.Config{Listener: ln, NodeID: 1, State: b.state, Partitions: b.store, DevTenant: a.Tenant.ID}); err == nil {
		t.Fatal("DevTenant accepted on a non-loopback listener")
	}
}

// TestTLS: SASL over TLS, produce and fetch; records are copied through
// user space on TLS connections and must arrive byte for byte.
func TestTLS(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	a := b.cp.Signup("alpha", "developer")
	b.createTopic(t, a, "orders", 1, nil)
	b.waitForKey(t, a)
	cert, pool := selfSigned(t)
	addr := b.startServer(t, func(c *kafka.Config) { c.TLS = &tls.Config{Certificates: []tls.Certificate{cert}} })
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	rc := wrapRaw(t, c)
	if r := rc.authenticate(a.KeyID, a.Secret); r.ErrorCode != 0 {
		t.Fatalf("authenticate over TLS: %d", r.ErrorCode)
	}
	batch := makeBatch("over", "tls")
	p := rawProduce(t, rc, "orders", 0, batch)
	if p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("produce: code %d offset %d", p.ErrorCode, p.BaseOffset)
	}
	f := rawFetch(t, rc, "orders", 0, 0)
	if f.ErrorCode != 0 || f.HighWatermark != 2 || len(f.RecordBatches) != len(batch) {
		t.Fatalf("fetch: code %d hw %d, %d bytes", f.ErrorCode, f.HighWatermark, len(f.RecordBatches))
	}
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(f.RecordBatches); err != nil || rb.NumRecords != 2 || string(rb.Records) != string(batch[61:]) {
		t.Fatalf("batch read back %+v %v", rb, err)
	}
}

func selfSigned(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// TestCloseEndsLongPoll: Close ends a fetch that is waiting for data,
// closes its connection, waits for the server's goroutines, and is
// idempotent; Serve returns nil.
func TestCloseEndsLongPoll(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	a := b.cp.Signup("alpha", "developer")
	b.createTopic(t, a, "orders", 1, nil)
	b.waitForKey(t, a)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := kafka.New(kafka.Config{Listener: ln, NodeID: 1, State: b.state, Partitions: b.store, Logger: b.logger})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background()) }()
	rc := dialRaw(t, ln.Addr().String())
	rc.authenticate(a.KeyID, a.Secret)
	r := kmsg.NewPtrFetchRequest()
	r.Version, r.MaxBytes, r.MinBytes, r.MaxWaitMillis, r.SessionEpoch = 12, 1<<20, 1, 30_000, -1
	p := kmsg.NewFetchRequestTopicPartition()
	p.PartitionMaxBytes = 1 << 20
	r.Topics = []kmsg.FetchRequestTopic{{Topic: "orders", Partitions: []kmsg.FetchRequestTopicPartition{p}}}
	rc.send(r)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	rc.expectClosed(5 * time.Second)
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Fatal("listener still accepting after Close")
	}
}
