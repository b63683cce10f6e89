package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/contract/catalog"
)

// A partition that lost its majority (two of its three brokers killed)
// answers publish and read on the survivor with not_enough_replicas, a
// retriable 503 that says nothing can be elected until brokers return,
// not the not_leader of a leader moving. Until the survivor's transport
// finds both peers down it may answer not_leader; nothing else is right.
func TestNoQuorumIsNotEnoughReplicas(t *testing.T) {
	c := startCell(t, cellOpts{})
	tn := c.tenant("acme")
	top := c.topic(tn, "orphan", 1, nil)
	leader, _ := c.leader(top.ID, 0)
	survivor := (leader + 1) % 3
	publishTo(c, tn, survivor, "orphan", 0, 0, 1)
	for i := range 3 {
		if i != survivor {
			c.kill(i)
		}
	}
	req := publishReq{Messages: []msg{{Value: []byte("x"), Partition: ptr(int32(0))}}}
	for _, tc := range []struct {
		name string
		call func() (int, []byte)
	}{
		{"publish", func() (int, []byte) {
			return c.call(survivor, http.MethodPost, publishPath("orphan"), tn.KeyID, tn.Secret, req)
		}},
		{"read", func() (int, []byte) {
			return c.call(survivor, http.MethodGet, readPath("orphan", 0, "offset=0"), tn.KeyID, tn.Secret, nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			waitFor(t, "not_enough_replicas from the survivor", func() bool {
				s, raw := tc.call()
				if s == http.StatusOK {
					t.Fatalf("%s without a majority succeeded: %s", tc.name, raw)
				}
				e := decodeError(t, raw)
				switch e.Code {
				case string(catalog.NotEnoughReplicas.Code):
					if s != http.StatusServiceUnavailable || !e.Retriable {
						t.Fatalf("%s: %d %s, want a retriable 503", tc.name, s, raw)
					}
					return true
				case string(catalog.NotLeader.Code):
					return false
				}
				t.Fatalf("%s without a majority: %d %s, want not_enough_replicas", tc.name, s, raw)
				return false
			})
		})
	}
}
