package launch_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluicehq/sluice/cmd/internal/launch"
	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/controlplane/pgtest"
)

// procCell is a control plane and n broker processes in one cell (pool
// name, cell name-cell), with a tenant (name), on a scratch database. Its
// control plane and brokers can be killed and started again on the same
// addresses.
type procCell struct {
	t         testing.TB
	bin, dir  string
	db        *launch.DB
	listen    string // the control plane's address
	cp        *launch.ControlPlane
	cellID    string
	specs     []*launch.Broker
	procs     []*launch.Proc
	cellKey   string
	tenant    *launch.Tenant
	bootstrap []string
	cellsDir  string   // where addCell puts its cells' data; c.dir if empty
	cellArgs  []string // further flags of addCell's brokers
}

func startProcCell(t testing.TB, name string, n int) *procCell {
	t.Helper()
	return startProcCellWith(t, name, n, nil)
}

// startProcCellWith is startProcCell with each broker's spec passed to
// edit (nil for none) before the brokers start: further flags, say.
func startProcCellWith(t testing.TB, name string, n int, edit func(*launch.Broker)) *procCell {
	t.Helper()
	ctx := context.Background()
	c := &procCell{t: t, dir: t.TempDir(), cellID: name + "-cell"}
	c.bin = testkit.BuildTenantd(t, c.dir)
	var err error
	if c.db, err = launch.CreateDB(ctx, pgtest.AdminURL(), "sluice_"+name+"_"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.db.Drop() })
	addrs, err := launch.FreeAddrs("127.0.0.1", 1+3*n)
	if err != nil {
		t.Fatal(err)
	}
	c.listen = addrs[0]
	c.startControlPlane()
	for i := range n {
		a := addrs[1+3*i:]
		c.specs = append(c.specs, &launch.Broker{ID: fmt.Sprintf("b%d", i+1), NodeID: i + 1, Kafka: a[0], Raft: a[1], HTTP: a[2],
			DataDir: filepath.Join(c.dir, fmt.Sprintf("b%d", i+1))})
		c.bootstrap = append(c.bootstrap, a[0])
	}
	if c.cellKey, err = launch.SeedCell(ctx, c.cp.Operator, name, c.cellID, filepath.Join(c.dir, "certs"), c.specs); err != nil {
		t.Fatal(err)
	}
	c.procs = make([]*launch.Proc, n)
	for i := range c.specs {
		if edit != nil {
			edit(c.specs[i])
		}
		c.startBroker(i)
		t.Cleanup(func() {
			c.procs[i].Stop(15 * time.Second)
			if t.Failed() {
				if b, err := os.ReadFile(filepath.Join(c.dir, c.specs[i].ID+".log")); err == nil {
					t.Logf("%s's log, last 4 KiB:\n%s", c.specs[i].ID, b[max(0, len(b)-4096):])
				}
			}
		})
	}
	if c.tenant, err = launch.SignUp(ctx, c.cp, name, ""); err != nil {
		t.Fatal(err)
	}
	return c
}

// startControlPlane starts the control plane on its address, each time in
// a directory of its own (a start makes a new operator key there).
func (c *procCell) startControlPlane() {
	c.t.Helper()
	var err error
	if c.cp, err = launch.StartControlPlane(context.Background(), c.bin, c.db.URL, c.listen, c.t.TempDir(), "warn"); err != nil {
		c.t.Fatal(err)
	}
	p := c.cp.Proc
	c.t.Cleanup(func() { p.Stop(15 * time.Second) })
}

// startBroker starts broker i, its output appended to its log.
func (c *procCell) startBroker(i int) {
	c.t.Helper()
	p, err := c.specs[i].Start(c.bin, c.cp.URL, c.cellID, c.cellKey, "warn", filepath.Join(c.dir, c.specs[i].ID+".log"))
	if err != nil {
		c.t.Fatal(err)
	}
	c.procs[i] = p
}

func (c *procCell) kgo(extra ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.bootstrap...),
		kgo.SASL(plain.Auth{User: c.tenant.KeyID, Pass: c.tenant.Secret}.AsMechanism())}, extra...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// dataAPI sends the tenant's request to path on broker 0's HTTP data API;
// a body (nil for none) is JSON.
func (c *procCell) dataAPI(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.specs[0].HTTP+path, r)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(c.tenant.KeyID, c.tenant.Secret)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return http.DefaultClient.Do(req)
}

// createTopic creates topic, of parts partitions, for the cell's tenant.
func (c *procCell) createTopic(ctx context.Context, topic string, parts int) {
	c.t.Helper()
	if _, err := c.tenant.Client.CreateTopic(ctx, api.CreateTopicRequest{Name: topic, Partitions: parts}); err != nil {
		c.t.Fatal(err)
	}
}

// otherTenant signs up a second tenant, name, with a topic of its own of
// parts partitions: a neighbour whose traffic a test watches for harm.
func (c *procCell) otherTenant(ctx context.Context, name, topic string, parts int) *launch.Tenant {
	c.t.Helper()
	other, err := launch.SignUp(ctx, c.cp, name, "")
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := other.Client.CreateTopic(ctx, api.CreateTopicRequest{Name: topic, Partitions: parts}); err != nil {
		c.t.Fatal(err)
	}
	return other
}
