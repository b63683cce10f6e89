package kafka_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/controlplane/cptest"
	"github.com/sluicehq/sluice/dataplane/kafka"
)

// saslClient is a franz-go client of the broker signing in only with the
// mechanism among opts (broker.client signs in with PLAIN).
func saslClient(t *testing.T, b *broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.addr), kgo.RetryTimeout(20 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// saslMechanisms are the ways a client signs in with a key: the SCRAM
// mechanisms beside PLAIN.
var saslMechanisms = []struct {
	name string
	mech func(user, pass string) sasl.Mechanism
}{
	{"PLAIN", func(u, p string) sasl.Mechanism { return plain.Auth{User: u, Pass: p}.AsMechanism() }},
	{"SCRAM-SHA-256", func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha256Mechanism() }},
	{"SCRAM-SHA-512", func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha512Mechanism() }},
}

// TestSASLMechanismsProduceConsume: franz-go clients produce and consume
// with each mechanism and the key's secret.
func TestSASLMechanismsProduceConsume(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	a := b.cp.Signup("scramco", "developer")
	b.waitForKey(t, a)
	for _, m := range saslMechanisms {
		t.Run(m.name, func(t *testing.T) {
			topic := strings.ToLower(strings.ReplaceAll(m.name, "-", ""))
			b.createTopic(t, a, topic, 2, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			prod := saslClient(t, b, kgo.SASL(m.mech(a.KeyID, a.Secret)), kgo.DefaultProduceTopic(topic))
			const n = 20
			for i := range n {
				if err := prod.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
					t.Fatalf("produce %d: %v", i, err)
				}
			}
			cons := saslClient(t, b, kgo.SASL(m.mech(a.KeyID, a.Secret)), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			got := 0
			for got < n {
				fs := cons.PollFetches(ctx)
				if err := fs.Err0(); err != nil {
					t.Fatalf("consume after %d records: %v", got, err)
				}
				got += fs.NumRecords()
			}
			if got != n {
				t.Fatalf("consumed %d records, want %d", got, n)
			}
		})
	}
}

// scramLogin runs SaslHandshake v1 and the SCRAM exchange over
// SaslAuthenticate on rc with franz-go's SCRAM client, and returns the
// first answer with an error, or the last one.
func scramLogin(t testing.TB, rc *rawConn, mechanism, user, pass string) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	auth := scram.Auth{User: user, Pass: pass}
	mech := auth.AsSha256Mechanism()
	if mechanism == "SCRAM-SHA-512" {
		mech = auth.AsSha512Mechanism()
	}
	if hs := rc.handshake(1, mechanism); hs.ErrorCode != 0 {
		t.Fatalf("handshake: %+v", hs)
	}
	sess, msg, err := mech.Authenticate(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for {
		au := kmsg.NewPtrSASLAuthenticateRequest()
		au.Version, au.SASLAuthBytes = 1, msg
		r, err := rc.roundTrip(au)
		if err != nil {
			t.Fatalf("authenticate: %v", err)
		}
		ar := r.(*kmsg.SASLAuthenticateResponse)
		if ar.ErrorCode != 0 {
			return ar
		}
		done, next, err := sess.Challenge(ar.SASLAuthBytes)
		if err != nil {
			t.Fatalf("client refused the server's answer: %v", err)
		}
		if done {
			return ar
		}
		msg = next
	}
}

// TestScramRefusals: a wrong secret, a revoked key, a key of no tenant on
// the cell and a key made before SCRAM are refused with SASL errors that
// say what to do, and the connection closes; SCRAM after a v0 handshake is
// not offered.
func TestScramRefusals(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	a := b.cp.Signup("scramno", "developer")
	revoked := b.cp.Signup("scramrevoked", "developer")
	old := b.cp.Signup("scramold", "developer")
	if _, err := b.cp.DB.Exec(context.Background(), `UPDATE api_keys SET scram_credentials = NULL WHERE id = $1`, old.KeyID); err != nil {
		t.Fatal(err)
	}
	for _, tn := range []*cptest.Tenant{a, revoked, old} {
		b.waitForKey(t, tn)
	}
	if _, err := revoked.Owner.RevokeAPIKey(context.Background(), revoked.KeyID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the revoked key to leave the broker", func() bool { return !b.state.View().HasKey(revoked.KeyID) })
	// The revocation changes the cell's state, which then carries the
	// cleared credentials too.
	waitFor(t, "the key without SCRAM credentials to reach the broker", func() bool {
		for _, k := range b.state.View().TenantKeys(old.Tenant.ID) {
			if k.ID == old.KeyID {
				return k.Scram == nil
			}
		}
		return false
	})

	for _, tc := range []struct {
		name, mech, user, pass, wantMsg string
	}{
		{"wrong secret", "SCRAM-SHA-256", a.KeyID, a.Secret + "x", "the API key id or secret is wrong"},
		{"wrong secret 512", "SCRAM-SHA-512", a.KeyID, "nope", "the API key id or secret is wrong"},
		{"revoked key", "SCRAM-SHA-256", revoked.KeyID, revoked.Secret, "use SASL/PLAIN here"},
		{"unknown key", "SCRAM-SHA-512", "SLKAAAAAAAAAAAAAAAA", "x", "SCRAM never sends the secret"},
		{"key made before SCRAM", "SCRAM-SHA-256", old.KeyID, old.Secret, "use SASL/PLAIN with it, or create a new API key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, b.addr)
			resp := scramLogin(t, rc, tc.mech, tc.user, tc.pass)
			if resp.ErrorCode != 58 || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, tc.wantMsg) {
				t.Fatalf("code %d message %v, want 58 and %q", resp.ErrorCode, resp.ErrorMessage, tc.wantMsg)
			}
			rc.expectClosed(5 * time.Second)
		})
	}
	t.Run("PLAIN still serves the key made before SCRAM", func(t *testing.T) {
		rc := dialRaw(t, b.addr)
		if resp := rc.authenticate(old.KeyID, old.Secret); resp.ErrorCode != 0 {
			t.Fatalf("PLAIN refused: %d %v", resp.ErrorCode, resp.ErrorMessage)
		}
	})
	t.Run("SCRAM after a v0 handshake", func(t *testing.T) {
		rc := dialRaw(t, b.addr)
		if hr := rc.handshake(0, "SCRAM-SHA-256"); hr.ErrorCode != 33 {
			t.Fatalf("v0 SCRAM handshake: code %d", hr.ErrorCode)
		}
	})
}

// TestScramHandshakeAdvertises: SaslHandshake lists the three mechanisms.
func TestScramHandshakeAdvertises(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	rc := dialRaw(t, b.addr)
	hr := rc.handshake(1, "SCRAM-SHA-512")
	if got := strings.Join(hr.SupportedMechanisms, ","); hr.ErrorCode != 0 || got != "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" {
		t.Fatalf("handshake: code %d mechanisms %s", hr.ErrorCode, got)
	}
}

// TestScramRevokedWhileConnected: a SCRAM connection closes when its key is
// revoked, as a PLAIN one does.
func TestScramRevokedWhileConnected(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	a := b.cp.Signup("scramlive", "developer")
	b.waitForKey(t, a)
	rc := dialRaw(t, b.addr)
	if resp := scramLogin(t, rc, "SCRAM-SHA-512", a.KeyID, a.Secret); resp.ErrorCode != 0 {
		t.Fatalf("login: %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	if _, err := rc.roundTrip(kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatalf("metadata: %v", err)
	}
	if _, err := a.Owner.RevokeAPIKey(context.Background(), a.KeyID); err != nil {
		t.Fatal(err)
	}
	rc.expectClosed(15 * time.Second)
}

// TestDescribeUserScramCredentials: a tenant's client lists its own keys
// with their mechanisms and iterations, never another tenant's; asking for
// another tenant's key answers as for a missing one; altering is refused.
func TestDescribeUserScramCredentials(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	a := b.cp.Signup("scramlist", "developer")
	other := b.cp.Signup("scramother", "developer")
	second, err := a.Owner.CreateAPIKey(context.Background(), api.CreateAPIKeyRequest{Description: "second", Role: "developer"})
	if err != nil {
		t.Fatal(err)
	}
	b.waitForKey(t, other)
	b.waitForKey(t, a)
	waitFor(t, "the second key to reach the broker", func() bool { return b.state.View().HasKey(second.ID) })
	cl := saslClient(t, b, kgo.SASL(scram.Auth{User: a.KeyID, Pass: a.Secret}.AsSha256Mechanism()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	describe := func(users ...string) *kmsg.DescribeUserSCRAMCredentialsResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		for _, u := range users {
			ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
			ru.Name = u
			req.Users = append(req.Users, ru)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("describe: code %d %v", resp.ErrorCode, resp.ErrorMessage)
		}
		return resp
	}

	all := describe()
	var users []string
	for _, r := range all.Results {
		users = append(users, r.User)
		if r.ErrorCode != 0 || len(r.CredentialInfos) != 2 ||
			r.CredentialInfos[0].Mechanism != 1 || r.CredentialInfos[1].Mechanism != 2 ||
			r.CredentialInfos[0].Iterations != 4096 || r.CredentialInfos[1].Iterations != 4096 {
			t.Fatalf("result %+v", r)
		}
	}
	want := []string{a.KeyID, second.ID}
	sort.Strings(want)
	if strings.Join(users, ",") != strings.Join(want, ",") {
		t.Fatalf("listed users %v, want the tenant's keys %v", users, want)
	}

	named := describe(second.ID, other.KeyID, "SLKAAAAAAAAAAAAAAAA")
	if len(named.Results) != 3 || named.Results[0].ErrorCode != 0 || len(named.Results[0].CredentialInfos) != 2 {
		t.Fatalf("named results %+v", named.Results)
	}
	foreign, missing := named.Results[1], named.Results[2]
	if foreign.ErrorCode != 91 || len(foreign.CredentialInfos) != 0 || missing.ErrorCode != 91 ||
		*foreign.ErrorMessage != *missing.ErrorMessage {
		t.Fatalf("another tenant's key %+v, a missing key %+v: want the same RESOURCE_NOT_FOUND", foreign, missing)
	}

	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = a.KeyID, 1, 8192, []byte("salt"), []byte("pw")
	alter.Upsertions = append(alter.Upsertions, up)
	aresp, err := alter.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(aresp.Results) != 1 || aresp.Results[0].ErrorCode != 42 || aresp.Results[0].ErrorMessage == nil ||
		!strings.Contains(*aresp.Results[0].ErrorMessage, "create a new API key") {
		t.Fatalf("alter: %+v", aresp.Results)
	}
	if r := describe(a.KeyID).Results[0]; r.CredentialInfos[0].Iterations != 4096 {
		t.Fatalf("credential altered: %+v", r)
	}
}

// TestKcatScram produces and consumes with kcat (librdkafka) over
// SASL_PLAINTEXT with each SCRAM mechanism.
func TestKcatScram(t *testing.T) {
	kcat := testkit.Kcat(t)
	b := startBroker(t, brokerOpts{})
	a := b.cp.Signup("kcatscram", "developer")
	b.waitForKey(t, a)
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			topic := strings.ToLower(strings.ReplaceAll(mech, "-", ""))
			b.createTopic(t, a, topic, 1, nil)
			run := kcatRunner(t, kcat, b.addr, mech, a, topic)
			run("one\ntwo\nthree\n", "-P", "-X", "acks=all")
			if out := run("", "-C", "-o", "beginning", "-e", "-f", "%s\n"); out != "one\ntwo\nthree\n" {
				t.Fatalf("consumed %q", out)
			}
		})
	}
}

// TestScramAdmin: administration over SCRAM, which never sends the
// secret, is served on the key's behalf with the broker's cell key: an
// admin key's kadm creates a topic, adds partitions, creates an ACL and
// deletes the topic; a client-role key gets no more than its role gives
// on /v1 (refused, as with PLAIN); and a broker without the cell client
// tells a SCRAM connection to use PLAIN.
func TestScramAdmin(t *testing.T) {
	b := startBroker(t, brokerOpts{controlPlane: true})
	a := b.cp.Signup("scramadmin", "admin")
	clientKey, err := a.Owner.CreateAPIKey(context.Background(), api.CreateAPIKeyRequest{Description: "client", Role: "client"})
	if err != nil {
		t.Fatal(err)
	}
	b.waitForKey(t, a)
	b.waitForSecret(t, "the client key", clientKey.ID, clientKey.Secret)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, m := range saslMechanisms[1:] {
		t.Run(m.name, func(t *testing.T) {
			topic := "via" + strings.ToLower(strings.ReplaceAll(m.name, "-", ""))
			adm := kadm.NewClient(saslClient(t, b, kgo.SASL(m.mech(a.KeyID, a.Secret))))
			created, err := adm.CreateTopics(ctx, 1, -1, nil, topic)
			if err != nil {
				t.Fatal(err)
			}
			if r := created[topic]; r.Err != nil {
				t.Fatalf("create %s over %s: %v %s", topic, m.name, r.Err, r.ErrMessage)
			}
			grown, err := adm.CreatePartitions(ctx, 1, topic)
			if err != nil || grown[topic].Err != nil {
				t.Fatalf("add a partition over %s: %v %+v", m.name, err, grown)
			}
			if tp, err := a.Key.Topic(ctx, topic); err != nil || tp.Partitions != 2 {
				t.Fatalf("the topic after CreatePartitions over %s: %+v %v", m.name, tp, err)
			}
			acl := kadm.NewACLs().Topics(topic).Allow("User:" + clientKey.ID).AllowHosts().Operations(kadm.OpRead).
				ResourcePatternType(kadm.ACLPatternLiteral)
			if res, err := adm.CreateACLs(ctx, acl); err != nil || len(res) != 1 || res[0].Err != nil {
				t.Fatalf("create an ACL over %s: %v %+v", m.name, err, res)
			}
			if acls, err := a.Key.ACLs(ctx); err != nil || !slices.ContainsFunc(acls, func(x api.ACL) bool { return x.ResourceName == topic }) {
				t.Fatalf("ACLs after CreateACLs over %s: %+v %v", m.name, acls, err)
			}
			deleted, err := adm.DeleteTopics(ctx, topic)
			if err != nil || deleted[topic].Err != nil {
				t.Fatalf("delete %s over %s: %v %+v", topic, m.name, err, deleted)
			}
			if _, err := a.Key.Topic(ctx, topic); !client.IsCode(err, "topic_not_found") {
				t.Fatalf("the topic after DeleteTopics over %s: %v", m.name, err)
			}
		})
	}

	// A client key gets no more over SCRAM than over /v1: no topic admin.
	weak := kadm.NewClient(saslClient(t, b, kgo.SASL(scram.Auth{User: clientKey.ID, Pass: clientKey.Secret}.AsSha256Mechanism())))
	res, err := weak.CreateTopics(ctx, 1, -1, nil, "notallowed")
	if err != nil {
		t.Fatal(err)
	}
	if r := res["notallowed"]; r.Err == nil {
		t.Fatal("a client key created a topic over SCRAM")
	}
	if _, err := a.Key.Topic(ctx, "notallowed"); !client.IsCode(err, "topic_not_found") {
		t.Fatalf("a client key's refused create left a topic: %v", err)
	}

	// A broker without the cell client asks a SCRAM connection for PLAIN
	// (a raw connection: a client would follow Metadata to the main one).
	addr := b.startServer(t, func(c *kafka.Config) { c.ControlPlane = client.New(b.cp.URL) })
	rc := dialRaw(t, addr)
	if r := scramLogin(t, rc, "SCRAM-SHA-512", a.KeyID, a.Secret); r.ErrorCode != 0 {
		t.Fatalf("scram sign-in: code %d", r.ErrorCode)
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 4
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "nocellclient", 1, -1
	req.Topics = append(req.Topics, rt)
	raw, err := rc.roundTrip(req)
	resp, _ := raw.(*kmsg.CreateTopicsResponse)
	if err != nil || resp == nil || len(resp.Topics) != 1 {
		t.Fatalf("create topics: %v %+v", err, raw)
	}
	if r := resp.Topics[0]; r.ErrorCode != 31 || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "SASL/PLAIN") {
		t.Fatalf("create over SCRAM without a cell client: code %d message %v", r.ErrorCode, r.ErrorMessage)
	}
}
