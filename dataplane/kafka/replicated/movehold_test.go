package replicated

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/kafka"
)

// heldSignal is a slog handler that closes held when the listener logs
// that a produce waits for its tenant's switch.
type heldSignal struct{ held chan struct{} }

func (h heldSignal) Enabled(context.Context, slog.Level) bool { return true }
func (h heldSignal) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "kafka produce held for its tenant's move" {
		select {
		case <-h.held:
		default:
			close(h.held)
		}
	}
	return nil
}
func (h heldSignal) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h heldSignal) WithGroup(string) slog.Handler      { return h }

// A v10 produce refused by a partition fenced for its tenant's move waits
// for the switch: once the cell's state drops the tenant (homed on cell-2
// now), the answer names the partition's leader at the new home, and the
// session is a redirect session from then on (its Metadata names cell-2).
func TestFencedProduceHeldUntilSwitch(t *testing.T) {
	held := heldSignal{held: make(chan struct{})}
	var c *cell // set before any lookup is made
	c, acme := startCellWith(t, 1, "held", cellOptions{configure: func(_ int, cfg *kafka.Config) {
		cfg.Logger = slog.New(held)
		cfg.Homes = kafka.HomesFunc(func(ctx context.Context, keyID, secret string) (wire.KeyHome, error) {
			return c.cp.CellClient().KeyHome(ctx, cptest.Cell, keyID, secret)
		})
	}})
	c.startReporters(t)
	o := c.startOtherCell(t)
	l := c.cell.WaitLeader(0, 20*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The reporters tell the control plane who leads, which the key's
	// home names after the switch.
	celltest.WaitFor(t, 30*time.Second, "partition_status to name the leader", func() bool {
		var n int
		err := c.cp.DB.QueryRow(ctx, `SELECT count(*) FROM partition_status WHERE topic_id = $1 AND leader_node = $2 AND leader_epoch >= 1`,
			c.topicID, l+1).Scan(&n)
		return err == nil && n > 0
	})
	if _, err := c.cell.Replica(l, 0).Fence(ctx); err != nil {
		t.Fatal(err)
	}

	rc := dialSASL(t, c.addrs[l], acme.KeyID, acme.Secret)
	if code, _ := rc.sasl(); code != 0 {
		t.Fatalf("SASL code %d", code)
	}
	req := produceRequest("held", 0, celltest.Batch([]byte("during the fence")))
	type answer struct {
		resp kmsg.Response
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := rc.roundTrip(req)
		answered <- answer{resp, err}
	}()
	select {
	case <-held.held:
	case a := <-answered:
		t.Fatalf("the fenced produce was answered without waiting for the switch: %+v, %v", a.resp, a.err)
	case <-ctx.Done():
		t.Fatal("the fenced produce never waited for the switch")
	}

	// The switch, as the control plane's does it: the tenant's home is
	// cell-2, and cell-1's new state drops the tenant.
	if _, err := c.cp.DB.Exec(ctx, `UPDATE tenants SET home_cell_id = $2 WHERE id = $1`, acme.Tenant.ID, otherCell); err != nil {
		t.Fatal(err)
	}
	if _, err := c.cp.DB.Exec(ctx, `UPDATE cells SET state_version = state_version + 1 WHERE id = $1`, cptest.Cell); err != nil {
		t.Fatal(err)
	}
	if _, err := c.cp.DB.Exec(ctx, `SELECT pg_notify('sluice_cell_state', $1)`, cptest.Cell); err != nil {
		t.Fatal(err)
	}
	var a answer
	select {
	case a = <-answered:
	case <-ctx.Done():
		t.Fatal("no answer to the held produce")
	}
	if a.err != nil {
		t.Fatalf("held produce: %v", a.err)
	}
	resp := a.resp.(*kmsg.ProduceResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != catalog.NotLeader.KafkaCode || p.CurrentLeader.LeaderID != kafka.RedirectNodeID(l+1) || p.CurrentLeader.LeaderEpoch < 1 {
		t.Fatalf("held produce: code %d, current leader %+v; want NOT_LEADER naming the home's leader node %d", p.ErrorCode, p.CurrentLeader, l+1)
	}
	// Only cell-2's node 1 has a Kafka address: the endpoint is named
	// exactly when the leader is node 1, and is cell-2's (under the id a
	// redirect gives it).
	for _, b := range resp.Brokers {
		if b.NodeID != kafka.RedirectNodeID(1) || net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) != o.addr {
			t.Fatalf("held produce endpoints %+v, want only cell-2's node 1 at %s", resp.Brokers, o.addr)
		}
	}
	if (len(resp.Brokers) == 1) != (l == 0) {
		t.Fatalf("held produce endpoints %+v for leader node %d", resp.Brokers, l+1)
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 9
	mr, err := rc.roundTrip(meta)
	if err != nil {
		t.Fatalf("metadata after the switch on the same session: %v", err)
	}
	if cl := mr.(*kmsg.MetadataResponse).ClusterID; cl == nil || *cl != otherCell {
		t.Fatalf("metadata after the switch names cluster %v, want %s", cl, otherCell)
	}
}
