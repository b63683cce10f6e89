package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
)

// TestAdminMoves: an operator starts, watches and cancels a replica move
// and drains a broker with tenantd admin alone, against a real control
// plane fed real cell reports; bad input is refused before or by the
// control plane with an error naming what is wrong.
func TestAdminMoves(t *testing.T) {
	ctx := context.Background()
	hs, id, secret, mailDir := adminControlPlane(t)
	run, mustRun := adminCommands(ctx, t, hs.URL, id, secret)
	op := client.New(hs.URL, client.WithAPIKey(id, secret))
	cptest.SeedFleet(t, op, cptest.Brokers{})
	res, err := cptest.SignUp(ctx, client.New(hs.URL), mailDir, api.SignupRequest{TenantName: "movers", Email: "movers@example.com", Password: "password-movers-1"})
	if err != nil {
		t.Fatal(err)
	}
	owner := client.New(hs.URL, client.WithSession(res.Session.Token))
	if _, err := owner.CreateTopic(ctx, api.CreateTopicRequest{Name: "orders", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	mustRun("brokers", "create", "cell-1-b4", "-cell", cptest.Cell, "-node-id", "4")
	k, err := op.AdminCreateCellKey(ctx, cptest.Cell)
	if err != nil {
		t.Fatal(err)
	}
	cell := client.New(hs.URL, client.WithAPIKey(k.ID, k.Secret))
	report := func(broker string, parts ...wire.PartitionStatus) {
		t.Helper()
		if parts == nil {
			parts = []wire.PartitionStatus{}
		}
		if err := cell.CellReport(ctx, cptest.Cell, wire.Report{Version: wire.Version, BrokerID: broker, Partitions: parts}); err != nil {
			t.Fatalf("report of %s: %v", broker, err)
		}
	}
	for _, b := range []string{"cell-1-b1", "cell-1-b2", "cell-1-b3", "cell-1-b4"} {
		report(b)
	}
	st, _, err := cell.CellState(ctx, cptest.Cell, -1, 0)
	if err != nil || len(st.Topics) != 1 {
		t.Fatalf("cell state: %+v, %v", st, err)
	}
	topic, orig := st.Topics[0].ID, st.Topics[0].Partitions[0].Replicas
	if !slices.Equal(orig, []int{1, 2, 3}) {
		t.Fatalf("partition 0 placed on %v, want 1,2,3", orig)
	}

	out := mustRun("moves", "start", "-topic", topic, "-partition", "0", "-replicas", "1, 2,4")
	if !regexp.MustCompile(`(?m)^state\s+running$`).MatchString(out) || !regexp.MustCompile(`(?m)^target\s+1, 2, 4$`).MatchString(out) {
		t.Fatalf("moves start:\n%s", out)
	}
	report("cell-1-b1", wire.PartitionStatus{TopicID: topic, Partition: 0, LeaderNode: 1, Voters: orig, Nonvoters: []int{4},
		Joining: []wire.JoinStatus{{Node: 4, BytesBehind: 2048, EntriesBehind: 3}}})
	row := regexp.MustCompile(`(?m)^1\s+cell-1\s+orders \(` + topic + `\)\s+0\s+running\s+1,2,3\s+1,2,4\s+2\.0 KiB\s+-\s+-$`)
	if out := mustRun("moves", "list"); !row.MatchString(out) {
		t.Fatalf("moves list:\n%s", out)
	}
	if out := mustRun("moves", "show", "1"); !regexp.MustCompile(`(?m)^bytes_remaining\s+2048$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^nonvoters\s+4$`).MatchString(out) {
		t.Fatalf("moves show:\n%s", out)
	}

	// -watch refreshes until interrupted.
	wctx, cancel := context.WithCancel(ctx)
	var wout testkit.LogBuffer
	done := make(chan error, 1)
	go func() {
		done <- admin(wctx, []string{"moves", "list", "-state", "running", "-watch", "-interval", "100ms"}, &wout, adminEnv(hs.URL, id, secret))
	}()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(wout.String(), " 1 moves\n") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("moves list -watch did not refresh twice:\n%s", wout.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("moves list -watch after interruption: %v", err)
	}

	if out := mustRun("moves", "cancel", "1"); !regexp.MustCompile(`(?m)^state\s+cancelling$`).MatchString(out) {
		t.Fatalf("moves cancel:\n%s", out)
	}
	report("cell-1-b1", wire.PartitionStatus{TopicID: topic, Partition: 0, LeaderNode: 1, Voters: orig})
	if out := mustRun("moves", "list", "-state", "cancelled", "-broker", "cell-1-b4"); !strings.Contains(out, "cancelled") {
		t.Fatalf("moves list -state cancelled:\n%s", out)
	}

	// Node 3 holds both partitions of the topic and all 8 offsets
	// partitions.
	out = mustRun("brokers", "drain", "cell-1-b3")
	if !strings.HasPrefix(out, "broker cell-1-b3 is draining; 10 moves started\n") || strings.Count(out, "drain of broker cell-1-b3") != 10 ||
		!regexp.MustCompile(`(?m)^\d+\s+cell-1\s+__offsets\s+7\s+running\s+2,3,1\s+2,4,1\s`).MatchString(out) {
		t.Fatalf("brokers drain:\n%s", out)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"start without topic", []string{"moves", "start", "-partition", "0", "-replicas", "1,2,4"}, "-topic is required"},
		{"start without partition", []string{"moves", "start", "-topic", topic, "-replicas", "1,2,4"}, "-partition is required"},
		{"start bad replicas", []string{"moves", "start", "-topic", topic, "-partition", "1", "-replicas", "1,x"}, `-replicas "1,x"`},
		{"start too few", []string{"moves", "start", "-topic", topic, "-partition", "1", "-replicas", "1,4"}, "invalid_replication_factor"},
		{"start a moving partition", []string{"moves", "start", "-topic", topic, "-partition", "1", "-replicas", "1,2,4"}, "already_exists"},
		{"offsets without cell", []string{"moves", "start", "-topic", "__offsets", "-partition", "0", "-replicas", "1,2,4"}, "cell_id is required"},
		{"show bad id", []string{"moves", "show", "abc"}, `MOVE_ID "abc" is not a move id`},
		{"show unknown", []string{"moves", "show", "99"}, "no such move"},
		{"cancel finished", []string{"moves", "cancel", "1"}, "only a running move can be cancelled"},
		{"list bad state", []string{"moves", "list", "-state", "done"}, `-state "done"`},
		{"drain unknown", []string{"brokers", "drain", "cell-1-b9"}, "no such broker"},
		{"delete a move's target", []string{"brokers", "delete", "cell-1-b4"}, "invalid_request"},
		{"delete a broker with replicas", []string{"brokers", "delete", "cell-1-b3"}, "move them first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("admin %v: %v\n%s\nwant an error containing %q", tc.args, err, out, tc.want)
			}
		})
	}
	var help bytes.Buffer
	if err := admin(ctx, []string{"moves", "start", "-h"}, &help, func(string) string { return "" }); err != nil ||
		!strings.Contains(help.String(), "moves start [-cell C] -topic TOPIC_ID|__offsets -partition N -replicas") {
		t.Errorf("moves start -h: %v\n%s", err, help.String())
	}
}

// TestAdminMovesFailed: a failed move shows its failure in moves show and
// moves list, and moves cancel rolls it back.
func TestAdminMovesFailed(t *testing.T) {
	ctx := context.Background()
	hs, id, secret, mailDir := adminControlPlane(t)
	_, mustRun := adminCommands(ctx, t, hs.URL, id, secret)
	op := client.New(hs.URL, client.WithAPIKey(id, secret))
	cptest.SeedFleet(t, op, cptest.Brokers{})
	res, err := cptest.SignUp(ctx, client.New(hs.URL), mailDir, api.SignupRequest{TenantName: "failers", Email: "failers@example.com", Password: "password-failers-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(hs.URL, client.WithSession(res.Session.Token)).CreateTopic(ctx, api.CreateTopicRequest{Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	mustRun("brokers", "create", "cell-1-b4", "-cell", cptest.Cell, "-node-id", "4")
	k, err := op.AdminCreateCellKey(ctx, cptest.Cell)
	if err != nil {
		t.Fatal(err)
	}
	cell := client.New(hs.URL, client.WithAPIKey(k.ID, k.Secret))
	report := func(broker string) {
		t.Helper()
		if err := cell.CellReport(ctx, cptest.Cell, wire.Report{Version: wire.Version, BrokerID: broker, Partitions: []wire.PartitionStatus{}}); err != nil {
			t.Fatalf("report of %s: %v", broker, err)
		}
	}
	for _, b := range []string{"cell-1-b1", "cell-1-b2", "cell-1-b3", "cell-1-b4"} {
		report(b)
	}
	st, _, err := cell.CellState(ctx, cptest.Cell, -1, 0)
	if err != nil || len(st.Topics) != 1 {
		t.Fatalf("cell state: %+v, %v", st, err)
	}
	topic := st.Topics[0].ID
	mustRun("moves", "start", "-topic", topic, "-partition", "0", "-replicas", "1,2,4")
	mustRun("brokers", "update", "cell-1-b4", "-status", "offline")
	report("cell-1-b1")
	const why = "broker cell-1-b4 (node 4), a new replica, is offline"
	if out := mustRun("moves", "show", "1"); !regexp.MustCompile(`(?m)^state\s+failed$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^failure\s+`+regexp.QuoteMeta(why)+`$`).MatchString(out) {
		t.Fatalf("moves show:\n%s", out)
	}
	if out := mustRun("moves", "list", "-state", "failed"); !regexp.MustCompile(`(?m)^1\s+cell-1\s+orders \(` + topic + `\)\s+0\s+failed\s+1,2,3\s+1,2,4\s+.*failed: ` + regexp.QuoteMeta(why) + `$`).MatchString(out) {
		t.Fatalf("moves list:\n%s", out)
	}
	if out := mustRun("moves", "cancel", "1"); !regexp.MustCompile(`(?m)^state\s+cancelling$`).MatchString(out) {
		t.Fatalf("moves cancel:\n%s", out)
	}
}
