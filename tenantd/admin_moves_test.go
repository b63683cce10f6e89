package main

import (
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
	m := startMoveCell(ctx, t, "movers", 2)
	run, mustRun, report, topic, orig := m.run, m.mustRun, m.report, m.topic, m.orig
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
		done <- admin(wctx, []string{"moves", "list", "-state", "running", "-watch", "-interval", "100ms"}, &wout, adminEnv(m.cp.URL, m.cp.OperatorKeyID, m.cp.OperatorSecret))
	}()
	testkit.WaitForState(t, 20*time.Second, "moves list -watch to refresh twice", func() (bool, string) {
		out := wout.String()
		return strings.Count(out, " 1 moves\n") >= 2, out
	})
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
	wantHelp(ctx, t, "moves start [-cell C] -topic TOPIC_ID|__offsets -partition N -replicas", "moves", "start", "-h")
}

// TestAdminMovesFailed: a failed move shows its failure in moves show and
// moves list, and moves cancel rolls it back.
func TestAdminMovesFailed(t *testing.T) {
	ctx := context.Background()
	m := startMoveCell(ctx, t, "failers", 0)
	mustRun, report, topic := m.mustRun, m.report, m.topic
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

// moveCell is tenantd admin against a control plane with the fleet seeded
// and a fourth broker cell-1-b4 created through it, a tenant's topic
// "orders", and every broker reported once with no partitions.
type moveCell struct {
	cp      *cptest.Env
	run     func(...string) (string, error)
	mustRun func(...string) string
	cell    *client.Client // with a key of the cell
	topic   string         // the id of "orders"
	orig    []int          // the replicas of its partition 0
	ctx     context.Context
	t       *testing.T
}

// startMoveCell starts a moveCell whose tenant is name, with partitions
// partitions of "orders" (the default when 0).
func startMoveCell(ctx context.Context, t *testing.T, name string, partitions int) *moveCell {
	t.Helper()
	cp, id, secret, mailDir := adminControlPlane(t)
	m := &moveCell{cp: cp, ctx: ctx, t: t}
	m.run, m.mustRun = adminCommands(ctx, t, cp.URL, id, secret)
	cptest.SeedFleet(t, cp.Operator, cptest.Brokers{})
	res, err := cptest.SignUp(ctx, cp.Anon, mailDir, api.SignupRequest{TenantName: name, Email: name + "@example.com", Password: "password-" + name + "-1"})
	if err != nil {
		t.Fatal(err)
	}
	owner := client.New(cp.URL, client.WithSession(res.Session.Token))
	if _, err := owner.CreateTopic(ctx, api.CreateTopicRequest{Name: "orders", Partitions: partitions}); err != nil {
		t.Fatal(err)
	}
	m.mustRun("brokers", "create", "cell-1-b4", "-cell", cptest.Cell, "-node-id", "4")
	k, err := cp.Operator.AdminCreateCellKey(ctx, cptest.Cell)
	if err != nil {
		t.Fatal(err)
	}
	m.cell = client.New(cp.URL, client.WithAPIKey(k.ID, k.Secret))
	for _, b := range []string{"cell-1-b1", "cell-1-b2", "cell-1-b3", "cell-1-b4"} {
		m.report(b)
	}
	st, _, err := m.cell.CellState(ctx, cptest.Cell, -1, 0)
	if err != nil || len(st.Topics) != 1 {
		t.Fatalf("cell state: %+v, %v", st, err)
	}
	m.topic, m.orig = st.Topics[0].ID, st.Topics[0].Partitions[0].Replicas
	return m
}

// report sends broker's cell report with these partitions (none if none
// are given).
func (m *moveCell) report(broker string, parts ...wire.PartitionStatus) {
	m.t.Helper()
	if parts == nil {
		parts = []wire.PartitionStatus{}
	}
	if err := m.cell.CellReport(m.ctx, cptest.Cell, wire.Report{Version: wire.Version, BrokerID: broker, Partitions: parts}); err != nil {
		m.t.Fatalf("report of %s: %v", broker, err)
	}
}
