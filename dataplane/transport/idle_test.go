package transport

import (
	"strings"
	"sync"
	"testing"
	"time"

	gometrics "github.com/hashicorp/go-metrics"

	"github.com/sluicehq/sluice/contract/testkit"
)

// keySink records the go-metrics keys hashicorp/raft reports.
type keySink struct {
	gometrics.BlackholeSink
	mu   sync.Mutex
	keys map[string]bool
}

func (s *keySink) AddSample(key []string, _ float32) {
	s.mu.Lock()
	s.keys[strings.Join(key, ".")] = true
	s.mu.Unlock()
}

func (s *keySink) AddSampleWithLabels(key []string, v float32, _ []gometrics.Label) {
	s.AddSample(key, v)
}

func (s *keySink) has(pred func(string) bool) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var found []string
	for k := range s.keys {
		if pred(k) {
			found = append(found, k)
		}
	}
	return found
}

// With RaftConfig, a leader's heartbeats and appends are timed once each,
// labelled by peer, not a second time under a key per peer (raft's legacy
// telemetry): one go-metrics call fewer per RPC on every idle group.
func TestRaftConfigNoPerPeerTelemetry(t *testing.T) {
	conf := gometrics.DefaultConfig("")
	conf.EnableHostname, conf.EnableHostnameLabel, conf.EnableRuntimeMetrics = false, false, false
	sink := &keySink{keys: map[string]bool{}}
	if _, err := gometrics.NewGlobal(conf, sink); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = gometrics.NewGlobal(conf, &gometrics.BlackholeSink{}) })

	c := newCell(t, 3, 1, 0, nil)
	c.waitLeaders(time.Minute)
	// The first heartbeats follow the election within HeartbeatTimeout/5.
	testkit.WaitFor(t, time.Minute, "heartbeat and append timings", func() bool {
		return len(sink.has(func(k string) bool { return k == "raft.replication.heartbeat" })) > 0 &&
			len(sink.has(func(k string) bool { return k == "raft.replication.appendEntries.rpc" })) > 0
	})
	var peers []string
	for _, n := range c.nodes {
		peers = append(peers, string(n.ID()))
	}
	perPeer := sink.has(func(k string) bool {
		for _, p := range peers {
			if strings.HasSuffix(k, "."+p) {
				return true
			}
		}
		return false
	})
	if len(perPeer) > 0 {
		t.Fatalf("per-peer keys reported: %v", perPeer)
	}
}
