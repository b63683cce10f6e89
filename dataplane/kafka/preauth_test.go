package kafka_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestUnauthenticatedConnectionsPerAddress: one address may hold only a
// few connections open before they authenticate (300 of 300 used to be
// held until the auth timeout); one over the cap waits, unanswered, for a
// place, one over the waiting bound is closed at once, a connection that
// ends gives its place to the one waiting, and authenticated connections
// do not count.
//
// The held connections are closed by the test's cleanup.
func TestUnauthenticatedConnectionsPerAddress(t *testing.T) {
	b := startBroker(t, brokerOpts{maxPreAuth: 3, maxWaiting: 1, authTimeout: time.Minute})
	tn := b.cp.Signup("preauth", "developer")
	b.waitForSecret(t, "the key", tn.KeyID, tn.Secret)
	dial := func() net.Conn {
		t.Helper()
		nc, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		return nc
	}
	// closedByServer reports whether the server closed nc (EOF) rather
	// than kept it waiting for its authentication.
	closedByServer := func(nc net.Conn) bool {
		t.Helper()
		nc.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := nc.Read(make([]byte, 1))
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return false
		}
		if err == nil {
			t.Fatal("the server sent bytes to a connection that asked nothing")
		}
		return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// An authenticated client first: it does not count against the cap.
	cl := b.client(t, tn)
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("authenticated client: %v", err)
	}
	held := []net.Conn{dial(), dial(), dial()}
	for i, nc := range held {
		if closedByServer(nc) {
			t.Fatalf("unauthenticated connection %d of 3 closed; the cap is 3", i+1)
		}
	}
	// The 4th waits for a place: its request is not read.
	waiting := wrapRaw(t, dial())
	waiting.send(kmsg.NewPtrApiVersionsRequest())
	if closedByServer(waiting.c) {
		t.Fatal("the 4th unauthenticated connection was closed; it should wait for a place")
	}
	if over := dial(); !closedByServer(over) {
		t.Fatal("a 5th unauthenticated connection from the address was kept open; one may wait")
	}
	// A connection ending gives its place to the one waiting, which is
	// then answered.
	held[0].Close()
	body, err := waiting.readFrame()
	if err != nil {
		t.Fatalf("the waiting connection was not answered once a place freed: %v", err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != waiting.corr {
		t.Fatalf("correlation id %d, want %d", got, waiting.corr)
	}
	waitFor(t, "the places to be taken again, and a 5th to be refused", func() bool {
		return closedByServer(dial())
	})
}

// TestManyClientsFromOneAddressStartTogether: more clients than the
// unauthenticated bound, all behind one address (a fleet restarted at once,
// a NAT), connect at the same moment, and every one of them gets through: those over the bound wait for a place instead
// of being closed (franz-go gave up on such a connection with "broker
// closed the connection immediately during api versions negotiation").
func TestManyClientsFromOneAddressStartTogether(t *testing.T) {
	b := startBroker(t, brokerOpts{maxPreAuth: 4})
	tn := b.cp.Signup("fleet", "developer")
	b.waitForSecret(t, "the key", tn.KeyID, tn.Secret)
	const clients = 100
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make(chan error, clients)
	for range clients {
		cl := b.client(t, tn)
		go func() { errs <- cl.Ping(ctx) }()
	}
	for i := range clients {
		if err := <-errs; err != nil {
			t.Fatalf("client %d of %d: %v", i+1, clients, err)
		}
	}
}
