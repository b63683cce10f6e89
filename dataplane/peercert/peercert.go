// Package peercert owns the certificates brokers of a cell use to
// authenticate each other on the Raft transport: the cell CA, the broker
// certificates it issues, the identity a certificate carries and the PEM
// files they live in.
//
// A broker's identity is one URI SAN, sluice://cell/<cell-id>/node/<server-id>,
// where the server id is the broker's Raft ServerID: in tenantd, its node id
// in the cell state (replicas.ServerID), the id every Raft configuration and
// every transport hello names it by. The CA of a cell carries
// sluice://cell/<cell-id>. Keys are ECDSA P-256; broker certificates carry
// both the server and the client extended key usage, since every broker both
// accepts and dials.
//
// Only dataplane packages, tenantd and test launchers (chaos, compare,
// celltest) may import it; it depends on the standard library alone.
package peercert

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// Scheme is the URI scheme of peer identities.
const Scheme = "sluice"

// DefaultValidity is how long NewCA and Issue make a certificate valid
// when given no duration.
const DefaultValidity = 10 * 365 * 24 * time.Hour

// NodeURI is the identity of the broker with Raft server id serverID in
// cell cellID.
func NodeURI(cellID, serverID string) *url.URL {
	return &url.URL{Scheme: Scheme, Host: "cell", Path: "/" + url.PathEscape(cellID) + "/node/" + url.PathEscape(serverID)}
}

func cellURI(cellID string) *url.URL {
	return &url.URL{Scheme: Scheme, Host: "cell", Path: "/" + url.PathEscape(cellID)}
}

// Identity returns the cell id and Raft server id a broker certificate
// names. It fails unless the certificate has exactly one sluice URI SAN,
// of the node form.
func Identity(cert *x509.Certificate) (cellID, serverID string, err error) {
	var found *url.URL
	for _, u := range cert.URIs {
		if u.Scheme != Scheme {
			continue
		}
		if found != nil {
			return "", "", errors.New("peer identity: more than one sluice URI")
		}
		found = u
	}
	if found == nil {
		return "", "", errors.New("peer identity: no sluice URI in the certificate")
	}
	parts := strings.Split(strings.TrimPrefix(found.EscapedPath(), "/"), "/")
	if found.Host != "cell" || len(parts) != 3 || parts[1] != "node" {
		return "", "", fmt.Errorf("peer identity: %q is not a broker identity", found.String())
	}
	cellID, err1 := url.PathUnescape(parts[0])
	serverID, err2 := url.PathUnescape(parts[2])
	if err := errors.Join(err1, err2); err != nil {
		return "", "", fmt.Errorf("peer identity %q: %w", found.String(), err)
	}
	if cellID == "" || serverID == "" {
		return "", "", fmt.Errorf("peer identity: %q names an empty id", found.String())
	}
	return cellID, serverID, nil
}

// CA is a cell's certificate authority.
type CA struct {
	CellID string
	Cert   *x509.Certificate
	Key    crypto.Signer
}

// NewCA makes a self-signed CA for cell cellID, valid for validFor
// (DefaultValidity if zero).
func NewCA(cellID string, validFor time.Duration) (*CA, error) {
	if cellID == "" {
		return nil, errors.New("new cell ca: cell id is required")
	}
	if validFor <= 0 {
		validFor = DefaultValidity
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("new cell ca: generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, fmt.Errorf("new cell ca: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "sluice cell " + cellID + " peer CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		URIs:                  []*url.URL{cellURI(cellID)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("new cell ca: create certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("new cell ca: parse certificate: %w", err)
	}
	return &CA{CellID: cellID, Cert: cert, Key: key}, nil
}

// Pool returns a pool holding only the CA's certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// CertPEM returns the CA certificate in PEM.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// KeyPair is a certificate and its private key in PEM.
type KeyPair struct {
	CertPEM, KeyPEM []byte
}

// TLS parses the pair for crypto/tls.
func (kp KeyPair) TLS() (*tls.Certificate, error) {
	c, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("parse key pair: %w", err)
	}
	return &c, nil
}

// Issue makes a certificate for the broker with Raft server id serverID in
// the CA's cell, valid
// for validFor (DefaultValidity if zero). hosts (IP addresses or DNS
// names) are added as SANs for operators' tools; peers authenticate the
// URI identity, not the host.
func (ca *CA) Issue(serverID string, hosts []string, validFor time.Duration) (KeyPair, error) {
	if serverID == "" {
		return KeyPair{}, errors.New("issue broker certificate: server id is required")
	}
	return ca.issue("broker", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "sluice cell " + ca.CellID + " node " + serverID},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{NodeURI(ca.CellID, serverID)},
	}, hosts, validFor)
}

// issue signs a leaf certificate of a fresh P-256 key with the CA: tmpl
// (subject, extended key usages, identity) completed with a serial, hosts
// as SANs, a validity from an hour ago (clock skew) for validFor
// (DefaultValidity if zero) and digital-signature key usage. Broker and
// server certificates differ only in tmpl; what names the kind in errors.
func (ca *CA) issue(what string, tmpl *x509.Certificate, hosts []string, validFor time.Duration) (KeyPair, error) {
	if validFor <= 0 {
		validFor = DefaultValidity
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("issue %s certificate: generate key: %w", what, err)
	}
	serial, err := newSerial()
	if err != nil {
		return KeyPair{}, fmt.Errorf("issue %s certificate: %w", what, err)
	}
	now := time.Now()
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(validFor)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("issue %s certificate: create: %w", what, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("issue %s certificate: marshal key: %w", what, err)
	}
	return KeyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func newSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return s, nil
}

// WriteFiles writes the CA certificate to certFile and its key to keyFile
// (mode 0600).
func (ca *CA) WriteFiles(certFile, keyFile string) error {
	keyDER, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return fmt.Errorf("write cell ca: marshal key: %w", err)
	}
	if err := writeFile(certFile, ca.CertPEM(), 0o644); err != nil {
		return fmt.Errorf("write cell ca: %w", err)
	}
	if err := writeFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return fmt.Errorf("write cell ca: %w", err)
	}
	return nil
}

// WriteFiles writes the certificate to certFile and the key to keyFile
// (mode 0600).
func (kp KeyPair) WriteFiles(certFile, keyFile string) error {
	if err := writeFile(certFile, kp.CertPEM, 0o644); err != nil {
		return fmt.Errorf("write key pair: %w", err)
	}
	if err := writeFile(keyFile, kp.KeyPEM, 0o600); err != nil {
		return fmt.Errorf("write key pair: %w", err)
	}
	return nil
}

// writeFile replaces path atomically, so a broker reloading it never reads
// half a file.
func writeFile(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create directory of %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename %s: %w", path, err)
	}
	return nil
}

// LoadCA reads a CA written by CA.WriteFiles.
func LoadCA(certFile, keyFile string) (*CA, error) {
	kp, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load cell ca: %w", err)
	}
	cert, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("load cell ca: parse certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("load cell ca: %s is not a CA certificate", certFile)
	}
	signer, ok := kp.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("load cell ca: key of type %T cannot sign", kp.PrivateKey)
	}
	cellID := ""
	for _, u := range cert.URIs {
		if u.Scheme == Scheme && u.Host == "cell" {
			cellID, _ = url.PathUnescape(strings.TrimPrefix(u.EscapedPath(), "/"))
		}
	}
	if cellID == "" {
		return nil, fmt.Errorf("load cell ca: %s names no cell", certFile)
	}
	return &CA{CellID: cellID, Cert: cert, Key: signer}, nil
}

// LoadPool reads the PEM certificates of file into a pool.
func LoadPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("load peer ca: %w", err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("load peer ca: no certificate in %s", file)
	}
	return p, nil
}

// Reloadable holds a broker's certificate behind an atomic pointer, so it
// can be replaced (Load, Set) while connections are made with it: Get is
// shaped for tls.Config's GetCertificate and GetClientCertificate.
type Reloadable struct {
	cur atomic.Pointer[tls.Certificate]
}

// NewReloadable loads certFile and keyFile.
func NewReloadable(certFile, keyFile string) (*Reloadable, error) {
	r := &Reloadable{}
	if err := r.Load(certFile, keyFile); err != nil {
		return nil, err
	}
	return r, nil
}

// Load reads certFile and keyFile and, if they parse, makes them the
// current certificate; on error the current one stays.
func (r *Reloadable) Load(certFile, keyFile string) error {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("load peer certificate: %w", err)
	}
	r.cur.Store(&c)
	return nil
}

// Set makes c the current certificate.
func (r *Reloadable) Set(c *tls.Certificate) { r.cur.Store(c) }

// Get returns the current certificate.
func (r *Reloadable) Get() (*tls.Certificate, error) {
	c := r.cur.Load()
	if c == nil {
		return nil, errors.New("no peer certificate loaded")
	}
	return c, nil
}

// Credentials are what a broker authenticates peers and itself with.
type Credentials struct {
	// CAs holds the cell CA certificate(s) a peer's certificate must chain
	// to.
	CAs *x509.CertPool
	// Certificate returns this broker's certificate. It is called on every
	// handshake, so a certificate swapped behind it (Reloadable.Get) serves
	// new connections without a restart.
	Certificate func() (*tls.Certificate, error)
}

// Credentials issues, in memory, a certificate for Raft server id serverID
// and returns it with the CA's pool: for tests and in-process cells.
func (ca *CA) Credentials(serverID string) (Credentials, error) {
	kp, err := ca.Issue(serverID, nil, 0)
	if err != nil {
		return Credentials{}, err
	}
	c, err := kp.TLS()
	if err != nil {
		return Credentials{}, err
	}
	return Credentials{CAs: ca.Pool(), Certificate: func() (*tls.Certificate, error) { return c, nil }}, nil
}

// LoadCredentials reads the cell CA certificate and this broker's
// certificate and key. The returned Reloadable re-reads the certificate
// and key on Load (the CA pool stays until a restart).
func LoadCredentials(caFile, certFile, keyFile string) (Credentials, *Reloadable, error) {
	pool, err := LoadPool(caFile)
	if err != nil {
		return Credentials{}, nil, err
	}
	r, err := NewReloadable(certFile, keyFile)
	if err != nil {
		return Credentials{}, nil, err
	}
	return Credentials{CAs: pool, Certificate: r.Get}, r, nil
}

// Files names the PEM files of one broker's credentials.
type Files struct {
	CA, Cert, Key string
}

// WriteBroker issues a certificate for Raft server id serverID and writes
// it, its key and the CA certificate into dir as ca.pem, node-<id>.pem and
// node-<id>-key.pem: for tenantd dev and launchers of tenantd processes.
func (ca *CA) WriteBroker(dir, serverID string, hosts []string) (Files, error) {
	kp, err := ca.Issue(serverID, hosts, 0)
	if err != nil {
		return Files{}, err
	}
	f := Files{
		CA:   filepath.Join(dir, "ca.pem"),
		Cert: filepath.Join(dir, "node-"+serverID+".pem"),
		Key:  filepath.Join(dir, "node-"+serverID+"-key.pem"),
	}
	if err := writeFile(f.CA, ca.CertPEM(), 0o644); err != nil {
		return Files{}, fmt.Errorf("write broker credentials: %w", err)
	}
	if err := kp.WriteFiles(f.Cert, f.Key); err != nil {
		return Files{}, fmt.Errorf("write broker credentials: %w", err)
	}
	return f, nil
}

// EnsureDir keeps the credentials of a cell's brokers in dir, for tenantd
// dev and launchers of tenantd processes: the CA (ca.pem, ca-key.pem) is
// reused if present, else made; each server id gets node-<id>.pem and
// node-<id>-key.pem, kept if they chain to the CA and name the id, else
// issued anew. It returns each server id's files.
func EnsureDir(dir, cellID string, serverIDs []string) (map[string]Files, error) {
	caCert, caKey := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	ca, err := LoadCA(caCert, caKey)
	if err != nil || ca.CellID != cellID {
		if ca, err = NewCA(cellID, 0); err != nil {
			return nil, err
		}
		if err := ca.WriteFiles(caCert, caKey); err != nil {
			return nil, err
		}
	}
	out := map[string]Files{}
	for _, id := range serverIDs {
		f := Files{CA: caCert, Cert: filepath.Join(dir, "node-"+id+".pem"), Key: filepath.Join(dir, "node-"+id+"-key.pem")}
		if ca.issued(f, id) {
			out[id] = f
			continue
		}
		if f, err = ca.WriteBroker(dir, id, nil); err != nil {
			return nil, err
		}
		out[id] = f
	}
	return out, nil
}

// issued reports whether f holds a valid certificate of the CA for id.
func (ca *CA) issued(f Files, id string) bool {
	kp, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return false
	}
	leaf, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		return false
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return false
	}
	cell, got, err := Identity(leaf)
	return err == nil && cell == ca.CellID && got == id && time.Until(leaf.NotAfter) > 24*time.Hour
}

// IssueServer makes a certificate for a client-facing listener (Kafka
// SASL_SSL, the HTTP data API, the control plane) at hosts (IP addresses
// or DNS names, at least one), valid for validFor (DefaultValidity if
// zero). Unlike Issue it carries no peer identity: clients check the
// host, as for any TLS server.
func (ca *CA) IssueServer(hosts []string, validFor time.Duration) (KeyPair, error) {
	if len(hosts) == 0 {
		return KeyPair{}, errors.New("issue server certificate: at least one host is required")
	}
	return ca.issue("server", &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0]},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, hosts, validFor)
}

// EnsureServerDir keeps a local CA and one server certificate for hosts in
// dir, for tenantd dev -tls: the CA (ca.pem, ca-key.pem, its own, not the
// Raft transport's) is reused if present, else made under the name
// caName; server.pem and server-key.pem are kept while they chain to the
// CA, cover every host and have a day left, else issued anew. Files.CA is
// what clients trust (curl --cacert, kcat ssl.ca.location).
func EnsureServerDir(dir, caName string, hosts []string) (Files, error) {
	f := Files{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server-key.pem")}
	ca, err := LoadCA(f.CA, filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		if ca, err = NewCA(caName, 0); err != nil {
			return Files{}, err
		}
		if err := ca.WriteFiles(f.CA, filepath.Join(dir, "ca-key.pem")); err != nil {
			return Files{}, err
		}
	}
	if ca.servesHosts(f, hosts) {
		return f, nil
	}
	kp, err := ca.IssueServer(hosts, 0)
	if err != nil {
		return Files{}, err
	}
	if err := kp.WriteFiles(f.Cert, f.Key); err != nil {
		return Files{}, fmt.Errorf("write server certificate: %w", err)
	}
	return f, nil
}

// servesHosts reports whether f holds a server certificate of the CA that
// verifies for every host and has a day left.
func (ca *CA) servesHosts(f Files, hosts []string) bool {
	kp, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return false
	}
	leaf, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil || time.Until(leaf.NotAfter) < 24*time.Hour {
		return false
	}
	for _, h := range hosts {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: h}); err != nil {
			return false
		}
	}
	return true
}
