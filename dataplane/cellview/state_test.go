package cellview_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/cellview"
)

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	celltest.WaitFor(t, 20*time.Second, what, cond)
}

func TestSyncerFollowsControlPlane(t *testing.T) {
	cp := cptest.Start(t, cptest.Brokers{KafkaAddrs: []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b := cp.Signup("alpha", "developer"), cp.Signup("beta", "client")
	if _, err := a.Key.CreateTopic(ctx, api.CreateTopicRequest{Name: "orders", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "state.json")
	s, err := cellview.New(cellview.Config{Cell: cptest.Cell, API: cp.CellClient(), CacheFile: cache, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	changed := s.Changed()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("no state within 20 s")
	}
	v := s.View()
	now := time.Now()
	pa, err := v.Authenticate(a.KeyID, a.Secret, now)
	if err != nil || pa.TenantID != a.Tenant.ID {
		t.Fatalf("authenticate alpha: %+v %v", pa, err)
	}
	if _, err := v.Authenticate(a.KeyID, b.Secret, now); !errors.Is(err, cellview.ErrBadCredentials) {
		t.Fatalf("wrong secret: %v", err)
	}
	if _, ok := v.Topic(a.Tenant.ID, "orders"); !ok {
		t.Fatal("alpha's topic missing")
	}
	if _, ok := v.Topic(b.Tenant.ID, "orders"); ok {
		t.Fatal("beta sees alpha's topic")
	}
	if len(v.Brokers) != 3 {
		t.Fatalf("brokers %+v", v.Brokers)
	}
	pb, err := v.Authenticate(b.KeyID, b.Secret, now)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Allowed(pa, authz.ResourceTopic, "orders", authz.OpWrite) || v.Allowed(pb, authz.ResourceTopic, "orders", authz.OpRead) {
		t.Fatal("ACL defaults: developer should write, client should not read")
	}

	// An ACL for beta's client key arrives, and alpha's key is revoked.
	if _, err := b.Owner.CreateACL(ctx, api.CreateACLRequest{Principal: b.KeyID, ResourceType: "topic", ResourceName: "in", Operation: "read"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Owner.RevokeAPIKey(ctx, a.KeyID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "revocation to reach the broker", func() bool { return !s.View().Valid(pa, time.Now()) })
	waitFor(t, "acl to reach the broker", func() bool { return s.View().Allowed(pb, authz.ResourceTopic, "in", authz.OpRead) })
	if _, err := s.View().Authenticate(a.KeyID, a.Secret, time.Now()); !errors.Is(err, cellview.ErrBadCredentials) {
		t.Fatalf("revoked key: %v", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}

	// A restart with the control plane unreachable serves the cached state.
	down := client.New("http://127.0.0.1:1", client.WithAPIKey("SLCAAAAAAAAAAAAAAAA", "x"))
	s2, err := cellview.New(cellview.Config{Cell: cptest.Cell, API: down, CacheFile: cache, RetryEvery: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.View().Authenticate(b.KeyID, b.Secret, time.Now()); err != nil {
		t.Fatalf("cached state: %v", err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	_ = s2.Run(ctx2) // fails to reach the control plane and keeps retrying
	if _, err := s2.View().Authenticate(b.KeyID, b.Secret, time.Now()); err != nil {
		t.Fatalf("state lost while the control plane is down: %v", err)
	}
}

func TestDamagedCacheIsIgnored(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(cache, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := cellview.New(cellview.Config{Cell: "c", CacheFile: cache})
	if err != nil {
		t.Fatal(err)
	}
	if s.View().StateVersion != 0 {
		t.Fatal("damaged cache produced state")
	}
}
