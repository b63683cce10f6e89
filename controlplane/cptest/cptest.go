// Package cptest starts a real control plane for other packages' tests: on a
// fresh database of the machine's Postgres, served over loopback HTTP, with
// one shared pool, one cell of three brokers and an operator key. Only tests
// import it.
package cptest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/controlplane"
	"github.com/sluicehq/sluice/controlplane/pgtest"
)

// Cell is the id of the seeded cell; Pool of its shared pool.
const (
	Cell = "cell-1"
	Pool = "shared-1"
)

// Env is a running control plane.
type Env struct {
	URL      string
	DB       *pgxpool.Pool
	Server   *controlplane.Server
	Operator *client.Client
	Anon     *client.Client
	// OperatorKeyID and OperatorSecret are the operator key Operator
	// carries, for tests that hand it to a command or a provider.
	OperatorKeyID, OperatorSecret string
	// MailDir holds the mail the control plane sent (a mail.Dir), unless
	// a configure callback set another Mailer.
	MailDir string
	t       testing.TB
}

// Brokers describes the seeded brokers: node ids 1..3 with these addresses.
type Brokers struct {
	KafkaAddrs []string
	HTTPAddrs  []string
}

// Start runs a control plane until the test ends, with the fleet seeded
// (SeedFleet): the seeded brokers get the given addresses (empty strings
// if none are given). Each configure callback, in order, may change the
// control plane's config (its DB set) before the server is built.
func Start(t testing.TB, b Brokers, configure ...func(*controlplane.Config)) *Env {
	t.Helper()
	e := StartEmpty(t, configure...)
	SeedFleet(t, e.Operator, b)
	return e
}

// StartEmpty runs a control plane as Start does, with no pool, cell or
// broker: for tests that build the fleet themselves, as an operator would.
func StartEmpty(t testing.TB, configure ...func(*controlplane.Config)) *Env {
	t.Helper()
	return start(t, nil, configure...)
}

// StartMounted is Start with the test server serving what mount returns:
// mount gets the control plane's handler and the server's URL (a console
// that calls the API at its own address needs it) and builds the
// server's handler around them, as tenantd mounts the console beside the
// API.
func StartMounted(t testing.TB, b Brokers, mount func(plane http.Handler, url string) http.Handler, configure ...func(*controlplane.Config)) *Env {
	t.Helper()
	e := start(t, mount, configure...)
	SeedFleet(t, e.Operator, b)
	return e
}

// start runs the control plane, served as mount builds it (nil: the
// control plane's handler alone), with an operator key and no fleet.
func start(t testing.TB, mount func(plane http.Handler, url string) http.Handler, configure ...func(*controlplane.Config)) *Env {
	t.Helper()
	db := pgtest.Pool(t)
	mailer, mailDir := Mailer(t)
	cfg := controlplane.Config{DB: db, Mailer: mailer}
	for _, f := range configure {
		f(&cfg)
	}
	srv, err := controlplane.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var served http.Handler = srv.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.ServeHTTP(w, r) }))
	t.Cleanup(hs.Close)
	if mount != nil {
		served = mount(srv.Handler(), hs.URL)
	}
	id, secret, err := controlplane.CreateOperatorKey(context.Background(), db, "cptest operator")
	if err != nil {
		t.Fatal(err)
	}
	return &Env{URL: hs.URL, DB: db, Server: srv, Operator: client.New(hs.URL, client.WithAPIKey(id, secret)), Anon: client.New(hs.URL),
		OperatorKeyID: id, OperatorSecret: secret, MailDir: mailDir, t: t}
}

// SeedFleet creates, through the operator client op, the shared pool Pool
// with the cell Cell and its brokers cell-1-b1..b3 (node ids 1..3) at the
// given addresses. Test harnesses that serve the control plane their own
// way (with the console mounted, say) seed with it too.
func SeedFleet(t testing.TB, op *client.Client, b Brokers) {
	t.Helper()
	ctx := context.Background()
	must(t)(op.AdminCreatePool(ctx, api.CreatePoolRequest{ID: Pool, Kind: "shared"}))
	must(t)(op.AdminCreateCell(ctx, api.CreateCellRequest{ID: Cell, PoolID: Pool}))
	for i := 0; i < 3; i++ {
		req := api.CreateBrokerRequest{ID: fmt.Sprintf("%s-b%d", Cell, i+1), CellID: Cell, NodeID: i + 1}
		if i < len(b.KafkaAddrs) {
			req.KafkaAddr = b.KafkaAddrs[i]
		}
		if i < len(b.HTTPAddrs) {
			req.HTTPAddr = b.HTTPAddrs[i]
		}
		must(t)(op.AdminCreateBroker(ctx, req))
	}
}

// TestAddrs are the seeded brokers' Kafka and HTTP addresses in tests that
// only display them (nothing listens there).
var TestAddrs = Brokers{
	KafkaAddrs: []string{"127.0.0.1:19092", "127.0.0.1:19093", "127.0.0.1:19094"},
	HTTPAddrs:  []string{"127.0.0.1:18092", "127.0.0.1:18093", "127.0.0.1:18094"},
}

// Clock is a settable clock for controlplane.Config.Now; the zero value is
// not ready: start it with NewClock.
type Clock = testkit.Clock

// NewClock returns a clock at the real time.
func NewClock() *Clock { return testkit.NewClock(time.Now()) }

func must(t testing.TB) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// CellClient returns a client carrying a new key of the seeded cell.
func (e *Env) CellClient() *client.Client {
	e.t.Helper()
	k, err := e.Operator.AdminCreateCellKey(context.Background(), Cell)
	if err != nil {
		e.t.Fatal(err)
	}
	return client.New(e.URL, client.WithAPIKey(k.ID, k.Secret))
}

// Tenant is a signed-up tenant: its owner's session client and an API key.
type Tenant struct {
	api.SignupResponse
	Owner  *client.Client
	Key    *client.Client
	KeyID  string
	Secret string
}

// Signup creates a tenant named name with an API key of the given role
// (admin when empty).
func (e *Env) Signup(name, keyRole string) *Tenant {
	e.t.Helper()
	ctx := context.Background()
	res, err := SignUp(ctx, e.Anon, e.MailDir, api.SignupRequest{TenantName: name, Email: name + "@example.com", Password: "password-" + name + "-1"})
	if err != nil {
		e.t.Fatalf("signup %s: %v", name, err)
	}
	if keyRole == "" {
		keyRole = "admin"
	}
	tn := &Tenant{SignupResponse: res, Owner: e.Anon.With(client.WithSession(res.Session.Token))}
	k, err := tn.Owner.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Description: name + " key", Role: keyRole})
	if err != nil {
		e.t.Fatalf("create key for %s: %v", name, err)
	}
	tn.KeyID, tn.Secret = k.ID, k.Secret
	tn.Key = e.Anon.With(client.WithAPIKey(k.ID, k.Secret))
	return tn
}
