package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/tenantd/devtest"
)

// devTenant signs a tenant up on d and returns its id and an API key
// (id, secret) with a topic of partitions partitions created.
func devTenant(t *testing.T, d *devtest.Dev, name, topic string, partitions int) (tenantID, keyID, secret string) {
	t.Helper()
	call := apiCaller(t, d.APIURL)
	email := "ops@" + name + ".test"
	call("POST", "/v1/signup", "", fmt.Sprintf(`{"tenant_name":%q,"email":%q,"password":"correct horse 1"}`, name, email), 202)
	signup := call("POST", "/v1/signup/confirm", "", `{"token":"`+d.MailToken(t, email)+`"}`, 201)
	token := signup["session"].(map[string]any)["token"].(string)
	key := call("POST", "/v1/api-keys", "Bearer "+token, `{"description":"load"}`, 201)
	keyID, secret = key["id"].(string), key["secret"].(string)
	call("POST", "/v1/topics", "Basic "+b64(keyID+":"+secret), fmt.Sprintf(`{"name":%q,"partitions":%d}`, topic, partitions), 201)
	return signup["tenant"].(map[string]any)["id"].(string), keyID, secret
}

// kafkaClient is a franz-go client of d's Kafka listener with the key.
func kafkaClient(t *testing.T, d *devtest.Dev, keyID, secret string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(d.Bootstrap),
		kgo.SASL(plain.Auth{User: keyID, Pass: secret}.AsMechanism())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

var sampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$`)

// metricSum is the sum of the samples of name whose labels contain every
// one of match (as `key="value"`), and how many there were.
func metricSum(body, name string, match ...string) (float64, int) {
	var sum float64
	n := 0
	for _, l := range strings.Split(body, "\n") {
		m := sampleRE.FindStringSubmatch(l)
		if m == nil || m[1] != name {
			continue
		}
		ok := true
		for _, want := range match {
			ok = ok && strings.Contains(m[2], want)
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err == nil {
			sum += v
			n++
		}
	}
	return sum, n
}

// TestBrokerMetricsAfterTraffic: after real franz-go traffic (produce,
// a consumer group, a fetch) and an HTTP publish against `tenantd dev`,
// the operators' /metrics carries the request, error, latency, byte,
// throttle, partition, leader, disk and group series with values that
// follow from that traffic.
func TestBrokerMetricsAfterTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tenantd")
	}
	// The shared cell alone: the figures below count its three brokers.
	d := startDev(t, "-dedicated-cell=false")
	tenantID, keyID, secret := devTenant(t, d, "metricsco", "events", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	prod := kafkaClient(t, d, keyID, secret, kgo.DefaultProduceTopic("events"))
	const records = 200
	for i := range records {
		if err := prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("event-%03d-%s", i, strings.Repeat("x", 100)))).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	// A produce to a topic the tenant does not have: an error response.
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "no-such-topic", Value: []byte("x")}).FirstErr(); err == nil {
		t.Fatal("produce to a missing topic succeeded")
	}
	cons := kafkaClient(t, d, keyID, secret, kgo.ConsumeTopics("events"), kgo.ConsumerGroup("readers"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < records {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d: %v", got, records, ctx.Err())
		}
		got += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	status, body := send(t, "POST", "http://"+d.HTTPData+"/v1/topics/events/messages:publish", "Basic "+b64(keyID+":"+secret),
		`{"messages":[{"value":"`+b64("over http")+`"}]}`)
	if status != 200 {
		t.Fatalf("http publish: %d %s", status, body)
	}

	var metrics string
	tenant := `tenant="` + tenantID + `"`
	// Throttle time, made certain: how fast 200 synchronous produces go
	// depends on the machine, so a temporary throttle of 10 messages a
	// second meets batches of 30 until a broker has throttled one.
	status, body = send(t, "PUT", d.APIURL+"/v1/admin/tenants/"+tenantID+"/throttle", "Basic "+b64(d.OpKey),
		`{"produce_messages_per_sec":10,"duration_seconds":600,"reason":"metrics test"}`)
	if status != 200 {
		t.Fatalf("throttle: %d %s", status, body)
	}
	throttled := 0
	celltest.WaitFor(t, 60*time.Second, "a produce throttled", func() bool {
		throttled += 30
		batch := make([]*kgo.Record, 30)
		for i := range batch {
			batch[i] = kgo.StringRecord("throttled")
		}
		if err := prod.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			t.Fatalf("throttled produce: %v", err)
		}
		_, b := send(t, "GET", d.APIURL+"/metrics", "Basic "+b64(d.OpKey), "")
		v, _ := metricSum(string(b), "sluice_quota_throttle_seconds_total", tenant)
		return v > 0
	})
	celltest.WaitFor(t, 30*time.Second, "the partition series settle", func() bool {
		status, b := send(t, "GET", d.APIURL+"/metrics", "Basic "+b64(d.OpKey), "")
		metrics = string(b)
		led, _ := metricSum(metrics, "sluice_partitions_led")
		grp, _ := metricSum(metrics, "sluice_groups")
		return status == 200 && led >= 3 && grp >= 1
	})
	checks := []struct {
		what       string
		name       string
		match      []string
		lo, hi     float64
		wantSeries bool
	}{
		{"produce requests of the tenant", "sluice_kafka_requests_total", []string{`api="Produce"`, tenant}, records, 10 * records, true},
		{"fetches of the tenant", "sluice_kafka_requests_total", []string{`api="Fetch"`, tenant}, 1, 1e6, true},
		{"group joins of the tenant", "sluice_kafka_requests_total", []string{`api="JoinGroup"`, tenant}, 1, 100, true},
		// franz-go learns of the missing topic from Metadata or Produce.
		{"the failed produce", "sluice_kafka_request_errors_total", []string{tenant, `error="UNKNOWN_TOPIC_OR_PARTITION"`}, 1, 1000, true},
		{"produce latency observations", "sluice_kafka_request_seconds_count", []string{`api="Produce"`, tenant}, records, 10 * records, true},
		{"produce bytes in", "sluice_kafka_request_bytes_total", []string{`api="Produce"`, tenant}, records * 100, 1e7, true},
		{"records produced over Kafka", "sluice_kafka_produced_records_total", []string{tenant}, float64(records + throttled), float64(records + throttled), true},
		{"the tenant's open connections", "sluice_kafka_connections", []string{tenant}, 1, 50, true},
		{"http publish of the tenant", "sluice_http_tenant_requests_total", []string{`route="/v1/topics/:topic/messages:publish"`, tenant, `outcome="ok"`}, 1, 1, true},
		{"http publish latency", "sluice_http_tenant_request_seconds_count", []string{tenant}, 1, 10, true},
		// Batch bytes, as compressed by the client (snappy).
		{"produced bytes recorded", "sluice_quota_recorded_bytes_total", []string{tenant, `direction="produce"`}, records * 50, 1e7, true},
		{"fetched bytes recorded", "sluice_quota_recorded_bytes_total", []string{tenant, `direction="fetch"`}, records * 50, 1e8, true},
		{"partitions led (three of the topic, the offsets partitions apart)", "sluice_partitions_led", nil, 3, 3 + 3*50, true},
		{"no partition without a leader", "sluice_partitions_leaderless", nil, 0, 0, true},
		{"no partition under-replicated", "sluice_partitions_under_replicated", nil, 0, 0, true},
		{"leader elections", "sluice_partition_leader_changes_total", nil, 0, 1e6, true},
		{"replicas (3 partitions x 3 brokers)", "sluice_replicas", nil, 9, 9, true},
		{"log bytes (three replicas)", "sluice_log_bytes", nil, 3 * records * 50, 1e9, true},
		{"log segments", "sluice_log_segments", nil, 9, 1e4, true},
		{"disk used", "sluice_disk_used_ratio", nil, 0.0001, 1, true},
		{"cell state fresh", "sluice_cell_state_sync_age_seconds", nil, 0, 3 * 60, true},
		// Each synchronous produce waits for a durable round on its leader.
		{"fsync rounds timed", "sluice_fsync_seconds_count", nil, records, 1e7, true},
		{"fsync time spent", "sluice_fsync_seconds_sum", nil, 1e-6, 1e4, true},
		// Every round covers at least one partition's store.
		{"stores the rounds covered", "sluice_commit_stores_total", nil, records, 1e7, true},
		{"Raft commits timed", "sluice_raft_seconds_count", []string{`kind="commit"`}, records, 1e7, true},
		{"Raft applies timed", "sluice_raft_seconds_count", []string{`kind="apply"`}, records, 1e7, true},
		{"leader log stores (with the group commit's fsync) timed", "sluice_raft_seconds_count", []string{`kind="store_leader"`}, 1, 1e7, true},
		{"follower log stores timed", "sluice_raft_seconds_count", []string{`kind="store_follower"`}, 1, 1e7, true},
		{"group rebalances", "sluice_group_rebalances_total", nil, 0, 100, true},
		// The throttled batches above.
		{"throttle time", "sluice_quota_throttle_seconds_total", []string{tenant}, 0.001, 1e4, true},
	}
	for _, c := range checks {
		v, n := metricSum(metrics, c.name, c.match...)
		if c.wantSeries && n == 0 {
			t.Errorf("%s: no %s%v series", c.what, c.name, c.match)
			continue
		}
		if v < c.lo || v > c.hi {
			t.Errorf("%s: %s%v = %v, want in [%v, %v]", c.what, c.name, c.match, v, c.lo, c.hi)
		}
	}
	if _, n := metricSum(metrics, "sluice_fsync_seconds_count"); n != 3 {
		t.Errorf("%d sluice_fsync_seconds histograms, want one per dev broker (3)", n)
	}
	if _, n := metricSum(metrics, "sluice_kafka_requests_total", `tenant="other"`); n != 0 {
		t.Errorf("one tenant but an other series:\n%s", metrics)
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", metrics)
	}
}
