package main

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
)

// TestAdminTenantMoves: an operator moves a tenant to a dedicated pool,
// watches it, lists, shows and cancels moves with tenantd admin alone,
// against a real control plane fed the two cells' reports; bad input is
// refused with an error naming what is wrong.
func TestAdminTenantMoves(t *testing.T) {
	ctx := context.Background()
	m := startMoveCell(ctx, t, "travellers", 0)
	run, mustRun := m.run, m.mustRun
	tid := tenantOfTopic(t, m)
	mustRun("pools", "create", "dedicated-1", "-kind", "dedicated")
	mustRun("cells", "create", "cell-2", "-pool", "dedicated-1")
	cells := map[string]*client.Client{cptest.Cell: m.cell}
	k, err := m.cp.Operator.AdminCreateCellKey(ctx, "cell-2")
	if err != nil {
		t.Fatal(err)
	}
	cells["cell-2"] = client.New(m.cp.URL, client.WithAPIKey(k.ID, k.Secret))
	send := func(cell string, r wire.Report) {
		t.Helper()
		r.Version, r.Moves = wire.Version, true
		if r.Partitions == nil {
			r.Partitions = []wire.PartitionStatus{}
		}
		if err := cells[cell].CellReport(ctx, cell, r); err != nil {
			t.Fatalf("report of %s: %v", r.BrokerID, err)
		}
	}
	for _, cell := range []string{cptest.Cell, "cell-2"} {
		ca := testkit.PeerCAPEM(t, cell)
		brokers := []string{cell + "-b1", cell + "-b2", cell + "-b3"}
		if cell == cptest.Cell {
			brokers = append(brokers, "cell-1-b4")
		}
		for i, b := range brokers {
			r := wire.Registration{NodeID: i + 1, RaftAddr: fmt.Sprintf("%s:7000", b), PeerCA: ca}
			if err := cells[cell].Do(ctx, http.MethodPut, "/internal/v1/cells/"+cell+"/brokers/"+b, r, nil); err != nil {
				t.Fatalf("register %s: %v", b, err)
			}
			send(cell, wire.Report{BrokerID: b})
		}
	}
	leads := func(cell string, ms wire.MirrorStatus) {
		t.Helper()
		send(cell, wire.Report{BrokerID: cell + "-b1", Partitions: []wire.PartitionStatus{
			{TopicID: m.topic, Partition: 0, LeaderNode: 1, Voters: []int{1, 2, 3}, Mirror: &ms}}})
	}

	out := mustRun("tenants", "move", tid, "-pool", "dedicated-1", "-rate", "2097152")
	if !regexp.MustCompile(`(?m)^bytes_per_sec\s+2097152$`).MatchString(out) || !regexp.MustCompile(`(?m)^partition_bytes_per_sec\s+2097152$`).MatchString(out) {
		t.Fatalf("tenants move -rate:\n%s", out)
	}
	if out := mustRun("tenants", "moves", "rate", "1", "1048576"); !regexp.MustCompile(`(?m)^bytes_per_sec\s+1048576$`).MatchString(out) {
		t.Fatalf("tenants moves rate:\n%s", out)
	}
	if mv, err := m.cp.Operator.AdminTenantMove(ctx, 1); err != nil || mv.BytesPerSec != 1<<20 {
		t.Fatalf("after tenants moves rate the move is %+v (%v)", mv, err)
	}
	if !regexp.MustCompile(`(?m)^state\s+mirroring$`).MatchString(out) || !regexp.MustCompile(`(?m)^dest_cell_id\s+cell-2$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^orders \(`+m.topic+`\)\s+0\s+\d,\d,\d\s+false\s+-\s+-\s+false\s+false\s+-$`).MatchString(out) {
		t.Fatalf("tenants move:\n%s", out)
	}
	leads("cell-2", wire.MirrorStatus{Mirroring: true, Lag: new(int64(5000)), BytesPerSec: 1 << 20})
	if out := mustRun("tenants", "moves", "show", "1"); !regexp.MustCompile(`(?m)\s+true\s+5000\s+1048576\s+false\s+false\s+-$`).MatchString(out) ||
		!strings.Contains(out, "not yet mirroring within 1000 offsets") {
		t.Fatalf("tenants moves show:\n%s", out)
	}
	row := regexp.MustCompile(`(?m)^1\s+` + tid + `\s+cell-1\s+cell-2\s+dedicated-1\s+mirroring\s+1\s+\S+\s+1 of 1 destination`)
	if out := mustRun("tenants", "moves", "list", "-tenant", tid); !row.MatchString(out) {
		t.Fatalf("tenants moves list:\n%s", out)
	}
	leads("cell-2", wire.MirrorStatus{Mirroring: true, Lag: new(int64(3))})
	if out := mustRun("tenants", "moves", "cancel", "1"); !regexp.MustCompile(`(?m)^state\s+cancelled$`).MatchString(out) {
		t.Fatalf("tenants moves cancel:\n%s", out)
	}

	// A second move, followed with -watch (and --pool, as the runbook
	// writes it) through every state to done.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wout testkit.LogBuffer
	done := make(chan error, 1)
	go func() {
		done <- admin(wctx, []string{"tenants", "move", tid, "--pool", "dedicated-1", "-watch", "-interval", "100ms"}, &wout,
			adminEnv(m.cp.URL, m.cp.OperatorKeyID, m.cp.OperatorSecret))
	}()
	waitLine := func(state string) {
		t.Helper()
		testkit.WaitForState(t, 20*time.Second, "tenants move -watch to print "+state, func() (bool, string) {
			out := wout.String()
			return strings.Contains(out, ": "+state+";"), out
		})
	}
	waitLine("mirroring")
	leads("cell-2", wire.MirrorStatus{Mirroring: true, Lag: new(int64(0))})
	waitLine("fencing")
	leads(cptest.Cell, wire.MirrorStatus{Fenced: true, FencedEnd: 9})
	waitLine("promoting")
	leads("cell-2", wire.MirrorStatus{Promoted: true})
	waitLine("switching")
	if out, err := run("tenants", "moves", "cancel", "2"); err == nil || !strings.Contains(err.Error(), "a move back is a new move") {
		t.Fatalf("cancel after promoting: %v\n%s", err, out)
	}
	mv, err := m.cp.Operator.AdminTenantMove(ctx, 2)
	if err != nil || mv.SwitchVersion == nil {
		t.Fatalf("move 2: %+v, %v", mv, err)
	}
	for _, b := range []string{"cell-1-b1", "cell-1-b2", "cell-1-b3", "cell-1-b4"} {
		send(cptest.Cell, wire.Report{BrokerID: b, StateVersion: *mv.SwitchVersion})
	}
	waitLine("offsets")
	send("cell-2", wire.Report{BrokerID: "cell-2-b1", OffsetsImported: []wire.OffsetsImport{{TenantID: tid, Partitions: []int{0, 1, 2, 3, 4, 5, 6, 7}}}})
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("tenants move -watch: %v\n%s", err, wout.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("tenants move -watch did not end once the move was done:\n%s", wout.String())
	}
	if !strings.Contains(wout.String(), ": done; max lag 0, 1/1 fenced, 1/1 promoted") {
		t.Fatalf("tenants move -watch:\n%s", wout.String())
	}
	if out := mustRun("tenants", "show", tid); !regexp.MustCompile(`(?m)^home_cell_id\s+cell-2$`).MatchString(out) {
		t.Fatalf("tenants show after the move:\n%s", out)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"move without pool", []string{"tenants", "move", tid}, "-pool is required"},
		{"move without tenant", []string{"tenants", "move", "-pool", "x"}, "TENANT_ID comes before any flags"},
		{"move to its own pool", []string{"tenants", "move", tid, "-pool", "dedicated-1"}, "is already on pool dedicated-1"},
		{"move unknown pool", []string{"tenants", "move", tid, "-pool", "nowhere"}, `no such pool "nowhere"`},
		{"move at a negative rate", []string{"tenants", "move", tid, "-pool", "shared-1", "-rate", "-5"}, "-rate -5 is negative"},
		{"moves without a command", []string{"tenants", "moves"}, "name list, show, rate or cancel"},
		{"rate without a rate", []string{"tenants", "moves", "rate", "2"}, "BYTES_PER_SEC is required"},
		{"rate negative", []string{"tenants", "moves", "rate", "2", "-1"}, `BYTES_PER_SEC "-1" is not a rate`},
		{"rate not a number", []string{"tenants", "moves", "rate", "2", "8MiB"}, `BYTES_PER_SEC "8MiB" is not a rate`},
		{"rate of a done move", []string{"tenants", "moves", "rate", "2", "0"}, "is done; its rate can no longer change"},
		{"rate unknown move", []string{"tenants", "moves", "rate", "99", "0"}, "no such tenant move"},
		{"moves unknown command", []string{"tenants", "moves", "start"}, "unknown command"},
		{"show bad id", []string{"tenants", "moves", "show", "x"}, `MOVE_ID "x" is not a tenant move id`},
		{"show unknown", []string{"tenants", "moves", "show", "99"}, "no such tenant move"},
		{"cancel done", []string{"tenants", "moves", "cancel", "2"}, "is done"},
		{"list bad state", []string{"tenants", "moves", "list", "-state", "moving"}, `-state "moving"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("admin %v: %v\n%s\nwant an error containing %q", tc.args, err, out, tc.want)
			}
		})
	}
}

// tenantOfTopic is the id of the tenant owning m's topic.
func tenantOfTopic(t *testing.T, m *moveCell) string {
	t.Helper()
	var id string
	if err := m.cp.DB.QueryRow(m.ctx, `SELECT tenant_id FROM topics WHERE id = $1`, m.topic).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
