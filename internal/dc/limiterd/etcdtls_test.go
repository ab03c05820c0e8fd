package limiterd_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/etcd/etcdclient"
	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/platform/embedetcd"
	"github.com/weirhq/weir/internal/platform/tlsconf"
	"github.com/weirhq/weir/internal/testkit/certtest"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
)

// TestEtcdClientCertificate runs a limiter against an etcd that requires
// client certificates: with the certificate (--etcd-ca, --etcd-cert,
// --etcd-key) it registers its instance there; without one, or with a
// certificate but no key, it refuses to start and says why.
func TestEtcdClientCertificate(t *testing.T) {
	dir := t.TempDir()
	server, client := certtest.Issue(t, dir, "server"), certtest.Issue(t, dir, "weir")
	etcd := etcdtest.StartTLS(t, embedetcd.TLS{Cert: server.CertFile, Key: server.KeyFile, ClientCA: client.CertFile})
	withCert := etcdclient.Auth{TLS: tlsconf.ClientFiles{CA: server.CertFile, Cert: client.CertFile, Key: client.KeyFile}}
	tests := []struct {
		name    string
		auth    etcdclient.Auth
		wantErr string // "" serves and registers
	}{
		{"with the certificate", withCert, ""},
		{"without a certificate", etcdclient.Auth{TLS: tlsconf.ClientFiles{CA: server.CertFile}}, "refused the TLS connection (check --etcd-ca, --etcd-cert and --etcd-key): remote error: tls: certificate required"},
		{"certificate without its key", etcdclient.Auth{TLS: tlsconf.ClientFiles{CA: server.CertFile, Cert: client.CertFile}}, "needs both --etcd-cert and --etcd-key"},
		{"no CA: etcd's certificate not trusted", etcdclient.Auth{TLS: tlsconf.ClientFiles{Cert: client.CertFile, Key: client.KeyFile}}, "certificate signed by unknown authority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			instance := "a-" + strings.ReplaceAll(tt.name, " ", "-")
			cfg := limiterd.Config{DC: "a", Etcd: etcd.Endpoints(), EtcdAuth: tt.auth, Instance: instance, SyncTimeout: 5 * time.Second}
			if tt.wantErr != "" {
				cfg.HTTPAddr, cfg.GRPCAddr = "127.0.0.1:0", "127.0.0.1:0"
				cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				err := limiterd.Run(ctx, cfg)
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			runLimiter(t, cfg)
			cli, err := etcdclient.New(etcdclient.Config{Endpoints: etcd.Endpoints(), Auth: withCert})
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			key := etcdlayout.Layout{}.Instance("a", instance)
			resp, err := cli.Get(ctx, key, clientv3.WithCountOnly())
			if err != nil {
				t.Fatal(err)
			}
			if resp.Count != 1 {
				t.Fatalf("instance records at %s: got %d, want 1", key, resp.Count)
			}
		})
	}
}
