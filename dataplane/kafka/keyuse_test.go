package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/cellview"
)

// TestKafkaUseSetsLastUsed: a key used only over Kafka gets its
// last_used_at once the broker reports: the connection notes the use in
// the broker's state and the report carries it to the control plane.
func TestKafkaUseSetsLastUsed(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	tn := b.cp.Signup("used", "admin")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	k, err := tn.Owner.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Description: "kafka only", Role: "developer"})
	if err != nil {
		t.Fatal(err)
	}
	b.waitForSecret(t, "the key", k.ID, k.Secret)
	rep, err := cellview.NewReporter(cellview.ReporterConfig{Cell: cptest.Cell, BrokerID: cptest.Cell + "-b1", API: b.cp.CellClient(),
		DataDir: t.TempDir(), KeysUsed: b.state.TakeKeysUsed})
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.ReportOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := tn.Owner.APIKey(ctx, k.ID); err != nil || got.LastUsedAt != nil {
		t.Fatalf("unused key: last_used_at %v, %v", got.LastUsedAt, err)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.SASL(plain.Auth{User: k.ID, Pass: k.Secret}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).ListTopics(ctx); err != nil {
		t.Fatal(err)
	}
	// The connection notes the use before it answers.
	if err := rep.ReportOnce(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := tn.Owner.APIKey(ctx, k.ID)
	if err != nil || got.LastUsedAt == nil {
		t.Fatalf("after Kafka use and a report: last_used_at %v, %v", got.LastUsedAt, err)
	}
}
