package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/replicas"
)

// TestBrokerReportsMoves: a broker registers its peer CA (the CA file's
// PEM) and reports that it takes part in tenant moves, with the cell state
// version its replicas applied. The control plane is the real one; a tap
// in front of it keeps copies of what the broker sends.
func TestBrokerReportsMoves(t *testing.T) {
	var mu sync.Mutex
	var reg wire.Registration
	var reps []wire.Report
	tap := func(plane http.Handler, _ string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/internal/v1/cells/") && (r.Method == http.MethodPut || strings.HasSuffix(r.URL.Path, "/report")) {
				b, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(b))
				mu.Lock()
				if r.Method == http.MethodPut {
					_ = json.Unmarshal(b, &reg)
				} else {
					var rep wire.Report
					if json.Unmarshal(b, &rep) == nil {
						reps = append(reps, rep)
					}
				}
				mu.Unlock()
			}
			plane.ServeHTTP(w, r)
		})
	}
	cp := cptest.StartMounted(t, cptest.Brokers{}, tap)
	ctx := context.Background()
	ck, err := cp.Operator.AdminCreateCellKey(ctx, cptest.Cell)
	if err != nil {
		t.Fatal(err)
	}
	peer := peerFiles(t, "1")
	raft, kafka, httpAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	args := append([]string{"-cell", cptest.Cell, "-broker-id", cptest.Cell + "-b1", "-api", cp.URL,
		"-cell-key", ck.ID + ":" + ck.Secret, "-data-dir", t.TempDir(), "-node-id", "1",
		"-raft-listen", raft, "-raft-advertise", raft, "-kafka-listen", kafka, "-kafka-advertise", kafka,
		"-http-listen", httpAddr, "-http-advertise", httpAddr}, peer...)
	cfg, err := loadConfig("broker", args, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	stop := goBrokerRole(cfg)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()

	ca, err := os.ReadFile(peer[1]) // -peer-ca-file
	if err != nil {
		t.Fatal(err)
	}
	var last wire.Report
	celltest.WaitFor(t, 30*time.Second, "a report of moves with the applied state version", func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(reps) == 0 {
			return false
		}
		last = reps[len(reps)-1]
		return last.Moves && last.StateVersion > 0
	})
	st, _, err := cp.CellClient().CellState(ctx, cptest.Cell, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if last.StateVersion > st.StateVersion {
		t.Fatalf("reported state version %d, beyond the cell's %d", last.StateVersion, st.StateVersion)
	}
	mu.Lock()
	defer mu.Unlock()
	if reg.NodeID != 1 || reg.PeerCA != string(ca) {
		t.Fatalf("registration: node %d, peer CA of %d bytes; want node 1 and the CA file's %d bytes", reg.NodeID, len(reg.PeerCA), len(ca))
	}
}

// A peer CA file that is not a CA certificate fails the broker's start
// before it registers anything.
func TestPeerCAPEMRefusesNonCA(t *testing.T) {
	peer := peerFiles(t, "1")
	if _, err := peerCAPEM(peer[3]); err == nil { // -peer-cert-file: a broker's, not a CA
		t.Fatal("a broker certificate was taken as the peer CA")
	}
	if got, err := peerCAPEM(peer[1]); err != nil || !strings.Contains(got, "BEGIN CERTIFICATE") {
		t.Fatalf("peer CA: %q, %v", got, err)
	}
}

// A broker's mirror rate defaults to replicas.DefaultMirrorRate, comes
// from the config file or the flag (0 unlimited) into the broker's
// config, and a negative one is refused.
func TestBrokerMirrorRateConfig(t *testing.T) {
	mirrorRate := func(c Config) (int64, int64) { return c.MirrorRate, brokerConfigOf(c).MirrorRate }
	testBrokerSettings(t, "mirror rate", mirrorRate, []brokerSettingCase[int64]{
		{"default", nil, replicas.DefaultMirrorRate},
		{"unlimited", []string{"-mirror-rate", "0"}, 0},
		{"file", []string{"-config", configFile(t, `{"mirror_rate": 4096}`)}, 4096},
		{"flag over file", []string{"-config", configFile(t, `{"mirror_rate": 4096}`), "-mirror-rate", "1048576"}, 1 << 20},
	})
	if _, err := loadBrokerConfig("-mirror-rate", "-5"); err == nil || !strings.Contains(err.Error(), "mirror rate") {
		t.Fatalf("a negative mirror rate: %v, want refused", err)
	}
}
