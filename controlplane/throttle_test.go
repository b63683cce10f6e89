package controlplane_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/celltest"
)

// TestThrottleRevertsByItself: a throttle caps the rates it names in the
// cell state the brokers poll (the other quotas untouched); when it
// expires, the control plane deletes it and the cell state serves the
// tenant's own quotas again under a new version, with nobody acting.
// Bad input changes nothing: no new state version, no throttle.
func TestThrottleRevertsByItself(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.signup("hotco")
	id := a.Tenant.ID
	own, err := e.op.AdminQuotas(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	cell := e.cellClient()
	stateQuotas := func() (wire.Quotas, int64) {
		t.Helper()
		st, _, err := cell.CellState(ctx, "cell-1", -1, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, tn := range st.Tenants {
			if tn.ID == id {
				return tn.Quotas, st.StateVersion
			}
		}
		t.Fatalf("tenant %s not in the cell state", id)
		return wire.Quotas{}, 0
	}
	q0, v0 := stateQuotas()
	if q0.ProduceBytesPerSec != own.ProduceBytesPerSec {
		t.Fatalf("cell state quota %d, own %d", q0.ProduceBytesPerSec, own.ProduceBytesPerSec)
	}
	i64 := func(v int64) *int64 { return &v }
	past := e.now.Now().Add(-time.Minute)
	for _, bad := range []struct {
		name, tenant, code string
		req                api.ThrottleRequest
	}{
		{"unknown tenant", "tn_nope", "not_found", api.ThrottleRequest{ProduceBytesPerSec: i64(1000), DurationSeconds: 60}},
		{"negative rate", id, "invalid_request", api.ThrottleRequest{ProduceBytesPerSec: i64(-5), DurationSeconds: 60}},
		{"zero rate", id, "invalid_request", api.ThrottleRequest{FetchBytesPerSec: i64(0), DurationSeconds: 60}},
		{"no rate", id, "invalid_request", api.ThrottleRequest{DurationSeconds: 60}},
		{"expiry in the past", id, "invalid_request", api.ThrottleRequest{ProduceBytesPerSec: i64(1000), ExpiresAt: &past}},
		{"negative duration", id, "invalid_request", api.ThrottleRequest{ProduceBytesPerSec: i64(1000), DurationSeconds: -60}},
		{"no expiry", id, "invalid_request", api.ThrottleRequest{ProduceBytesPerSec: i64(1000)}},
		{"too long", id, "invalid_request", api.ThrottleRequest{ProduceBytesPerSec: i64(1000), DurationSeconds: 8 * 24 * 3600}},
	} {
		var out api.Throttle
		err := e.op.Do(ctx, "PUT", "/v1/admin/tenants/"+bad.tenant+"/throttle", bad.req, &out)
		if !client.IsCode(err, bad.code) {
			t.Errorf("%s: %v, want %s", bad.name, err, bad.code)
		}
	}
	if _, v := stateQuotas(); v != v0 {
		t.Fatalf("bad throttles moved the cell state from version %d to %d", v0, v)
	}
	var none api.Throttle
	if err := e.op.Do(ctx, "GET", "/v1/admin/tenants/"+id+"/throttle", nil, &none); !client.IsCode(err, "not_found") {
		t.Fatalf("throttle after bad input: %v %+v", err, none)
	}

	// A throttle of the produce rate for two seconds.
	expires := time.Now().Add(2 * time.Second)
	var th api.Throttle
	if err := e.op.Do(ctx, "PUT", "/v1/admin/tenants/"+id+"/throttle", api.ThrottleRequest{ProduceBytesPerSec: i64(4096), ExpiresAt: &expires, Reason: "hot"}, &th); err != nil {
		t.Fatal(err)
	}
	if th.Effective.ProduceBytesPerSec != 4096 || th.Effective.FetchBytesPerSec != own.FetchBytesPerSec {
		t.Fatalf("effective quotas under the throttle: %+v", th.Effective)
	}
	q1, v1 := stateQuotas()
	if v1 <= v0 || q1.ProduceBytesPerSec != 4096 || q1.FetchBytesPerSec != own.FetchBytesPerSec || q1.MaxConnections != own.MaxConnections {
		t.Fatalf("cell state under the throttle: version %d (was %d), %+v", v1, v0, q1)
	}
	if own2, _ := e.op.AdminQuotas(ctx, id); own2.ProduceBytesPerSec != own.ProduceBytesPerSec {
		t.Fatalf("the throttle changed the tenant's own quota: %d", own2.ProduceBytesPerSec)
	}
	// A broker's long poll sees the revert as a new version, unasked.
	celltest.WaitFor(t, 20*time.Second, "the throttle reverts by itself", func() bool {
		st, changed, err := cell.CellState(ctx, "cell-1", v1, 2*time.Second)
		if err != nil || !changed {
			return false
		}
		for _, tn := range st.Tenants {
			if tn.ID == id {
				return tn.Quotas.ProduceBytesPerSec == own.ProduceBytesPerSec
			}
		}
		return false
	})
	if time.Now().Before(expires) {
		t.Fatal("reverted before the expiry")
	}
	if err := e.op.Do(ctx, "GET", "/v1/admin/tenants/"+id+"/throttle", nil, &none); !client.IsCode(err, "not_found") {
		t.Fatalf("throttle after expiry: %v", err)
	}

	// Lifted early: DELETE answers it, and the state reverts at once.
	if err := e.op.Do(ctx, "PUT", "/v1/admin/tenants/"+id+"/throttle", api.ThrottleRequest{FetchBytesPerSec: i64(8192), DurationSeconds: 600}, &th); err != nil {
		t.Fatal(err)
	}
	if q, _ := stateQuotas(); q.FetchBytesPerSec != 8192 {
		t.Fatalf("fetch throttle not in the state: %+v", q)
	}
	if err := e.op.Do(ctx, "DELETE", "/v1/admin/tenants/"+id+"/throttle", nil, &th); err != nil {
		t.Fatal(err)
	}
	if q, _ := stateQuotas(); q.FetchBytesPerSec != own.FetchBytesPerSec {
		t.Fatalf("fetch throttle lifted but the state has %+v", q)
	}
	if err := e.op.Do(ctx, "DELETE", "/v1/admin/tenants/"+id+"/throttle", nil, &th); !client.IsCode(err, "not_found") {
		t.Fatalf("lift a throttle twice: %v", err)
	}
}

// TestOperatorRevokesTenantKey: an operator revokes a tenant's key (the
// cell state drops it); an unknown tenant or a key of another tenant is
// not_found and revokes nothing.
func TestOperatorRevokesTenantKey(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := e.signup("leaky"), e.signup("other")
	var k api.APIKey
	for _, bad := range []struct{ name, path string }{
		{"unknown tenant", "/v1/admin/tenants/tn_nope/api-keys/" + a.keyID},
		{"another tenant's key", "/v1/admin/tenants/" + b.Tenant.ID + "/api-keys/" + a.keyID},
		{"unknown key", "/v1/admin/tenants/" + a.Tenant.ID + "/api-keys/ak_nope"},
	} {
		if err := e.op.Do(ctx, "DELETE", bad.path, nil, &k); !client.IsCode(err, "not_found") {
			t.Errorf("%s: %v", bad.name, err)
		}
	}
	if _, err := a.key.Topics(ctx); err != nil {
		t.Fatalf("the key after bad revokes: %v", err)
	}
	if err := e.op.Do(ctx, "DELETE", "/v1/admin/tenants/"+a.Tenant.ID+"/api-keys/"+a.keyID, nil, &k); err != nil || k.RevokedAt == nil {
		t.Fatalf("revoke: %v %+v", err, k)
	}
	if _, err := a.key.Topics(ctx); !client.IsCode(err, "key_revoked") {
		t.Fatalf("the revoked key: %v", err)
	}
	st, _, err := e.cellClient().CellState(ctx, "cell-1", -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range st.Keys {
		if key.ID == a.keyID {
			t.Fatalf("the revoked key is still in the cell state")
		}
	}
}
