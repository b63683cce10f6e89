package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/celltest"
)

// TestBrokerHealth: /livez answers from a broker's first moment; /readyz
// answers 503 with the reason until the broker serves its replicas: while
// the cell state does not list it, and while its replicas (the cell's
// offsets partitions) have no leader because its two peers are down, and
// while its reconciliation fails (its peers have no Raft address yet).
func TestBrokerHealth(t *testing.T) {
	cp := cptest.Start(t, cptest.Brokers{})
	ck, err := cp.Operator.AdminCreateCellKey(context.Background(), cptest.Cell)
	if err != nil {
		t.Fatal(err)
	}
	// Peers at addresses where nothing listens.
	down := func(t *testing.T) {
		for _, b := range []string{"-b2", "-b3"} {
			a := freeAddr(t)
			if _, err := cp.Operator.AdminUpdateBroker(context.Background(), cptest.Cell+b, api.UpdateBrokerRequest{RaftAddr: &a}); err != nil {
				t.Fatal(err)
			}
		}
		self := "127.0.0.1:1" // its -raft-advertise
		if _, err := cp.Operator.AdminUpdateBroker(context.Background(), cptest.Cell+"-b1", api.UpdateBrokerRequest{RaftAddr: &self}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, broker, reason string
		setup                func(*testing.T)
	}{
		{"not listed", cptest.Cell + "-b9", "not running yet", nil},
		{"peers without addresses", cptest.Cell + "-b1", "reconciliation with the cell state failed", nil},
		{"peers down", cptest.Cell + "-b1", "know no leader", down},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup(t)
			}
			addr, stop := startBrokerRole(t, cp, ck, tc.broker, "-health-listen")
			hc := &http.Client{Timeout: 5 * time.Second}
			celltest.WaitFor(t, 30*time.Second, "/livez answers", func() bool {
				resp, err := hc.Get("http://" + addr + "/livez")
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK
			})
			var last map[string]any
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("last /readyz: %v", last)
				}
			})
			celltest.WaitFor(t, 30*time.Second, "/readyz says "+tc.reason, func() bool {
				resp, err := hc.Get("http://" + addr + "/readyz")
				if err != nil {
					return false
				}
				defer resp.Body.Close()
				last = nil
				_ = json.NewDecoder(resp.Body).Decode(&last)
				reason, _ := last["reason"].(string)
				return resp.StatusCode == http.StatusServiceUnavailable && last["ready"] == false && strings.Contains(reason, tc.reason)
			})
			stop()
		})
	}
}
