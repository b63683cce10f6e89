package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

// PeerCAPEM is a fresh self-signed CA certificate in PEM naming cell, as a
// cell's brokers register for their Raft transport (tests of tenant moves
// and of peer CA registration).
func PeerCAPEM(t testing.TB, cell string) string {
	t.Helper()
	return SelfSignedPEM(t, cell+" peer CA", true)
}

// SelfSignedPEM is a fresh self-signed certificate in PEM with common name
// cn, valid for a day: a CA that may sign certificates, or (isCA false) a
// certificate that is not a CA, for tests that must see one refused.
func SelfSignedPEM(t testing.TB, cn string, isCA bool) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: isCA, BasicConstraintsValid: true}
	if isCA {
		tmpl.KeyUsage = x509.KeyUsageCertSign
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
