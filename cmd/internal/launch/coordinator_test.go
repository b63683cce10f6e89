package launch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/cmd/internal/launch"
	"github.com/sluicehq/sluice/contract/testkit"
)

// TestCoordinatorFromBrokerWithoutOffsets: in a cell of four brokers the
// offsets partitions live on the three lowest node ids, so broker 4 holds
// none. Asked for a group's coordinator, it names one of the three (the
// partition's preferred leader) instead of COORDINATOR_NOT_AVAILABLE; a
// franz-go group and a kcat group that know only broker 4 consume what
// was produced (librdkafka asks its bootstrap broker for the
// coordinator); a member joins a group through broker 4's HTTP data API,
// which forwards the join to the coordinator.
func TestCoordinatorFromBrokerWithoutOffsets(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and four brokers")
	}
	const topic, parts, n = "coordinated", 2, 50
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startProcCell(t, "coord", 4)
	c.createTopic(ctx, topic, parts)
	fourth := c.specs[3]

	cl := c.kgo(kgo.SeedBrokers(fourth.Kafka))
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}

	// Raw FindCoordinator on broker 4's own connection, for several
	// groups (so several offsets partitions). A coordinator still being
	// elected is retried; any other error fails at once.
	groups := []string{"g-a", "g-b", "g-c", "g-d", "g-e"}
	var named []int32
	err := launch.WaitFor(ctx, "broker 4 names a coordinator for every group", time.Minute, func() error {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKeys = groups
		resp, err := req.RequestWith(ctx, cl.Broker(4))
		if err != nil {
			return err
		}
		named = named[:0]
		for _, co := range resp.Coordinators {
			if co.ErrorCode != 0 {
				return fmt.Errorf("group %s: %v", co.Key, kerr.ErrorForCode(co.ErrorCode))
			}
			named = append(named, co.NodeID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, node := range named {
		if node < 1 || node > 3 {
			t.Errorf("broker 4 names node %d as %s's coordinator; the offsets partitions are on nodes 1-3", node, groups[i])
		}
	}

	// A consumer group that knows only broker 4 reads every record.
	cons := c.kgo(kgo.SeedBrokers(fourth.Kafka), kgo.ConsumerGroup("only-fourth"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("the group read %d of %d records: %v", got, n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		got += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit through the coordinator broker 4 named: %v", err)
	}

	// kcat (librdkafka), bootstrapped with broker 4 alone, reads every
	// record in a group of its own.
	kctx, kcancel := context.WithTimeout(ctx, 90*time.Second)
	defer kcancel()
	kcat := exec.CommandContext(kctx, testkit.Kcat(t), "-b", fourth.Kafka,
		"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
		"-X", "sasl.username="+c.tenant.KeyID, "-X", "sasl.password="+c.tenant.Secret,
		"-G", "kcat-fourth", "-X", "auto.offset.reset=earliest", "-c", strconv.Itoa(n), "-f", "%s\n", topic)
	kcat.WaitDelay = 10 * time.Second
	out, err := kcat.Output()
	if err != nil {
		t.Fatalf("kcat group through broker 4 (ended after 90 s: it found no coordinator): %v\n%s", err, out)
	}
	if lines := strings.Count(string(out), "\n"); lines != n {
		t.Fatalf("kcat read %d records through broker 4, want %d:\n%s", lines, n, out)
	}

	// An HTTP member joins through broker 4.
	body, _ := json.Marshal(map[string]any{"topics": []string{topic}})
	err = launch.WaitFor(ctx, "a join through broker 4's HTTP data API", time.Minute, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+fourth.HTTP+"/v1/groups/http-readers/members", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.SetBasicAuth(c.tenant.KeyID, c.tenant.Secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("join: %s %s", resp.Status, out)
		}
		var j struct {
			MemberID   string `json:"member_id"`
			Partitions []struct {
				Partition int32 `json:"partition"`
			} `json:"partitions"`
		}
		if err := json.Unmarshal(out, &j); err != nil {
			return err
		}
		var ps []int32
		for _, p := range j.Partitions {
			ps = append(ps, p.Partition)
		}
		slices.Sort(ps)
		if j.MemberID == "" || !slices.Equal(ps, []int32{0, 1}) {
			return fmt.Errorf("join answered member %q with partitions %v, want both", j.MemberID, ps)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
