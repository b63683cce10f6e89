package controlplane_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/controlplane"
	"github.com/sluicehq/sluice/controlplane/cptest"
)

// env is a control plane on a fresh database with one shared pool, one cell
// of three brokers, and an operator key.
type env struct {
	t    *testing.T
	url  string
	db   *pgxpool.Pool
	op   *client.Client
	anon *client.Client
	logs *testkit.LogBuffer
	srv  *controlplane.Server
	now  *cptest.Clock
	mail string // the mail.Dir the control plane writes its mail to
	cp   *cptest.Env
}

func newEnv(t *testing.T, tweak ...func(*controlplane.Config)) *env {
	t.Helper()
	logs := &testkit.LogBuffer{}
	clk := cptest.NewClock()
	cp := cptest.Start(t, cptest.TestAddrs, append([]func(*controlplane.Config){func(c *controlplane.Config) {
		c.Now = clk.Now
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}}, tweak...)...)
	return &env{t: t, url: cp.URL, db: cp.DB, logs: logs, srv: cp.Server, now: clk, op: cp.Operator, anon: cp.Anon,
		mail: cp.MailDir, cp: cp}
}

func (e *env) must(_ any, err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

// tenant is a signed-up tenant with its owner's session and an admin key.
type tenant struct {
	api.SignupResponse
	owner  *client.Client // session
	key    *client.Client // admin API key
	keyID  string
	secret string
}

// signUp signs up as a user would: the request, then the mailed token.
func (e *env) signUp(ctx context.Context, req api.SignupRequest) (api.SignupResponse, error) {
	return cptest.SignUp(ctx, e.anon, e.mail, req)
}

// addMember invites through by and accepts with the mailed token.
func (e *env) addMember(ctx context.Context, by *client.Client, req api.AddMemberRequest) (api.Member, error) {
	return cptest.AddMember(ctx, by, e.anon, e.mail, req)
}

// signup signs up the tenant name with an admin key (cptest's Signup).
func (e *env) signup(name string) *tenant {
	e.t.Helper()
	tn := e.cp.Signup(name, "admin")
	return &tenant{SignupResponse: tn.SignupResponse, owner: tn.Owner, key: tn.Key, keyID: tn.KeyID, secret: tn.Secret}
}

// cellClient returns a client carrying a new cell key of cell-1.
func (e *env) cellClient() *client.Client { return e.cp.CellClient() }

// createTopic creates a topic with tn's admin key and returns its id.
func (e *env) createTopic(tn *tenant, name string, partitions int) string {
	e.t.Helper()
	if _, err := tn.key.CreateTopic(context.Background(), api.CreateTopicRequest{Name: name, Partitions: partitions}); err != nil {
		e.t.Fatalf("create topic %s: %v", name, err)
	}
	return topicID(e.t, e, tn.Tenant.ID, name)
}

// createKey makes an API key through by (a tenant's owner or one of its
// keys) and returns it with its secret, failing the test if it cannot.
func (e *env) createKey(by *client.Client, req api.CreateAPIKeyRequest) api.APIKey {
	e.t.Helper()
	k, err := by.CreateAPIKey(context.Background(), req)
	if err != nil {
		e.t.Fatalf("create api key %q: %v", req.Description, err)
	}
	return k
}

// roleKey makes an API key of role through tn's owner: a client calling
// with it, and its id.
func (e *env) roleKey(tn *tenant, role string) (*client.Client, string) {
	e.t.Helper()
	k := e.createKey(tn.owner, api.CreateAPIKeyRequest{Description: role, Role: role})
	return e.anon.With(client.WithAPIKey(k.ID, k.Secret)), k.ID
}

// cellKeyClient returns a client of the control plane at url carrying a
// new key of cell.
func (e *env) cellKeyClient(url, cell string) *client.Client {
	e.t.Helper()
	k, err := e.op.AdminCreateCellKey(context.Background(), cell)
	if err != nil {
		e.t.Fatal(err)
	}
	return client.New(url, client.WithAPIKey(k.ID, k.Secret))
}

// secondURL serves another control plane on e's database, as a second
// instance or a restarted one is, and returns its address.
func (e *env) secondURL() string {
	e.t.Helper()
	srv, err := controlplane.New(controlplane.Config{DB: e.db, Now: e.now.Now})
	if err != nil {
		e.t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	e.t.Cleanup(hs.Close)
	return hs.URL
}

// operatorKeySession creates an operator key and signs in with it, as the
// console does: the key's id and secret, and the session.
func (e *env) operatorKeySession(description string) (id, secret string, s api.Session) {
	e.t.Helper()
	ctx := context.Background()
	id, secret, err := controlplane.CreateOperatorKey(ctx, e.db, description)
	if err != nil {
		e.t.Fatal(err)
	}
	if s, err = e.anon.Login(ctx, api.SessionRequest{APIKey: id + ":" + secret}); err != nil {
		e.t.Fatalf("sign in with operator key %s: %v", id, err)
	}
	return id, secret, s
}

// raw sends a request with a literal body and returns status and decoded
// error body (if any).
func (e *env) raw(method, path, auth, contentType, body string) (int, api.Error, http.Header) {
	e.t.Helper()
	status, b, h := e.send(method, path, auth, contentType, body)
	var ae api.Error
	if status >= 300 {
		if err := json.Unmarshal(b, &ae); err != nil || ae.Code == "" || ae.Message == "" {
			e.t.Fatalf("%s %s: status %d with a body that is not a catalogue error: %q", method, path, status, b)
		}
	}
	return status, ae, h
}

// send makes one request to the control plane, with the Content-Type and
// Authorization headers that are set, and returns the answer's status,
// body and headers.
func (e *env) send(method, path, auth, contentType, body string) (int, []byte, http.Header) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if !client.IsCode(err, code) {
		t.Fatalf("got %v, want error code %s", err, code)
	}
}
