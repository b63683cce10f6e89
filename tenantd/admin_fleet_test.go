package main

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
)

// TestAdminFleet: an operator builds a cell with tenantd admin alone (pool,
// cell, cell key, brokers with their addresses) against a real control
// plane; bad input gets an error naming what is wrong and changes nothing;
// without a control plane URL it says so instead of guessing one.
func TestAdminFleet(t *testing.T) {
	ctx := context.Background()
	hs, id, secret, _ := adminControlPlane(t)
	run, mustRun := adminCommands(ctx, t, hs.URL, id, secret)

	mustRun("pools", "create", "eu-shared", "-kind", "shared", "-description", "shared pool")
	mustRun("cells", "create", "eu-1", "-pool", "eu-shared")
	key := strings.TrimSpace(mustRun("cells", "key", "eu-1"))
	if !regexp.MustCompile(`^[^:\s]+:[^:\s]+$`).MatchString(key) {
		t.Fatalf("cells key printed %q, want id:secret", key)
	}
	for _, n := range []string{"1", "2", "3"} {
		mustRun("brokers", "create", "eu-1-b"+n, "-cell", "eu-1", "-node-id", n,
			"-kafka-addr", "kafka-"+n+".test:9092", "-http-addr", "http-"+n+".test:8090", "-raft-addr", "raft-"+n+".test:7000")
	}
	mustRun("brokers", "update", "eu-1-b3", "-kafka-addr", "kafka-3b.test:9092")

	// The cell key works for the brokers' own API: the cell state lists
	// the three brokers with the addresses given.
	kid, ksecret, _ := strings.Cut(key, ":")
	cell := client.New(hs.URL, client.WithAPIKey(kid, ksecret))
	st, _, err := cell.CellState(ctx, "eu-1", -1, 0)
	if err != nil {
		t.Fatalf("cell state with the new cell key: %v", err)
	}
	got := map[string]string{}
	for _, b := range st.Brokers {
		got[b.ID] = b.KafkaAddr + " " + b.HTTPAddr + " " + b.RaftAddr
	}
	want := map[string]string{
		"eu-1-b1": "kafka-1.test:9092 http-1.test:8090 raft-1.test:7000",
		"eu-1-b2": "kafka-2.test:9092 http-2.test:8090 raft-2.test:7000",
		"eu-1-b3": "kafka-3b.test:9092 http-3.test:8090 raft-3.test:7000",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("cell state broker %s = %q, want %q", k, got[k], v)
		}
	}
	if out := mustRun("cells", "list"); !regexp.MustCompile(`(?m)^eu-1\s+eu-shared\s+active\s+0\s+0\s+3\s`).MatchString(out) {
		t.Errorf("cells list:\n%s", out)
	}
	if out := mustRun("pools", "list"); !regexp.MustCompile(`(?m)^eu-shared\s+shared\s+1\s+shared pool$`).MatchString(out) {
		t.Errorf("pools list:\n%s", out)
	}
	before := mustRun("-o", "json", "brokers", "list")

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"pool kind", []string{"pools", "create", "p2", "-kind", "big"}, `-kind "big": want shared or dedicated`},
		{"pool id", []string{"pools", "create", "P_2", "-kind", "shared"}, `pool id "P_2"`},
		{"pool exists", []string{"pools", "create", "eu-shared", "-kind", "dedicated"}, "already_exists"},
		{"cell without pool", []string{"cells", "create", "eu-2"}, "-pool is required"},
		{"cell of no pool", []string{"cells", "create", "eu-2", "-pool", "nope"}, "no such pool"},
		{"key of no cell", []string{"cells", "key", "nope"}, "no such cell"},
		{"broker node id", []string{"brokers", "create", "eu-1-b4", "-cell", "eu-1", "-node-id", "0"}, "-node-id 0: want 1 to 1048576"},
		{"broker address", []string{"brokers", "create", "eu-1-b4", "-cell", "eu-1", "-node-id", "4", "-kafka-addr", "nohost"}, `-kafka-addr "nohost" is not host:port`},
		{"broker node taken", []string{"brokers", "create", "eu-1-b4", "-cell", "eu-1", "-node-id", "2"}, "already_exists"},
		{"broker without cell", []string{"brokers", "create", "eu-1-b4", "-node-id", "4"}, "-cell is required"},
		{"broker flag first", []string{"brokers", "create", "-cell", "eu-1"}, "BROKER_ID comes before any flags"},
		{"update nothing", []string{"brokers", "update", "eu-1-b1"}, "give at least one of"},
		{"update status", []string{"brokers", "update", "eu-1-b1", "-status", "gone"}, `-status "gone"`},
		{"update no broker", []string{"brokers", "update", "eu-1-b9", "-status", "offline"}, "no such broker"},
		{"stray argument", []string{"cells", "create", "eu-2", "-pool", "eu-shared", "extra"}, "unexpected arguments extra"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("admin %v: %v\n%s\nwant an error containing %q", tc.args, err, out, tc.want)
			}
		})
	}
	if after := mustRun("-o", "json", "brokers", "list"); after != before {
		t.Errorf("bad input changed the brokers:\nbefore %s\nafter %s", before, after)
	}
	var cells []api.Cell
	if err := json.Unmarshal([]byte(mustRun("-o", "json", "cells", "list")), &cells); err != nil || len(cells) != 1 {
		t.Errorf("bad input changed the cells: %v %+v", err, cells)
	}

	noURL, _ := adminCommands(ctx, t, "", id, secret)
	if _, err := noURL("pools", "list"); err == nil || !strings.Contains(err.Error(), "SLUICE_ENDPOINT or -api") {
		t.Errorf("admin without a control plane URL: %v", err)
	}
	wantHelp(ctx, t, "brokers create BROKER_ID -cell CELL_ID -node-id N", "brokers", "create", "-h")
}

// TestRegisterBroker: a broker registers itself with its cell key (the
// StatefulSet way): a new broker id is added, the same id and node id
// updates its addresses and bumps the cell state only when they change,
// another node id under the same broker id and another cell's broker are
// refused.
func TestRegisterBroker(t *testing.T) {
	ctx := context.Background()
	hs, id, secret, _ := adminControlPlane(t)
	op := client.New(hs.URL, client.WithAPIKey(id, secret))
	for _, c := range []string{"c1", "c2"} {
		if _, err := op.AdminCreatePool(ctx, api.CreatePoolRequest{ID: "p-" + c, Kind: "shared"}); err != nil {
			t.Fatal(err)
		}
		if _, err := op.AdminCreateCell(ctx, api.CreateCellRequest{ID: c, PoolID: "p-" + c}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := op.AdminCreateBroker(ctx, api.CreateBrokerRequest{ID: "c2-b1", CellID: "c2", NodeID: 1}); err != nil {
		t.Fatal(err)
	}
	k, err := op.AdminCreateCellKey(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	cell := client.New(hs.URL, client.WithAPIKey(k.ID, k.Secret))
	register := func(broker string, r wire.Registration) (api.Broker, error) {
		var b api.Broker
		err := cell.Do(ctx, http.MethodPut, "/internal/v1/cells/c1/brokers/"+broker, r, &b)
		return b, err
	}
	version := func() int64 {
		st, _, err := cell.CellState(ctx, "c1", -1, 0)
		if err != nil {
			t.Fatal(err)
		}
		return st.StateVersion
	}
	r := wire.Registration{NodeID: 1, KafkaAddr: "c1-0.c1.ns.svc:9092", HTTPAddr: "c1-0.c1.ns.svc:8090", RaftAddr: "c1-0.c1.ns.svc:7000"}
	if b, err := register("c1-0", r); err != nil || b.NodeID != 1 || b.KafkaAddr != r.KafkaAddr || b.RaftAddr != r.RaftAddr {
		t.Fatalf("register a new broker: %+v, %v", b, err)
	}
	v1 := version()
	if _, err := register("c1-0", r); err != nil || version() != v1 {
		t.Fatalf("the same registration again: %v; state version %d, want %d", err, version(), v1)
	}
	r.KafkaAddr = "10.0.0.9:9092"
	if b, err := register("c1-0", r); err != nil || b.KafkaAddr != r.KafkaAddr || version() <= v1 {
		t.Fatalf("a new address: %+v, %v, version %d after %d", b, err, version(), v1)
	}
	for _, tc := range []struct {
		name, broker string
		r            wire.Registration
		code         string
	}{
		{"other node id", "c1-0", wire.Registration{NodeID: 2}, "already_exists"},
		{"node id taken", "c1-1", wire.Registration{NodeID: 1}, "already_exists"},
		{"other cell's broker", "c2-b1", wire.Registration{NodeID: 1}, "permission_denied"},
		{"no node id", "c1-1", wire.Registration{}, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := register(tc.broker, tc.r); !client.IsCode(err, tc.code) {
				t.Fatalf("register %s %+v: %v, want %s", tc.broker, tc.r, err, tc.code)
			}
		})
	}
	bs, err := op.AdminBrokers(ctx)
	if err != nil || len(bs) != 2 {
		t.Fatalf("brokers after the refusals: %+v, %v", bs, err)
	}
}
