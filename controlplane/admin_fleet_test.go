package controlplane_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/controlplane/cptest"
)

// TestFleetListsPageAndRefuseMissingParents: the operator's cell and broker
// lists page by id; a cell or broker that is not there, or whose pool or
// cell is not there, is not_found.
func TestFleetListsPageAndRefuseMissingParents(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.must(e.op.AdminCreateCell(ctx, api.CreateCellRequest{ID: "cell-2", PoolID: cptest.Pool}))

	// pages walks path one item at a time and returns the ids it saw.
	pages := func(path string, id func(api.Page[map[string]any]) string) []string {
		var ids []string
		token := ""
		for range 10 {
			var pg api.Page[map[string]any]
			if err := e.op.Do(ctx, "GET", path+"?limit=1&page_token="+url.QueryEscape(token), nil, &pg); err != nil {
				t.Fatalf("list %s: %v", path, err)
			}
			if len(pg.Items) != 1 {
				t.Fatalf("list %s with limit 1: %d items", path, len(pg.Items))
			}
			ids = append(ids, id(pg))
			if token = pg.NextPageToken; token == "" {
				return ids
			}
		}
		t.Fatalf("list %s: more pages than items", path)
		return nil
	}
	first := func(pg api.Page[map[string]any]) string { return pg.Items[0]["id"].(string) }
	if got := pages("/v1/admin/cells", first); len(got) != 2 || got[0] != cptest.Cell || got[1] != "cell-2" {
		t.Fatalf("cells by page: %v", got)
	}
	if got := pages("/v1/admin/brokers", first); len(got) != 3 || got[0] != cptest.Cell+"-b1" || got[2] != cptest.Cell+"-b3" {
		t.Fatalf("brokers by page: %v", got)
	}

	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"get unknown cell", func() error { _, err := e.op.AdminCell(ctx, "cell-9"); return err }},
		{"get unknown broker", func() error { return e.op.Do(ctx, "GET", "/v1/admin/brokers/nope", nil, nil) }},
		{"cell in unknown pool", func() error {
			_, err := e.op.AdminCreateCell(ctx, api.CreateCellRequest{ID: "cell-3", PoolID: "pool-9"})
			return err
		}},
		{"broker in unknown cell", func() error {
			_, err := e.op.AdminCreateBroker(ctx, api.CreateBrokerRequest{ID: "b-9", CellID: "cell-9", NodeID: 9})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { wantCode(t, tc.call(), "not_found") })
	}
}
