package httpapi_test

import (
	"net/http"
	"slices"
	"testing"
)

// TestHTTPUseIsNoted: a request of the HTTP data API notes its key's use
// in the serving broker's state, for the report that sets last_used_at.
func TestHTTPUseIsNoted(t *testing.T) {
	c := startCell(t, cellOpts{})
	tn := c.tenant("acme")
	c.topic(tn, "tasks", 1, nil)
	c.brokers[1].syncer.TakeKeysUsed()
	if s := c.as(tn, 1, http.MethodGet, readPath("tasks", 0, "offset=0"), nil, nil); s != http.StatusOK {
		t.Fatalf("read: %d", s)
	}
	if used := c.brokers[1].syncer.TakeKeysUsed(); !slices.Contains(used, tn.KeyID) {
		t.Fatalf("keys used %v, want %s", used, tn.KeyID)
	}
}
