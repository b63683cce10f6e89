package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dataplane/celltest"
)

// TestKafkaJSClient points kafkajs 2.2.4 (Node.js; a Kafka client written
// apart from franz-go and librdkafka) at a real `tenantd dev`, once per
// SASL mechanism (testdata/kafkajs.js): describeCluster names the cell and
// its three brokers; createTopics with a retention setting, listTopics,
// fetchTopicMetadata and describeConfigs agree; an idempotent producer's
// 100 keyed records are all stored; a consumer group reads each key's in
// order and commits all 100; describeGroups and listGroups answer as
// Kafka's would; setOffsets and resetOffsets (which commits -2) move the
// group, whose next consumer reads all 100 again (once, with PLAIN);
// deleteTopics deletes; a wrong secret is refused as an authentication
// error.
func TestKafkaJSClient(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tenantd")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: run `make tools`")
	}
	modules, err := filepath.Abs(filepath.Join("..", ".cache", "kafkajs", "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(modules, "kafkajs", "package.json")); err != nil {
		t.Fatalf("kafkajs is not installed: run `make tools` (%v)", err)
	}
	d := startDev(t)
	hc := &http.Client{Timeout: 30 * time.Second}
	id, secret := devKey(t, d, hc, "jsco", "kafkajs")

	// Every broker knows the key once it answers a missing topic with 404
	// rather than the unknown key with 401.
	for _, addr := range d.HTTPAddrs {
		celltest.WaitFor(t, 30*time.Second, "broker "+addr+" knows the key", func() bool {
			status, _ := sendWith(t, hc, "GET", "http://"+addr+"/v1/topics/none/partitions/0/offsets", "Basic "+b64(id+":"+secret), "")
			return status == http.StatusNotFound
		})
	}

	for _, mech := range []string{"plain", "scram-sha-256", "scram-sha-512"} {
		cmd := exec.Command(node, filepath.Join("testdata", "kafkajs.js"))
		cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "BROKERS="+d.Bootstrap, "KEY_ID="+id, "SECRET="+secret,
			"MECH="+mech, "TOPIC=js-"+mech, "CELL=dev-cell-1")
		want := fmt.Sprintf("OK %s: produced 100, read 100, committed 100\n", mech)
		if mech == "plain" { // the offset tools once
			cmd.Env = append(cmd.Env, "OFFSET_TOOLS=1")
			want = "OK plain: produced 100, read 100, committed 100, read 100 again after resetOffsets\n"
		}
		out, err := runBounded(cmd, 2*time.Minute)
		if err != nil || !strings.Contains(string(out), want) {
			t.Fatalf("kafkajs with %s: %v\n%s\n%s", mech, err, out, d.Stderr.String())
		}
	}
}
