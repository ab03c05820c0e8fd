package limiterd_test

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/platform/redisproc"
	"github.com/weirhq/weir/internal/platform/tlsconf"
	"github.com/weirhq/weir/internal/testkit/certtest"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/syncbuf"
)

// TestRedisTLS runs a limiter against redis-servers that serve TLS alone,
// with a certificate of their own CA, one of them requiring client
// certificates: given the CA (--redis-ca), and the client certificate
// (--redis-cert, --redis-key) where one is required, every decision is
// made on the store, for host:port and rediss:// alike. Without the CA,
// or without the certificate Redis requires, every decision goes to the
// failure mode and the log says the TLS connection failed. Settings that
// cannot work stop the limiter at start, saying why.
func TestRedisTLS(t *testing.T) {
	dir := t.TempDir()
	server, client := certtest.Issue(t, dir, "redis"), certtest.Issue(t, dir, "weir")
	// The servers trust the client's certificate; the kit's own clients,
	// the servers'.
	bundle := filepath.Join(dir, "bundle.pem")
	if err := os.WriteFile(bundle, append(readFile(t, server.CertFile), readFile(t, client.CertFile)...), 0o600); err != nil {
		t.Fatal(err)
	}
	files := redisproc.TLSFiles{CertFile: server.CertFile, KeyFile: server.KeyFile, CAFile: bundle}
	plain := redistest.StartTLS(t, files)
	mutual := redistest.StartTLS(t, files, "--tls-auth-clients", "yes")
	ca := tlsconf.ClientFiles{CA: server.CertFile}
	withCert := tlsconf.ClientFiles{CA: server.CertFile, Cert: client.CertFile, Key: client.KeyFile}
	const tlsFailed = "the TLS connection to Redis failed"
	for _, tc := range []struct {
		name      string
		srv       *redistest.Server
		redis     string // "" for srv's host:port
		tls       tlsconf.ClientFiles
		wantStore bool
		wantLog   string
	}{
		{"host:port and the CA", plain, "", ca, true, ""},
		{"rediss:// and the CA", plain, "rediss://" + plain.Addr, ca, true, ""},
		{"rediss:// without the CA", plain, "rediss://" + plain.Addr, tlsconf.ClientFiles{}, false, tlsFailed},
		{"client certificate required, given", mutual, "", withCert, true, ""},
		{"client certificate required, not given", mutual, "", ca, false, tlsFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := tc.redis
			if addr == "" {
				addr = tc.srv.Addr
			}
			var logs syncbuf.Buffer
			base := startLimiter(t, limiterd.Config{DC: "a", Redis: addr, RedisTLS: tc.tls, RulesFile: sentinelRules(t), StoreTimeout: time.Second,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			const checks = 4
			user := "user-" + strings.ReplaceAll(tc.name, " ", "-")
			postChecks(t, base, user, checks)
			want := map[string]int{"failure_local": checks}
			if tc.wantStore {
				want = map[string]int{"store": checks}
			}
			if got := decisionsBySource(t, base); !maps.Equal(got, want) {
				t.Errorf("decisions by source: got %v, want %v", got, want)
			}
			keys, err := tc.srv.Client(t).Keys(t.Context(), "*"+user+"*").Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := len(keys) > 0; got != tc.wantStore {
				t.Errorf("keys of %s in Redis: %v, want some: %v", user, keys, tc.wantStore)
			}
			if tc.wantLog != "" && !loggedWith(logs.String(), tc.wantLog, "") {
				t.Errorf("no line %q logged; logs:\n%s", tc.wantLog, logs.String())
			}
		})
	}

	for _, tc := range []struct {
		name, redis string
		tls         tlsconf.ClientFiles
		wantErr     string
	}{
		{"redis:// with the CA", "redis://" + plain.Addr, ca, "need TLS: give --redis as rediss://"},
		{"unix:// with the CA", "unix:///tmp/none.sock", ca, "need TLS"},
		{"certificate without its key", plain.Addr, tlsconf.ClientFiles{CA: server.CertFile, Cert: client.CertFile}, "needs both its certificate and its key"},
		{"a CA file that is not one", plain.Addr, tlsconf.ClientFiles{CA: bundle + ".missing"}, "--redis-ca"},
	} {
		t.Run("refused at start: "+tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := limiterd.Run(ctx, limiterd.Config{DC: "a", Redis: tc.redis, RedisTLS: tc.tls, RulesFile: sentinelRules(t),
				HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
