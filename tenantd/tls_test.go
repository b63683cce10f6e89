package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluicehq/sluice/dataplane/celltest"
	"github.com/sluicehq/sluice/dataplane/peercert"
)

// TestDevTLS runs `tenantd dev -tls` and uses every listener over TLS as
// its banner says: the control plane and console over HTTPS with the CA
// it names (the console calling the API at its own https address), kcat
// and franz-go producing and consuming over SASL_SSL with PLAIN,
// SCRAM-SHA-256 and SCRAM-SHA-512, /v1/cluster listing https:// data
// endpoints, the HTTP data API over HTTPS (reads of partitions other
// brokers lead forwarded over HTTPS) and tenantd admin with the CA.
// Plaintext and an untrusted client are refused on the HTTP ports. Then a
// new certificate in the data dir and a SIGHUP: new connections get it
// without a restart.
func TestDevTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tenantd")
	}
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed: run `make tools` (it installs Debian's kcat)")
	}
	d := startDev(t, "-tls")
	if !strings.HasPrefix(d.APIURL, "https://") || d.CAFile == "" {
		t.Fatalf("dev -tls banner: API %s, CA file %q", d.APIURL, d.CAFile)
	}
	pool, err := peercert.LoadPool(d.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	call := func(method, url, auth, body string, want int) map[string]any {
		t.Helper()
		return devCall(t, hc, method, url, auth, body, want)
	}
	id, secret := devKey(t, d, hc, "acme", "tls")
	basic := "Basic " + b64(id+":"+secret)
	call("POST", d.APIURL+"/v1/topics", basic, `{"name":"orders","partitions":3}`, 201)
	consoleOperatorSignIn(t, d.APIURL, d.OpKey, "acme", tr)
	// tenantd admin, pointed at the CA as the banner says.
	adminCmd := exec.Command(d.Bin, "admin", "tenants", "list")
	adminCmd.Env = append(append(os.Environ(), d.OpEnv...), "SLUICE_TLS_CA_FILE="+d.CAFile)
	if out, err := adminCmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "acme") {
		t.Fatalf("tenantd admin over https: %v\n%s", err, out)
	}

	// Plaintext, and a client without the CA, are refused on the HTTP ports.
	for _, addr := range []string{strings.TrimPrefix(d.APIURL, "https://"), d.HTTPData} {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(b), "ok") {
				t.Fatalf("plaintext on %s: %d %s", addr, resp.StatusCode, b)
			}
		}
		if _, err := http.Get("https://" + addr + "/healthz"); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("a client without the dev CA reached %s: %v", addr, err)
		}
		call("GET", "https://"+addr+"/healthz", "", "", 200)
	}

	// kcat and franz-go over SASL_SSL with each mechanism, as the banner
	// says: each produces under its own prefix and reads everything back.
	mechanisms := []struct {
		name string
		mech func(user, pass string) sasl.Mechanism
	}{
		{"PLAIN", func(u, p string) sasl.Mechanism { return plain.Auth{User: u, Pass: p}.AsMechanism() }},
		{"SCRAM-SHA-256", func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha256Mechanism() }},
		{"SCRAM-SHA-512", func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha512Mechanism() }},
	}
	produced := 0
	for _, m := range mechanisms {
		sasl := []string{"-b", d.Bootstrap, "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + d.CAFile,
			"-X", "sasl.mechanisms=" + m.name, "-X", "sasl.username=" + id, "-X", "sasl.password=" + secret}
		celltest.WaitFor(t, 30*time.Second, "kcat -L over SASL_SSL with "+m.name+" lists the topic", func() bool {
			out, err := runBounded(exec.Command(kcat, append(sasl, "-L", "-t", "orders")...), 20*time.Second)
			return err == nil && strings.Contains(string(out), `topic "orders" with 3 partitions`)
		})
		var in strings.Builder
		for i := range 10 {
			fmt.Fprintf(&in, "k%d:kcat-%s-%d\n", i%3, m.name, i)
		}
		prod := exec.Command(kcat, append(sasl, "-t", "orders", "-P", "-K:", "-X", "acks=all")...)
		prod.Stdin = strings.NewReader(in.String())
		if out, err := runBounded(prod, 60*time.Second); err != nil {
			t.Fatalf("kcat produce over SASL_SSL with %s: %v\n%s\n%s", m.name, err, out, d.Stderr.String())
		}
		produced += 10
		out, err := runBounded(exec.Command(kcat, append(sasl, "-t", "orders", "-C", "-o", "beginning", "-e", "-f", "%s\n")...), 60*time.Second)
		if err != nil {
			t.Fatalf("kcat consume over SASL_SSL with %s: %v\n%s", m.name, err, out)
		}
		if got := regexp.MustCompile(`(?m)^kcat-`+m.name+`-\d+$`).FindAllString(string(out), -1); len(got) != 10 {
			t.Fatalf("kcat read %d of its records over SASL_SSL with %s, want 10:\n%s", len(got), m.name, out)
		}

		cl, err := kgo.NewClient(kgo.SeedBrokers(d.Bootstrap), kgo.DialTLSConfig(&tls.Config{RootCAs: pool}),
			kgo.SASL(m.mech(id, secret)),
			kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("franz-" + m.name)}).FirstErr(); err != nil {
			t.Fatalf("franz-go produce over SASL_SSL with %s: %v", m.name, err)
		}
		produced++
		consumed, own := 0, 0
		for consumed < produced {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("franz-go consumed %d of %d records over SASL_SSL with %s", consumed, produced, m.name)
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("franz-go fetch over SASL_SSL with %s: %v", m.name, err) })
			fs.EachRecord(func(r *kgo.Record) {
				if string(r.Value) == "franz-"+m.name {
					own++
				}
			})
			consumed += fs.NumRecords()
		}
		cancel()
		cl.Close()
		if consumed != produced || own != 1 {
			t.Fatalf("franz-go with %s read %d records (%d its own), want %d (1)", m.name, consumed, own, produced)
		}
	}

	// /v1/cluster lists the HTTPS data endpoints the brokers serve.
	celltest.WaitFor(t, 30*time.Second, "/v1/cluster to list https:// data endpoints", func() bool {
		eps, _ := call("GET", d.APIURL+"/v1/cluster", basic, "", 200)["http_endpoints"].([]any)
		if len(eps) != 3 {
			return false
		}
		for _, e := range eps {
			if !strings.HasPrefix(e.(string), "https://") {
				return false
			}
		}
		return true
	})

	// The HTTP data API over HTTPS, all partitions through the first
	// broker: the others' are forwarded to their leaders over HTTPS.
	read := 0
	for p := range 3 {
		r := call("GET", fmt.Sprintf("https://%s/v1/topics/orders/partitions/%d/messages?offset=0", d.HTTPData, p), basic, "", 200)
		read += len(r["messages"].([]any))
	}
	if read != produced {
		t.Fatalf("read %d records over the HTTPS data API, want %d", read, produced)
	}

	// A renewed certificate, then SIGHUP: new connections get it.
	dir := filepath.Join(d.DataDir, "tls")
	ca, err := peercert.LoadCA(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.IssueServer(devTLSHosts, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := kp.WriteFiles(filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")); err != nil {
		t.Fatal(err)
	}
	renewed, err := kp.TLS()
	if err != nil {
		t.Fatal(err)
	}
	if served(t, d.Bootstrap, pool, renewed) {
		t.Fatal("the renewed certificate is served before SIGHUP")
	}
	if err := d.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{strings.TrimPrefix(d.APIURL, "https://"), d.HTTPData, d.Bootstrap} {
		celltest.WaitFor(t, 10*time.Second, "the renewed certificate served on "+addr, func() bool { return served(t, addr, pool, renewed) })
	}
	call("GET", d.APIURL+"/healthz", "", "", 200)
}

// served reports whether a new TLS connection to addr, verified with
// pool, gets want's certificate.
func served(t *testing.T, addr string, pool *x509.CertPool, want *tls.Certificate) bool {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("tls dial %s: %v", addr, err)
	}
	defer conn.Close()
	return bytes.Equal(conn.ConnectionState().PeerCertificates[0].Raw, want.Certificate[0])
}
