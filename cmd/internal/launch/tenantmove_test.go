package launch_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/internal/launch"
	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/dataplane/peercert"
)

// addCell creates pool (of kind) and a cell id in it with n brokers of
// their own peer CA, on the procCell's control plane, and starts them.
// It returns the brokers' specs.
func (c *procCell) addCell(ctx context.Context, pool, kind, cellID string, n int) []*launch.Broker {
	c.t.Helper()
	op := c.cp.Operator
	if _, err := op.AdminCreatePool(ctx, api.CreatePoolRequest{ID: pool, Kind: kind, Description: pool}); err != nil {
		c.t.Fatalf("create pool %s: %v", pool, err)
	}
	if _, err := op.AdminCreateCell(ctx, api.CreateCellRequest{ID: cellID, PoolID: pool}); err != nil {
		c.t.Fatalf("create cell %s: %v", cellID, err)
	}
	addrs, err := launch.FreeAddrs("127.0.0.1", 3*n)
	if err != nil {
		c.t.Fatal(err)
	}
	nodes := make([]string, n)
	for i := range n {
		nodes[i] = strconv.Itoa(i + 1)
	}
	dir := filepath.Join(cmp.Or(c.cellsDir, c.dir), cellID)
	peers, err := peercert.EnsureDir(filepath.Join(dir, "certs"), cellID, nodes)
	if err != nil {
		c.t.Fatal(err)
	}
	var specs []*launch.Broker
	for i := range n {
		a := addrs[3*i:]
		b := &launch.Broker{ID: fmt.Sprintf("%s-b%d", cellID, i+1), NodeID: i + 1, Kafka: a[0], Raft: a[1], HTTP: a[2],
			DataDir: dir, Peer: peers[nodes[i]], Args: c.cellArgs}
		if _, err := op.AdminCreateBroker(ctx, api.CreateBrokerRequest{ID: b.ID, CellID: cellID, NodeID: b.NodeID,
			KafkaAddr: b.Kafka, HTTPAddr: b.HTTP, RaftAddr: b.Raft}); err != nil {
			c.t.Fatalf("create broker %s: %v", b.ID, err)
		}
		specs = append(specs, b)
	}
	ck, err := op.AdminCreateCellKey(ctx, cellID)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, b := range specs {
		logPath := filepath.Join(dir, b.ID+".log")
		p, err := b.Start(c.bin, c.cp.URL, cellID, ck.ID+":"+ck.Secret, "warn", logPath)
		if err != nil {
			c.t.Fatal(err)
		}
		c.t.Cleanup(func() {
			p.Stop(15 * time.Second)
			if c.t.Failed() {
				if out, err := os.ReadFile(logPath); err == nil {
					c.t.Logf("%s's log, last 4 KiB:\n%s", b.ID, out[max(0, len(out)-4096):])
				}
			}
		})
	}
	return specs
}

// TestTenantMoveUnderTraffic moves a tenant from its shared cell to a
// cell of a dedicated pool while a franz-go idempotent producer and a
// consumer group run against the shared cell's bootstrap addresses: the
// move ends done, nothing acknowledged is lost or doubled, the group's
// polls stay in order, the clients never change their bootstrap address,
// and the tenant's key then works through the old cell's HTTP data API
// too (it follows the tenant home).
func TestTenantMoveUnderTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and six brokers in two cells")
	}
	const topic, parts = "moving", 3
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c := startProcCell(t, "tmove", 3)
	c.createTopic(ctx, topic, parts)
	c.addCell(ctx, "tmove-dedicated", "dedicated", "tmove-dcell", 3)

	tr := c.startTraffic(ctx, topic, "move-group", 2*time.Minute)
	waitAcks(ctx, t, tr.chk, 300)
	tr.waitGroupRead(ctx, t, 0, "before the move")

	mv := c.startTenantMove(ctx, "tmove-dedicated")
	started := time.Now()
	mv, timeline := c.awaitTenantMove(ctx, mv.ID, started, 4*time.Minute)
	took := time.Since(started)
	read := tr.chk.Result().GroupRecords
	waitAcks(ctx, t, tr.chk, tr.chk.Result().Acks+300) // produce continues on the new cell
	tr.waitGroupRead(ctx, t, read, "after the move")
	tr.halt()
	// A pause that starts during the move ends when produce resumes on the
	// new home, which may be after the move is done.
	t.Logf("move %d to %s took %s (%s); longest wait for an ack from its start to the end of the traffic %s", mv.ID, mv.DestCellID,
		took.Round(time.Millisecond), strings.Join(timeline, ", "), tr.longestGap(started, time.Now()).Round(time.Millisecond))
	res := tr.check(ctx, t, c, topic, parts)
	t.Logf("history: %+v", res)

	// The old cell's HTTP data API follows the tenant to its new home. A
	// retriable answer (the tenant's request rate, just after the
	// producer stopped) is retried, as a client does.
	body := []byte(`{"messages":[{"key":"aw==","value":"YWZ0ZXIgdGhlIG1vdmU="}]}`)
	var refused error
	err := launch.WaitFor(ctx, "a publish through the old cell after the move", 30*time.Second, func() error {
		resp, err := c.dataAPI(ctx, http.MethodPost, "/v1/topics/"+topic+"/messages:publish", body)
		if err != nil {
			return err
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			return nil
		case bytes.Contains(out, []byte(`"retriable":true`)):
			return fmt.Errorf("%s %s", resp.Status, out)
		}
		refused = fmt.Errorf("%s %s", resp.Status, out)
		return nil
	})
	if err = errors.Join(err, refused); err != nil {
		t.Fatal(err)
	}

	// A librdkafka consumer group seeded only with the old cell finds its
	// coordinator (it asks its bootstrap brokers) and reads.
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed: run `make tools`")
	}
	kctx, kcancel := context.WithTimeout(ctx, 90*time.Second)
	defer kcancel()
	kc := exec.CommandContext(kctx, kcat, "-b", c.bootstrap[0], "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
		"-X", "sasl.username="+c.tenant.KeyID, "-X", "sasl.password="+c.tenant.Secret, "-X", "auto.offset.reset=earliest",
		"-G", "kcat-after-move", "-c", "5", "-f", "%o\n", topic)
	kout, err := kc.CombinedOutput()
	if err != nil || strings.Count(string(kout), "\n") < 5 {
		t.Fatalf("a kcat group through the old cell after the move: %v\n%s", err, kout)
	}
}

// startTenantMove moves the cell's tenant to pool, trying again for up to
// a minute while the pool's cell is not ready to take it (its brokers not
// yet registered or reporting moves).
func (c *procCell) startTenantMove(ctx context.Context, pool string) api.TenantMove {
	c.t.Helper()
	var mv api.TenantMove
	if err := launch.WaitFor(ctx, "the tenant move starts", time.Minute, func() error {
		var err error
		mv, err = c.cp.Operator.AdminMoveTenant(ctx, c.tenant.ID, api.MoveTenantRequest{Pool: pool})
		return err
	}); err != nil {
		c.t.Fatal(err)
	}
	return mv
}

// awaitTenantMove waits up to limit for move id to be done and returns it
// with the states it went through, each with its time since started.
func (c *procCell) awaitTenantMove(ctx context.Context, id int64, started time.Time, limit time.Duration) (api.TenantMove, []string) {
	c.t.Helper()
	var mv api.TenantMove
	var timeline []string
	last := ""
	if err := launch.WaitFor(ctx, "the tenant move is done", limit, func() error {
		m, err := c.cp.Operator.AdminTenantMove(ctx, id)
		if err != nil {
			return err
		}
		if m.State != last {
			last = m.State
			timeline = append(timeline, fmt.Sprintf("%s at %s", m.State, time.Since(started).Round(time.Millisecond)))
		}
		if m.State != "done" {
			return fmt.Errorf("move %d is %s: %s", m.ID, m.State, m.Error)
		}
		mv = m
		return nil
	}); err != nil {
		c.t.Fatal(err)
	}
	return mv, timeline
}
