package kafka_test

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestUnauthenticatedConnectionsPerAddress: one address may hold only a
// few connections open before they authenticate (300 of 300 used to be
// held until the auth timeout); one over the cap is closed at once, an
// authenticated connection frees its place, and authenticated
// connections do not count.
//
// The held connections are closed by the test's cleanup.
func TestUnauthenticatedConnectionsPerAddress(t *testing.T) {
	b := startBroker(t, brokerOpts{maxPreAuth: 3, authTimeout: time.Minute})
	tn := b.cp.Signup("preauth", "developer")
	waitFor(t, "the key to reach the broker", func() bool {
		_, err := b.state.View().Authenticate(tn.KeyID, tn.Secret, time.Now())
		return err == nil
	})
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
	if over := dial(); !closedByServer(over) {
		t.Fatal("a 4th unauthenticated connection from the address was kept open")
	}
	// A connection ending gives its place back.
	held[0].Close()
	waitFor(t, "the closed connection's place to be given back", func() bool {
		return !closedByServer(dial())
	})
}
