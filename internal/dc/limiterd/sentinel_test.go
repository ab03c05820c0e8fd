package limiterd_test

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/platform/redisproc"
	"github.com/weirhq/weir/internal/platform/tlsconf"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/syncbuf"
	"github.com/weirhq/weir/internal/testkit/wait"
)

// TestRedisSentinel runs a limiter on the primary that a Redis Sentinel
// watches (--redis redis://SENTINEL?master_name=NAME, as
// envoyproxy/ratelimit's REDIS_TYPE=sentinel): without credentials; with
// a Sentinel and a primary that each require a password, given in the
// URL's userinfo (the Sentinel's) and its password parameter (the
// primary's); and with those passwords over TLS alone (rediss://), the
// servers' CA given (--redis-ca) or certificates not checked. Its
// decisions are made on the store; when the primary dies, the Sentinel
// promotes the replica and the limiter's decisions go back to the store,
// on the new primary.
func TestRedisSentinel(t *testing.T) {
	passwords, withTLS := sentinelConfigs(t)
	for _, tc := range []struct {
		name string
		cfg  redisproc.SentinelConfig
		// redis is the --redis URL for the Sentinel at addr watching
		// master.
		redis func(addr, master string) string
		tls   tlsconf.ClientFiles // --redis-ca
	}{
		{"without credentials", redisproc.SentinelConfig{}, func(addr, master string) string {
			return "redis://" + addr + "?master_name=" + master
		}, tlsconf.ClientFiles{}},
		{"passwords of the Sentinel and the primary", passwords, func(addr, master string) string {
			return "redis://:sentinel-secret@" + addr + "?master_name=" + master + "&password=primary-secret"
		}, tlsconf.ClientFiles{}},
		// The servers' certificate is of a CA of its own: trusted with
		// --redis-ca (or, cmd/limiter's TestRedisSentinelPrivateCA,
		// SSL_CERT_FILE); TestRedisSentinelRefused shows it refused
		// without. skip_verify=true encrypts without checking it.
		{"passwords and TLS, the CA given", withTLS, func(addr, master string) string {
			return "rediss://:sentinel-secret@" + addr + "?master_name=" + master + "&password=primary-secret"
		}, tlsconf.ClientFiles{CA: withTLS.TLS.CAFile}},
		{"passwords and TLS, certificates not checked", withTLS, func(addr, master string) string {
			return "rediss://:sentinel-secret@" + addr + "?master_name=" + master + "&password=primary-secret&skip_verify=true"
		}, tlsconf.ClientFiles{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.StartSentinel(t, tc.cfg)
			// A store timeout far above the default: this test is about
			// where decisions go, and a loaded machine's slow reply would
			// be decided by the failure mode too.
			base := startLimiter(t, limiterd.Config{DC: "a", Redis: tc.redis(s.Sentinel.Addr, s.MasterName), RedisTLS: tc.tls, RulesFile: sentinelRules(t), StoreTimeout: time.Second})
			postChecks(t, base, "before", 10)
			if got := decisionsBySource(t, base)["store"]; got != 10 {
				t.Fatalf("decisions on the store through the Sentinel: got %d, want 10 (all: %v)", got, decisionsBySource(t, base))
			}
			// The primary holds the key the limiter wrote.
			if keys, err := s.Primary.Client(t).Keys(t.Context(), "*before*").Result(); err != nil || len(keys) != 1 {
				t.Fatalf("keys of user before on the primary: %v %v, want one", keys, err)
			}

			killed := time.Now()
			s.Primary.Stop()
			wait.For(t, 30*time.Second, "decisions on the store again, on the promoted replica", func() bool {
				before := decisionsBySource(t, base)["store"]
				postChecks(t, base, "after", 1)
				return decisionsBySource(t, base)["store"] == before+1
			})
			t.Logf("decisions on the store again %v after the primary was killed", time.Since(killed).Round(100*time.Millisecond))
			if keys, err := s.Replica.Client(t).Keys(t.Context(), "*after*").Result(); err != nil || len(keys) != 1 {
				t.Errorf("keys of user after on the promoted replica: %v %v, want one", keys, err)
			}
		})
	}
}

// TestRedisSentinelRefused: a limiter that the Sentinel or the primary
// refuses (a wrong or missing password), or that refuses their TLS
// certificate (signed by a CA of its own, which go-redis's rediss:// does
// not trust), still starts, and decides every check by its rule's failure
// mode (local, the default); its log says why, with what it was answered,
// at start (an error that names the password or the TLS connection, not
// the warning of a server that does not answer yet) and on the first
// decision that went to the failure mode.
func TestRedisSentinelRefused(t *testing.T) {
	const wrongPassword = "Redis refused the limiter's password or user"
	passwords, withTLS := sentinelConfigs(t)
	for _, tc := range []struct {
		name string
		cfg  redisproc.SentinelConfig
		// redis is the --redis URL for the Sentinel at addr watching
		// master.
		redis func(addr, master string) string
		// wantErr is what the log lines must quote of the error;
		// wantStart begins the error logged at start.
		wantErr, wantStart string
	}{
		{"wrong primary password", passwords, func(addr, master string) string {
			return "redis://:sentinel-secret@" + addr + "?master_name=" + master + "&password=not-the-primary-secret"
		}, "WRONGPASS invalid username-password pair", wrongPassword},
		{"no primary password", passwords, func(addr, master string) string {
			return "redis://:sentinel-secret@" + addr + "?master_name=" + master
		}, "NOAUTH Authentication required", wrongPassword},
		{"wrong Sentinel password", passwords, func(addr, master string) string {
			return "redis://:not-the-sentinel-secret@" + addr + "?master_name=" + master + "&password=primary-secret"
		}, "all sentinels specified in configuration are unreachable: WRONGPASS invalid username-password pair", wrongPassword},
		{"TLS with a private CA", withTLS, func(addr, master string) string {
			return "rediss://:sentinel-secret@" + addr + "?master_name=" + master + "&password=primary-secret"
		}, "all sentinels specified in configuration are unreachable: tls: failed to verify certificate: x509: certificate signed by unknown authority", "the TLS connection to Redis failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.StartSentinel(t, tc.cfg)
			var logs syncbuf.Buffer
			base := startLimiter(t, limiterd.Config{DC: "a", Redis: tc.redis(s.Sentinel.Addr, s.MasterName), RulesFile: sentinelRules(t), StoreTimeout: time.Second,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			const checks = 5
			postChecks(t, base, "someone", checks)
			if got, want := decisionsBySource(t, base), map[string]int{"failure_local": checks}; !maps.Equal(got, want) {
				t.Errorf("decisions by source: got %v, want %v", got, want)
			}
			for _, msg := range []string{
				tc.wantStart,
				"rule decisions went to their failure modes instead of the store",
			} {
				if !loggedWith(logs.String(), msg, tc.wantErr) {
					t.Errorf("no line %q quoting %q logged; logs:\n%s", msg, tc.wantErr, logs.String())
				}
			}
			if keys, err := s.Primary.Client(t).Keys(t.Context(), "*").Result(); err != nil || len(keys) != 0 {
				t.Errorf("keys on the primary: %v %v, want none", keys, err)
			}
		})
	}
}

// loggedWith reports whether a line of logs has msg as its message and
// quotes text.
func loggedWith(logs, msg, text string) bool {
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `msg="`+msg) && strings.Contains(line, text) {
			return true
		}
	}
	return false
}

// sentinelConfigs returns the Sentinel deployments the tests run with
// credentials: the Sentinel and the primary each requiring a password
// (sentinel-secret, primary-secret), and the same serving TLS alone
// (serverTLS).
func sentinelConfigs(t *testing.T) (passwords, withTLS redisproc.SentinelConfig) {
	t.Helper()
	passwords = redisproc.SentinelConfig{Password: "primary-secret", SentinelPassword: "sentinel-secret"}
	withTLS = passwords
	withTLS.TLS = serverTLS(t)
	return passwords, withTLS
}

// sentinelRules writes the rule file of the Sentinel tests and returns
// its path: one rule whose limit the tests' checks stay far below.
func sentinelRules(t *testing.T) string {
	t.Helper()
	return ruleFile(t, "domain: api\nrules:\n  - rule_id: per-user\n    key_type: user_id\n    limit: 1000000\n    window_seconds: 600\n")
}

// postChecks makes n checks of user in domain api on the limiter at base,
// failing t unless each answers 200.
func postChecks(t *testing.T, base, user string, n int) {
	t.Helper()
	for range n {
		resp, err := http.Post(base+"/v1/check", "application/json", strings.NewReader(fmt.Sprintf(`{"domain":"api","attributes":{"user_id":%q}}`, user)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("check of %s: status %d %s, want 200", user, resp.StatusCode, b)
		}
	}
}
