package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/dataplane/peercert"
)

// listenerTLS is the process's TLS on its client-facing listeners (the
// Kafka listener's SASL_SSL, the HTTP data API, the control plane and
// console), all serving one certificate, and the roots the process trusts
// when it calls the control plane's API or another broker.
type listenerTLS struct {
	certFile, keyFile string
	// cert is the served certificate, swapped on reload; nil means the
	// listeners serve plaintext.
	cert *peercert.Reloadable
	// roots verify the servers the process calls; nil means the system's.
	roots *x509.CertPool
}

// loadListenerTLS reads the certificate, key and CA files cfg names (each
// may be unset: no certificate means plaintext listeners, no CA file the
// system's roots).
func loadListenerTLS(cfg Config) (*listenerTLS, error) {
	lt := &listenerTLS{certFile: cfg.TLSCertFile, keyFile: cfg.TLSKeyFile}
	if cfg.TLSCertFile != "" {
		c, err := peercert.NewReloadable(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("load listener certificate: %w", err)
		}
		lt.cert = c
	}
	if cfg.TLSCAFile != "" {
		p, err := peercert.LoadPool(cfg.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("load listener ca: %w", err)
		}
		lt.roots = p
	}
	return lt, nil
}

// enabled reports whether the listeners serve TLS.
func (lt *listenerTLS) enabled() bool { return lt != nil && lt.cert != nil }

// server is the listeners' TLS configuration, nil for plaintext. Every
// handshake reads the current certificate, so a reload serves new
// connections; connections already made keep theirs.
func (lt *listenerTLS) server() *tls.Config {
	if !lt.enabled() {
		return nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return lt.cert.Get() }}
}

// scheme is the URL scheme of the process's HTTP listeners.
func (lt *listenerTLS) scheme() string {
	if lt.enabled() {
		return "https"
	}
	return "http"
}

// httpClient calls the control plane's API (and the console its own
// address) trusting the roots; as client.New's default, with a 30 s
// timeout.
func (lt *listenerTLS) httpClient() *http.Client {
	var roots *x509.CertPool
	if lt != nil {
		roots = lt.roots
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}}
}

// reload re-reads the certificate and key; on error the current ones stay.
func (lt *listenerTLS) reload() error {
	if !lt.enabled() {
		return nil
	}
	return lt.cert.Load(lt.certFile, lt.keyFile)
}

// reloadOnHangup calls reload on every SIGHUP, logging what it reloaded,
// so a renewed certificate serves new connections without a restart. It
// returns a function that stops it and waits for it.
func reloadOnHangup(what, file string, reload func() error, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-hup:
				if err := reload(); err != nil {
					log.Error("reload "+what+"; keeping the current one", "err", err)
					continue
				}
				log.Info(what+" reloaded", "file", file)
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		<-exited
	}
}

// devTLSHosts are the names the dev listener certificate is issued for.
var devTLSHosts = []string{"127.0.0.1", "localhost"}

// devTLSFiles makes (or reuses) dev mode's listener CA and certificate
// under dataDir/tls and points cfg at them.
func devTLSFiles(cfg *Config) error {
	f, err := peercert.EnsureServerDir(filepath.Join(cfg.DataDir, "tls"), "dev-listeners", devTLSHosts)
	if err != nil {
		return fmt.Errorf("dev listener certificate: %w", err)
	}
	cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSCAFile = f.Cert, f.Key, f.CA
	return nil
}
