package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/httpapi"
)

const otherCell = "cell-2"

// noPartitions is a broker that holds no replica.
type noPartitions struct{}

func (noPartitions) Get(string, int32) (httpapi.Partition, bool) { return nil, false }

// otherCell is a second cell of the pool, with its state and key-home
// lookups from the control plane, and no replica: tenants signed up
// afterwards are homed there (the emptier cell).
type second struct {
	state  *cellview.Syncer
	lookup func(ctx context.Context, keyID, secret string) (wire.KeyHome, error)
}

func (c *cell) startSecondCell(t *testing.T) *second {
	t.Helper()
	ctx := context.Background()
	op := c.cp.Operator
	if _, err := op.AdminCreateCell(ctx, api.CreateCellRequest{ID: otherCell, PoolID: cptest.Pool}); err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 3; n++ {
		if _, err := op.AdminCreateBroker(ctx, api.CreateBrokerRequest{ID: fmt.Sprintf("%s-b%d", otherCell, n), CellID: otherCell, NodeID: n}); err != nil {
			t.Fatal(err)
		}
	}
	k, err := op.AdminCreateCellKey(ctx, otherCell)
	if err != nil {
		t.Fatal(err)
	}
	cellAPI := client.New(c.cp.URL, client.WithAPIKey(k.ID, k.Secret))
	o := &second{}
	o.state, err = cellview.New(cellview.Config{Cell: otherCell, API: cellAPI, CacheFile: filepath.Join(t.TempDir(), "state.json"),
		Wait: 5 * time.Second, RetryEvery: 100 * time.Millisecond, Logger: c.logger})
	if err != nil {
		t.Fatal(err)
	}
	// The control plane's lookup, with the home brokers' HTTP addresses
	// filled in from cell-1's where it leaves them out.
	o.lookup = func(ctx context.Context, keyID, secret string) (wire.KeyHome, error) {
		h, err := cellAPI.KeyHome(ctx, otherCell, keyID, secret)
		if err != nil || h.Cell != cptest.Cell {
			return h, err
		}
		if len(h.Brokers) == 0 {
			for _, b := range c.brokers {
				h.Brokers = append(h.Brokers, wire.HomeNode{NodeID: b.node, KafkaAddr: b.kafka})
			}
		}
		for i := range h.Brokers {
			if h.Brokers[i].HTTPAddr == "" {
				h.Brokers[i].HTTPAddr, h.Brokers[i].HTTPScheme = c.brokers[h.Brokers[i].NodeID-1].httpAddr, "http"
			}
		}
		return h, nil
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { o.state.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return o
}

// serve starts a cell-2 HTTP data API whose key-home answers pass through
// rewrite (nil: as they are) and returns its address.
func (o *second) serve(t *testing.T, c *cell, maxBody int64, rewrite func(wire.KeyHome) wire.KeyHome) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs, err := httpapi.New(httpapi.Config{Listener: ln, NodeID: 1, State: o.state, Partitions: noPartitions{}, Logger: c.logger,
		MaxBodyBytes: maxBody, ForwardTimeout: 5 * time.Second, MaxWait: 5 * time.Second,
		Homes: keyHomes(func(ctx context.Context, keyID, secret string) (wire.KeyHome, error) {
			h, err := o.lookup(ctx, keyID, secret)
			if err == nil && rewrite != nil {
				h = rewrite(h)
			}
			return h, err
		})})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = hs.Serve(context.Background()); close(done) }()
	t.Cleanup(func() { hs.Close(); <-done })
	return ln.Addr().String()
}

type keyHomes func(ctx context.Context, keyID, secret string) (wire.KeyHome, error)

func (f keyHomes) KeyHome(ctx context.Context, keyID, secret string) (wire.KeyHome, error) {
	return f(ctx, keyID, secret)
}

// callAt is one HTTP request to addr as id:secret.
func callAt(t *testing.T, addr, method, path, id, secret string, body []byte, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(id, secret)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, out
}

// TestHTTPFollowsTenantHome: a request to another cell's HTTP data API
// with a valid key of a tenant homed on cell-1 gets cell-1's answer (a
// publish lands there, a read and a group's commit and fetch come from
// there) with a header naming the home; a wrong, unknown or expired key
// or a suspended tenant gets exactly cell-1's answer; a home that cannot
// be reached, a body over the limit and a request already followed from
// another cell get specific errors.
func TestHTTPFollowsTenantHome(t *testing.T) {
	c := startCell(t, cellOpts{})
	acme := c.tenant("acme")
	sleepy := c.tenant("sleepy")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	soon := time.Now().Add(3 * time.Second)
	short, err := acme.Key.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Role: "admin", ExpiresAt: &soon})
	if err != nil {
		t.Fatal(err)
	}
	c.topic(acme, "orders", 1, nil)
	o := c.startSecondCell(t)
	if local := c.cp.Signup("local", "admin"); local.Tenant.HomeCellID != otherCell {
		t.Fatalf("a new tenant is homed on %s, want %s", local.Tenant.HomeCellID, otherCell)
	}
	addr := o.serve(t, c, 4096, nil)

	// A publish through cell-2 lands on cell-1.
	pub, _ := json.Marshal(publishReq{Messages: []msg{{Key: []byte("k"), Value: []byte("followed")}}})
	status, h, raw := callAt(t, addr, http.MethodPost, publishPath("orders"), acme.KeyID, acme.Secret, pub)
	if status != http.StatusOK || h.Get(httpapi.HomeCellHeader) != cptest.Cell {
		t.Fatalf("publish through cell-2: %d %q %s", status, h.Get(httpapi.HomeCellHeader), raw)
	}
	var pr publishResp
	if err := json.Unmarshal(raw, &pr); err != nil || len(pr.Messages) != 1 || pr.Messages[0].Error != nil {
		t.Fatalf("publish answer %s: %v", raw, err)
	}
	var rr readResp
	if st := c.as(acme, 0, http.MethodGet, readPath("orders", 0, "offset=0"), nil, &rr); st != http.StatusOK ||
		len(rr.Messages) != 1 || string(rr.Messages[0].Value) != "followed" {
		t.Fatalf("read on cell-1: %d %+v", st, rr)
	}
	status, _, raw = callAt(t, addr, http.MethodGet, readPath("orders", 0, "offset=0"), acme.KeyID, acme.Secret, nil)
	if err := json.Unmarshal(raw, &rr); status != http.StatusOK || err != nil || len(rr.Messages) != 1 || string(rr.Messages[0].Value) != "followed" {
		t.Fatalf("read through cell-2: %d %s", status, raw)
	}
	// A group's routes go through the same way: a member joins, then
	// commits.
	var jr struct {
		MemberID   string `json:"member_id"`
		Generation int32  `json:"generation"`
	}
	join, _ := json.Marshal(map[string]any{"topics": []string{"orders"}})
	celltest.WaitFor(t, wait, "a join through cell-2", func() bool {
		status, _, raw = callAt(t, addr, http.MethodPost, "/v1/groups/g/members", acme.KeyID, acme.Secret, join)
		return status/100 == 2 || !decodeError(t, raw).Retriable
	})
	if err := json.Unmarshal(raw, &jr); status/100 != 2 || err != nil || jr.MemberID == "" {
		t.Fatalf("join through cell-2: %d %s", status, raw)
	}
	commit, _ := json.Marshal(map[string]any{"member_id": jr.MemberID, "generation": jr.Generation,
		"offsets": []map[string]any{{"topic": "orders", "partition": 0, "offset": 1}}})
	if status, _, raw = callAt(t, addr, http.MethodPost, "/v1/groups/g/offsets:commit", acme.KeyID, acme.Secret, commit); status/100 != 2 {
		t.Fatalf("commit through cell-2: %d %s", status, raw)
	}

	// Bad keys get cell-1's own answers.
	same := func(name, id, secret string) {
		t.Helper()
		want, _, wraw := callAt(t, c.brokers[0].httpAddr, http.MethodGet, readPath("orders", 0, "offset=0"), id, secret, nil)
		got, _, graw := callAt(t, addr, http.MethodGet, readPath("orders", 0, "offset=0"), id, secret, nil)
		if got != want || decodeError(t, graw) != decodeError(t, wraw) {
			t.Fatalf("%s: cell-2 answers %d %s, cell-1 %d %s", name, got, graw, want, wraw)
		}
	}
	same("wrong secret", acme.KeyID, "sk_wrong")
	same("unknown key", "SLK"+strings.Repeat("A", 16), "sk_x")
	same("malformed key id", "nope", "sk_x")
	if _, err := c.cp.Operator.AdminUpdateTenant(ctx, sleepy.Tenant.ID, api.UpdateTenantRequest{Status: ptr("suspended")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "cell-1 to know sleepy is suspended", func() bool {
		st, _, _ := callAt(t, c.brokers[0].httpAddr, http.MethodGet, readPath("orders", 0, "offset=0"), sleepy.KeyID, sleepy.Secret, nil)
		return st == http.StatusForbidden
	})
	same("suspended tenant", sleepy.KeyID, sleepy.Secret)
	waitFor(t, "the short key to expire on cell-1", func() bool {
		st, _, raw := callAt(t, c.brokers[0].httpAddr, http.MethodGet, readPath("orders", 0, "offset=0"), short.ID, short.Secret, nil)
		return st == http.StatusUnauthorized && decodeError(t, raw).Code == "key_expired"
	})
	same("expired key", short.ID, short.Secret)

	// Bounded body, loops and an unreachable home.
	big, _ := json.Marshal(publishReq{Messages: []msg{{Value: bytes.Repeat([]byte("x"), 8192)}}})
	if status, _, raw := callAt(t, addr, http.MethodPost, publishPath("orders"), acme.KeyID, acme.Secret, big); status != http.StatusRequestEntityTooLarge ||
		decodeError(t, raw).Code != "body_too_large" {
		t.Fatalf("a body over the limit: %d %s", status, raw)
	}
	if status, _, raw := callAt(t, addr, http.MethodGet, readPath("orders", 0, "offset=0"), acme.KeyID, acme.Secret, nil,
		"Sluice-Followed-From", "cell-3"); status != http.StatusServiceUnavailable || !decodeError(t, raw).Retriable {
		t.Fatalf("a request already followed from another cell: %d %s", status, raw)
	}
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	gone := o.serve(t, c, 0, func(h wire.KeyHome) wire.KeyHome {
		for i := range h.Brokers {
			h.Brokers[i].HTTPAddr = deadAddr
		}
		return h
	})
	status, h, raw = callAt(t, gone, http.MethodPost, publishPath("orders"), acme.KeyID, acme.Secret, pub)
	if e := decodeError(t, raw); status != http.StatusServiceUnavailable || !e.Retriable || e.Code != "unavailable" ||
		!strings.Contains(e.Message, "home cell could not be reached") || h.Get(httpapi.HomeCellHeader) != cptest.Cell {
		t.Fatalf("an unreachable home: %d %s", status, raw)
	}
	noAddr := o.serve(t, c, 0, func(h wire.KeyHome) wire.KeyHome {
		for i := range h.Brokers {
			h.Brokers[i].HTTPAddr = ""
		}
		return h
	})
	if status, _, raw := callAt(t, noAddr, http.MethodPost, publishPath("orders"), acme.KeyID, acme.Secret, pub); status != http.StatusServiceUnavailable ||
		!strings.Contains(decodeError(t, raw).Message, "no known HTTP data API address") {
		t.Fatalf("a home without HTTP addresses: %d %s", status, raw)
	}
}
