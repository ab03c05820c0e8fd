package redisproc

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// TLSFiles are the PEM files of a server that serves TLS alone: its
// certificate and key, which it also shows as a client when it
// replicates or, for a Sentinel, watches a primary; and the CA it trusts
// for its peers' certificates, which its clients trust for its own.
type TLSFiles struct {
	CertFile, KeyFile, CAFile string
}

// args are redis-server's arguments for f: TLS with f's files, for
// replication too, without asking clients for certificates (Redis asks
// by default).
func (f TLSFiles) args() []string {
	return []string{
		"--tls-cert-file", f.CertFile, "--tls-key-file", f.KeyFile, "--tls-ca-cert-file", f.CAFile,
		"--tls-replication", "yes", "--tls-auth-clients", "no",
	}
}

// clientConfig is a client's TLS configuration for a server with f's
// files: it trusts f's CA, and presents the server's own certificate,
// as the server does to its peers, for a server that asks clients for
// one (--tls-auth-clients yes) and trusts it.
func (f TLSFiles) clientConfig() (*tls.Config, error) {
	pem, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, fmt.Errorf("redisproc: read the CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("redisproc: no certificate in %s", f.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("redisproc: load the certificate: %w", err)
	}
	return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
