package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// issue writes a self-signed CA-capable certificate for 127.0.0.1 and its
// key to dir, and returns their paths and the parsed pair.
func issue(t *testing.T, dir, name string) (certPath, keyPath string, pair tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	if err := os.WriteFile(certPath, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pair, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath, pair
}

func TestServer(t *testing.T) {
	dir := t.TempDir()
	cert, key, serverPair := issue(t, dir, "server")
	clientCert, _, clientPair := issue(t, dir, "client")
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
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
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
	roots := x509.NewCertPool()
	roots.AddCert(serverPair.Leaf)
	dial := func(certs []tls.Certificate) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: roots, Certificates: certs})
		if err != nil {
			return err
		}
		defer c.Close()
		buf := make([]byte, 2)
		_, err = c.Read(buf)
		return err
	}
	if err := dial([]tls.Certificate{clientPair}); err != nil {
		t.Fatalf("client with a certificate: %v", err)
	}
	if err := dial(nil); err == nil {
		t.Fatal("a client without a certificate got through mutual TLS")
	}
}
