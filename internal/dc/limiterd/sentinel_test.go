package limiterd_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/platform/redisproc"
	"github.com/weirhq/weir/internal/platform/tlsconf"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/syncbuf"
	"github.com/weirhq/weir/internal/testkit/wait"
)

// TestRedisSentinel runs a limiter on the primary that Redis Sentinels
// watch (--redis redis://SENTINEL?master_name=NAME, as
// envoyproxy/ratelimit's REDIS_TYPE=sentinel): without credentials; with
// a Sentinel and a primary that each require a password, given in the
// URL's userinfo (the Sentinel's) and its password parameter (the
// primary's); with those passwords over TLS alone (rediss://), the
// servers' CA given (--redis-ca) or certificates not checked; as ACL
// users, the Sentinel's (limiterd.RedisSentinelACL) in the userinfo and
// the primary's (limiterd.RedisACL) in the username and password
// parameters, neither the default user; and through three
// Sentinels (quorum 2) named in one URL, the first of them down from
// before the limiter starts. Its decisions are made on the store; when
// the primary dies, the Sentinels promote the replica and the limiter's
// decisions go back to the store, on the new primary.
func TestRedisSentinel(t *testing.T) {
	passwords, withTLS := sentinelConfigs(t)
	aclUsers := passwords
	aclUsers.Users = []string{"weir on >weir-pw " + limiterd.RedisACL}
	aclUsers.SentinelUsers = []string{"limiter on >limiter-pw " + limiterd.RedisSentinelACL}
	certs, limiterCert := clientCertTLS(t)
	clientCerts := passwords
	clientCerts.TLS, clientCerts.Extra = certs, []string{"--tls-auth-clients", "yes"}
	threeTLS := withTLS
	threeTLS.Sentinels = 3
	for _, tc := range []struct {
		name string
		cfg  redisproc.SentinelConfig
		// redis is the --redis URL for the Sentinels of s.
		redis func(s *redistest.Sentinel) string
		tls   tlsconf.ClientFiles // --redis-ca
		// firstDown stops the first Sentinel before the limiter starts.
		firstDown bool
	}{
		{"without credentials", redisproc.SentinelConfig{}, func(s *redistest.Sentinel) string {
			return "redis://" + s.Sentinels[0].Addr + "?master_name=" + s.MasterName
		}, tlsconf.ClientFiles{}, false},
		{"passwords of the Sentinel and the primary", passwords, func(s *redistest.Sentinel) string {
			return "redis://:sentinel-secret@" + s.Sentinels[0].Addr + "?master_name=" + s.MasterName + "&password=primary-secret"
		}, tlsconf.ClientFiles{}, false},
		// The servers' certificate is of a CA of its own: trusted with
		// --redis-ca (or, cmd/limiter's TestRedisSentinelPrivateCA,
		// SSL_CERT_FILE); TestRedisSentinelRefused shows it refused
		// without. skip_verify=true encrypts without checking it.
		{"passwords and TLS, the CA given", withTLS, func(s *redistest.Sentinel) string {
			return "rediss://:sentinel-secret@" + s.Sentinels[0].Addr + "?master_name=" + s.MasterName + "&password=primary-secret"
		}, tlsconf.ClientFiles{CA: withTLS.TLS.CAFile}, false},
		{"passwords and TLS, certificates not checked", withTLS, func(s *redistest.Sentinel) string {
			return "rediss://:sentinel-secret@" + s.Sentinels[0].Addr + "?master_name=" + s.MasterName + "&password=primary-secret&skip_verify=true"
		}, tlsconf.ClientFiles{}, false},
		// The default users still require sentinel-secret and
		// primary-secret: a limiter that did not log in as the users
		// named would be refused.
		{"ACL users of the Sentinel and the primary", aclUsers, func(s *redistest.Sentinel) string {
			return "redis://limiter:limiter-pw@" + s.Sentinels[0].Addr + "?master_name=" + s.MasterName + "&username=weir&password=weir-pw"
		}, tlsconf.ClientFiles{}, false},
		// Every server asks clients for a certificate: the limiter's
		// (--redis-cert, --redis-key) goes to the Sentinel and the
		// primary alike.
		{"passwords, TLS and client certificates", clientCerts, func(s *redistest.Sentinel) string {
			return "rediss://:sentinel-secret@" + s.Sentinels[0].Addr + "?master_name=" + s.MasterName + "&password=primary-secret"
		}, limiterCert, false},
		{"three Sentinels, the first down", redisproc.SentinelConfig{Sentinels: 3}, func(s *redistest.Sentinel) string {
			return "redis://" + s.Sentinels[0].Addr + "?master_name=" + s.MasterName + "&addr=" + s.Sentinels[1].Addr + "&addr=" + s.Sentinels[2].Addr
		}, tlsconf.ClientFiles{}, true},
		{"three Sentinels with passwords over TLS, the first down", threeTLS, func(s *redistest.Sentinel) string {
			return "rediss://:sentinel-secret@" + s.Sentinels[0].Addr + "?master_name=" + s.MasterName + "&password=primary-secret&addr=" + s.Sentinels[1].Addr + "&addr=" + s.Sentinels[2].Addr
		}, tlsconf.ClientFiles{CA: withTLS.TLS.CAFile}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.StartSentinel(t, tc.cfg)
			if tc.firstDown {
				s.Sentinels[0].Stop()
			}
			// A store timeout far above the default: this test is about
			// where decisions go, and a loaded machine's slow reply would
			// be decided by the failure mode too.
			var logs syncbuf.Buffer
			base := startLimiter(t, limiterd.Config{DC: "a", Redis: tc.redis(s), RedisTLS: tc.tls, RulesFile: sentinelRules(t), StoreTimeout: time.Second,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			// The limiter's own poll of the Sentinels (followPrimary)
			// gets the primary too: over TLS, as the Sentinel's user,
			// past a Sentinel that is down.
			wait.For(t, 10*time.Second, "the limiter's poll naming the primary", func() bool {
				return loggedWith(logs.String(), "the Redis Sentinels name the primary", "primary="+s.Primary.Addr)
			})
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
			wait.For(t, 10*time.Second, "the limiter's poll naming the promoted replica", func() bool {
				return loggedWith(logs.String(), "the Redis Sentinels name another primary", "primary="+s.Replica.Addr)
			})
			if strings.Contains(logs.String(), "no Redis Sentinel answered") {
				t.Errorf("the poll warned that no Sentinel answered; logs:\n%s", logs.String())
			}
			if keys, err := s.Replica.Client(t).Keys(t.Context(), "*after*").Result(); err != nil || len(keys) != 1 {
				t.Errorf("keys of user after on the promoted replica: %v %v, want one", keys, err)
			}
		})
	}
}

// TestRedisSentinelRefused: a limiter that the Sentinel or the primary
// refuses (a wrong or missing password, a Sentinel ACL user that may not
// ask for the primary), or that refuses their TLS
// certificate (signed by a CA of its own, which go-redis's rediss:// does
// not trust), still starts, and decides every check by its rule's failure
// mode (local, the default); its log says why, with what it was answered,
// at start (an error that names the password or the TLS connection, not
// the warning of a server that does not answer yet) and on the first
// decision that went to the failure mode.
func TestRedisSentinelRefused(t *testing.T) {
	const wrongPassword = "Redis refused the limiter's password or user"
	passwords, withTLS := sentinelConfigs(t)
	certs, limiterCert := clientCertTLS(t)
	clientCerts := passwords
	clientCerts.TLS, clientCerts.Extra = certs, []string{"--tls-auth-clients", "yes"}
	for _, tc := range []struct {
		name string
		cfg  redisproc.SentinelConfig
		// redis is the --redis URL for the Sentinel at addr watching
		// master.
		redis func(addr, master string) string
		// wantErr is what the log lines must quote of the error;
		// wantStart begins the error logged at start.
		wantErr, wantStart string
		// wantPoll is what the warning that no Sentinel answered the
		// limiter's poll (followPrimary) quotes; "" when they answer.
		wantPoll string
		tls      tlsconf.ClientFiles // --redis-ca, --redis-cert, --redis-key
	}{
		{"wrong primary password", passwords, func(addr, master string) string {
			return "redis://:sentinel-secret@" + addr + "?master_name=" + master + "&password=not-the-primary-secret"
		}, "WRONGPASS invalid username-password pair", wrongPassword, "", tlsconf.ClientFiles{}},
		{"no primary password", passwords, func(addr, master string) string {
			return "redis://:sentinel-secret@" + addr + "?master_name=" + master
		}, "NOAUTH Authentication required", wrongPassword, "", tlsconf.ClientFiles{}},
		{"wrong Sentinel password", passwords, func(addr, master string) string {
			return "redis://:not-the-sentinel-secret@" + addr + "?master_name=" + master + "&password=primary-secret"
		}, "all sentinels specified in configuration are unreachable: WRONGPASS invalid username-password pair", wrongPassword,
			"WRONGPASS invalid username-password pair", tlsconf.ClientFiles{}},
		// A Sentinel's ACL user that may log in but not ask for the
		// primary.
		{"Sentinel ACL user without SENTINEL rights", redisproc.SentinelConfig{SentinelUsers: []string{"limiter on >limiter-pw -@all +@connection"}}, func(addr, master string) string {
			return "redis://limiter:limiter-pw@" + addr + "?master_name=" + master
		}, "NOPERM this user has no permissions to run the 'sentinel|get-master-addr-by-name' command", "Redis refused the limiter a command its ACL user may not run",
			"NOPERM this user has no permissions to run the 'sentinel|get-master-addr-by-name' command", tlsconf.ClientFiles{}},
		{"TLS with a private CA", withTLS, func(addr, master string) string {
			return "rediss://:sentinel-secret@" + addr + "?master_name=" + master + "&password=primary-secret"
		}, "all sentinels specified in configuration are unreachable: tls: failed to verify certificate: x509: certificate signed by unknown authority", "the TLS connection to Redis failed",
			"tls: failed to verify certificate: x509: certificate signed by unknown authority", tlsconf.ClientFiles{}},
		// Servers that ask for a client certificate, the limiter given
		// none (its CA only).
		{"client certificate required", clientCerts, func(addr, master string) string {
			return "rediss://:sentinel-secret@" + addr + "?master_name=" + master + "&password=primary-secret"
		}, "all sentinels specified in configuration are unreachable: remote error: tls: certificate required", "the TLS connection to Redis failed",
			"remote error: tls: certificate required", tlsconf.ClientFiles{CA: limiterCert.CA}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.StartSentinel(t, tc.cfg)
			var logs syncbuf.Buffer
			base := startLimiter(t, limiterd.Config{DC: "a", Redis: tc.redis(s.Sentinels[0].Addr, s.MasterName), RedisTLS: tc.tls, RulesFile: sentinelRules(t), StoreTimeout: time.Second,
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
			// The poll runs beside the decisions: its first answer (or
			// warning) comes within a second or so of the start.
			const noAnswer = "no Redis Sentinel answered the limiter's question for the primary"
			deadline := time.Now().Add(5 * time.Second)
			for tc.wantPoll != "" && !loggedWith(logs.String(), noAnswer, tc.wantPoll) && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if tc.wantPoll == "" {
				time.Sleep(1500 * time.Millisecond) // past the second poll, a second after the first
			}
			if got := loggedWith(logs.String(), noAnswer, tc.wantPoll); got != (tc.wantPoll != "") {
				t.Errorf("warning %q quoting %q: logged %v, want %v; logs:\n%s", noAnswer, tc.wantPoll, got, tc.wantPoll != "", logs.String())
			}
			if n := strings.Count(logs.String(), noAnswer); n > 1 {
				t.Errorf("warning %q logged %d times, want at most once in its first 10 s", noAnswer, n)
			}
		})
	}
}

// TestRedisSentinelPollWarns: when the one Sentinel stops answering the
// limiter's poll for the primary, a warning says so, once however long it
// lasts (the poll asks every second; the warning comes at most every
// 10 s), quoting the error; when the Sentinel answers again, an info
// line says so.
func TestRedisSentinelPollWarns(t *testing.T) {
	const noAnswer = "no Redis Sentinel answered the limiter's question for the primary"
	const again = "a Redis Sentinel answers the limiter's question for the primary again"
	s := redistest.StartSentinel(t, redisproc.SentinelConfig{})
	var logs syncbuf.Buffer
	startLimiter(t, limiterd.Config{DC: "a", Redis: "redis://" + s.Sentinels[0].Addr + "?master_name=" + s.MasterName, RulesFile: sentinelRules(t),
		StoreTimeout: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	wait.For(t, 10*time.Second, "the poll naming the primary", func() bool {
		return loggedWith(logs.String(), "the Redis Sentinels name the primary", "primary="+s.Primary.Addr)
	})
	s.Sentinels[0].Stop()
	wait.For(t, 10*time.Second, "the warning that no Sentinel answered", func() bool {
		return loggedWith(logs.String(), noAnswer, "connection refused")
	})
	time.Sleep(2500 * time.Millisecond) // two more polls without an answer
	if n := strings.Count(logs.String(), noAnswer); n != 1 {
		t.Errorf("warning %q logged %d times in the first seconds, want once; logs:\n%s", noAnswer, n, logs.String())
	}
	if strings.Contains(logs.String(), again) {
		t.Fatalf("%q logged while the Sentinel is down; logs:\n%s", again, logs.String())
	}
	s.Sentinels[0].Restart(t)
	wait.For(t, 10*time.Second, "the line that a Sentinel answers again", func() bool {
		return loggedWith(logs.String(), again, "sentinel="+s.Sentinels[0].Addr)
	})
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
// failing t unless each answers 200 (with as many results as rules
// match: checkSource wants one).
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

// TestRedisSentinelSwitchover has the Sentinels fail the primary over
// while it keeps running (SENTINEL FAILOVER: a planned switchover), under
// a limiter that decides a new user every few milliseconds, as ACL users:
// one of the Sentinels that may hear of the failover
// (limiterd.RedisSentinelACL), and one that may only ask for the primary,
// of one Sentinel and of three.
// The old primary stays a writable primary until the Sentinels demote it,
// some ten seconds later: a client that keeps deciding there counts
// admissions that the demotion throws away, with no error to show it.
// Each time, within a bounded time of the Sentinels naming the new
// primary, every decision is made on the store there, and none on the old
// one; the counts made before the switchover continue there. The test
// logs what it measures: the replica's promotion and the Sentinels'
// switch after SENTINEL FAILOVER, the decisions the old primary counted
// in between (lost), and those decided by the failure mode.
func TestRedisSentinelSwitchover(t *testing.T) {
	// follow bounds how long after the Sentinels name the new primary a
	// decision may still go elsewhere.
	const follow = 2 * time.Second
	const limit = 1000000
	rules := ruleFile(t, fmt.Sprintf("domain: api\nrules:\n  - rule_id: per-user\n    key_type: user_id\n    algorithm: FixedWindow\n    limit: %d\n    window_seconds: 3600\n", limit))
	const askOnly = "resetchannels -@all +@connection +sentinel|get-master-addr-by-name"
	for _, tc := range []struct {
		name        string
		sentinelACL string // the rules of the Sentinels' ACL user
		sentinels   int    // how many, all named in the URL
	}{
		{"the Sentinel user hears of the failover", limiterd.RedisSentinelACL, 1},
		{"the Sentinel user may only ask for the primary", askOnly, 1},
		{"three Sentinels, whose user may only ask for the primary", askOnly, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := sentinelConfigs(t)
			cfg.Sentinels = tc.sentinels
			cfg.Users = []string{"weir on >weir-pw " + limiterd.RedisACL}
			cfg.SentinelUsers = []string{"limiter on >limiter-pw " + tc.sentinelACL}
			s := redistest.StartSentinel(t, cfg)
			url := "redis://limiter:limiter-pw@" + s.Sentinels[0].Addr + "?master_name=" + s.MasterName + "&username=weir&password=weir-pw"
			for _, other := range s.Sentinels[1:] {
				url += "&addr=" + other.Addr
			}
			var logs syncbuf.Buffer
			base := startLimiter(t, limiterd.Config{DC: "a", RulesFile: rules, StoreTimeout: time.Second, Redis: url,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			const before = 10
			postChecks(t, base, "before", before)
			if got := decisionsBySource(t, base)["store"]; got != before {
				t.Fatalf("decisions on the store before the switchover: got %d, want %d (all: %v)", got, before, decisionsBySource(t, base))
			}
			sentinel, primary, replica := s.Sentinels[0].SentinelClient(t), s.Primary.Client(t), s.Replica.Client(t)

			type decision struct {
				at     time.Duration // after SENTINEL FAILOVER
				user   string
				source string
			}
			var decisions []decision
			var promoted, switched time.Duration // replica's role master; the Sentinel names it
			s.Failover(t)
			start := time.Now()
			for i := 0; switched == 0 || time.Since(start) < switched+follow+time.Second; i++ {
				if time.Since(start) > 20*time.Second {
					t.Fatalf("the Sentinel did not name the replica as the primary within 20 s (promoted after %v)", promoted)
				}
				user := fmt.Sprintf("during-%d", i)
				source, _ := checkSource(t, base, user)
				decisions = append(decisions, decision{time.Since(start), user, source})
				if promoted == 0 && role(t, replica) == "master" {
					promoted = time.Since(start)
				}
				if addr, err := sentinel.GetMasterAddrByName(t.Context(), s.MasterName).Result(); switched == 0 && err == nil && strings.Join(addr, ":") == s.Replica.Addr {
					switched = time.Since(start)
				}
				time.Sleep(5 * time.Millisecond)
			}
			oldRole := role(t, primary)

			// Where each decision on the store was counted: the replica
			// holds what the primary counted before its promotion, and
			// what the limiter counted on it since; what the old primary
			// counted after it is lost when the Sentinels demote it.
			onNew, onOld := keySet(t, replica, "*during-*"), keySet(t, primary, "*during-*")
			var lost, byFailureMode int
			var lastAway, lastLost time.Duration
			for _, d := range decisions {
				key := "weir:{api/per-user/" + d.user + "}:fw3"
				switch {
				case d.source != "store":
					byFailureMode++
					lastAway = d.at
				case onNew[key]:
				case onOld[key]:
					lost++
					lastAway, lastLost = d.at, d.at
				default:
					t.Errorf("%s decided on the store %v after SENTINEL FAILOVER: key %s on neither server", d.user, d.at, key)
				}
			}
			t.Logf("after SENTINEL FAILOVER: replica promoted at %v, named by the Sentinel at %v; %d decisions, %d counted by the old primary after the promotion (lost; the last at %v), %d by the failure mode; every decision on the new primary from %v; old primary's role at the end: %s",
				promoted.Round(10*time.Millisecond), switched.Round(10*time.Millisecond), len(decisions), lost, lastLost.Round(10*time.Millisecond), byFailureMode, lastAway.Round(10*time.Millisecond), oldRole)
			if lastAway > switched+follow {
				t.Errorf("decisions away from the new primary (lost on the old one, or by the failure mode) until %v after SENTINEL FAILOVER, want none later than %v after the Sentinel named it (at %v)", lastAway, follow, switched)
			}
			if lost > 0 && oldRole != "master" {
				t.Logf("the old primary was demoted before the test ended: the lost decisions may have been counted before its promotion")
			}
			// The counts made before the switchover go on on the new primary.
			if source, remaining := checkSource(t, base, "before"); source != "store" || remaining != limit-before-1 {
				t.Errorf("check of user before after the switchover: got source %s, remaining %d, want store, %d", source, remaining, limit-before-1)
			}
			if strings.Contains(logs.String(), "level=ERROR") {
				t.Errorf("errors logged:\n%s", logs.String())
			}
		})
	}
}

// checkSource makes a check of user in domain api on the limiter at base
// and returns its one result's source and remaining quota, failing t
// unless it answers 200 with one result.
func checkSource(t *testing.T, base, user string) (source string, remaining int64) {
	t.Helper()
	resp, err := http.Post(base+"/v1/check", "application/json", strings.NewReader(fmt.Sprintf(`{"domain":"api","attributes":{"user_id":%q}}`, user)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Results []struct {
			Source    string `json:"source"`
			Remaining int64  `json:"remaining"`
		} `json:"results"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || len(out.Results) != 1 {
		t.Fatalf("check of %s: status %d, %+v, %v; want 200 and one result", user, resp.StatusCode, out, err)
	}
	return out.Results[0].Source, out.Results[0].Remaining
}

// role returns the role (ROLE) of the server rc is a client of: master
// or slave.
func role(t *testing.T, rc *redis.Client) string {
	t.Helper()
	r, err := rc.Do(t.Context(), "role").Slice()
	if err != nil || len(r) == 0 {
		t.Fatalf("ROLE of %s: %v %v", rc.Options().Addr, r, err)
	}
	s, _ := r[0].(string)
	return s
}

// keySet returns the keys matching pattern on the server rc is a client
// of.
func keySet(t *testing.T, rc *redis.Client, pattern string) map[string]bool {
	t.Helper()
	keys, err := rc.Keys(t.Context(), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]bool, len(keys))
	for _, k := range keys {
		out[k] = true
	}
	return out
}

// TestRedisReadOnly runs a limiter on a replica, which answers every
// write READONLY (as a demoted primary does, to a client that kept its
// connections): each decision is a failure of the store, decided by its
// rule's failure mode, and counted by the node's circuit breaker, which
// opens after three; one warning says so, quoting Redis's answer, however
// many decisions fail within its ten seconds.
func TestRedisReadOnly(t *testing.T) {
	primary := redistest.Start(t)
	host, port, _ := strings.Cut(primary.Addr, ":")
	replica := redistest.Start(t, "--replicaof", host, port)
	var logs syncbuf.Buffer
	base := startLimiter(t, limiterd.Config{DC: "a", Redis: replica.Addr, RulesFile: sentinelRules(t), StoreTimeout: time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	const checks = 20
	postChecks(t, base, "someone", checks)
	if got, want := decisionsBySource(t, base), map[string]int{"failure_local": checks}; !maps.Equal(got, want) {
		t.Errorf("decisions by source: got %v, want %v", got, want)
	}
	var fallbacks []string
	for _, line := range strings.Split(metricsText(t, base), "\n") {
		if strings.HasPrefix(line, "weir_store_fallbacks_total{") && !strings.HasSuffix(line, " 0") {
			fallbacks = append(fallbacks, line)
		}
	}
	want := []string{
		`weir_store_fallbacks_total{node="` + replica.Addr + `",reason="breaker_open"} ` + fmt.Sprint(checks-3),
		`weir_store_fallbacks_total{node="` + replica.Addr + `",reason="error"} 3`,
	}
	if !slices.Equal(fallbacks, want) {
		t.Errorf("decisions by the failure mode, by node and reason: got %q, want %q", fallbacks, want)
	}
	const fellBack = "rule decisions went to their failure modes instead of the store"
	if !loggedWith(logs.String(), fellBack, "READONLY You can't write against a read only replica") {
		t.Errorf("no line %q quoting READONLY; logs:\n%s", fellBack, logs.String())
	}
	if n := strings.Count(logs.String(), fellBack); n != 1 {
		t.Errorf("lines %q: got %d, want 1; logs:\n%s", fellBack, n, logs.String())
	}
	// Said at start, naming the primary.
	if !loggedWith(logs.String(), "the Redis --redis names is a replica", "primary="+primary.Addr) {
		t.Errorf("no warning at start that --redis names a replica of %s; logs:\n%s", primary.Addr, logs.String())
	}
}
