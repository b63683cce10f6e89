package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestBrokerIdentityConfig: a broker's node id comes from -node-id,
// SLUICE_NODE_ID or a StatefulSet's SLUICE_POD_INDEX (index+1);
// -peer-cert-dir names its certificate files by node id; registering needs
// all three advertised addresses, and advertised addresses need a node id.
func TestBrokerIdentityConfig(t *testing.T) {
	base := []string{"-cell", "c", "-broker-id", "b", "-api", "http://cp", "-cell-key", "k:s"}
	adv := []string{"-kafka-advertise", "b.c:9092", "-http-advertise", "b.c:8090", "-raft-advertise", "b.c:7000"}
	for _, tc := range []struct {
		name     string
		args     []string
		env      map[string]string
		wantNode int
		wantErr  string
	}{
		{"pod index", append(append([]string{"-peer-cert-dir", "/p"}, adv...), base...), map[string]string{"SLUICE_POD_INDEX": "2"}, 3, ""},
		{"node id env wins over pod index", append(append([]string{"-peer-cert-dir", "/p"}, adv...), base...), map[string]string{"SLUICE_POD_INDEX": "2", "SLUICE_NODE_ID": "7"}, 7, ""},
		{"flag wins", append(append([]string{"-peer-cert-dir", "/p", "-node-id", "5"}, adv...), base...), map[string]string{"SLUICE_NODE_ID": "7"}, 5, ""},
		{"bad pod index", append(append([]string{"-peer-cert-dir", "/p"}, adv...), base...), map[string]string{"SLUICE_POD_INDEX": "x"}, 0, "SLUICE_POD_INDEX"},
		{"registration without addresses", append([]string{"-peer-cert-dir", "/p", "-node-id", "1"}, base...), nil, 0, "give -kafka-advertise, -http-advertise and -raft-advertise"},
		{"addresses without node id", append(append([]string{"-peer-ca-file", "a", "-peer-cert-file", "b", "-peer-key-file", "c"}, adv...), base...), nil, 0, "give it too"},
		{"cert dir without node id", append([]string{"-peer-cert-dir", "/p"}, base...), nil, 0, "-peer-cert-dir names files by node id"},
		{"bad advertise", append([]string{"-peer-cert-dir", "/p", "-node-id", "1", "-kafka-advertise", "nohostport", "-http-advertise", "b:1", "-raft-advertise", "b:2"}, base...), nil, 0, "not host:port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadConfig("broker", tc.args, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.NodeID != tc.wantNode {
				t.Fatalf("node id %d, want %d", cfg.NodeID, tc.wantNode)
			}
			n := strconv.Itoa(tc.wantNode)
			if cfg.PeerCAFile != filepath.Join("/p", "ca.pem") || cfg.PeerCertFile != filepath.Join("/p", "node-"+n+".pem") || cfg.PeerKeyFile != filepath.Join("/p", "node-"+n+"-key.pem") {
				t.Fatalf("peer files %q %q %q", cfg.PeerCAFile, cfg.PeerCertFile, cfg.PeerKeyFile)
			}
			bc := brokerConfigOf(cfg)
			if bc.Register.NodeID != tc.wantNode || bc.Register.KafkaAddr != "b.c:9092" || bc.Register.RaftAddr != "b.c:7000" {
				t.Fatalf("registration %+v", bc.Register)
			}
		})
	}
}
