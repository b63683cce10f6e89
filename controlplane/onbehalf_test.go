package controlplane_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
)

// TestOnBehalfOf: a cell key acts on /v1 for an active API key of a
// tenant of its cell, with exactly that key's role (a viewer key may
// not create topics, so neither may the cell acting for it); it is refused
// for a revoked key, a key of another cell's tenant, an operator key, a
// made-up id, and without a valid cell key.
func TestOnBehalfOf(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.signup("onbehalf")
	viewer := e.createKey(a.owner, api.CreateAPIKeyRequest{Description: "viewer", Role: "viewer"})
	gone := e.createKey(a.owner, api.CreateAPIKeyRequest{Description: "gone", Role: "admin"})
	if _, err := a.owner.RevokeAPIKey(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	// A tenant on cell-2 (the emptier cell takes the next signup).
	e.must(e.op.AdminCreateCell(ctx, api.CreateCellRequest{ID: "cell-2", PoolID: "shared-1"}))
	e.must(e.op.AdminCreateBroker(ctx, api.CreateBrokerRequest{ID: "cell-2-b1", CellID: "cell-2", NodeID: 1}))
	far := e.signup("faraway")
	if far.Tenant.HomeCellID != "cell-2" {
		t.Fatalf("the second tenant landed on %s", far.Tenant.HomeCellID)
	}
	ck, err := e.op.AdminCreateCellKey(ctx, "cell-1")
	if err != nil {
		t.Fatal(err)
	}
	cell := e.anon.With(client.WithAPIKey(ck.ID, ck.Secret))

	// For the tenant's admin key: topic administration, as the key itself.
	asAdmin := cell.With(client.OnBehalfOf(a.keyID))
	if _, err := asAdmin.CreateTopic(ctx, api.CreateTopicRequest{Name: "delegated", Partitions: 1}); err != nil {
		t.Fatalf("create a topic for the admin key: %v", err)
	}
	if ts, err := a.key.Topics(ctx); err != nil || len(ts) != 1 || ts[0].Name != "delegated" {
		t.Fatalf("the tenant's topics: %+v %v", ts, err)
	}
	// For a viewer key: what the viewer key may do, and no more.
	asViewer := cell.With(client.OnBehalfOf(viewer.ID))
	if _, err := asViewer.Topics(ctx); err != nil {
		t.Fatalf("list topics for the viewer key: %v", err)
	}
	_, err = asViewer.CreateTopic(ctx, api.CreateTopicRequest{Name: "not-for-viewers", Partitions: 1})
	wantCode(t, err, "permission_denied")

	opKey, err := e.op.AdminCreateKey(ctx, api.CreateOperatorKeyRequest{Description: "operator"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		c    *client.Client
		code string
	}{
		{"revoked key", cell.With(client.OnBehalfOf(gone.ID)), "key_revoked"},
		{"another cell's tenant", cell.With(client.OnBehalfOf(far.keyID)), "unauthenticated"},
		{"operator key", cell.With(client.OnBehalfOf(opKey.ID)), "unauthenticated"},
		{"made-up key", cell.With(client.OnBehalfOf("SLKAAAAAAAAAAAAAAAA")), "unauthenticated"},
		{"wrong cell secret", e.anon.With(client.WithAPIKey(ck.ID, "nope"), client.OnBehalfOf(a.keyID)), "unauthenticated"},
		{"an API key instead of a cell key", e.anon.With(client.WithAPIKey(viewer.ID, viewer.Secret), client.OnBehalfOf(a.keyID)), "unauthenticated"},
		{"no credential", e.anon.With(client.OnBehalfOf(a.keyID)), "unauthenticated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.c.Topics(ctx)
			wantCode(t, err, tc.code)
		})
	}
}
