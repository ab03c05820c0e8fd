package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/testkit/certtest"
)

// listen serves TLS with cfg on a loopback port until t ends, writing "ok"
// on every connection, and returns its address.
func listen(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake()
				_, _ = c.Write([]byte("ok"))
			}()
		}
	}()
	return ln.Addr().String()
}

// dial connects to addr with cfg and reads the server's "ok".
func dial(addr string, cfg *tls.Config) error {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, 2)
	_, err = c.Read(buf)
	return err
}

func TestServer(t *testing.T) {
	dir := t.TempDir()
	server, client := certtest.Issue(t, dir, "server"), certtest.Issue(t, dir, "client")
	cert, key, serverPair := server.CertFile, server.KeyFile, server.Pair
	clientCert, clientPair := client.CertFile, client.Pair
	if c, err := (Files{}).Server(); c != nil || err != nil {
		t.Fatalf("no files: %v, %v", c, err)
	}
	if _, err := (Files{Cert: cert}).Server(); err == nil {
		t.Fatal("a certificate without its key was accepted")
	}
	if _, err := (Files{Cert: cert, Key: filepath.Join(dir, "missing")}).Server(); err == nil {
		t.Fatal("a missing key file was accepted")
	}
	cfg, err := Files{Cert: cert, Key: key, ClientCA: clientCert}.Server()
	if err != nil {
		t.Fatal(err)
	}
	addr := listen(t, cfg)
	roots := x509.NewCertPool()
	roots.AddCert(serverPair.Leaf)
	if err := dial(addr, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientPair}}); err != nil {
		t.Fatalf("client with a certificate: %v", err)
	}
	if err := dial(addr, &tls.Config{RootCAs: roots}); err == nil {
		t.Fatal("a client without a certificate got through mutual TLS")
	}
}

func TestClient(t *testing.T) {
	dir := t.TempDir()
	server, client, other := certtest.Issue(t, dir, "server"), certtest.Issue(t, dir, "client"), certtest.Issue(t, dir, "other")
	srv, err := Files{Cert: server.CertFile, Key: server.KeyFile, ClientCA: client.CertFile}.Server()
	if err != nil {
		t.Fatal(err)
	}
	addr := listen(t, srv)
	tests := []struct {
		name    string
		files   ClientFiles
		wantErr string // from Client; "" builds a config
		dialErr string // from dialling the mutual-TLS server; "" connects
	}{
		{"trusted, with a certificate", ClientFiles{CA: server.CertFile, Cert: client.CertFile, Key: client.KeyFile}, "", ""},
		{"trusted, without a certificate", ClientFiles{CA: server.CertFile}, "", "certificate required"},
		{"another CA", ClientFiles{CA: other.CertFile, Cert: client.CertFile, Key: client.KeyFile}, "", "certificate signed by unknown authority"},
		{"certificate without its key", ClientFiles{CA: server.CertFile, Cert: client.CertFile}, "needs both", ""},
		{"missing CA file", ClientFiles{CA: filepath.Join(dir, "missing")}, "no such file", ""},
		{"CA file without a certificate", ClientFiles{CA: server.KeyFile}, "no certificate in", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := tt.files.Client()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			err = dial(addr, cfg)
			switch {
			case tt.dialErr == "" && err != nil:
				t.Fatalf("dial: got %v, want a connection", err)
			case tt.dialErr != "" && (err == nil || !strings.Contains(err.Error(), tt.dialErr)):
				t.Fatalf("dial: got %v, want an error containing %q", err, tt.dialErr)
			}
		})
	}
	if cfg, err := (ClientFiles{}).Client(); cfg != nil || err != nil {
		t.Errorf("no files: got %v, %v; want nil, nil", cfg, err)
	}
}
