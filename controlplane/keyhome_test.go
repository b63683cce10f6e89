package controlplane_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
)

// twoCells adds cell-2 (three brokers with Kafka addresses) to the seeded
// pool, signs up alpha (homed on cell-1) and bravo (homed on cell-2, the
// emptier cell), and returns a cell key client per cell.
func twoCells(t *testing.T, e *env) (alpha, bravo *tenant, cell1, cell2 *client.Client) {
	t.Helper()
	ctx := context.Background()
	e.must(e.op.AdminCreateCell(ctx, api.CreateCellRequest{ID: "cell-2", PoolID: "shared-1"}))
	for n := 1; n <= 3; n++ {
		e.must(e.op.AdminCreateBroker(ctx, api.CreateBrokerRequest{ID: fmt.Sprintf("cell-2-b%d", n), CellID: "cell-2", NodeID: n,
			KafkaAddr: fmt.Sprintf("127.0.0.1:2909%d", n)}))
	}
	alpha = e.signup("alpha")
	bravo = e.signup("bravo")
	if alpha.Tenant.HomeCellID != "cell-1" || bravo.Tenant.HomeCellID != "cell-2" {
		t.Fatalf("homes: alpha %s, bravo %s", alpha.Tenant.HomeCellID, bravo.Tenant.HomeCellID)
	}
	for i, c := range []**client.Client{&cell1, &cell2} {
		k, err := e.op.AdminCreateCellKey(ctx, fmt.Sprintf("cell-%d", i+1))
		if err != nil {
			t.Fatal(err)
		}
		*c = e.anon.With(client.WithAPIKey(k.ID, k.Secret))
	}
	return alpha, bravo, cell1, cell2
}

func TestKeyHome(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	alpha, bravo, cell1, cell2 := twoCells(t, e)
	e.must(alpha.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "alpha-only", Partitions: 1}))
	e.must(bravo.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "orders", Partitions: 2}))
	e.must(bravo.key.CreateTopic(ctx, api.CreateTopicRequest{Name: "secret", Partitions: 1}))

	// Leaders come from the reports; the newest epoch wins over a stale row.
	st, _, err := cell2.CellState(ctx, "cell-2", -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ordersID string
	for _, tp := range st.Topics {
		if tp.Name == "orders" {
			ordersID = tp.ID
		}
	}
	for _, r := range []wire.Report{
		{Version: wire.Version, BrokerID: "cell-2-b1", Partitions: []wire.PartitionStatus{{TopicID: ordersID, Partition: 0, LeaderNode: 3, LeaderEpoch: 4}}},
		{Version: wire.Version, BrokerID: "cell-2-b2", Partitions: []wire.PartitionStatus{{TopicID: ordersID, Partition: 0, LeaderNode: 2, LeaderEpoch: 2}}},
	} {
		if err := cell2.CellReport(ctx, "cell-2", r); err != nil {
			t.Fatal(err)
		}
	}

	h, err := cell1.KeyHome(ctx, "cell-1", bravo.keyID, bravo.secret)
	if err != nil {
		t.Fatal(err)
	}
	if h.Status != wire.KeyValid || h.TenantID != bravo.Tenant.ID || h.Role != "admin" || h.Cell != "cell-2" {
		t.Fatalf("bravo's key from cell-1: %+v", h)
	}
	if len(h.Brokers) != 3 || h.Brokers[0] != (wire.HomeNode{NodeID: 1, KafkaAddr: "127.0.0.1:29091"}) {
		t.Fatalf("brokers: %+v", h.Brokers)
	}
	if len(h.Topics) != 2 || h.Topics[0].Name != "orders" || h.Topics[1].Name != "secret" {
		t.Fatalf("topics: %+v (alpha's must not appear)", h.Topics)
	}
	orders := h.Topics[0]
	if !orders.Describable || len(orders.Partitions) != 2 {
		t.Fatalf("orders: %+v", orders)
	}
	if p := orders.Partitions[0]; p.Leader != 3 || p.LeaderEpoch != 4 || len(p.Replicas) != 3 {
		t.Fatalf("orders/0: %+v, want leader 3 at epoch 4", p)
	}
	if p := orders.Partitions[1]; p.Leader != 0 || p.LeaderEpoch != -1 {
		t.Fatalf("orders/1 without reports: %+v", p)
	}

	// A client key sees only what its ACLs let it describe.
	ck := e.createKey(bravo.owner, api.CreateAPIKeyRequest{Role: "client"})
	e.must(bravo.key.CreateACL(ctx, api.CreateACLRequest{Principal: ck.ID, ResourceType: "topic", ResourceName: "orders",
		PatternType: "literal", Operation: "read", Permission: "allow"}))
	h, err = cell1.KeyHome(ctx, "cell-1", ck.ID, ck.Secret)
	if err != nil || h.Status != wire.KeyValid || len(h.Topics) != 2 {
		t.Fatalf("client key: %+v %v", h, err)
	}
	if !h.Topics[0].Describable || len(h.Topics[0].Partitions) != 2 || h.Topics[1].Describable || len(h.Topics[1].Partitions) != 0 {
		t.Fatalf("client key's topics: %+v", h.Topics)
	}

	// Everything that is not a valid key answers the same.
	opKey, err := e.op.AdminCreateKey(ctx, api.CreateOperatorKeyRequest{Description: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	revoked := e.createKey(bravo.owner, api.CreateAPIKeyRequest{Role: "developer"})
	e.must(bravo.owner.RevokeAPIKey(ctx, revoked.ID))
	for _, tc := range []struct{ name, id, secret string }{
		{"wrong secret", bravo.keyID, "not-the-secret"},
		{"unknown key", "SLKAAAAAAAAAAAAAAAA", bravo.secret},
		{"malformed key id", "nope", "x"},
		{"operator key", opKey.ID, opKey.Secret},
		{"revoked key", revoked.ID, revoked.Secret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := cell1.KeyHome(ctx, "cell-1", tc.id, tc.secret)
			if err != nil || h.Status != wire.KeyInvalid || h.TenantID != "" || h.Cell != "" || len(h.Topics) != 0 || len(h.Brokers) != 0 {
				t.Fatalf("got %+v %v, want a bare invalid", h, err)
			}
		})
	}

	// Expired and suspended: only with the right secret.
	exp := e.now.Now().Add(time.Hour)
	ek := e.createKey(bravo.owner, api.CreateAPIKeyRequest{Role: "developer", ExpiresAt: &exp})
	e.now.Advance(2 * time.Hour)
	if h, err := cell1.KeyHome(ctx, "cell-1", ek.ID, ek.Secret); err != nil || h.Status != wire.KeyExpired || h.Cell != "" {
		t.Fatalf("expired key: %+v %v", h, err)
	}
	if h, err := cell1.KeyHome(ctx, "cell-1", ek.ID, "wrong"); err != nil || h.Status != wire.KeyInvalid {
		t.Fatalf("expired key, wrong secret: %+v %v", h, err)
	}
	suspended := "suspended"
	e.must(e.op.AdminUpdateTenant(ctx, bravo.Tenant.ID, api.UpdateTenantRequest{Status: &suspended}))
	if h, err := cell1.KeyHome(ctx, "cell-1", bravo.keyID, bravo.secret); err != nil || h.Status != wire.KeySuspended || h.Cell != "" {
		t.Fatalf("suspended tenant: %+v %v", h, err)
	}
}

func TestKeyHomeAuthAndLimits(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, bravo, cell1, cell2 := twoCells(t, e)
	_, err := e.anon.KeyHome(ctx, "cell-1", bravo.keyID, bravo.secret)
	wantCode(t, err, "unauthenticated")
	_, err = bravo.key.KeyHome(ctx, "cell-1", bravo.keyID, bravo.secret)
	wantCode(t, err, "unauthenticated")
	_, err = cell2.KeyHome(ctx, "cell-1", bravo.keyID, bravo.secret)
	wantCode(t, err, "permission_denied")
	if code, ae, _ := e.raw("POST", "/internal/v1/cells/cell-1/key-home", "", "application/json", `{}`); code != 401 || ae.Code != "unauthenticated" {
		t.Fatalf("no credential: %d %+v", code, ae)
	}

	// One cell's lookups are capped (the test clock stands still, so the
	// bucket never refills); another cell's are not affected.
	limited := -1
	for i := 0; i < 400 && limited < 0; i++ {
		_, err := cell1.KeyHome(ctx, "cell-1", "SLKAAAAAAAAAAAAAAAA", "guess")
		switch {
		case client.IsCode(err, "rate_limited"):
			limited = i
		case err != nil:
			t.Fatal(err)
		}
	}
	if limited < 100 {
		t.Fatalf("rate limited after %d lookups", limited)
	}
	if h, err := cell2.KeyHome(ctx, "cell-2", bravo.keyID, bravo.secret); err != nil || h.Status != wire.KeyValid {
		t.Fatalf("cell-2 after cell-1 was limited: %+v %v", h, err)
	}
}

// Every internal route answers only a key of the cell it names.
func TestInternalRoutesNeedTheirCellKey(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.must(e.op.AdminCreateCell(ctx, api.CreateCellRequest{ID: "cell-2", PoolID: "shared-1"}))
	k2, err := e.op.AdminCreateCellKey(ctx, "cell-2")
	if err != nil {
		t.Fatal(err)
	}
	other := "Basic " + base64.StdEncoding.EncodeToString([]byte(k2.ID+":"+k2.Secret))
	n := 0
	for _, r := range e.srv.Routes() {
		if !strings.HasPrefix(r.Path, "/internal/") {
			continue
		}
		n++
		path := strings.Replace(r.Path, ":cell", "cell-1", 1)
		t.Run(r.Method+" "+r.Path, func(t *testing.T) {
			if code, ae, _ := e.raw(r.Method, path, "", "application/json", `{}`); code != 401 || ae.Code != "unauthenticated" {
				t.Fatalf("no credential: %d %+v", code, ae)
			}
			if code, ae, _ := e.raw(r.Method, path, other, "application/json", `{}`); code != 403 || ae.Code != "permission_denied" {
				t.Fatalf("another cell's key: %d %+v", code, ae)
			}
		})
	}
	if n < 4 {
		t.Fatalf("%d internal routes", n)
	}
}
