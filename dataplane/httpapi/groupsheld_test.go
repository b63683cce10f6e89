package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/contract/wire"
)

// TestHeldGroupRoutes: while the tenant is moving here with its groups
// held, the HTTP API's group routes answer 503 coordinator_loading,
// retriable, saying the tenant is moving; once the hold clears a member
// joins.
func TestHeldGroupRoutes(t *testing.T) {
	c := startCell(t, cellOpts{})
	acme := c.tenant("acme")
	c.topic(acme, "orders", 1, nil)
	setMoves := func(hold bool) {
		for _, b := range c.brokers {
			b.coord.SetMoves([]wire.Tenant{{ID: acme.Tenant.ID, Move: &wire.TenantMove{Role: wire.MoveDestination, Peer: "cell-0", HoldGroups: hold}}})
		}
	}
	setMoves(true)
	join := map[string]any{"topics": []string{"orders"}}
	for _, tc := range []struct {
		name, method, path string
		body               any
	}{
		{"join", http.MethodPost, "/v1/groups/g/members", join},
		{"fetch", http.MethodPost, "/v1/groups/g/messages:fetch", map[string]any{"member_id": "m", "generation": 1}},
		{"commit", http.MethodPost, "/v1/groups/g/offsets:commit", map[string]any{"member_id": "m", "generation": 1,
			"offsets": []map[string]any{{"topic": "orders", "partition": 0, "offset": 1}}}},
		{"reset", http.MethodPost, "/v1/groups/g/offsets:reset", map[string]any{"topic": "orders", "to": "earliest"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, raw := c.call(0, tc.method, tc.path, acme.KeyID, acme.Secret, tc.body)
			e := decodeError(t, raw)
			if status != http.StatusServiceUnavailable || e.Code != "coordinator_loading" || !e.Retriable || !strings.Contains(e.Message, "moving") {
				t.Fatalf("%s of a held group: %d %s", tc.name, status, raw)
			}
		})
	}
	setMoves(false)
	waitFor(t, "a join once the hold clears", func() bool {
		status, raw := c.call(0, http.MethodPost, "/v1/groups/g/members", acme.KeyID, acme.Secret, join)
		if status/100 == 2 {
			return true
		}
		if e := decodeError(t, raw); !e.Retriable || strings.Contains(e.Message, "moving") {
			t.Fatalf("join after the release: %d %s", status, raw)
		}
		return false
	})
}
