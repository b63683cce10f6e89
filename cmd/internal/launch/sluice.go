package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/controlplane/mail"
	"github.com/sluicehq/sluice/dataplane/peercert"
)

// DB is a scratch Postgres database.
type DB struct {
	AdminURL string // the database it was created from
	Name     string
	URL      string // AdminURL pointing at Name
}

// CreateDB creates a database named prefix and a random suffix through the
// Postgres at adminURL (a user that may create databases).
func CreateDB(ctx context.Context, adminURL, prefix string) (*DB, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	d := &DB{AdminURL: adminURL, Name: prefix + hex.EncodeToString(b[:])}
	var err error
	if d.URL, err = withDatabase(adminURL, d.Name); err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres at %s: %w", adminURL, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+d.Name); err != nil {
		return nil, fmt.Errorf("create scratch database: %w", err)
	}
	return d, nil
}

// withDatabase returns the Postgres URL u pointing at database db.
func withDatabase(u, db string) (string, error) {
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "postgres" && parsed.Scheme != "postgresql") {
		return "", fmt.Errorf("postgres url %q: want postgres://user@host:port/db", u)
	}
	parsed.Path = "/" + db
	parsed.RawPath = ""
	return parsed.String(), nil
}

// Drop drops the database, closing its connections; bounded by 30 s.
func (d *DB) Drop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, d.AdminURL)
	if err != nil {
		return fmt.Errorf("drop scratch database %s: %w", d.Name, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+d.Name+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop scratch database %s: %w", d.Name, err)
	}
	return nil
}

// ControlPlane is a running `tenantd controlplane`.
type ControlPlane struct {
	URL      string
	Proc     *Proc
	Operator *client.Client // an operator key's client
	// MailDir keeps the mail the control plane would send (-mail-dir):
	// signup and invitation tokens.
	MailDir string
}

// StartControlPlane applies the migrations to databaseURL and makes an
// operator key (`tenantd migrate`, as an operator would), starts `tenantd
// controlplane` on listen with its log in dir, and waits (60 s at most)
// until it is healthy.
func StartControlPlane(ctx context.Context, tenantd, databaseURL, listen, dir, logLevel string) (*ControlPlane, error) {
	keyFile := filepath.Join(dir, "operator-key")
	out, err := exec.CommandContext(ctx, tenantd, "migrate", "-database-url", databaseURL, "-operator-key-file", keyFile).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("tenantd migrate: %w\n%s", err, out)
	}
	opKey, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("read the operator key: %w", err)
	}
	opID, opSecret, _ := strings.Cut(strings.TrimSpace(string(opKey)), ":")
	cp := &ControlPlane{URL: "http://" + listen, MailDir: filepath.Join(dir, "mail")}
	cp.Proc, err = Start("tenantd controlplane", filepath.Join(dir, "controlplane.log"), nil,
		tenantd, "controlplane", "-database-url", databaseURL, "-listen", listen, "-log-level", logLevel,
		"-mail-dir", cp.MailDir)
	if err != nil {
		return nil, err
	}
	if err := cp.Proc.WaitOK(ctx, "control plane healthy", cp.URL+"/healthz", 60*time.Second); err != nil {
		cp.Proc.Stop(15 * time.Second)
		return nil, err
	}
	cp.Operator = client.New(cp.URL, client.WithAPIKey(opID, opSecret))
	return cp, nil
}

// Broker is one broker of a cell: what the control plane lists for it and
// how its process is started.
type Broker struct {
	ID     string
	NodeID int
	// Kafka, HTTP and Raft are the addresses the cell state lists: clients
	// and peers dial them. RaftListen, if set, is where the broker listens
	// for Raft instead (behind a proxy on Raft).
	Kafka, HTTP, Raft, RaftListen string
	DataDir                       string         // the broker's data lands in DataDir/ID
	Debug                         string         // -debug-listen (pprof), "" for none
	Peer                          peercert.Files // set by SeedCell
	Args                          []string       // further tenantd broker flags
}

// SeedCell creates pool (shared) and cellID in it, peer certificates for
// the brokers under certDir, registers the brokers, and returns the cell
// key as id:secret.
func SeedCell(ctx context.Context, op *client.Client, pool, cellID, certDir string, brokers []*Broker) (string, error) {
	if _, err := op.AdminCreatePool(ctx, api.CreatePoolRequest{ID: pool, Kind: "shared", Description: pool}); err != nil {
		return "", fmt.Errorf("create pool: %w", err)
	}
	if _, err := op.AdminCreateCell(ctx, api.CreateCellRequest{ID: cellID, PoolID: pool}); err != nil {
		return "", fmt.Errorf("create cell: %w", err)
	}
	nodes := make([]string, len(brokers))
	for i, b := range brokers {
		nodes[i] = strconv.Itoa(b.NodeID)
	}
	peers, err := peercert.EnsureDir(certDir, cellID, nodes)
	if err != nil {
		return "", fmt.Errorf("make peer certificates: %w", err)
	}
	for _, b := range brokers {
		b.Peer = peers[strconv.Itoa(b.NodeID)]
		if _, err := op.AdminCreateBroker(ctx, api.CreateBrokerRequest{ID: b.ID, CellID: cellID, NodeID: b.NodeID,
			KafkaAddr: b.Kafka, HTTPAddr: b.HTTP, RaftAddr: b.Raft}); err != nil {
			return "", fmt.Errorf("create broker %s: %w", b.ID, err)
		}
	}
	ck, err := op.AdminCreateCellKey(ctx, cellID)
	if err != nil {
		return "", fmt.Errorf("create cell key: %w", err)
	}
	return ck.ID + ":" + ck.Secret, nil
}

// Start starts `tenantd broker` for b in cellID, following the control
// plane at apiURL with cellKey (passed in the environment, not on the
// command line), its output appended to logPath.
func (b *Broker) Start(tenantd, apiURL, cellID, cellKey, logLevel, logPath string) (*Proc, error) {
	args := []string{"broker", "-cell", cellID, "-broker-id", b.ID, "-api", apiURL, "-data-dir", filepath.Join(b.DataDir, b.ID),
		"-log-level", logLevel, "-peer-ca-file", b.Peer.CA, "-peer-cert-file", b.Peer.Cert, "-peer-key-file", b.Peer.Key}
	if b.RaftListen != "" {
		args = append(args, "-raft-listen", b.RaftListen, "-raft-advertise", b.Raft)
	}
	if b.Debug != "" {
		args = append(args, "-debug-listen", b.Debug)
	}
	args = append(args, b.Args...)
	return Start("tenantd broker "+b.ID, logPath, []string{"SLUICE_CELL_KEY=" + cellKey}, tenantd, args...)
}

// Tenant is a signed-up tenant with an API key.
type Tenant struct {
	ID          string
	KeyID       string // the API key: SASL/PLAIN username and password
	Secret      string
	Client      *client.Client // the API key's client
	OwnerClient *client.Client // the owner's session's client
}

// SignUp signs up a tenant (its owner's email derived from name) on plan
// ("" for the default) and creates an API key for it.
func SignUp(ctx context.Context, cp *ControlPlane, name, plan string) (*Tenant, error) {
	apiURL, email := cp.URL, name+"@sluice.test"
	anon := client.New(apiURL)
	if _, err := anon.Signup(ctx, api.SignupRequest{TenantName: name, Email: email,
		Password: name + " " + name + " password 1", Plan: plan}); err != nil {
		return nil, fmt.Errorf("sign up tenant %s: %w", name, err)
	}
	// The control plane sends no mail: its mail dir has the token.
	text, err := mail.Last(cp.MailDir, email)
	if err != nil {
		return nil, fmt.Errorf("read the signup mail of tenant %s: %w", name, err)
	}
	su, err := anon.ConfirmSignup(ctx, mail.Token(text))
	if err != nil {
		return nil, fmt.Errorf("confirm the signup of tenant %s: %w", name, err)
	}
	owner := client.New(apiURL, client.WithSession(su.Session.Token))
	key, err := owner.CreateAPIKey(ctx, api.CreateAPIKeyRequest{Description: name + " clients"})
	if err != nil {
		return nil, fmt.Errorf("create the api key of tenant %s: %w", name, err)
	}
	return &Tenant{ID: su.Tenant.ID, KeyID: key.ID, Secret: key.Secret, OwnerClient: owner,
		Client: client.New(apiURL, client.WithAPIKey(key.ID, key.Secret))}, nil
}
