package console

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
)

// moveSetup is a tenant's one-partition topic on the seeded cell, a
// fourth broker (node 4) added through the cell page's form, and every
// broker live: a cell where a move may start.
type moveSetup struct {
	op       *browser
	cell     *client.Client // the cell's key, to report as brokers do
	topicID  string
	original []int
}

func newMoveSetup(e *env) *moveSetup {
	e.t.Helper()
	dev := e.browser()
	dev.signup("move-co")
	resp, body := dev.post("/topics", url.Values{"name": {"orders"}, "partitions": {"1"}})
	wantStatus(e.t, resp, body, http.StatusSeeOther)
	m := &moveSetup{op: e.opBrowser()}
	if err := e.db.QueryRow(context.Background(), `SELECT t.id, p.replicas FROM topics t JOIN partitions p ON p.topic_id = t.id
		WHERE t.name = 'orders'`).Scan(&m.topicID, &m.original); err != nil {
		e.t.Fatal(err)
	}
	m.op.get("/admin/cells/" + cptest.Cell)
	resp, body = m.op.post("/admin/cells/"+cptest.Cell+"/brokers", url.Values{"id": {"cell-1-b4"}, "node_id": {"4"}})
	wantStatus(e.t, resp, body, http.StatusSeeOther)
	m.cell = e.heartbeat("cell-1-b1", "cell-1-b2", "cell-1-b3", "cell-1-b4")
	return m
}

// leaderReport is the report of the partition's leader (its first
// replica) while node 4 joins, bytesBehind behind it.
func (m *moveSetup) leaderReport(t *testing.T, bytesBehind int64) {
	t.Helper()
	leader := m.original[0]
	err := m.cell.CellReport(context.Background(), cptest.Cell, wire.Report{Version: wire.Version, BrokerID: "cell-1-b" + strconv.Itoa(leader),
		Partitions: []wire.PartitionStatus{{TopicID: m.topicID, Partition: 0, LeaderNode: leader, LeaderEpoch: 2,
			Voters: m.original, Nonvoters: []int{4}, Joining: []wire.JoinStatus{{Node: 4, BytesBehind: bytesBehind, EntriesBehind: 10}}}}})
	if err != nil {
		t.Fatal(err)
	}
}

// An operator starts a move through the form, sees its progress (bytes
// remaining, ETA) from the leader's reports, cancels it with its button,
// and each refusal of the control plane is shown next to the form with
// its message.
func TestMoveForms(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	m := newMoveSetup(e)
	b := m.op

	resp, body := b.get("/admin/moves")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `id="create-move"`, `id="moves-none"`, `id="moves-recent-empty"`, `href="/admin/moves" aria-current="page"`)

	target := []int{m.original[1], m.original[2], 4}
	targetText := strconv.Itoa(target[0]) + ", " + strconv.Itoa(target[1]) + " 4"
	for _, tc := range []struct {
		name   string
		form   url.Values
		status int
		msg    string
	}{
		{"partition not a number", url.Values{"topic_id": {m.topicID}, "partition": {"first"}, "replicas": {targetText}},
			http.StatusUnprocessableEntity, "partition must be a whole number"},
		{"replicas not numbers", url.Values{"topic_id": {m.topicID}, "partition": {"0"}, "replicas": {"b4, b5"}},
			http.StatusUnprocessableEntity, "target replicas must be broker node ids"},
		{"unknown topic", url.Values{"topic_id": {"tp_nope"}, "partition": {"0"}, "replicas": {targetText}},
			http.StatusNotFound, "no topic has id &#34;tp_nope&#34;"},
		{"no such partition", url.Values{"topic_id": {m.topicID}, "partition": {"3"}, "replicas": {targetText}},
			http.StatusNotFound, "has partitions 0 to 0; it has no partition 3"},
		{"too few replicas", url.Values{"topic_id": {m.topicID}, "partition": {"0"}, "replicas": {"4"}},
			http.StatusBadRequest, "has 3 replicas; name exactly 3 broker node ids, not 1"},
		{"unknown node", url.Values{"topic_id": {m.topicID}, "partition": {"0"}, "replicas": {"1, 2, 9"}},
			http.StatusBadRequest, "node 9 is not a broker of cell cell-1"},
		{"same replicas", url.Values{"topic_id": {m.topicID}, "partition": {"0"}, "replicas": {nodes(m.original)}},
			http.StatusBadRequest, "already has replicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := b.post("/admin/moves", tc.form)
			wantStatus(t, resp, body, tc.status)
			wantContains(t, body, `id="create-move-error"`, tc.msg, `value="`+tc.form.Get("replicas")+`"`)
		})
	}
	if ms, err := e.op.AdminMoves(ctx, client.MoveFilter{}); err != nil || len(ms) != 0 {
		t.Fatalf("refused forms made moves: %+v %v", ms, err)
	}

	resp, body = b.post("/admin/moves", url.Values{"topic_id": {" " + m.topicID + " "}, "partition": {"0"}, "replicas": {targetText}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	moves, err := e.op.AdminMoves(ctx, client.MoveFilter{})
	if err != nil || len(moves) != 1 {
		t.Fatalf("moves after the form: %+v %v", moves, err)
	}
	mv := moves[0]
	id := strconv.FormatInt(mv.ID, 10)
	if mv.State != "running" || !slices.Equal(mv.Target, target) || !slices.Equal(mv.Original, m.original) {
		t.Fatalf("the form started %+v, want %v → %v", mv, m.original, target)
	}
	resp, body = b.follow(resp)
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, "Move "+id+" started.", `id="moves-in-progress"`, `id="move-`+id+`"`, `<span class="badge running">running</span>`,
		nodes(m.original)+" → "+nodes(target), "adding 4", "not reported yet", "not measured yet", `id="cancel-move-`+id+`"`)

	// A second move of the partition is the API's to refuse.
	resp, body = b.post("/admin/moves", url.Values{"topic_id": {m.topicID}, "partition": {"0"}, "replicas": {"4, 1, 2"}})
	wantStatus(t, resp, body, http.StatusConflict)
	wantContains(t, body, `id="create-move-error"`, "already has move "+id+" (running); wait for it to finish or cancel it")

	// The leader reports node 4 joining: 8 MiB behind, then 4 MiB four
	// seconds later, so 1 MiB/s and four seconds to go.
	m.leaderReport(t, 8<<20)
	e.clock.Advance(4 * time.Second)
	m.leaderReport(t, 4<<20)
	resp, body = b.get("/admin/moves")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, "4.0 MiB", "node 4: 4.0 MiB behind", ">4s<")

	// The cell page counts the move onto node 4 and off the old replica;
	// the broker filter lists it.
	resp, body = b.get("/admin/cells/" + cptest.Cell)
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, "moves in progress: 1", `<a href="/admin/moves?broker=cell-1-b4">1 onto</a>`,
		`<a href="/admin/moves?broker=cell-1-b`+strconv.Itoa(m.original[0])+`">1 off</a>`)
	resp, body = b.get("/admin/moves?broker=cell-1-b4")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `id="moves-filter"`, `id="move-`+id+`"`)

	// Cancel rolls it back; a cancelling move has no cancel button.
	resp, body = b.post("/admin/moves/"+id+"/cancel", url.Values{})
	wantStatus(t, resp, body, http.StatusSeeOther)
	if got, err := e.op.AdminMove(ctx, mv.ID); err != nil || got.State != "cancelling" {
		t.Fatalf("after cancel the move is %+v (%v)", got, err)
	}
	resp, body = b.follow(resp)
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, "Move "+id+" is rolling back to its original replicas.", `<span class="badge cancelling">cancelling</span>`)
	if strings.Contains(body, `id="cancel-move-`+id+`"`) {
		t.Fatal("a cancelling move still has a cancel button")
	}
	// The leader reports the original voters and no non-voter: cancelled,
	// and the move is listed as recent, newest first.
	if err := m.cell.CellReport(ctx, cptest.Cell, wire.Report{Version: wire.Version, BrokerID: "cell-1-b" + strconv.Itoa(m.original[0]),
		Partitions: []wire.PartitionStatus{{TopicID: m.topicID, Partition: 0, LeaderNode: m.original[0], LeaderEpoch: 2, Voters: m.original}}}); err != nil {
		t.Fatal(err)
	}
	resp, body = b.get("/admin/moves")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `id="moves-none"`, `id="moves-recent"`, `<span class="badge cancelled">cancelled</span>`)

	// Cancelling a finished move, or one that does not exist, is refused
	// with the API's message.
	resp, body = b.post("/admin/moves/"+id+"/cancel", url.Values{})
	wantStatus(t, resp, body, http.StatusBadRequest)
	wantContains(t, body, `id="moves-error"`, "move "+id+" is cancelled; only a running move can be cancelled")
	resp, body = b.post("/admin/moves/999999/cancel", url.Values{})
	wantStatus(t, resp, body, http.StatusNotFound)
	wantContains(t, body, `id="moves-error"`, "no such move")
	// Without the session's token nothing is cancelled or started.
	resp, body = b.post("/admin/moves", url.Values{"topic_id": {m.topicID}, "partition": {"0"}, "replicas": {targetText}, csrfField: {"forged"}})
	wantStatus(t, resp, body, http.StatusForbidden)
	if ms, _ := e.op.AdminMoves(ctx, client.MoveFilter{State: "running"}); len(ms) != 0 {
		t.Fatalf("a forged form started %+v", ms)
	}
}

// A drain through the broker page starts the moves that take the
// broker's replicas off, onto the spare broker, and the page lists them.
func TestDrainStartsMoves(t *testing.T) {
	e := newEnv(t)
	m := newMoveSetup(e)
	b := m.op
	off := "cell-1-b" + strconv.Itoa(m.original[0])
	page := "/admin/cells/" + cptest.Cell + "/brokers/" + off
	b.get(page)
	resp, body := b.post(page+"/drain", url.Values{"confirm": {off}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	resp, body = b.follow(resp)
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, "Broker "+off+" is draining", `<span class="badge draining" id="broker-status">draining</span>`,
		`id="broker-moves"`, "drain of broker "+off, `<span class="badge running">running</span>`)
	// One move of the topic's partition, and one of each offsets partition
	// the broker holds (the cell's three lowest node ids hold them).
	ms, err := e.op.AdminMoves(context.Background(), client.MoveFilter{Broker: off})
	var topicMoves []api.Move
	for _, x := range ms {
		if x.TopicID == m.topicID {
			topicMoves = append(topicMoves, x)
		}
	}
	if err != nil || len(topicMoves) != 1 || !slices.Contains(topicMoves[0].Target, 4) || slices.Contains(topicMoves[0].Target, m.original[0]) {
		t.Fatalf("the drain's moves: %+v %v", ms, err)
	}
}

// The moves page's renderings of node lists, ETAs and a move's ends.
func TestMoveRendering(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name string
		move api.Move
		eta  string
	}{
		{"finished", api.Move{State: "completed", ETASeconds: f(3)}, "–"},
		{"no rate yet", api.Move{State: "running"}, "not measured yet"},
		{"caught up", api.Move{State: "running", ETASeconds: f(0)}, "under a second"},
		{"seconds", api.Move{State: "cancelling", ETASeconds: f(83.4)}, "1m23s"},
		{"hours round to minutes", api.Move{State: "running", ETASeconds: f(2*3600 + 95)}, "2h2m0s"},
		{"huge", api.Move{State: "running", ETASeconds: f(1e300)}, "2562047h47m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := eta(tc.move); got != tc.eta {
				t.Fatalf("eta %q, want %q", got, tc.eta)
			}
		})
	}
	for _, tc := range []struct {
		in   string
		want []int
		bad  bool
	}{
		{"4, 2, 3", []int{4, 2, 3}, false},
		{" 4 2\t3 ", []int{4, 2, 3}, false},
		{"4,,5", []int{4, 5}, false},
		{"", []int{}, false},
		{"4, b5", nil, true},
	} {
		got, err := parseNodes(tc.in)
		if (err != nil) != tc.bad || !slices.Equal(got, tc.want) {
			t.Fatalf("parseNodes(%q) = %v, %v", tc.in, got, err)
		}
	}
}

// A failed move shows its failure in the moves table and keeps a cancel
// button, which rolls it back.
func TestMoveFailedShown(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	m := newMoveSetup(e)
	mv, err := e.op.AdminCreateMove(ctx, api.CreateMoveRequest{TopicID: m.topicID, Partition: 0,
		Replicas: []int{m.original[0], m.original[1], 4}})
	if err != nil {
		t.Fatal(err)
	}
	off := "offline"
	if _, err := e.op.AdminUpdateBroker(ctx, "cell-1-b4", api.UpdateBrokerRequest{Status: &off}); err != nil {
		t.Fatal(err)
	}
	e.heartbeat("cell-1-b1")
	id := strconv.FormatInt(mv.ID, 10)
	resp, body := m.op.get("/admin/moves")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `id="moves-in-progress"`, `<span class="badge failed">failed</span>`,
		`id="move-`+id+`-failure">broker cell-1-b4 (node 4), a new replica, is offline<`, `id="cancel-move-`+id+`"`)
	resp, body = m.op.post("/admin/moves/"+id+"/cancel", url.Values{})
	wantStatus(t, resp, body, http.StatusSeeOther)
	if got, err := e.op.AdminMove(ctx, mv.ID); err != nil || got.State != "cancelling" {
		t.Fatalf("after the cancel button: %+v, %v", got, err)
	}
}
