package etcdclient_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/etcd/etcdclient"
	"github.com/weirhq/weir/internal/platform/embedetcd"
	"github.com/weirhq/weir/internal/platform/tlsconf"
	"github.com/weirhq/weir/internal/testkit/certtest"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
)

// write writes content to a new file in dir and returns its path.
func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// bundle writes the certificates of certs into one CA file.
func bundle(t *testing.T, dir string, certs ...certtest.Cert) string {
	t.Helper()
	var all []byte
	for _, c := range certs {
		b, err := os.ReadFile(c.CertFile)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return write(t, dir, "bundle.crt", string(all))
}

func TestClientConfigRefusesBadSettings(t *testing.T) {
	dir := t.TempDir()
	c := certtest.Issue(t, dir, "client")
	pw := write(t, dir, "pw", "secret\n")
	empty := write(t, dir, "empty", "\n")
	missing := filepath.Join(dir, "missing")
	https := []string{"https://127.0.0.1:2379"}
	tests := []struct {
		name    string
		cfg     etcdclient.Config
		wantErr string // "" builds a configuration
	}{
		{"plain", etcdclient.Config{Endpoints: []string{"http://127.0.0.1:2379"}}, ""},
		{"TLS with a client certificate and a user", etcdclient.Config{Endpoints: https, Auth: etcdclient.Auth{TLS: tlsconf.ClientFiles{CA: c.CertFile, Cert: c.CertFile, Key: c.KeyFile}, User: "weir", PasswordFile: pw}}, ""},
		{"no endpoint", etcdclient.Config{}, "no endpoint (--etcd)"},
		{"certificate without its key", etcdclient.Config{Endpoints: https, Auth: etcdclient.Auth{TLS: tlsconf.ClientFiles{Cert: c.CertFile}}}, "needs both --etcd-cert and --etcd-key"},
		{"key without its certificate", etcdclient.Config{Endpoints: https, Auth: etcdclient.Auth{TLS: tlsconf.ClientFiles{Key: c.KeyFile}}}, "needs both --etcd-cert and --etcd-key"},
		{"TLS files with an http endpoint", etcdclient.Config{Endpoints: []string{"http://127.0.0.1:2379"}, Auth: etcdclient.Auth{TLS: tlsconf.ClientFiles{CA: c.CertFile}}}, "use https://"},
		{"user without a password file", etcdclient.Config{Endpoints: https, Auth: etcdclient.Auth{User: "weir"}}, "needs both --etcd-user and --etcd-password-file"},
		{"password file without a user", etcdclient.Config{Endpoints: https, Auth: etcdclient.Auth{PasswordFile: pw}}, "needs both --etcd-user and --etcd-password-file"},
		{"unreadable CA", etcdclient.Config{Endpoints: https, Auth: etcdclient.Auth{TLS: tlsconf.ClientFiles{CA: missing}}}, "no such file"},
		{"CA without a certificate", etcdclient.Config{Endpoints: https, Auth: etcdclient.Auth{TLS: tlsconf.ClientFiles{CA: c.KeyFile}}}, "no certificate in"},
		{"unreadable key", etcdclient.Config{Endpoints: https, Auth: etcdclient.Auth{TLS: tlsconf.ClientFiles{Cert: c.CertFile, Key: missing}}}, "no such file"},
		{"unreadable password file", etcdclient.Config{Endpoints: https, Auth: etcdclient.Auth{User: "weir", PasswordFile: missing}}, "no such file"},
		{"empty password", etcdclient.Config{Endpoints: https, Auth: etcdclient.Auth{User: "weir", PasswordFile: empty}}, "is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc, err := tt.cfg.ClientConfig()
			wantErr(t, err, tt.wantErr)
			if err == nil && tt.cfg.Auth.User != "" && (cc.Username != "weir" || cc.Password != "secret") {
				t.Fatalf("got user %q password %q, want weir, secret", cc.Username, cc.Password)
			}
		})
	}
}

// put writes a key through a client built from cfg, within a bound.
func put(t *testing.T, cfg etcdclient.Config, key string) error {
	t.Helper()
	cfg.DialTimeout = 2 * time.Second
	cli, err := etcdclient.New(cfg)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = cli.Put(ctx, key, "v")
	return err
}

func TestTLSClientCertificates(t *testing.T) {
	dir := t.TempDir()
	server, client, other := certtest.Issue(t, dir, "server"), certtest.Issue(t, dir, "weir"), certtest.Issue(t, dir, "other")
	etcd := etcdtest.StartTLS(t, embedetcd.TLS{Cert: server.CertFile, Key: server.KeyFile, ClientCA: client.CertFile})
	tests := []struct {
		name    string
		files   tlsconf.ClientFiles
		wantErr string // "" writes
	}{
		{"trusted, with the certificate", tlsconf.ClientFiles{CA: server.CertFile, Cert: client.CertFile, Key: client.KeyFile}, ""},
		{"trusted, without a certificate", tlsconf.ClientFiles{CA: server.CertFile}, "refused the TLS connection (check --etcd-ca, --etcd-cert and --etcd-key): remote error: tls: certificate required"},
		{"trusted, with a certificate etcd does not trust", tlsconf.ClientFiles{CA: server.CertFile, Cert: other.CertFile, Key: other.KeyFile}, "refused the TLS connection (check --etcd-ca, --etcd-cert and --etcd-key): remote error: tls: certificate required"},
		{"another CA", tlsconf.ClientFiles{CA: other.CertFile, Cert: client.CertFile, Key: client.KeyFile}, "refused the TLS connection (check --etcd-ca, --etcd-cert and --etcd-key): tls: failed to verify certificate: x509: certificate signed by unknown authority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := put(t, etcdclient.Config{Endpoints: etcd.Endpoints(), Auth: etcdclient.Auth{TLS: tt.files}}, "/weir/k")
			wantErr(t, err, tt.wantErr)
		})
	}
}

// TestUnreachableEtcdIsNoError: a limiter restarted while etcd is down
// must still start (its --state-dir), so New builds a TLS client of an
// etcd it cannot reach.
func TestUnreachableEtcdIsNoError(t *testing.T) {
	dir := t.TempDir()
	c := certtest.Issue(t, dir, "weir")
	addr, err := embedetcd.FreeAddr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: []string{"https://" + addr}, Auth: etcdclient.Auth{TLS: tlsconf.ClientFiles{CA: c.CertFile, Cert: c.CertFile, Key: c.KeyFile}}})
	if err != nil {
		t.Fatalf("got error %v, want none", err)
	}
	cli.Close()
}

// wantErr fails t unless err is nil when want is "", or contains want.
func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("got error %v, want none", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("got error %v, want one containing %q", err, want)
	}
}

// TestLoginLater: a client of a user built while etcd is down (a limiter
// restarted during an etcd outage) is no error; it logs in once etcd
// answers, for requests and for watches, and is held to its role. A wrong
// password shows on its first request then.
func TestLoginLater(t *testing.T) {
	dir := t.TempDir()
	etcd := etcdtest.Start(t)
	etcdtest.EnableAuth(t, etcd.Client(t), etcdtest.WeirUser())
	etcd.Stop()
	pw, wrong := write(t, dir, "pw", "weirpw\n"), write(t, dir, "wrong", "nope\n")
	build := func(passwordFile string) *clientv3.Client {
		t.Helper()
		cli, err := etcdclient.New(etcdclient.Config{Endpoints: etcd.Endpoints(), DialTimeout: 300 * time.Millisecond, Auth: etcdclient.Auth{User: "weir", PasswordFile: passwordFile}})
		if err != nil {
			t.Fatalf("New while etcd is down: got error %v, want none", err)
		}
		t.Cleanup(func() { cli.Close() })
		return cli
	}
	good, bad := build(pw), build(wrong)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// clientv3's Watch returns once its stream is open: here once etcd
	// answers and the client has logged in. From revision 1, it sees the
	// put below whenever it opens.
	watches := make(chan clientv3.WatchChan, 1)
	go func() { watches <- good.Watch(ctx, "/weir/", clientv3.WithPrefix(), clientv3.WithRev(1)) }()
	etcd.Restart()

	if _, err := good.Put(ctx, "/weir/k", "v"); err != nil {
		t.Fatalf("put under its prefix once etcd answers: %v", err)
	}
	var watch clientv3.WatchChan
	select {
	case watch = <-watches:
	case <-ctx.Done():
		t.Fatal("the watch asked for while etcd was down did not open")
	}
	select {
	case resp := <-watch:
		if err := resp.Err(); err != nil || len(resp.Events) != 1 || string(resp.Events[0].Kv.Key) != "/weir/k" {
			t.Errorf("watch opened while etcd was down: got %v events %v, want the put of /weir/k", err, resp.Events)
		}
	case <-ctx.Done():
		t.Error("the watch opened while etcd was down saw nothing")
	}
	if _, err := good.Put(ctx, "/other/k", "v"); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("put under another prefix: got error %v, want permission denied", err)
	}
	if _, err := bad.Get(ctx, "/weir/k"); err == nil || !strings.Contains(err.Error(), "authentication failed") {
		t.Errorf("get with a wrong password: got error %v, want authentication failed", err)
	}
}

// TestLoginLaterWithoutAuth: a client of a user built while etcd is down
// works once etcd answers with its auth off, as one that logged in at
// once does (etcd ignores the token it holds until it logs in).
func TestLoginLaterWithoutAuth(t *testing.T) {
	etcd := etcdtest.Start(t)
	etcd.Stop()
	pw := write(t, t.TempDir(), "pw", "weirpw\n")
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: etcd.Endpoints(), DialTimeout: 300 * time.Millisecond, Auth: etcdclient.Auth{User: "weir", PasswordFile: pw}})
	if err != nil {
		t.Fatalf("New while etcd is down: got error %v, want none", err)
	}
	defer cli.Close()
	etcd.Restart()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/any/k", "v"); err != nil {
		t.Fatalf("put once etcd answers, auth off: %v", err)
	}
}

// TestRBAC runs an etcd with client certificates and auth enabled, where
// user weir may read and write /weir/ only: the certificate's common name,
// or a user and password, is the etcd user.
func TestRBAC(t *testing.T) {
	dir := t.TempDir()
	server, root, weir := certtest.Issue(t, dir, "server"), certtest.Issue(t, dir, "root"), certtest.Issue(t, dir, "weir")
	etcd := etcdtest.StartTLS(t, embedetcd.TLS{Cert: server.CertFile, Key: server.KeyFile, ClientCA: bundle(t, dir, root, weir)})
	admin, err := etcdclient.New(etcdclient.Config{Endpoints: etcd.Endpoints(), Auth: etcdclient.Auth{TLS: tlsconf.ClientFiles{CA: server.CertFile, Cert: root.CertFile, Key: root.KeyFile}}})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	etcdtest.EnableAuth(t, admin, etcdtest.WeirUser())
	pw, wrong := write(t, dir, "pw", "weirpw\n"), write(t, dir, "wrong", "nope\n")
	cert := tlsconf.ClientFiles{CA: server.CertFile, Cert: weir.CertFile, Key: weir.KeyFile}
	tests := []struct {
		name    string
		auth    etcdclient.Auth
		key     string
		wantErr string // "" writes
	}{
		{"certificate's user, its prefix", etcdclient.Auth{TLS: cert}, "/weir/k", ""},
		{"certificate's user, another prefix", etcdclient.Auth{TLS: cert}, "/other/k", "permission denied"},
		{"user and password, its prefix", etcdclient.Auth{TLS: cert, User: "weir", PasswordFile: pw}, "/weir/k", ""},
		{"user and password, another prefix", etcdclient.Auth{TLS: cert, User: "weir", PasswordFile: pw}, "/other/k", "permission denied"},
		{"wrong password", etcdclient.Auth{TLS: cert, User: "weir", PasswordFile: wrong}, "/weir/k", "authentication failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := put(t, etcdclient.Config{Endpoints: etcd.Endpoints(), Auth: tt.auth}, tt.key)
			wantErr(t, err, tt.wantErr)
		})
	}
}
