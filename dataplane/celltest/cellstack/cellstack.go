// Package cellstack holds what every real-cell test harness of the front
// doors wires the same way (dataplane/kafka, dataplane/kafka/replicated,
// dataplane/httpapi): a broker's cell-state syncer following a cptest
// control plane, the wait until a tenant's topic and key reach every
// broker, listening again on a restarted broker's port, and a franz-go
// client of a tenant. Tests only; like all of dataplane it imports nothing
// of controlplane (the harnesses pass in what they took from cptest).
package cellstack

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/cellview"
)

// Syncer is a broker's syncer of cell's state through api (a client with
// the cell's key), as tenantd makes one: its cache in dir, long polls of
// wait, retries every 100 ms. The caller runs it.
func Syncer(t testing.TB, api *client.Client, cell, dir string, wait time.Duration, logger *slog.Logger) *cellview.Syncer {
	t.Helper()
	s, err := cellview.New(cellview.Config{Cell: cell, API: api, CacheFile: filepath.Join(dir, "state.json"),
		Wait: wait, RetryEvery: 100 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Key is a tenant's API key.
type Key struct{ TenantID, ID, Secret string }

// WaitKnown waits, up to limit, until every syncer's view has the key's
// tenant's topic (if topic is not "") and accepts the key, and returns the
// topic's id ("" without a topic).
func WaitKnown(t testing.TB, limit time.Duration, k Key, topic string, syncers ...*cellview.Syncer) string {
	t.Helper()
	var id string
	celltest.WaitFor(t, limit, "topic "+topic+" and key "+k.ID+" on every broker", func() bool {
		for _, s := range syncers {
			v := s.View()
			if topic != "" {
				tt, ok := v.Topic(k.TenantID, topic)
				if !ok {
					return false
				}
				id = tt.ID
			}
			if _, err := v.Authenticate(k.ID, k.Secret, time.Now()); err != nil {
				return false
			}
		}
		return true
	})
	return id
}

// Listen listens on addr, retrying for up to 10 s: a restarted broker
// takes its old port back, which the kernel may hold briefly.
func Listen(t testing.TB, addr string) net.Listener {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			return ln
		}
		if time.Now().After(deadline) {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Client is a franz-go client of the key's tenant (SASL/PLAIN) seeded
// with addrs, retrying requests for up to retry, then opts; closed at t's
// cleanup.
func Client(t testing.TB, k Key, addrs []string, retry time.Duration, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(addrs...),
		kgo.SASL(plain.Auth{User: k.ID, Pass: k.Secret}.AsMechanism()),
		kgo.RetryTimeout(retry),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// FromStart is every partition of 0 to parts-1 at its first offset, for
// kgo.ConsumePartitions.
func FromStart(parts int) map[int32]kgo.Offset {
	offsets := map[int32]kgo.Offset{}
	for p := range int32(parts) {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	return offsets
}

// ConsumeN polls cons until it returned n records, failing tb on a fetch
// error or if that takes over 10 minutes.
func ConsumeN(tb testing.TB, cons *kgo.Client, n int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			tb.Fatalf("consumed %d of %d", got, n)
		}
		fs.EachError(func(_ string, _ int32, err error) { tb.Fatal(err) })
		got += fs.NumRecords()
	}
}
