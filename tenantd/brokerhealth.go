package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/replicas"
)

// A broker's health endpoints (-health-listen), for an orchestrator's
// probes:
//
//	GET /livez   200 while the process runs, from its first moment: a
//	             broker replaying a long log is alive, so a liveness probe
//	             here never kills a recovery.
//	GET /readyz  200 once the broker serves its replicas: its replica
//	             manager runs, its last reconciliation with the cell state
//	             succeeded, and every replica it holds knows its leader and
//	             is not stuck behind the leader's log start; 503 with the
//	             reason otherwise. A rolling restart that waits for it
//	             takes the next broker down only when this one is back in
//	             every Raft group, so the cell keeps a majority.
//
// It is unauthenticated and says nothing about tenants beyond counts:
// bind it to the pod's or machine's private address.

// applyState is the outcome of the broker's last reconciliation of its
// replicas with the cell state; nil-safe.
type applyState struct {
	// mu guards the fields below.
	mu   sync.Mutex
	done bool
	err  error
}

func (a *applyState) set(err error) {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.done, a.err = true, err
	a.mu.Unlock()
}

func (a *applyState) get() (done bool, err error) {
	if a == nil {
		return true, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.done, a.err
}

// readiness is why a broker is not ready yet, "" when it is.
func readiness(slot *atomic.Pointer[replicas.Manager], applied *applyState) (reason string, replicasServed int) {
	m := slot.Load()
	if m == nil {
		return "the replicas are not running yet (waiting for the cell state to list this broker)", 0
	}
	switch done, err := applied.get(); {
	case !done:
		return "the replicas are starting (first reconciliation with the cell state)", 0
	case err != nil:
		return "the last reconciliation with the cell state failed (retrying): " + err.Error(), 0
	}
	st := m.Status()
	total, leaderless, behind := len(st), 0, 0
	for _, p := range st {
		if p.LeaderNode == 0 {
			leaderless++
		}
		if p.BehindLogStart {
			behind++
		}
	}
	// Status leaves out the cell's offsets partitions (numbered from 0),
	// which the group coordinator serves from.
	for p := int32(0); ; p++ {
		r, ok := m.Get(groups.OffsetsTopicID, p)
		if !ok {
			break
		}
		total++
		if id, _ := r.LeaderID(); id == "" {
			leaderless++
		}
		if r.BehindLogStart() {
			behind++
		}
	}
	switch {
	case leaderless > 0:
		return fmt.Sprintf("%d of %d replicas know no leader yet", leaderless, total), total
	case behind > 0:
		return fmt.Sprintf("%d of %d replicas are behind their leader's log start and wait to be seeded", behind, total), total
	}
	return "", total
}

// serveHealth serves /livez and /readyz on addr until ctx ends.
func serveHealth(ctx context.Context, addr string, slot *atomic.Pointer[replicas.Manager], applied *applyState, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen for health on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		reason, n := readiness(slot, applied)
		w.Header().Set("Content-Type", "application/json")
		if reason != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ready": reason == "", "reason": reason, "replicas": n})
	})
	log.Info("health listening", "health_listen", ln.Addr().String())
	return serveHTTP(ctx, ln, mux, log, nil)
}
