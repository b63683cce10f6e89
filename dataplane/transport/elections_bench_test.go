package transport

import (
	"encoding/json"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// eventLog counts the warnings and errors that hashicorp/raft and the
// Nodes log while it is on, by message, so that BenchmarkIdleCell can say
// why an idle group held an election: a follower's heartbeat timeout, a
// leader's lease check stepping down, a failed heartbeat, a peer broker
// found down.
type eventLog struct {
	on atomic.Bool
	// mu guards the field below.
	mu     sync.Mutex
	counts map[string]int
}

func newEventLog() *eventLog { return &eventLog{counts: map[string]int{}} }

// Write takes one JSON log line of hclog ("@message") or slog ("msg").
func (e *eventLog) Write(p []byte) (int, error) {
	if !e.on.Load() {
		return len(p), nil
	}
	var line struct {
		Hclog string `json:"@message"`
		Slog  string `json:"msg"`
		Error string `json:"error"`
	}
	if json.Unmarshal(p, &line) == nil {
		msg := line.Hclog + line.Slog
		if msg == msgHeartbeatFailed {
			msg += ": " + line.Error
		}
		e.mu.Lock()
		e.counts[msg]++
		e.mu.Unlock()
	}
	return len(p), nil
}

// count is the number of messages msg, or msg followed by ": " and an
// error, in counts.
func count(counts map[string]int, msg string) int {
	n := 0
	for k, v := range counts {
		if k == msg || strings.HasPrefix(k, msg+": ") {
			n += v
		}
	}
	return n
}

func (e *eventLog) snapshot() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.counts)
}

// raftLogger makes every group's Raft log warnings and errors to e.
func (e *eventLog) raftLogger(c *raft.Config) {
	c.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: e, JSONFormat: true})
}

// nodeLogger makes a Node log to e.
func (e *eventLog) nodeLogger(c *Config) {
	c.Logger = slog.New(slog.NewJSONHandler(e, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// The messages BenchmarkIdleCell reports (hashicorp/raft v1.8's and
// liveness.go's).
const (
	msgFollowerTimeout = "heartbeat timeout reached, starting election"
	msgLeaseStepDown   = "failed to contact quorum of nodes, stepping down"
	msgHeartbeatFailed = "failed to heartbeat to"
	msgPeerDown        = "raft peer broker not answering; its partitions' followers elect new leaders"
)
