package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/groups"
	"github.com/sluicehq/sluice/dataplane/lag"
	dlog "github.com/sluicehq/sluice/dataplane/log"
)

// hwLog is a partition log whose high watermark is its end, as on a
// replica that applied everything it stored.
type hwLog struct{ *dlog.Log }

func (l hwLog) HighWatermark() int64 { return l.NextOffset() }

// The broker's group lag follows whatever coordinator is plugged in with
// useCoordinator, and shows in the report rows and on /metrics.
func TestGroupLagFollowsCoordinator(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	syncer, err := cellview.New(cellview.Config{Cell: "cell-1", CacheFile: filepath.Join(t.TempDir(), "state.json")})
	if err != nil {
		t.Fatal(err)
	}
	if err := syncer.Apply(wire.CellState{Version: wire.Version, Cell: "cell-1", StateVersion: 2,
		Tenants: []wire.Tenant{{ID: "tn_1", Name: "one", Status: "active"}},
		Topics: []wire.Topic{{ID: "tp_1", TenantID: "tn_1", Name: "orders", Config: map[string]string{"retention.ms": "3600000"},
			Partitions: []wire.Partition{{Partition: 0, Replicas: []int{1, 2, 3}}}}}}); err != nil {
		t.Fatal(err)
	}
	l, err := dlog.Open(context.Background(), dlog.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range 3 {
		if _, _, err := l.Append(celltest.Batch([]byte("a"), []byte("b")), 1); err != nil {
			t.Fatal(err)
		}
	}
	gl, err := newGroupLag(syncer, func(id string, p int32) (lag.Partition, bool) { return hwLog{l}, id == "tp_1" && p == 0 }, log)
	if err != nil {
		t.Fatal(err)
	}
	reg := brokerRegistry()
	metrics := func(broker string) {
		if err := wrapBroker(reg, broker).Register(gl.tracker); err != nil {
			t.Fatal(err)
		}
	}
	metrics("b1")
	if rows := gl.report(); len(rows) != 0 {
		t.Fatalf("rows without a coordinator: %+v", rows)
	}

	gl.useCoordinator(func() []groups.GroupSnapshot {
		return []groups.GroupSnapshot{{TenantID: "tn_1", GroupDescription: groups.GroupDescription{GroupSummary: groups.GroupSummary{Group: "workers"}},
			Offsets: map[groups.TopicPartition]groups.Committed{{TopicID: "tp_1", Partition: 0}: {Offset: 2}}}}
	})
	var rows []wire.GroupLag
	celltest.WaitFor(t, 10*time.Second, "the coordinator's offsets measured", func() bool { rows = gl.report(); return len(rows) == 1 })
	if r := rows[0]; r.Group != "workers" || !r.Measured || r.LagRecords != 4 || r.HighWatermark != 6 || r.LagBytes <= 0 {
		t.Fatalf("row %+v", r)
	}

	// /metrics carries the series, labelled with the broker.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serveMetrics(ctx, ln, reg, log) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve metrics: %v", err)
		}
	}()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `sluice_group_lag_records{broker="b1",group="workers",partition="0",tenant="tn_1",topic="orders"} 4`
	if !strings.Contains(string(body), want) {
		t.Fatalf("/metrics lacks %s:\n%s", want, body)
	}

	gl.useCoordinator(nil)
	celltest.WaitFor(t, 10*time.Second, "no rows once the coordinator is gone", func() bool { return len(gl.report()) == 0 })
}

// `tenantd broker -metrics-listen` serves the broker's metrics, group lag
// and replicas behind the log start included, while the broker runs, and stops with it.
func TestBrokerServesMetrics(t *testing.T) {
	cp := cptest.Start(t, cptest.Brokers{})
	ck, err := cp.Operator.AdminCreateCellKey(context.Background(), cptest.Cell)
	if err != nil {
		t.Fatal(err)
	}
	addr, stop := startBrokerRole(t, cp, ck, cptest.Cell+"-b1", "-metrics-listen")
	hc := &http.Client{Timeout: 5 * time.Second}
	var body string
	// The listener is up before the broker registers its collectors.
	celltest.WaitFor(t, 30*time.Second, "the broker serves its lag on /metrics", func() bool {
		resp, err := hc.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		return resp.StatusCode == http.StatusOK && strings.Contains(body, "sluice_group_lag_aggregated 0") &&
			strings.Contains(body, "sluice_replicas_behind_log_start ")
	})
	for _, want := range []string{"go_goroutines", "sluice_group_lag_aggregated 0", "sluice_replicas_behind_log_start 0"} {
		if !strings.Contains(body, want) {
			t.Fatalf("/metrics lacks %q:\n%s", want, body)
		}
	}
	stop()
	if _, err := hc.Get("http://" + addr + "/metrics"); err == nil {
		t.Fatal("metrics still served after the broker stopped")
	}
}

// A consumer group whose members are assigned all three partitions of a
// topic but committed on two lists all three, the third without a
// committed offset and lagging by its retained records; and the
// coordinator asks for a report when the group is assigned or commits a
// partition for the first time, not when it moves known offsets.
func TestGroupLagListsEveryConsumedPartition(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	syncer, err := cellview.New(cellview.Config{Cell: "cell-1", CacheFile: filepath.Join(t.TempDir(), "state.json")})
	if err != nil {
		t.Fatal(err)
	}
	three := []wire.Partition{{Partition: 0, Replicas: []int{1, 2, 3}}, {Partition: 1, Replicas: []int{1, 2, 3}}, {Partition: 2, Replicas: []int{1, 2, 3}}}
	if err := syncer.Apply(wire.CellState{Version: wire.Version, Cell: "cell-1", StateVersion: 2,
		Tenants: []wire.Tenant{{ID: "tn_1", Name: "one", Status: "active"}},
		Topics: []wire.Topic{
			{ID: "tp_1", TenantID: "tn_1", Name: "orders", Config: map[string]string{}, Partitions: three},
			{ID: "tp_2", TenantID: "tn_1", Name: "audit", Config: map[string]string{}, Partitions: three[:1]},
		}}); err != nil {
		t.Fatal(err)
	}
	// Partition p of orders holds 2(p+1) records; audit/0 holds 2.
	logs := map[string]hwLog{}
	for _, k := range []string{"tp_1/0", "tp_1/1", "tp_1/2", "tp_2/0"} {
		l, err := dlog.Open(context.Background(), dlog.Config{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		n := 1
		if k[:4] == "tp_1" {
			n = int(k[5]-'0') + 1
		}
		for range n {
			if _, _, err := l.Append(celltest.Batch([]byte("a"), []byte("b")), 1); err != nil {
				t.Fatal(err)
			}
		}
		logs[k] = hwLog{l}
	}
	gl, err := newGroupLag(syncer, func(id string, p int32) (lag.Partition, bool) {
		l, ok := logs[fmt.Sprintf("%s/%d", id, p)]
		return l, ok
	}, log)
	if err != nil {
		t.Fatal(err)
	}

	// A real coordinator over a Raft cell's offsets partition.
	cell := celltest.New(t, celltest.Options{Partitions: 1})
	// Only the coordinator the test uses asks for reports, so a load
	// elsewhere cannot stand in for the signals checked.
	var coords []*groups.Coordinator
	var used atomic.Int32
	used.Store(-1)
	for b := range 3 {
		co, err := groups.New(groups.Config{NodeID: b + 1, Partitions: 1, Logger: log, InitialRebalanceDelay: -1,
			Changed: func() {
				if int(used.Load()) == b {
					gl.changed()
				}
			},
			Offsets: func(p int32) (groups.Log, bool) {
				r := cell.Replica(b, int(p))
				if r == nil {
					return nil, false
				}
				return r, true
			}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { co.Close() })
		coords = append(coords, co)
	}
	var co *groups.Coordinator
	celltest.WaitFor(t, 60*time.Second, "a loaded coordinator", func() bool {
		for b, c := range coords {
			if _, local, err := c.Locate("tn_1", "workers"); err == nil && local {
				co = c
				used.Store(int32(b))
				return true
			}
		}
		return false
	})
	gl.useCoordinator(co.AllGroups)
	asked := func() bool {
		select {
		case <-gl.soon:
			return true
		default:
			return false
		}
	}
	asked()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sub := kmsg.NewConsumerMemberMetadata()
	sub.Topics = []string{"orders", "audit"}
	jr, err := co.Join(ctx, groups.JoinRequest{TenantID: "tn_1", Group: "workers", ClientID: "c", ProtocolType: "consumer",
		SessionTimeout: 30 * time.Second, RebalanceTimeout: 30 * time.Second,
		Protocols: []groups.Protocol{{Name: "range", Metadata: sub.AppendTo(nil)}}})
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	asg := kmsg.NewConsumerMemberAssignment()
	at := kmsg.NewConsumerMemberAssignmentTopic()
	at.Topic, at.Partitions = "orders", []int32{0, 1, 2}
	asg.Topics = append(asg.Topics, at)
	if _, err := co.Sync(ctx, "tn_1", "workers", jr.MemberID, "", jr.Generation, map[string][]byte{jr.MemberID: asg.AppendTo(nil)}); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if !asked() {
		t.Fatal("the assignment did not ask for a report")
	}
	commit := func(offsets map[int32]int64) {
		t.Helper()
		var cs []groups.OffsetCommit
		for p, o := range offsets {
			cs = append(cs, groups.OffsetCommit{TopicPartition: groups.TopicPartition{TopicID: "tp_1", Partition: p}, Offset: o})
		}
		if err := co.CommitOffsets(ctx, "tn_1", "workers", jr.MemberID, "", jr.Generation, cs); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	commit(map[int32]int64{0: 1, 1: 1})
	if !asked() {
		t.Fatal("the group's first commit did not ask for a report")
	}
	commit(map[int32]int64{0: 2, 1: 1})
	if asked() {
		t.Fatal("moving known offsets asked for a report")
	}

	var rows []wire.GroupLag
	celltest.WaitFor(t, 10*time.Second, "every consumed partition measured", func() bool { rows = gl.report(); return len(rows) == 4 })
	want := []struct {
		topic              string
		part               int
		committed, records int64
	}{{"tp_1", 0, 2, 0}, {"tp_1", 1, 1, 3}, {"tp_1", 2, -1, 6}, {"tp_2", 0, -1, 2}}
	for i, w := range want {
		r := rows[i]
		if r.TopicID != w.topic || r.Partition != w.part || r.CommittedOffset != w.committed || r.LagRecords != w.records ||
			!r.Measured || r.Group != "workers" || (w.committed < 0) != r.CommittedAt.IsZero() {
			t.Errorf("row %d: %+v, want %s/%d committed %d lag %d", i, r, w.topic, w.part, w.committed, w.records)
		}
	}
}
