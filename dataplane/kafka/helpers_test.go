package kafka_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/celltest/cellstack"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/kafka"
	"github.com/sluicehq/sluice/dataplane/kafka/localpart"
	"github.com/sluicehq/sluice/dataplane/usage"
)

// broker is one Kafka listener over local single-replica partitions, fed
// by a real control plane.
type broker struct {
	cp     *cptest.Env
	state  *cellview.Syncer
	store  *localpart.Store
	logger *slog.Logger
	srv    *kafka.Server
	addr   string
	panics *panicWatch
}

type brokerOpts struct {
	maxRequestBytes int32
	authTimeout     time.Duration
	maxPreAuth      int // Config.MaxUnauthenticatedPerIP
	maxWaiting      int // Config.MaxWaitingPerIP
	logger          *slog.Logger
	controlPlane    bool         // serve CreateTopics/DeleteTopics through the control plane
	tls             *tls.Config  // Config.TLS: the advertised listener serves SASL_SSL
	usage           *usage.Meter // Config.Usage
}

// startBroker starts a control plane, a state syncer for the cell, local
// partitions and the Kafka server of node 1. The seeded nodes 2 and 3 have
// no Kafka address, so Metadata lists only node 1, which leads every
// local partition. Everything stops in t.Cleanup.
func startBroker(t testing.TB, o brokerOpts) *broker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	cp := cptest.Start(t, cptest.Brokers{KafkaAddrs: []string{addr}})
	pw := &panicWatch{}
	logger := o.logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(&testWriter{t: t, pw: pw}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	syncer := cellstack.Syncer(t, cp.CellClient(), cptest.Cell, t.TempDir(), 5*time.Second, logger)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		syncer.Run(ctx)
	}()
	store, err := localpart.New(localpart.Config{Dir: t.TempDir(), NodeID: 1, State: syncer, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	cfg := kafka.Config{Listener: ln, NodeID: 1, State: syncer, Partitions: store, Logger: logger,
		MaxRequestBytes: o.maxRequestBytes, AuthTimeout: o.authTimeout, MaxUnauthenticatedPerIP: o.maxPreAuth, MaxWaitingPerIP: o.maxWaiting, TLS: o.tls, Usage: o.usage}
	if o.controlPlane {
		cfg.ControlPlane = client.New(cp.URL)
		cfg.CellControlPlane = cp.CellClient()
	}
	srv, err := kafka.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ctx); err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		if err := srv.Close(); err != nil {
			t.Errorf("close server: %v", err)
		}
		wg.Wait()
		if err := store.Close(); err != nil {
			t.Errorf("close partitions: %v", err)
		}
		if pw.seen() {
			t.Error("a connection panicked (see the log)")
		}
	})
	return &broker{cp: cp, state: syncer, store: store, logger: logger, srv: srv, addr: addr, panics: pw}
}

// startServer starts another listener over the same state and partitions,
// configured by edit, and returns its address.
func (b *broker) startServer(t testing.TB, edit func(*kafka.Config)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := kafka.Config{Listener: ln, NodeID: 1, State: b.state, Partitions: b.store, Logger: b.logger}
	edit(&cfg)
	srv, err := kafka.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background()) }()
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close server: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// createTopic creates a topic through the control plane and waits until
// the broker's state has it.
func (b *broker) createTopic(t testing.TB, tn *cptest.Tenant, name string, partitions int, config map[string]string) {
	t.Helper()
	if _, err := tn.Key.CreateTopic(context.Background(), api.CreateTopicRequest{Name: name, Partitions: partitions, Config: config}); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	waitFor(t, "topic "+name+" to reach the broker", func() bool {
		_, ok := b.state.View().Topic(tn.Tenant.ID, name)
		return ok
	})
}

// waitForTenant waits until the broker knows the tenant's key.
func (b *broker) waitForKey(t testing.TB, tn *cptest.Tenant) {
	t.Helper()
	cellstack.WaitKnown(t, 20*time.Second, keyOf(tn), "", b.state)
}

// waitForSecret waits until the broker's state authenticates the key id
// with secret; what names the key in the failure message.
func (b *broker) waitForSecret(t testing.TB, what, id, secret string) {
	t.Helper()
	waitFor(t, what+" to reach the broker", func() bool {
		_, err := b.state.View().Authenticate(id, secret, time.Now())
		return err == nil
	})
}

// client is a franz-go client authenticated with the tenant's key.
func (b *broker) client(t testing.TB, tn *cptest.Tenant, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return cellstack.Client(t, keyOf(tn), []string{b.addr}, 20*time.Second, opts...)
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	celltest.WaitFor(t, 20*time.Second, what, cond)
}

// testWriter sends log lines to the test and notes panics.
type testWriter struct {
	t  testing.TB
	pw *panicWatch
}

func (w *testWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("panicked")) {
		w.pw.set()
	}
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

type panicWatch struct {
	mu  sync.Mutex
	hit bool
}

func (p *panicWatch) set() { p.mu.Lock(); p.hit = true; p.mu.Unlock() }
func (p *panicWatch) seen() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hit
}

// rawConn speaks the Kafka protocol by hand, for what real clients never
// send.
type rawConn struct {
	t    testing.TB
	c    net.Conn
	fmt  *kmsg.RequestFormatter
	corr int32
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return wrapRaw(t, c)
}

func wrapRaw(t testing.TB, c net.Conn) *rawConn {
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test"))}
}

// send writes one request.
func (r *rawConn) send(req kmsg.Request) {
	r.t.Helper()
	r.corr++
	if _, err := r.c.Write(r.fmt.AppendRequest(nil, req, r.corr)); err != nil {
		r.t.Fatalf("write %s: %v", kmsg.NameForKey(req.Key()), err)
	}
}

// roundTrip sends req and decodes its response.
func (r *rawConn) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	r.t.Helper()
	r.send(req)
	return r.receive(req)
}

// receive reads and decodes the response to req, the last request sent.
func (r *rawConn) receive(req kmsg.Request) (kmsg.Response, error) {
	r.t.Helper()
	return r.receiveFor(req, r.corr)
}

// receiveFor reads the next response, which must answer req, sent with
// correlation id corr, and decodes it.
func (r *rawConn) receiveFor(req kmsg.Request, corr int32) (kmsg.Response, error) {
	r.t.Helper()
	resp := req.ResponseKind()
	body, err := r.readFrame()
	if err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		r.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	body = body[4:]
	if req.IsFlexible() && req.Key() != 18 {
		if len(body) == 0 || body[0] != 0 {
			r.t.Fatalf("response header tags: % x", body[:min(len(body), 4)])
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		r.t.Fatalf("decode %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

func (r *rawConn) readFrame() ([]byte, error) {
	r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var sz [4]byte
	if _, err := io.ReadFull(r.c, sz[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(sz[:]))
	_, err := io.ReadFull(r.c, b)
	return b, err
}

// expectClosed waits (bounded) for the server to close the connection.
func (r *rawConn) expectClosed(within time.Duration) {
	r.t.Helper()
	r.c.SetReadDeadline(time.Now().Add(within))
	buf := make([]byte, 4096)
	for {
		_, err := r.c.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			r.t.Fatalf("connection still open after %s", within)
		}
		return
	}
}

// handshake sends SaslHandshake for mechanism at version and returns the
// answer, whatever its error code.
func (r *rawConn) handshake(version int16, mechanism string) *kmsg.SASLHandshakeResponse {
	r.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = version, mechanism
	resp, err := r.roundTrip(hs)
	if err != nil {
		r.t.Fatalf("handshake: %v", err)
	}
	return resp.(*kmsg.SASLHandshakeResponse)
}

// authenticate runs SaslHandshake v1 and SaslAuthenticate with PLAIN.
func (r *rawConn) authenticate(keyID, secret string) *kmsg.SASLAuthenticateResponse {
	r.t.Helper()
	if hs := r.handshake(1, "PLAIN"); hs.ErrorCode != 0 {
		r.t.Fatalf("handshake: %+v", hs)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version = 1
	au.SASLAuthBytes = []byte("\x00" + keyID + "\x00" + secret)
	aresp, err := r.roundTrip(au)
	if err != nil {
		r.t.Fatalf("authenticate: %v", err)
	}
	return aresp.(*kmsg.SASLAuthenticateResponse)
}

var makeBatch = kafka.MakeBatch

// apiVersions sends ApiVersions v3 on rc and returns the answer.
func apiVersions(t testing.TB, rc *rawConn) *kmsg.ApiVersionsResponse {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 3, "raw-test", "1.0"
	resp, err := rc.roundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.ApiVersionsResponse)
}

// keyOf is a cptest tenant's key, as cellstack takes it.
func keyOf(tn *cptest.Tenant) cellstack.Key {
	return cellstack.Key{TenantID: tn.Tenant.ID, ID: tn.KeyID, Secret: tn.Secret}
}
