// Package tlsconf builds the TLS configurations of Weir's servers from
// certificate files: TLS when a certificate and key are given, mutual TLS
// when a client CA is given too.
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
		pem, err := os.ReadFile(f.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("tlsconf: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tlsconf: no certificate in %s", f.ClientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
