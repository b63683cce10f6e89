package controlplane_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/controlplane/pgtest"
)

// BenchmarkKeyHome: one key-home lookup as the handler does it, on the
// machine's Postgres, for a tenant with 10 topics of 3 partitions (each
// with three reported replica statuses) and 5 ACL rules: valid is the
// whole answer (key check, brokers, ACLs, topics and leaders in one
// read-only repeatable-read transaction); wrong-secret stops after the
// key check.
func BenchmarkKeyHome(b *testing.B) {
	db := pgtest.Pool(b)
	mailer, mailDir := cptest.Mailer(b)
	srv, err := controlplane.New(controlplane.Config{DB: db, Mailer: mailer})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	b.Cleanup(hs.Close)
	ctx := context.Background()
	id, secret, err := controlplane.CreateOperatorKey(ctx, db, "bench operator")
	if err != nil {
		b.Fatal(err)
	}
	op := client.New(hs.URL, client.WithAPIKey(id, secret))
	cptest.SeedFleet(b, op, cptest.TestAddrs)
	anon := client.New(hs.URL)
	res, err := cptest.SignUp(ctx, anon, mailDir, api.SignupRequest{TenantName: "benchco", Email: "bench@example.com", Password: "password-bench-1"})
	if err != nil {
		b.Fatal(err)
	}
	owner := anon.With(client.WithSession(res.Session.Token))
	k, err := owner.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Role: "developer"})
	if err != nil {
		b.Fatal(err)
	}
	admin, err := owner.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Role: "admin"})
	if err != nil {
		b.Fatal(err)
	}
	adminKey := anon.With(client.WithAPIKey(admin.ID, admin.Secret))
	for i := 0; i < 10; i++ {
		if _, err := adminKey.CreateTopic(ctx, api.CreateTopicRequest{Name: fmt.Sprintf("topic-%d", i), Partitions: 3}); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ {
		if _, err := adminKey.CreateACL(ctx, api.CreateACLRequest{Principal: k.ID, ResourceType: "topic", ResourceName: fmt.Sprintf("topic-%d", i),
			Operation: "read", Permission: "allow"}); err != nil {
			b.Fatal(err)
		}
	}
	ck, err := op.AdminCreateCellKey(ctx, cptest.Cell)
	if err != nil {
		b.Fatal(err)
	}
	cell := anon.With(client.WithAPIKey(ck.ID, ck.Secret))
	st, _, err := cell.CellState(ctx, cptest.Cell, -1, 0)
	if err != nil {
		b.Fatal(err)
	}
	for n := 1; n <= 3; n++ {
		r := wire.Report{Version: wire.Version, BrokerID: fmt.Sprintf("%s-b%d", cptest.Cell, n)}
		for _, t := range st.Topics {
			for _, p := range t.Partitions {
				r.Partitions = append(r.Partitions, wire.PartitionStatus{TopicID: t.ID, Partition: p.Partition, LeaderNode: p.Replicas[0], LeaderEpoch: 1})
			}
		}
		if err := cell.CellReport(ctx, cptest.Cell, r); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name, secret, want string
	}{
		{"valid", k.Secret, wire.KeyValid},
		{"wrong-secret", "wrong", wire.KeyInvalid},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				h, err := srv.LookupKeyHome(ctx, k.ID, bc.secret)
				if err != nil || h.Status != bc.want {
					b.Fatalf("%+v %v", h, err)
				}
			}
		})
	}
}
