package deploytest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
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

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
	"github.com/sluicehq/sluice/contract/testkit"
	"github.com/sluicehq/sluice/controlplane/mail"
	"github.com/sluicehq/sluice/controlplane/pgtest"
)

// TestChartCellOnTwoControlPlanes runs what the chart renders, as the
// operations guide deploys it: the migration Job, the control plane
// Deployment's two replicas on one Postgres behind a Service, and a cell's
// StatefulSet of three brokers, each from the rendered arguments,
// environment and config files (the brokers register themselves from
// their pod identity). The fleet is built with the guide's tenantd admin
// and tenantd certs commands. Control-plane clients are spread over both
// instances and the brokers' long-polls land on either through the
// Service; then one instance is killed, and topics are still created and
// served through the other. It runs plaintext and with the chart's TLS
// Secret (HTTPS control plane, SASL_SSL Kafka, brokers trusting ca.crt).
func TestChartCellOnTwoControlPlanes(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: builds and runs tenantd processes")
	}
	bin := buildTenantd(t)
	t.Run("plaintext", func(t *testing.T) { runChartCell(t, bin, "testdata/loopback.yaml", false) })
	t.Run("tls", func(t *testing.T) { runChartCell(t, bin, "testdata/loopback-tls.yaml", true) })
}

// runChartCell is TestChartCellOnTwoControlPlanes for one values file;
// with withTLS the chart's TLS Secret holds a certificate for 127.0.0.1
// and every client trusts its CA.
func runChartCell(t *testing.T, bin, values string, withTLS bool) {
	ctx := context.Background()
	r := render(t, values)
	checkEnvNames(t, bin, r)
	dbURL := pgtest.New(t)

	p := newPods(t, bin, r)
	p.secrets["sluice-database"] = map[string]string{"url": dbURL}
	mailDir := t.TempDir()
	scheme, hc, tlsCfg, adminTLS := "http", http.DefaultClient, (*tls.Config)(nil), []string(nil)
	if withTLS {
		dir := t.TempDir()
		tenantd(t, bin, nil, "certs", "ca", "-cell", "listeners", "-dir", dir)
		tenantd(t, bin, nil, "certs", "node", "-node-id", "1", "-host", "127.0.0.1,localhost", "-dir", dir)
		for _, f := range [][2]string{{"node-1.pem", "tls.crt"}, {"node-1-key.pem", "tls.key"}, {"ca.pem", "ca.crt"}} {
			if err := os.Rename(filepath.Join(dir, f[0]), filepath.Join(dir, f[1])); err != nil {
				t.Fatal(err)
			}
		}
		os.Remove(filepath.Join(dir, "ca-key.pem"))
		p.secretDirs["sluice-tls"] = dir
		pem, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		tlsCfg = &tls.Config{RootCAs: pool}
		hc = &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: 30 * time.Second}
		scheme, adminTLS = "https", []string{"SLUICE_TLS_CA_FILE=" + filepath.Join(dir, "ca.crt")}
	}
	newClient := func(u string, opts ...client.Option) *client.Client {
		return client.New(u, append([]client.Option{client.WithHTTPClient(hc)}, opts...)...)
	}
	get := func(u string) error { return getWith(hc, u) }

	// The migration Job, then the first operator key as the guide makes it.
	if err := p.start("sluice-migrate", r.Jobs[0].Spec.Template.Spec, nil).wait(2 * time.Minute); err != nil {
		t.Fatalf("migration Job: %v", err)
	}
	keyFile := filepath.Join(t.TempDir(), "operator-key")
	tenantd(t, bin, nil, "migrate", "-database-url", dbURL, "-operator-key-file", keyFile)
	opKey, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	opID, opSecret, _ := strings.Cut(strings.TrimSpace(string(opKey)), ":")

	// Two control planes, and their Service.
	d := deployment(t, r, "controlplane")
	if *d.Spec.Replicas != 2 {
		t.Fatalf("control plane replicas %d, want the default 2", *d.Spec.Replicas)
	}
	port := strconv.Itoa(int(d.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort))
	var cps []*proc
	var cpURLs, backends []string
	for i := 0; i < 2; i++ {
		name := fmt.Sprintf("sluice-controlplane-%d", i)
		cps = append(cps, p.start(name, d.Spec.Template.Spec, nil, "SLUICE_MAIL_DIR="+mailDir))
		backends = append(backends, p.addr(name, port))
		cpURLs = append(cpURLs, scheme+"://"+p.addr(name, port))
	}
	svcURL := scheme + "://" + p.addr("sluice-controlplane", port)
	service(t, p.addr("sluice-controlplane", port), backends)
	for _, u := range cpURLs {
		waitFor(t, "control plane "+u, 60*time.Second, func() error { return get(u + "/healthz") })
	}

	// The billing worker, ready once its rounds reach the database; the
	// control planes run none (their config turns theirs off).
	bd := deployment(t, r, "billing")
	p.start("sluice-billing-0", bd.Spec.Template.Spec, nil)
	bports := map[string]string{}
	for _, cp := range bd.Spec.Template.Spec.Containers[0].Ports {
		bports[cp.Name] = strconv.Itoa(int(cp.ContainerPort))
	}
	billingHealth := "http://" + p.addr("sluice-billing-0", bports["health"])
	waitFor(t, "billing worker ready", 60*time.Second, func() error { return getWith(http.DefaultClient, billingHealth+"/readyz") })
	waitFor(t, "billing worker rounds in its metrics", 60*time.Second, func() error {
		resp, err := http.Get("http://" + p.addr("sluice-billing-0", bports["metrics"]) + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), `sluice_billing_rounds_total{result="ledger_only"} `) ||
			strings.Contains(string(b), `sluice_billing_rounds_total{result="ledger_only"} 0`+"\n") {
			return fmt.Errorf("no ledger-only round yet")
		}
		return nil
	})

	// The fleet, with the guide's commands.
	opEnv := append([]string{"SLUICE_ENDPOINT=" + svcURL, "SLUICE_API_KEY_ID=" + opID, "SLUICE_API_KEY_SECRET=" + opSecret}, adminTLS...)
	tenantd(t, bin, opEnv, "admin", "pools", "create", "shared", "-kind", "shared")
	tenantd(t, bin, opEnv, "admin", "cells", "create", "cell-a", "-pool", "shared")
	cellKey := strings.TrimSpace(tenantd(t, bin, opEnv, "admin", "cells", "key", "cell-a"))
	certDir := t.TempDir()
	tenantd(t, bin, nil, "certs", "ca", "-cell", "cell-a", "-dir", certDir)
	for n := 1; n <= 3; n++ {
		tenantd(t, bin, nil, "certs", "node", "-node-id", strconv.Itoa(n), "-dir", certDir)
	}
	if err := os.Remove(filepath.Join(certDir, "ca-key.pem")); err != nil { // kept off the brokers
		t.Fatal(err)
	}
	sts := r.StatefulSets[0]
	cell := sts.Spec.Template.Spec
	p.secrets["sluice-cell-a-key"] = map[string]string{"cell-key": cellKey}
	p.secretDirs["sluice-cell-a-peer"] = certDir

	// The StatefulSet's three pods.
	var kafkaAddrs []string
	for i := 0; i < int(*sts.Spec.Replicas); i++ {
		pod := fmt.Sprintf("%s-%d", sts.Name, i)
		p.start(pod, cell, map[string]string{"metadata.name": pod, "metadata.namespace": "prod",
			"metadata.labels['apps.kubernetes.io/pod-index']": strconv.Itoa(i)})
		kafkaAddrs = append(kafkaAddrs, p.addr(pod, "9092"))
	}
	op := newClient(svcURL, client.WithAPIKey(opID, opSecret))
	waitFor(t, "the brokers to register their pod addresses", 60*time.Second, func() error {
		bs, err := op.AdminBrokers(ctx)
		if err != nil {
			return err
		}
		got := map[string]string{}
		for _, b := range bs {
			got[b.ID] = fmt.Sprintf("%d %s %s %s", b.NodeID, b.KafkaAddr, b.HTTPAddr, b.RaftAddr)
		}
		for i := 0; i < 3; i++ {
			pod := fmt.Sprintf("%s-%d", sts.Name, i)
			want := fmt.Sprintf("%d %s %s %s", i+1, p.addr(pod, "9092"), p.addr(pod, "8090"), p.addr(pod, "7000"))
			if got[pod] != want {
				return fmt.Errorf("broker %s is %q, want %q", pod, got[pod], want)
			}
		}
		return nil
	})
	for i := 0; i < 3; i++ {
		u := "http://" + p.addr(fmt.Sprintf("%s-%d", sts.Name, i), "8081") + "/readyz"
		waitFor(t, "readiness of broker "+strconv.Itoa(i), 90*time.Second, func() error { return getWith(http.DefaultClient, u) })
	}

	// A tenant through instance 0, its topic through instance 1.
	anon := newClient(cpURLs[0])
	email := "ops@two.test"
	if _, err := anon.Signup(ctx, api.SignupRequest{TenantName: "two", Email: email, Password: "two control planes 1"}); err != nil {
		t.Fatal(err)
	}
	text, err := mail.Last(mailDir, email)
	if err != nil {
		t.Fatal(err)
	}
	su, err := newClient(cpURLs[1]).ConfirmSignup(ctx, mail.Token(text))
	if err != nil {
		t.Fatal(err)
	}
	key, err := newClient(cpURLs[0], client.WithSession(su.Session.Token)).CreateAPIKey(ctx, api.CreateAPIKeyRequest{Description: "clients"})
	if err != nil {
		t.Fatal(err)
	}
	tenant := func(u string) *client.Client { return newClient(u, client.WithAPIKey(key.ID, key.Secret)) }
	if _, err := tenant(cpURLs[1]).CreateTopic(ctx, api.CreateTopicRequest{Name: "before", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, kafkaAddrs, tlsCfg, key.ID, key.Secret, "before")

	// Kill instance 0; the Service, brokers and clients go on with 1.
	// The test's HTTP client may hold a kept-alive connection through the
	// Service to instance 0 (the operator's polls above): a request on it
	// is reset, as on a real Service, and a POST is not retried. New
	// connections are what must reach the survivor.
	cps[0].kill()
	hc.CloseIdleConnections()
	if _, err := tenant(svcURL).CreateTopic(ctx, api.CreateTopicRequest{Name: "after", Partitions: 3}); err != nil {
		t.Fatalf("create a topic through the Service with one control plane killed: %v", err)
	}
	roundTrip(t, kafkaAddrs, tlsCfg, key.ID, key.Secret, "after")
	if ts, err := tenant(svcURL).Topics(ctx); err != nil || len(ts) != 2 {
		t.Fatalf("topics through the survivor: %+v, %v", ts, err)
	}
	if err := get(cpURLs[1] + "/healthz"); err != nil {
		t.Fatalf("the surviving control plane: %v", err)
	}
}

// roundTrip produces records to topic through the brokers and reads them
// back, waiting for the topic's partitions to get leaders.
func roundTrip(t *testing.T, seeds []string, tlsCfg *tls.Config, id, secret, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.SASL(plain.Auth{User: id, Pass: secret}.AsMechanism()),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RequiredAcks(kgo.AllISRAcks())}
	if tlsCfg != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsCfg.Clone()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 20
	for i := 0; i < n; i++ {
		rec := &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte(topic + "-" + strconv.Itoa(i))}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	seen := map[string]bool{}
	for len(seen) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s: %d of %d records: %v", topic, len(seen), n, err)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
}

// checkEnvNames: every SLUICE_* variable the chart sets is one tenantd
// reads (its flags' help names each), so a renamed variable cannot be
// silently ignored.
func checkEnvNames(t *testing.T, bin string, r rendered) {
	t.Helper()
	known := map[string]bool{}
	for _, role := range []string{"broker", "controlplane", "billing"} {
		out, _ := exec.Command(bin, role, "-h").CombinedOutput()
		for _, n := range sluiceEnvs.FindAllString(string(out), -1) {
			known[n] = true
		}
	}
	var specs []string
	check := func(what string, envs []string) {
		for _, e := range envs {
			if strings.HasPrefix(e, "SLUICE_") && !known[e] {
				t.Errorf("%s sets %s, which tenantd does not read", what, e)
			}
			specs = append(specs, e)
		}
	}
	names := func(c []string) []string { return c }
	for _, d := range r.Deployments {
		var n []string
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			n = append(n, e.Name)
		}
		check("Deployment "+d.Name, names(n))
	}
	for _, s := range r.StatefulSets {
		var n []string
		for _, e := range s.Spec.Template.Spec.Containers[0].Env {
			n = append(n, e.Name)
		}
		check("StatefulSet "+s.Name, names(n))
	}
	if len(specs) == 0 || len(known) < 10 {
		t.Fatalf("found %d variables in the chart and %d in tenantd's help", len(specs), len(known))
	}
}

func getWith(hc *http.Client, u string) error {
	resp, err := hc.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return fmt.Errorf("GET %s: %s %v", u, resp.Status, body)
	}
	return nil
}

// waitFor polls cond until it returns nil, failing the test after limit
// (testkit.WaitFor) with cond's last error logged.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() error) {
	t.Helper()
	var last error
	defer func() {
		if t.Failed() && last != nil {
			t.Logf("%s: last error: %v", what, last)
		}
	}()
	testkit.WaitFor(t, limit, what, func() bool { last = cond(); return last == nil })
}
