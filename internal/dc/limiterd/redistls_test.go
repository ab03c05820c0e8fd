package limiterd_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/platform/redisproc"
	"github.com/weirhq/weir/internal/platform/tlsconf"
	"github.com/weirhq/weir/internal/testkit/certtest"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/syncbuf"
	"github.com/weirhq/weir/internal/testkit/wait"
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
	files, withCert := clientCertTLS(t)
	plain := redistest.StartTLS(t, files)
	mutual := redistest.StartTLS(t, files, "--tls-auth-clients", "yes")
	ca := tlsconf.ClientFiles{CA: withCert.CA}
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
			checkDecided(t, base, tc.srv.Client(t), user, checks, tc.wantStore, &logs, tc.wantLog)
		})
	}

	for _, tc := range []struct {
		name, redis string
		tls         tlsconf.ClientFiles
		wantErr     string
	}{
		{"redis:// with the CA", "redis://" + plain.Addr, ca, "need TLS: give --redis as rediss://"},
		{"unix:// with the CA", "unix:///tmp/none.sock", ca, "need TLS"},
		{"certificate without its key", plain.Addr, tlsconf.ClientFiles{CA: withCert.CA, Cert: withCert.Cert}, "needs both its certificate and its key"},
		{"a CA file that is not one", plain.Addr, tlsconf.ClientFiles{CA: files.CAFile + ".missing"}, "--redis-ca"},
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

// serverTLS issues a certificate for redis-servers that serve TLS alone
// (a Sentinel deployment, a Redis Cluster), its own CA: the CA file to
// trust is CertFile.
func serverTLS(t *testing.T) redisproc.TLSFiles {
	t.Helper()
	cert := certtest.Issue(t, t.TempDir(), "redis")
	return redisproc.TLSFiles{CertFile: cert.CertFile, KeyFile: cert.KeyFile, CAFile: cert.CertFile}
}

// clientCertTLS issues the certificates of servers that may ask clients
// for one, and of the limiter: the servers' files, whose CA file trusts
// both certificates (the kit's own clients present the servers'), and
// the limiter's --redis-ca, --redis-cert and --redis-key.
func clientCertTLS(t *testing.T) (redisproc.TLSFiles, tlsconf.ClientFiles) {
	t.Helper()
	dir := t.TempDir()
	server, client := certtest.Issue(t, dir, "redis"), certtest.Issue(t, dir, "weir")
	bundle := filepath.Join(dir, "bundle.pem")
	if err := os.WriteFile(bundle, append(readFile(t, server.CertFile), readFile(t, client.CertFile)...), 0o600); err != nil {
		t.Fatal(err)
	}
	return redisproc.TLSFiles{CertFile: server.CertFile, KeyFile: server.KeyFile, CAFile: bundle},
		tlsconf.ClientFiles{CA: server.CertFile, Cert: client.CertFile, Key: client.KeyFile}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRedisClusterTLS runs a limiter on a Redis Cluster whose nodes serve
// TLS alone, with a certificate of a CA of their own, on the cluster bus
// and to their replicas too (redistest.StartClusterTLS). Given the CA
// (--redis-ca) and the nodes each way --redis can name a cluster's —
// comma-separated, a rediss:// URL with addr parameters, or one node,
// whose cluster the limiter finds — every decision, for users spread
// over every primary's slots, is made on the store, and every primary
// holds some of their keys. Without the CA every decision goes to the
// failure mode. Last, a primary is killed: the decisions of a user on its
// slots come back to the store, over TLS, on the promoted replica.
func TestRedisClusterTLS(t *testing.T) {
	files := serverTLS(t)
	cluster := redistest.StartClusterTLS(t, files)
	addrs := cluster.Addrs()
	ca := tlsconf.ClientFiles{CA: files.CAFile}
	runClusterCases(t, cluster, []clusterCase{
		{"comma-separated nodes, the CA", strings.Join(addrs[:3], ","), ca, true, ""},
		{"rediss:// with addr parameters, the CA", "rediss://" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2], ca, true, ""},
		{"one node's address, the CA", addrs[2], ca, true, ""},
		{"rediss:// of one node, the CA", "rediss://" + addrs[1], ca, true, ""},
		{"rediss:// with addr parameters, without the CA", "rediss://" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2], tlsconf.ClientFiles{}, false,
			`msg="the TLS connection to Redis failed.*certificate signed by unknown authority`},
		// Plain TCP to the TLS ports: the nodes close the connection, and
		// the log's warning hints at TLS.
		{"comma-separated nodes, without the CA", strings.Join(addrs[:3], ","), tlsconf.ClientFiles{}, false,
			`msg="could not load scripts into Redis at start.*if it serves TLS alone`},
	})

	t.Run("failover", func(t *testing.T) { clusterFailover(t, cluster, strings.Join(addrs, ","), ca) })
}

// clusterFailover starts a limiter on cluster (--redis redis, over TLS
// with tls when set), decides a user on the store, kills (SIGKILL) the
// primary of the user's slot, and waits until the user's decisions are
// made on the store again, on the promoted replica, which then holds the
// user's key; it logs how long after the kill.
func clusterFailover(t *testing.T, cluster *redistest.Cluster, redis string, tls tlsconf.ClientFiles) {
	t.Helper()
	base := startLimiter(t, limiterd.Config{DC: "a", Redis: redis, RedisTLS: tls, RulesFile: sentinelRules(t), StoreTimeout: time.Second})
	const user = "failover"
	postChecks(t, base, user, 1)
	if got := decisionsBySource(t, base)["store"]; got != 1 {
		t.Fatalf("decisions on the store before the kill: got %d, want 1 (all: %v)", got, decisionsBySource(t, base))
	}
	var key string
	for _, k := range keysByPrimary(t, cluster, "*"+user+"*") {
		key = k[0]
	}
	slot := redistest.Slot(key)
	killed := time.Now()
	dead := cluster.KillPrimaryOf(t, slot)
	wait.For(t, 30*time.Second, "decisions on the store again, on the promoted replica", func() bool {
		before := decisionsBySource(t, base)["store"]
		postChecks(t, base, user, 1)
		return decisionsBySource(t, base)["store"] == before+1
	})
	t.Logf("primary %s killed; decisions of slot %d on the store again %v later", dead, slot, time.Since(killed).Round(100*time.Millisecond))
	// The nodes the limiter did not ask may learn of the promotion a
	// little later.
	promoted := cluster.WaitPromoted(t, slot, dead)
	if got := keysByPrimary(t, cluster, "*"+user+"*")[promoted]; len(got) != 1 || got[0] != key {
		t.Errorf("keys of user %s on the promoted replica %s: got %v, want [%s]", user, promoted, got, key)
	}
}

// keysByPrimary returns the keys matching pattern on each primary of c
// that holds any.
func keysByPrimary(t *testing.T, c *redistest.Cluster, pattern string) map[string][]string {
	t.Helper()
	var mu sync.Mutex
	out := map[string][]string{}
	err := c.Client(t).ForEachMaster(t.Context(), func(ctx context.Context, rc *redis.Client) error {
		keys, err := rc.Keys(ctx, pattern).Result()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if len(keys) > 0 {
			out[rc.Options().Addr] = keys
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// clusterCase is a limiter on a Redis Cluster named one way.
type clusterCase struct {
	name, redis string
	tls         tlsconf.ClientFiles
	wantStore   bool // every decision on the store, else by the failure mode
	// wantLog, when not empty, is a regular expression a line of the
	// log must match.
	wantLog string
}

// runClusterCases starts a limiter on cluster for each case, and checks
// that the decisions of 30 users spread over every slot range are all
// made on the store, their keys on all three primaries, or all by the
// failure mode, with no key anywhere, and the log line the case wants.
func runClusterCases(t *testing.T, cluster *redistest.Cluster, cases []clusterCase) {
	t.Helper()
	const users = 30
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncbuf.Buffer
			base := startLimiter(t, limiterd.Config{DC: "a", Redis: tc.redis, RedisTLS: tc.tls, RulesFile: sentinelRules(t), StoreTimeout: time.Second,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			prefix := strings.NewReplacer(" ", "-", ",", "", "/", "", ":", "", "'", "").Replace(tc.name)
			for i := range users {
				postChecks(t, base, fmt.Sprintf("%s-%d", prefix, i), 1)
			}
			want := map[string]int{"failure_local": users}
			if tc.wantStore {
				want = map[string]int{"store": users}
			}
			if got := decisionsBySource(t, base); !maps.Equal(got, want) {
				t.Errorf("decisions by source: got %v, want %v", got, want)
			}
			keys := keysByPrimary(t, cluster, "*"+prefix+"-*")
			total := 0
			for _, k := range keys {
				total += len(k)
			}
			if tc.wantStore && (total != users || len(keys) != 3) {
				t.Errorf("keys of the users by primary: got %v, want %d over 3 primaries", keys, users)
			}
			if !tc.wantStore && total != 0 {
				t.Errorf("keys of the users by primary: got %v, want none", keys)
			}
			if tc.wantLog != "" && !regexp.MustCompile(tc.wantLog).MatchString(logs.String()) {
				t.Errorf("no log line matching %q; logs:\n%s", tc.wantLog, logs.String())
			}
		})
	}
}

// TestRedisClusterPassword runs a limiter on a Redis Cluster whose nodes
// require a password (envoyproxy/ratelimit's REDIS_AUTH with
// REDIS_TYPE=cluster): given in a URL, with addr parameters or of one
// node, every decision is made on the store; comma-separated host:port,
// which cannot carry one, and a wrong password decide by the failure
// mode, and the log's error at start says the password was refused.
func TestRedisClusterPassword(t *testing.T) {
	cluster := redistest.StartClusterPassword(t, "cluster-secret")
	addrs := cluster.Addrs()
	runClusterCases(t, cluster, []clusterCase{
		{"URL with addr parameters", "redis://:cluster-secret@" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2], tlsconf.ClientFiles{}, true, ""},
		{"URL of one node", "redis://:cluster-secret@" + addrs[1], tlsconf.ClientFiles{}, true, ""},
		{"comma-separated nodes, no password", strings.Join(addrs[:3], ","), tlsconf.ClientFiles{}, false, refusedPassword},
		{"wrong password", "redis://:wrong@" + addrs[0] + "?addr=" + addrs[1], tlsconf.ClientFiles{}, false, refusedPassword},
	})
}

// TestRedisClusterACL runs a limiter on a Redis Cluster as an ACL user
// that every node has, with the rights limiterd.RedisACL lists, while the
// default user requires another password: given in a URL, with addr
// parameters or of one node (which the limiter finds to be a cluster's
// seed), every decision is made on the store, over all three primaries;
// a wrong password decides by the failure mode, and the log's error at
// start says the password or user was refused. Last, a primary is
// killed: a user's decisions come back to the store, as the same ACL
// user, on the promoted replica.
func TestRedisClusterACL(t *testing.T) {
	cluster := redistest.StartClusterWith(t, redisproc.ClusterConfig{Password: "cluster-secret", Users: []string{"weir on >weir-pw " + limiterd.RedisACL}})
	addrs := cluster.Addrs()
	runClusterCases(t, cluster, []clusterCase{
		{"URL with addr parameters", "redis://weir:weir-pw@" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2], tlsconf.ClientFiles{}, true, ""},
		{"URL of one node", "redis://weir:weir-pw@" + addrs[1], tlsconf.ClientFiles{}, true, ""},
		{"wrong password", "redis://weir:wrong@" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2], tlsconf.ClientFiles{}, false, refusedPassword},
	})
	t.Run("failover", func(t *testing.T) {
		clusterFailover(t, cluster, "redis://weir:weir-pw@"+addrs[0]+"?addr="+addrs[1]+"&addr="+addrs[2], tlsconf.ClientFiles{})
	})
}

// refusedPassword matches the error a limiter logs at start when Redis
// refuses its password or user.
const refusedPassword = `msg="Redis refused the limiter's password or user`

// TestRedisClusterTLSPassword runs a limiter on a Redis Cluster whose
// nodes serve TLS alone and require a password, both at once: given the
// CA (--redis-ca) and the password in a rediss:// URL, with addr
// parameters or of one node, every decision is made on the store; a
// wrong password, or none (comma-separated host:port), decides by the
// failure mode, and the log's error at start says the password was
// refused. Last, a primary is killed: a user's decisions come back to
// the store, over TLS with the password, on the promoted replica.
func TestRedisClusterTLSPassword(t *testing.T) {
	files := serverTLS(t)
	cluster := redistest.StartClusterWith(t, redisproc.ClusterConfig{TLS: files, Password: "cluster-secret"})
	addrs := cluster.Addrs()
	ca := tlsconf.ClientFiles{CA: files.CAFile}
	runClusterCases(t, cluster, []clusterCase{
		{"rediss:// with addr parameters", "rediss://:cluster-secret@" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2], ca, true, ""},
		{"rediss:// of one node", "rediss://:cluster-secret@" + addrs[1], ca, true, ""},
		{"wrong password", "rediss://:wrong@" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2], ca, false, refusedPassword},
		{"comma-separated nodes, no password", strings.Join(addrs[:3], ","), ca, false, refusedPassword},
	})
	t.Run("failover", func(t *testing.T) {
		clusterFailover(t, cluster, "rediss://:cluster-secret@"+addrs[0]+"?addr="+addrs[1]+"&addr="+addrs[2], ca)
	})
}

// TestRedisClusterClientCert runs a limiter on a Redis Cluster whose
// nodes serve TLS alone and require a client certificate
// (tls-auth-clients yes): given the CA and the limiter's certificate
// (--redis-ca, --redis-cert, --redis-key), every decision is made on the
// store, the nodes named each way --redis can name a cluster's; without
// the certificate, every decision goes to the failure mode, and the
// log's error at start says the TLS connection failed.
func TestRedisClusterClientCert(t *testing.T) {
	files, withCert := clientCertTLS(t)
	cluster := redistest.StartClusterWith(t, redisproc.ClusterConfig{TLS: files, Extra: []string{"--tls-auth-clients", "yes"}})
	addrs := cluster.Addrs()
	ca := tlsconf.ClientFiles{CA: withCert.CA}
	runClusterCases(t, cluster, []clusterCase{
		{"comma-separated nodes", strings.Join(addrs[:3], ","), withCert, true, ""},
		{"rediss:// with addr parameters", "rediss://" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2], withCert, true, ""},
		{"one node's address", addrs[2], withCert, true, ""},
		{"comma-separated nodes, without the certificate", strings.Join(addrs[:3], ","), ca, false, `msg="the TLS connection to Redis failed.*tls: certificate required`},
		{"rediss:// with addr parameters, without the certificate", "rediss://" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2], ca, false, `msg="the TLS connection to Redis failed.*tls: certificate required`},
	})
}

// checkDecided checks that a limiter at base made n decisions, all on the
// store, with keys of user in Redis (rc), or all by the failure mode,
// with none; and, when wantLog is not empty, that a line of logs has it
// as its message.
func checkDecided(t *testing.T, base string, rc *redis.Client, user string, n int, onStore bool, logs *syncbuf.Buffer, wantLog string) {
	t.Helper()
	want := map[string]int{"failure_local": n}
	if onStore {
		want = map[string]int{"store": n}
	}
	if got := decisionsBySource(t, base); !maps.Equal(got, want) {
		t.Errorf("decisions by source: got %v, want %v", got, want)
	}
	keys, err := rc.Keys(t.Context(), "*"+user+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(keys) > 0; got != onStore {
		t.Errorf("keys of %s in Redis: %v, want some: %v", user, keys, onStore)
	}
	if wantLog != "" && !loggedWith(logs.String(), wantLog, "") {
		t.Errorf("no line %q logged; logs:\n%s", wantLog, logs.String())
	}
}
