package main_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/weirhq/weir/internal/platform/redisproc"
	"github.com/weirhq/weir/internal/testkit/certtest"
	"github.com/weirhq/weir/internal/testkit/redistest"
)

// TestRedisSentinelPrivateCA: the limiter has no setting of its own for
// the CA of Redis's certificates, and go-redis's rediss:// checks them
// against the system's CAs. A Sentinel and a primary that show a
// certificate of a private CA are trusted when SSL_CERT_FILE, Go's
// variable for the system's CA file on Linux, names that CA: every check
// is decided on the store, over TLS with the certificate checked. Without
// it the certificate is refused, and every check goes to its rule's
// failure mode. Run as a process of its own, since Go reads the system's
// CAs once per process.
func TestRedisSentinelPrivateCA(t *testing.T) {
	skipShort(t)
	cert := certtest.Issue(t, t.TempDir(), "redis")
	s := redistest.StartSentinel(t, redisproc.SentinelConfig{
		Password: "primary-secret", SentinelPassword: "sentinel-secret",
		TLS: redisproc.TLSFiles{CertFile: cert.CertFile, KeyFile: cert.KeyFile, CAFile: cert.CertFile},
	})
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, rules, "domain: api\nrules:\n  - rule_id: per-user\n    key_type: user_id\n    limit: 1000000\n    window_seconds: 600\n")
	redisURL := "rediss://:sentinel-secret@" + s.Sentinels[0].Addr + "?master_name=" + s.MasterName + "&password=primary-secret"
	const checks = 5
	for _, tc := range []struct {
		name string
		env  string
		// source is where every check must be decided.
		source string
	}{
		{"SSL_CERT_FILE names the CA", "SSL_CERT_FILE=" + cert.CertFile, "store"},
		{"the system's CAs alone", "SSL_CERT_FILE=", "failure_local"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A store timeout far above the default: this test is about
			// where decisions go, and a loaded machine's slow reply would
			// be decided by the failure mode too.
			p := startLimiter(t, []string{"--dc", "a", "--redis", redisURL, "--rules", rules, "--store-timeout", "1s",
				"--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"}, tc.env)
			for range checks {
				if r := p.post(t, "/v1/check", `{"domain":"api","attributes":{"user_id":"someone"}}`); r.code != http.StatusOK {
					t.Fatalf("check: got status %d %s, want 200", r.code, r.body)
				}
			}
			name := fmt.Sprintf(`weir_decisions_total{domain="api",result="allowed",rule="per-user",source=%q}`, tc.source)
			if got := metric(p.metrics(t), name); got != checks {
				t.Errorf("%s: got %v, want %d", name, got, checks)
			}
		})
	}
}
