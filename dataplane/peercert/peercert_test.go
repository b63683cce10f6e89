package peercert

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
)

func TestIssueAndIdentity(t *testing.T) {
	ca, err := NewCA("cell-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue("7", []string{"127.0.0.1", "broker-7.example"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kp.TLS()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Fatalf("verify for usage %v: %v", usage, err)
		}
	}
	cell, id, err := Identity(leaf)
	if err != nil || cell != "cell-1" || id != "7" {
		t.Fatalf("Identity = %q, %q, %v", cell, id, err)
	}
	if got := leaf.URIs[0].String(); got != "sluice://cell/cell-1/node/7" {
		t.Fatalf("URI = %s", got)
	}
	if _, _, err := Identity(ca.Cert); err == nil {
		t.Fatal("the CA certificate passed as a broker identity")
	}
}

func TestEnsureDirReuses(t *testing.T) {
	dir := t.TempDir()
	first, err := EnsureDir(dir, "dev", []string{"1", "2"})
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(first["1"].Cert)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(first["2"].Key); err != nil {
		t.Fatal(err)
	}
	second, err := EnsureDir(dir, "dev", []string{"1", "2", "3"})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(second["1"].Cert)
	if string(before) != string(after) {
		t.Fatal("a valid certificate was reissued")
	}
	cred, r, err := LoadCredentials(second["2"].CA, second["2"].Cert, second["2"].Key)
	if err != nil {
		t.Fatalf("reissued credentials: %v", err)
	}
	if _, err := cred.Certificate(); err != nil {
		t.Fatal(err)
	}
	if err := r.Load(filepath.Join(dir, "missing.pem"), second["3"].Key); err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
	if c, err := r.Get(); err != nil || c == nil {
		t.Fatalf("a failed Load dropped the current certificate: %v", err)
	}
	if err := r.Load(second["3"].Cert, second["3"].Key); err != nil {
		t.Fatal(err)
	}
	c, _ := r.Get()
	leaf, _ := x509.ParseCertificate(c.Certificate[0])
	if _, id, _ := Identity(leaf); id != "3" {
		t.Fatalf("after reload the certificate names %q", id)
	}
	if fi, err := os.Stat(second["3"].Key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", fi.Mode(), err)
	}
}

// TestEnsureServerDir: the dev listener certificate verifies for every
// host against the CA file written beside it, and a second call keeps both.
func TestEnsureServerDir(t *testing.T) {
	dir := t.TempDir()
	hosts := []string{"127.0.0.1", "localhost"}
	f, err := EnsureServerDir(dir, "dev-listeners", hosts)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := LoadPool(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: h}); err != nil {
			t.Fatalf("verify for %s: %v", h, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "example.com"}); err == nil {
		t.Fatal("the certificate verified for a host it was not issued for")
	}
	before, _ := os.ReadFile(f.Cert)
	if _, err := EnsureServerDir(dir, "dev-listeners", hosts); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(f.Cert); string(after) != string(before) {
		t.Fatal("a valid server certificate was issued again")
	}
}
