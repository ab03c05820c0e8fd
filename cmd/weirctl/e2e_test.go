package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/control/coordinatord"
	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/etcd/etcdclient"
	"github.com/weirhq/weir/internal/platform/tlsconf"
	"github.com/weirhq/weir/internal/testkit/certtest"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
	"github.com/weirhq/weir/internal/testkit/kafkatest"
	"github.com/weirhq/weir/pkg/adminapi"
)

const (
	rwToken = "rw-token-0123456789abcdef"
	roToken = "ro-token-0123456789abcdef"
)

// system is a coordinator with the admin API and two limiters (DCs a and
// b, memory stores) following the rules in a real embedded etcd.
type system struct {
	admin string // http://host:port of the coordinator (the leader, with a standby)
	// standby is the admin URL of the coordinator that does not lead,
	// when the system has one.
	standby string
	http    map[string]string // DC → limiter HTTP base URL
	etcd    *etcdtest.Cluster
	// limiterAuth is how each DC's limiter logs in to etcd
	// (systemTLS.etcdUser).
	limiterAuth map[string]etcdclient.Auth
	// limiters carries the test's own requests to the limiters.
	limiters *http.Client
	probes   atomic.Int64 // numbers the users of probe
}

// systemTLS sets the TLS of a system's limiters: what they serve (none by
// default) and what the coordinator trusts and presents when it asks them
// for a key's status.
type systemTLS struct {
	limiters    tlsconf.Files
	coordinator tlsconf.ClientFiles
	// standby starts a second coordinator; the system's admin is then
	// whichever leads, its standby the other.
	standby bool
	// etcdUser turns etcd's auth on; the coordinators log in as a user
	// who may read and write /weir/ only, the limiters as one who may
	// read it and write /weir/instances/ only.
	etcdUser bool
}

func startSystem(t *testing.T) *system {
	t.Helper()
	return startSystemTLS(t, systemTLS{}, http.DefaultClient)
}

// startSystemTLS starts a system whose limiters serve with tc's TLS; the
// test reaches them with client.
func startSystemTLS(t *testing.T, tc systemTLS, client *http.Client) *system {
	t.Helper()
	etcd := etcdtest.Start(t)
	broker := kafkatest.Start(t, "weir.usage")
	dir := t.TempDir()
	var coordinatorAuth etcdclient.Auth
	limiterAuth := map[string]etcdclient.Auth{}
	if tc.etcdUser {
		// The roles docs/operations.md recommends: coordinators read and
		// write Weir's prefix; a DC's limiters read it and write their
		// DC's instance records only.
		limiters := map[string]etcdtest.User{}
		for _, dc := range []string{"a", "b"} {
			limiters[dc] = etcdtest.User{Name: "weir-limiter-" + dc, Password: "limiterpw-" + dc, Grants: []etcdtest.Grant{
				{Prefix: "/weir/"}, {Prefix: "/weir/instances/" + dc + "/", Write: true},
			}}
		}
		etcdtest.EnableAuth(t, etcd.Client(t), etcdtest.WeirUser(), limiters["a"], limiters["b"])
		login := func(u etcdtest.User) etcdclient.Auth {
			a := etcdclient.Auth{User: u.Name, PasswordFile: filepath.Join(dir, u.Name+"-password")}
			if err := os.WriteFile(a.PasswordFile, []byte(u.Password+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			return a
		}
		coordinatorAuth = login(etcdtest.WeirUser())
		for dc, u := range limiters {
			limiterAuth[dc] = login(u)
		}
	}
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(rwToken+" rw operator\n"+roToken+" ro viewer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	s := &system{http: map[string]string{}, limiters: client, etcd: etcd, limiterAuth: limiterAuth}
	ready := make(chan string, 1)
	run := func(name string, f func(ctx context.Context) error) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- f(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	names := []string{"c1"}
	if tc.standby {
		names = append(names, "c2")
	}
	var admins []string
	for _, name := range names {
		run("coordinator "+name, func(ctx context.Context) error {
			return coordinatord.Run(ctx, coordinatord.Config{
				Etcd: etcd.Endpoints(), Kafka: []string{broker.Addr()}, DCs: []string{"a", "b"},
				AdminAddr: "127.0.0.1:0", AdminTokenFile: tokens, DefaultDomain: "api", Name: name,
				Interval: 500 * time.Millisecond, Logger: quiet, Ready: func(addr string) { ready <- addr },
				LimiterTLS: tc.coordinator, EtcdAuth: coordinatorAuth,
			})
		})
		admins = append(admins, "http://"+<-ready)
	}
	s.admin = admins[0]
	if tc.standby {
		leads := func(admin string) bool {
			req, _ := http.NewRequest("GET", admin+"/v1/status", nil)
			req.Header.Set("Authorization", "Bearer "+roToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var st struct{ Leader bool }
			return json.NewDecoder(resp.Body).Decode(&st) == nil && st.Leader
		}
		var leader int
		if !waitFor(20*time.Second, func() bool {
			for i, a := range admins {
				if leads(a) {
					leader = i
					return true
				}
			}
			return false
		}) {
			t.Fatal("no coordinator leads after 20s")
		}
		s.admin, s.standby = admins[leader], admins[1-leader]
	}
	for _, dc := range []string{"a", "b"} {
		up := make(chan string, 1)
		run("limiter "+dc, func(ctx context.Context) error {
			return limiterd.Run(ctx, limiterd.Config{
				DC: dc, DCs: []string{"a", "b"}, HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0",
				Etcd: etcd.Endpoints(), Kafka: []string{broker.Addr()}, ReportInterval: 500 * time.Millisecond,
				Logger: quiet, Ready: func(httpAddr, _ string) { up <- httpAddr }, TLS: tc.limiters, EtcdAuth: limiterAuth[dc],
			})
		})
		select {
		case addr := <-up:
			s.http[dc] = "http://" + addr
			if tc.limiters.Enabled() {
				s.http[dc] = "https://" + addr
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("limiter %s did not start", dc)
		}
	}
	return s
}

// ordersRule writes to path a rule file of domain api holding rule
// orders (requests to /orders, per user, limit per window of
// windowSeconds) and returns path.
func ordersRule(t *testing.T, path string, limit, windowSeconds int) string {
	t.Helper()
	doc := fmt.Sprintf("domain: api\nrules:\n  - rule_id: orders\n    path_pattern: /orders\n    key_type: user\n    limit: %d\n    window_seconds: %d\n", limit, windowSeconds)
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// weirctl runs the command against the system with the rw token.
func (s *system) weirctl(t *testing.T, args ...string) (string, string) {
	t.Helper()
	return s.weirctlAt(t, s.admin, args...)
}

// weirctlAt runs the command against the coordinator at admin with the rw
// token.
func (s *system) weirctlAt(t *testing.T, admin string, args ...string) (string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := map[string]string{"WEIR_SERVER": admin, "WEIR_TOKEN": rwToken}
	code := run(context.Background(), env2(args, &out, &errOut, env))
	if code != exitOK {
		t.Fatalf("weirctl %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

func env2(args []string, out, errOut io.Writer, vars map[string]string) env {
	return env{args: args, stdin: strings.NewReader(""), stdout: out, stderr: errOut,
		lookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
}

// check asks DC dc's limiter about one request of user u; it returns the
// rule that decided and its local limit ("" when no rule matched).
func (s *system) check(t *testing.T, dc, user string) (string, int64) {
	t.Helper()
	resp, err := s.limiters.Post(s.http[dc]+"/v1/check", "application/json", strings.NewReader(fmt.Sprintf(`{"domain":"api","attributes":{"user":%q,"path":"/orders"}}`, user)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Matched bool   `json:"matched"`
		RuleID  string `json:"rule_id"`
		Limit   int64  `json:"limit"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if !body.Matched {
		return "", 0
	}
	return body.RuleID, body.Limit
}

// probe asks DC dc's limiter about one request of a user never seen
// before; it returns the rule that decided and its local limit. A fresh
// user each time keeps the probes from consuming a key's quota: a key
// that has consumed part of a long window keeps that much of its local
// limit wherever the shares go (usage-aware limits), so the limit a
// reused probe shows would not follow the rule's shares.
func (s *system) probe(t *testing.T, dc string) (string, int64) {
	t.Helper()
	return s.check(t, dc, fmt.Sprintf("probe-%d", s.probes.Add(1)))
}

// planned waits until the leader has planned rule id (its live shares
// answer): the limiters enforce a static share of a new rule before the
// leader's next tick, and a pin needs the live shares.
func (s *system) planned(t *testing.T, id string) {
	t.Helper()
	until(t, 10*time.Second, "the leader plans "+id, func() bool {
		var out, errOut bytes.Buffer
		env := map[string]string{"WEIR_SERVER": s.admin, "WEIR_TOKEN": rwToken}
		return run(context.Background(), env2([]string{"shares", "get", id}, &out, &errOut, env)) == exitOK
	})
}

// until polls cond every 20 ms up to d and returns how long it took.
func until(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	if !waitFor(d, cond) {
		t.Fatalf("after %v: %s", d, what)
	}
	return time.Since(start)
}

func TestAgainstARunningCoordinator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, a broker, a coordinator and two limiters")
	}
	s := startSystem(t)

	// Authentication: none → 401; read-only on a write → 403.
	for _, tc := range []struct {
		method, token string
		want          int
	}{{"GET", "", 401}, {"GET", "wrong-token-0123456789", 401}, {"POST", roToken, 403}, {"GET", roToken, 200}} {
		req, _ := http.NewRequest(tc.method, s.admin+"/rate-limits", strings.NewReader(`{"rule_id":"x","limit":1,"window_seconds":1}`))
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s /rate-limits with token %q: %d, want %d", tc.method, tc.token, resp.StatusCode, tc.want)
		}
	}

	// Create through weirctl apply; the limiters enforce it.
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	write := func(limit int) { ordersRule(t, rules, limit, 60) }
	write(10)
	out, _ := s.weirctl(t, "apply", "-f", rules, "--dry-run")
	if !strings.Contains(out, "orders") || !strings.Contains(out, "dry run") {
		t.Errorf("apply --dry-run printed %q", out)
	}
	if id, _ := s.check(t, "a", "u1"); id != "" {
		t.Fatal("--dry-run created the rule")
	}
	s.weirctl(t, "apply", "-f", rules)
	took := until(t, 5*time.Second, "the new rule enforced in both DCs", func() bool {
		a, _ := s.probe(t, "a")
		b, _ := s.probe(t, "b")
		return a == "orders" && b == "orders"
	})
	t.Logf("rule created through the API: enforced in both DCs %v later", took)

	// Update: the new limit reaches the limiters (each DC enforces half).
	write(40)
	s.weirctl(t, "apply", "-f", rules)
	took = until(t, 5*time.Second, "the updated limit enforced", func() bool {
		_, la := s.probe(t, "a")
		return la == 20
	})
	t.Logf("update enforced %v later", took)
	s.planned(t, "orders")

	// Every read command answers.
	for _, args := range [][]string{
		{"get"}, {"get", "orders"}, {"get", "orders", "-o", "json"}, {"status", "orders", "u1"}, {"top", "orders"},
		{"shares", "get", "orders"}, {"audit"},
	} {
		out, _ := s.weirctl(t, args...)
		if out == "" {
			t.Errorf("weirctl %v printed nothing", args)
		}
	}
	out, _ = s.weirctl(t, "status", "orders", "u1")
	if !strings.Contains(out, "a") || !strings.Contains(out, "b") {
		t.Errorf("status does not show both DCs:\n%s", out)
	}

	// Pin DC a at 25%: its local limit follows within about an interval.
	s.weirctl(t, "shares", "pin", "orders", "a", "25%")
	took = until(t, 10*time.Second, "a's local limit at 25% of 40", func() bool {
		_, la := s.probe(t, "a")
		return la == 10
	})
	t.Logf("pin reached DC a %v later (interval 500ms)", took)
	s.weirctl(t, "shares", "unpin", "orders", "a")
	s.weirctl(t, "shares", "floor", "orders", "b", "0.3")
	s.weirctl(t, "shares", "drain", "orders", "b")
	until(t, 10*time.Second, "b drained", func() bool {
		_, lb := s.probe(t, "b")
		return lb == 0
	})
	s.weirctl(t, "shares", "drain", "orders", "b", "--undo")

	out, _ = s.weirctl(t, "audit", "-o", "json")
	for _, action := range []string{`"create"`, `"update"`, `"shares"`, `"operator"`} {
		if !strings.Contains(out, action) {
			t.Errorf("audit lacks %s:\n%s", action, out)
		}
	}

	// Delete: the limiters stop matching it.
	s.weirctl(t, "delete", "orders")
	until(t, 5*time.Second, "the deleted rule gone from both DCs", func() bool {
		a, _ := s.probe(t, "a")
		b, _ := s.probe(t, "b")
		return a == "" && b == ""
	})
}

// TestStatusFromTLSLimiters runs weirctl status against limiters that
// serve mutual TLS: the coordinator reaches them at the https scheme they
// register in etcd, trusting the CA it is given and presenting its client
// certificate; with a CA that does not sign the limiters' certificate,
// every DC says so.
func TestStatusFromTLSLimiters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, a broker, a coordinator and two limiters, twice")
	}
	dir := t.TempDir()
	lim, coord, other := certtest.Issue(t, dir, "limiter"), certtest.Issue(t, dir, "coordinator"), certtest.Issue(t, dir, "other")
	served := tlsconf.Files{Cert: lim.CertFile, Key: lim.KeyFile, ClientCA: coord.CertFile}
	roots := x509.NewCertPool()
	roots.AddCert(lim.Pair.Leaf)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{coord.Pair}}}}
	tests := []struct {
		name    string
		trust   tlsconf.ClientFiles
		wantErr []string // in every DC's error; none: every DC answers
	}{
		{"trusted", tlsconf.ClientFiles{CA: lim.CertFile, Cert: coord.CertFile, Key: coord.KeyFile}, nil},
		{"CA not trusted", tlsconf.ClientFiles{CA: other.CertFile, Cert: coord.CertFile, Key: coord.KeyFile},
			[]string{"TLS certificate is not trusted", "certificate signed by unknown authority"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startSystemTLS(t, systemTLS{limiters: served, coordinator: tt.trust}, client)
			rules := ordersRule(t, filepath.Join(t.TempDir(), "rules.yaml"), 40, 60)
			s.weirctl(t, "apply", "-f", rules)
			until(t, 10*time.Second, "the rule enforced in both DCs", func() bool {
				a, _ := s.probe(t, "a")
				b, _ := s.probe(t, "b")
				return a == "orders" && b == "orders"
			})
			var ks adminapi.KeyStatus
			settled := func() bool {
				var out, errOut bytes.Buffer
				env := map[string]string{"WEIR_SERVER": s.admin, "WEIR_TOKEN": rwToken}
				if run(context.Background(), env2([]string{"status", "orders", "u1", "-o", "json"}, &out, &errOut, env)) != exitOK {
					return false // the coordinator does not lead yet
				}
				ks = adminapi.KeyStatus{}
				if err := json.Unmarshal(out.Bytes(), &ks); err != nil {
					t.Fatalf("weirctl status -o json: %v\n%s", err, out.String())
				}
				if len(ks.DCs) != 2 {
					return false
				}
				for _, d := range ks.DCs {
					if len(tt.wantErr) == 0 && d.Error != "" {
						return false
					}
					for _, w := range tt.wantErr {
						if !strings.Contains(d.Error, w) {
							return false
						}
					}
				}
				return true
			}
			if !waitFor(10*time.Second, settled) {
				t.Fatalf("weirctl status: got %+v, want every DC to answer (or to fail with %q)", ks, tt.wantErr)
			}
			if len(tt.wantErr) > 0 {
				out, _ := s.weirctl(t, "status", "orders", "u1")
				if !strings.Contains(out, "unavailable: ") || !strings.Contains(out, tt.wantErr[0]) {
					t.Errorf("weirctl status does not show why:\n%s", out)
				}
				return
			}
			for _, d := range ks.DCs {
				want := s.limiterStatus(t, d.DC, "orders", "u1")
				if d.Limit != want.Limit || d.Remaining != want.Remaining || d.WindowSeconds != want.WindowSeconds || d.Limit <= 0 {
					t.Errorf("DC %s: got limit %d, remaining %d, window %ds; want the limiter's %d, %d, %ds (a positive limit)",
						d.DC, d.Limit, d.Remaining, d.WindowSeconds, want.Limit, want.Remaining, want.WindowSeconds)
				}
			}
		})
	}
}

// TestAgainstAStandby runs weirctl's leader-only reads against the
// coordinator that does not lead: it forwards them to the leader, with the
// caller's token. It also checks that a rule of a domain other than the
// default is found without --domain.
func TestAgainstAStandby(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, a broker, two coordinators and two limiters")
	}
	s := startSystemTLS(t, systemTLS{standby: true}, http.DefaultClient)
	rules := ordersRule(t, filepath.Join(t.TempDir(), "rules.yaml"), 40, 60)
	s.weirctlAt(t, s.standby, "apply", "-f", rules) // writes go to etcd from any coordinator
	until(t, 10*time.Second, "the rule enforced in both DCs", func() bool {
		a, _ := s.check(t, "a", "u1")
		b, _ := s.check(t, "b", "u1")
		return a == "orders" && b == "orders"
	})
	// The leader has planned the rule once its shares answer.
	var out, errOut bytes.Buffer
	if !waitFor(10*time.Second, func() bool {
		out.Reset()
		errOut.Reset()
		return run(context.Background(), env2([]string{"shares", "get", "orders"}, &out, &errOut,
			map[string]string{"WEIR_SERVER": s.admin, "WEIR_TOKEN": rwToken})) == exitOK
	}) {
		t.Fatalf("weirctl shares get against the leader: %s", errOut.String())
	}
	for _, tt := range []struct {
		args []string
		want string // in the output
	}{
		{[]string{"shares", "get", "orders"}, "SHARE"},
		{[]string{"top", "orders"}, "rule orders"},
		{[]string{"status", "orders", "u1"}, "REMAINING"},
		{[]string{"status", "orders", "u1", "-o", "json"}, `"remaining"`},
	} {
		out, _ := s.weirctlAt(t, s.standby, tt.args...)
		if !strings.Contains(out, tt.want) {
			t.Errorf("weirctl %v against the standby: got\n%s\nwant it to contain %q", tt.args, out, tt.want)
		}
	}
	// The coordinator's own view of the shares is forwarded too.
	for _, tc := range []struct {
		token string
		want  int
	}{{roToken, 200}, {"", 401}} {
		req, _ := http.NewRequest("GET", s.standby+"/v1/shares", nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET /v1/shares on the standby with token %q: got %d, want %d", tc.token, resp.StatusCode, tc.want)
		}
	}

	// A rule only in domain shop: found without --domain, from either
	// coordinator.
	shop := filepath.Join(t.TempDir(), "shop.yaml")
	if err := os.WriteFile(shop, []byte("domain: shop\nrules:\n  - rule_id: carts\n    key_type: user\n    limit: 5\n    window_seconds: 60\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.weirctl(t, "apply", "-f", shop)
	for _, admin := range []string{s.admin, s.standby} {
		out, _ := s.weirctlAt(t, admin, "get", "carts", "-o", "json")
		if !strings.Contains(out, `"domain": "shop"`) && !strings.Contains(out, `"domain":"shop"`) {
			t.Errorf("weirctl get carts (no --domain) at %s: got\n%s\nwant the rule of domain shop", admin, out)
		}
	}
}

// TestUnderEtcdRBAC runs two coordinators and two limiters against an
// etcd with auth on, each kind logged in as a user with the least role
// it needs (startSystemTLS): a leader is elected, a rule applied through
// the standby is enforced in both DCs, the limiters register, and a pin
// reaches a limiter through etcd.
func TestUnderEtcdRBAC(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, a broker, two coordinators and two limiters")
	}
	s := startSystemTLS(t, systemTLS{standby: true, etcdUser: true}, http.DefaultClient)
	rules := ordersRule(t, filepath.Join(t.TempDir(), "rules.yaml"), 40, 60)
	s.weirctlAt(t, s.standby, "apply", "-f", rules)
	until(t, 10*time.Second, "the rule enforced in both DCs at half its limit", func() bool {
		_, la := s.probe(t, "a")
		_, lb := s.probe(t, "b")
		return la == 20 && lb == 20
	})
	s.planned(t, "orders")
	// A pin goes from the leader through etcd to DC a's limiter.
	s.weirctlAt(t, s.standby, "shares", "pin", "orders", "a", "25%")
	until(t, 10*time.Second, "a's local limit at 25% of 40", func() bool {
		_, la := s.probe(t, "a")
		return la == 10
	})

	// The limiters registered under their roles; DC a's may not touch a
	// rule, nor DC b's instance records.
	limiter, err := etcdclient.New(etcdclient.Config{Endpoints: s.etcd.Endpoints(), Auth: s.limiterAuth["a"]})
	if err != nil {
		t.Fatal(err)
	}
	defer limiter.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := limiter.Get(ctx, "/weir/instances/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 2 {
		t.Errorf("instance records of the limiters: got %v (err %v), want 2", resp, err)
	}
	for _, key := range []string{"/weir/rules/api/orders", "/weir/instances/b/forged"} {
		if _, err := limiter.Put(ctx, key, "{}"); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("DC a's limiter user writing %s: got error %v, want permission denied", key, err)
		}
	}
}

// TestShareMoveTimes measures how long a pin takes to show in the local
// limits of a keyed rule (the limits of keys without a share of their
// own): the DC that shrinks follows within about an interval, the DC that
// grows only once the quota released has aged out of the rule's memory —
// the window, two for the default sliding window counter — and the
// coordinator's tolerated skew: the figures docs/operations.md gives.
func TestShareMoveTimes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, a broker, a coordinator and two limiters")
	}
	const interval = 500 * time.Millisecond // startSystem's
	const quarantine = 20 * time.Second     // the memory of a 10 s sliding window counter
	s := startSystem(t)
	rules := ordersRule(t, filepath.Join(t.TempDir(), "rules.yaml"), 40, 10)
	s.weirctl(t, "apply", "-f", rules)
	until(t, 10*time.Second, "both DCs at half the limit", func() bool {
		_, la := s.probe(t, "a")
		_, lb := s.probe(t, "b")
		return la == 20 && lb == 20
	})
	s.planned(t, "orders")

	for _, mv := range []struct {
		name            string
		args            []string
		shrinks, grows  string
		shrunk, grownTo int64
	}{
		{"pin a at 25%", []string{"shares", "pin", "orders", "a", "25%"}, "a", "b", 10, 30},
		{"drain b (a unpinned)", []string{"shares", "drain", "orders", "b"}, "b", "a", 0, 40},
	} {
		if mv.name == "drain b (a unpinned)" {
			s.weirctl(t, "shares", "unpin", "orders", "a")
		}
		start := time.Now()
		s.weirctl(t, mv.args...)
		var shrink, grow time.Duration
		waitFor(quarantine+15*time.Second, func() bool {
			_, ls := s.probe(t, mv.shrinks)
			_, lg := s.probe(t, mv.grows)
			if shrink == 0 && ls == mv.shrunk {
				shrink = time.Since(start)
			}
			if grow == 0 && lg == mv.grownTo {
				grow = time.Since(start)
			}
			return shrink > 0 && grow > 0
		})
		t.Logf("%s (interval %v, quarantine %v): %s shrank in %v, %s grew in %v", mv.name, interval, quarantine, mv.shrinks, shrink, mv.grows, grow)
		switch {
		case shrink == 0 || grow == 0:
			t.Fatalf("%s: after %v, shrink %v, grow %v (0: not seen)", mv.name, quarantine+15*time.Second, shrink, grow)
		case shrink >= quarantine:
			t.Errorf("%s: the shrink took %v, want it well within the quarantine (%v)", mv.name, shrink, quarantine)
		case grow < quarantine:
			t.Errorf("%s: %s grew in %v, before the released quota's quarantine (%v) was over", mv.name, mv.grows, grow, quarantine)
		}
	}
}

// waitFor polls cond every 20 ms up to d and reports whether it held.
func waitFor(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// limiterStatus asks DC dc's limiter directly for a key's status.
func (s *system) limiterStatus(t *testing.T, dc, ruleID, key string) adminapi.DCKeyStatus {
	t.Helper()
	resp, err := s.limiters.Get(s.http[dc] + "/v1/rate-limits/" + ruleID + "/" + key + "?domain=api")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Limit         int64 `json:"limit"`
		Remaining     int64 `json:"remaining"`
		WindowSeconds int64 `json:"window_seconds"`
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("limiter %s status: %s", dc, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return adminapi.DCKeyStatus{DC: dc, Limit: st.Limit, Remaining: st.Remaining, WindowSeconds: st.WindowSeconds}
}
