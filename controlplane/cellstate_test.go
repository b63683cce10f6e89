package controlplane_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/credential"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
)

func TestCellStateLongPollAndReport(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.signup("cellstate")
	if _, err := a.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "orders", Partitions: 2, Config: map[string]string{"retention.ms": "3600000"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.key.CreateACL(ctx, api.CreateACLRequest{Principal: "*", ResourceType: "topic", ResourceName: "secret", Operation: "all", Permission: "deny"}); err != nil {
		t.Fatal(err)
	}
	cell := e.cellClient()

	st, changed, err := cell.CellState(ctx, "cell-1", -1, 0)
	if err != nil || !changed {
		t.Fatalf("first state: changed=%v err=%v", changed, err)
	}
	if st.Version != wire.Version || len(st.Brokers) != 3 || len(st.Tenants) != 1 || st.Tenants[0].ID != a.Tenant.ID {
		t.Fatalf("state: %+v", st)
	}
	if len(st.Topics) != 1 || len(st.Topics[0].Partitions) != 2 || st.Topics[0].Config["retention.ms"] != "3600000" ||
		st.Topics[0].Config["cleanup.policy"] != "delete" || !slices.Equal(st.Topics[0].Explicit, []string{"retention.ms"}) {
		t.Fatalf("topics: %+v", st.Topics)
	}
	if len(st.ACLs) != 1 || st.ACLs[0].Permission != "deny" {
		t.Fatalf("acls: %+v", st.ACLs)
	}
	var found bool
	for _, k := range st.Keys {
		if k.ID == a.keyID {
			found = true
			if !bytes.Equal(k.SecretHash, credential.HashSecret(a.secret)) {
				t.Fatal("key hash in state does not match the secret")
			}
		}
	}
	if !found {
		t.Fatal("tenant's key missing from state")
	}

	// No change within the wait: 304, reported as unchanged.
	_, changed, err = cell.CellState(ctx, "cell-1", st.StateVersion, 300*time.Millisecond)
	if err != nil || changed {
		t.Fatalf("unchanged poll: changed=%v err=%v", changed, err)
	}
	// A change during the wait ends it early: revoking the key removes it.
	type result struct {
		st      wire.CellState
		changed bool
		err     error
	}
	done := make(chan result, 1)
	go func() {
		s, c, err := cell.CellState(ctx, "cell-1", st.StateVersion, 20*time.Second)
		done <- result{s, c, err}
	}()
	if _, err := a.owner.RevokeAPIKey(ctx, a.keyID); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("long-poll did not return after a change")
	}
	if r.err != nil || !r.changed || r.st.StateVersion <= st.StateVersion {
		t.Fatalf("after revoke: %+v", r)
	}
	for _, k := range r.st.Keys {
		if k.ID == a.keyID {
			t.Fatal("revoked key still in state")
		}
	}

	// Reports land on the broker and its replicas.
	rep := wire.Report{Version: wire.Version, BrokerID: "cell-1-b1", DiskUsedBytes: 10, DiskTotalBytes: 100,
		Partitions: []wire.PartitionStatus{{TopicID: st.Topics[0].ID, Partition: 0, LeaderNode: 1, LeaderEpoch: 3, LogEndOffset: 42, HighWatermark: 40, SizeBytes: 4096},
			{TopicID: "tp_gone", Partition: 0}}}
	if err := cell.CellReport(ctx, "cell-1", rep); err != nil {
		t.Fatal(err)
	}
	var hw int64
	if err := e.db.QueryRow(ctx, `SELECT high_watermark FROM partition_status WHERE topic_id = $1 AND broker_id = 'cell-1-b1'`, st.Topics[0].ID).Scan(&hw); err != nil || hw != 40 {
		t.Fatalf("stored hw %d %v", hw, err)
	}
	c, err := e.op.AdminCell(ctx, "cell-1")
	if err != nil || c.Brokers[0].DiskUsedBytes != 10 || c.Brokers[0].LastSeenAt == nil {
		t.Fatalf("broker after report: %+v %v", c.Brokers, err)
	}
}

func TestCellAuth(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ck, err := e.op.AdminCreateCellKey(ctx, "cell-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.op.AdminCreateCell(ctx, api.CreateCellRequest{ID: "cell-2", PoolID: "shared-1"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, cell string
		c          *client.Client
		code       string
	}{
		{"wrong secret", "cell-1", e.anon.With(client.WithAPIKey(ck.ID, "nope")), "unauthenticated"},
		{"operator key is not a cell key", "cell-1", e.op, "unauthenticated"},
		{"another cell", "cell-2", e.anon.With(client.WithAPIKey(ck.ID, ck.Secret)), "permission_denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := tc.c.CellState(ctx, tc.cell, -1, 0)
			wantCode(t, err, tc.code)
		})
	}
	cell := e.anon.With(client.WithAPIKey(ck.ID, ck.Secret))
	err = cell.CellReport(ctx, "cell-1", wire.Report{Version: 99, BrokerID: "cell-1-b1"})
	wantCode(t, err, "invalid_request")
	err = cell.CellReport(ctx, "cell-1", wire.Report{Version: wire.Version, BrokerID: "nope"})
	wantCode(t, err, "not_found")
}

// TestReportNotesKeyUse: a broker's report sets last_used_at of the keys it
// saw, but only of its own cell's tenants: another cell's report of the same
// key id changes nothing, and unknown ids are ignored.
func TestReportNotesKeyUse(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.signup("used")
	k := e.createKey(a.owner, api.CreateAPIKeyRequest{Description: "kafka only", Role: "developer"})
	e.must(e.op.AdminCreateCell(ctx, api.CreateCellRequest{ID: "cell-2", PoolID: cptest.Pool}))
	e.must(e.op.AdminCreateBroker(ctx, api.CreateBrokerRequest{ID: "cell-2-b1", CellID: "cell-2", NodeID: 1}))
	lastUsed := func() *time.Time {
		t.Helper()
		got, err := a.owner.APIKey(ctx, k.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.LastUsedAt
	}
	for _, c := range []struct{ cell, broker string }{{"cell-2", "cell-2-b1"}, {"cell-1", "cell-1-b1"}} {
		ck, err := e.op.AdminCreateCellKey(ctx, c.cell)
		if err != nil {
			t.Fatal(err)
		}
		cl := e.anon.With(client.WithAPIKey(ck.ID, ck.Secret))
		rep := wire.Report{Version: wire.Version, BrokerID: c.broker, Partitions: []wire.PartitionStatus{},
			KeysUsed: []string{k.ID, "SLKAAAAAAAAAAAAAAAA"}}
		if err := cl.CellReport(ctx, c.cell, rep); err != nil {
			t.Fatal(err)
		}
		switch got := lastUsed(); {
		case c.cell == "cell-2" && got != nil:
			t.Fatalf("another cell's report set last_used_at %v", got)
		case c.cell == "cell-1" && (got == nil || got.Sub(e.now.Now()).Abs() > time.Millisecond): // stored to the microsecond
			t.Fatalf("the home cell's report: last_used_at %v, want %v", got, e.now.Now())
		}
	}
}

// TestClusterEndpointScheme: /v1/cluster lists the HTTP data endpoints with
// the scheme each broker reports serving (http until it reports), and a
// report naming any other scheme is refused and changes nothing.
func TestClusterEndpointScheme(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.signup("schemes")
	ck, err := e.op.AdminCreateCellKey(ctx, "cell-1")
	if err != nil {
		t.Fatal(err)
	}
	cell := e.anon.With(client.WithAPIKey(ck.ID, ck.Secret))
	endpoints := func() []string {
		t.Helper()
		c, err := a.key.Cluster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c.HTTPEndpoints
	}
	want := []string{"http://127.0.0.1:18092", "http://127.0.0.1:18093", "http://127.0.0.1:18094"}
	if got := endpoints(); !slices.Equal(got, want) {
		t.Fatalf("before any report: %v, want %v", got, want)
	}
	report := func(broker, scheme string) error {
		return cell.CellReport(ctx, "cell-1", wire.Report{Version: wire.Version, BrokerID: broker, HTTPScheme: scheme,
			Partitions: []wire.PartitionStatus{}})
	}
	for _, b := range []string{"cell-1-b1", "cell-1-b2", "cell-1-b3"} {
		if err := report(b, "https"); err != nil {
			t.Fatal(err)
		}
	}
	want = []string{"https://127.0.0.1:18092", "https://127.0.0.1:18093", "https://127.0.0.1:18094"}
	if got := endpoints(); !slices.Equal(got, want) {
		t.Fatalf("after https reports: %v, want %v", got, want)
	}
	wantCode(t, report("cell-1-b1", "ftp"), "invalid_request")
	if err := report("cell-1-b2", ""); err != nil { // a broker that does not say: plain http
		t.Fatal(err)
	}
	want[1] = "http://127.0.0.1:18093"
	if got := endpoints(); !slices.Equal(got, want) {
		t.Fatalf("after a refused and an empty report: %v, want %v", got, want)
	}
}
