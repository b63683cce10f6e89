package cellview

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/credential"
	"github.com/sluicehq/sluice/contract/wire"
)

// FuzzLoadCache feeds arbitrary bytes to a broker as its cached cell state
// (cell-state.json, read at start before the control plane answers), which
// is also the wire form of the control plane's long-poll answer.
//
// Invariants:
//   - New never fails and never panics on a damaged cache: the control
//     plane has the truth, so the broker starts with an empty view instead;
//   - whatever view it loads answers every lookup (tenants, topics, keys
//     and their SCRAM credentials, ACLs, brokers) without panicking;
//   - a view loaded from the cache carries the cache's state version.
func FuzzLoadCache(f *testing.F) {
	id, secret := credential.NewAPIKey()
	st := wire.CellState{Version: wire.Version, Cell: "c1", StateVersion: 9,
		Brokers: []wire.Broker{{ID: "b1", NodeID: 1, KafkaAddr: "127.0.0.1:9092", RaftAddr: "127.0.0.1:7001", Status: "active"}},
		Tenants: []wire.Tenant{{ID: "t1", Name: "acme", Status: "active", Plan: "free", Quotas: wire.Quotas{ProduceBytesPerSec: 1 << 20}}},
		Keys:    []wire.Key{{ID: id, TenantID: "t1", Role: "admin", SecretHash: credential.HashSecret(secret)}},
		ACLs: []wire.ACL{{TenantID: "t1", Principal: id, ResourceType: "topic", ResourceName: "ord",
			PatternType: "prefixed", Operation: "write", Permission: "allow"}},
		Topics: []wire.Topic{{ID: "tp1", TenantID: "t1", Name: "orders", Config: map[string]string{"retention.ms": "1000"},
			Partitions: []wire.Partition{{Partition: 0, Replicas: []int{1, 2, 3}}}}},
	}
	good, _ := json.Marshal(st)
	f.Add(good, id, secret)
	f.Add(good[:len(good)/2], id, "wrong")
	f.Add([]byte(`{"keys":[{"id":"k","tenant_id":"nobody","secret_hash":null}],"acls":[{"tenant_id":"t","operation":"???"}],"tenants":[{"id":"t"}]}`), "k", "")
	f.Add([]byte(`{"topics":[{"id":"x","partitions":[{"partition":-1,"replicas":null}]}],"brokers":[{"node_id":-7}]}`), "", "")
	f.Add([]byte(`null`), "", "")
	file := filepath.Join(f.TempDir(), "cell-state.json") // rewritten by every input
	f.Fuzz(func(t *testing.T, cache []byte, keyID, keySecret string) {
		if err := os.WriteFile(file, cache, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := New(Config{Cell: "c1", CacheFile: file})
		if err != nil {
			t.Fatalf("a damaged cache made New fail: %v", err)
		}
		v := s.View()
		var st wire.CellState
		if json.Unmarshal(cache, &st) == nil && st.StateVersion > 0 && v.StateVersion != st.StateVersion && v.StateVersion != 0 {
			t.Fatalf("view version %d, cache version %d", v.StateVersion, st.StateVersion)
		}
		now := time.Unix(1_800_000_000, 0)
		if p, err := v.Authenticate(keyID, keySecret, now); err == nil {
			_ = v.Valid(p, now)
			for _, op := range []string{"read", "write", "create", "describe"} {
				_ = v.Allowed(p, "topic", "orders", op)
				_ = v.Allowed(p, "group", keySecret, op)
			}
		}
		_, _ = v.ScramCredential(keyID, "SCRAM-SHA-256")
		_, _ = v.AdmitScram(keyID, now)
		for _, tn := range v.Tenants {
			_, _ = v.Tenant(tn.ID)
			_ = v.TenantKeys(tn.ID)
			for _, tp := range v.Topics(tn.ID) {
				_, _ = v.Topic(tn.ID, tp.Name)
				_, _ = v.TopicByID(tp.ID)
			}
		}
		for _, b := range v.Brokers {
			_, _ = v.Broker(b.NodeID)
		}
	})
}
