// Package tlsconf builds the TLS configurations of Weir's servers and of
// their clients from certificate files: for a server, TLS when a
// certificate and key are given, mutual TLS when a client CA is given too;
// for a client, the CA to trust and the certificate to present to servers
// that require one.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Files names a server's certificate, key and, for mutual TLS, the CA that
// signs its clients' certificates. All empty means no TLS.
type Files struct {
	Cert, Key, ClientCA string
}

// Enabled reports whether any file is given.
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" || f.ClientCA != "" }

// Server returns the server configuration: TLS 1.2 or later with the
// certificate, and when ClientCA is set, client certificates required and
// verified against it. It returns nil, nil when no file is given.
func (f Files) Server() (*tls.Config, error) {
	if !f.Enabled() {
		return nil, nil
	}
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("tlsconf: a certificate needs both --tls-cert and --tls-key")
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: load %s and %s: %w", f.Cert, f.Key, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if f.ClientCA != "" {
		pool, err := loadPool(f.ClientCA)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// ClientFiles names what a client trusts and presents: the CA that signs
// the servers' certificates, and for servers that require mutual TLS, the
// client's own certificate and key. All empty means the defaults (the
// system's roots, no client certificate).
type ClientFiles struct {
	CA, Cert, Key string
}

// Client returns the client configuration: TLS 1.2 or later, trusting
// only the certificates CA signs when it is set (else the system's roots),
// and presenting the certificate when Cert and Key are set. It returns
// nil, nil when no file is given.
func (f ClientFiles) Client() (*tls.Config, error) {
	if f.CA == "" && f.Cert == "" && f.Key == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pool, err := loadPool(f.CA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if f.Cert != "" || f.Key != "" {
		if f.Cert == "" || f.Key == "" {
			return nil, errors.New("tlsconf: a client certificate needs both its certificate and its key")
		}
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("tlsconf: load %s and %s: %w", f.Cert, f.Key, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// loadPool reads the PEM certificates of a file into a pool.
func loadPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tlsconf: no certificate in %s", path)
	}
	return pool, nil
}
