package ruleset_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
)

// limited returns an enabled rule allowing 10 a minute, with options.
func limited(id string, opts ...func(*rule.Rule)) rule.Rule {
	r := rule.Rule{ID: id, Limit: 10, WindowSeconds: 60, Enabled: true}
	for _, o := range opts {
		o(&r)
	}
	return r
}

func path(p string) func(*rule.Rule)        { return func(r *rule.Rule) { r.PathPattern = p } }
func methods(ms ...string) func(*rule.Rule) { return func(r *rule.Rule) { r.Methods = ms } }
func keyType(ds ...string) func(*rule.Rule) { return func(r *rule.Rule) { r.KeyType = ds } }
func disabled(r *rule.Rule)                 { r.Enabled = false }
func unlimited(r *rule.Rule)                { r.Unlimited, r.Limit, r.WindowSeconds = true, 0, 0 }
func conds(kv ...string) func(*rule.Rule) {
	return func(r *rule.Rule) {
		r.Conditions = map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			r.Conditions[kv[i]] = kv[i+1]
		}
	}
}
func overrides(os ...rule.Override) func(*rule.Rule) {
	return func(r *rule.Rule) { r.Overrides = os }
}

func mustCompile(t testing.TB, rules ...rule.Rule) *ruleset.Set {
	t.Helper()
	s, err := ruleset.Compile(rule.Set{Domain: "shop", Rules: rules})
	if err != nil {
		t.Fatalf("Compile: got error %v, want none", err)
	}
	return s
}

func ids(ms []ruleset.Match) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Rule.Spec.ID)
	}
	return out
}

func TestMatchWhichRulesApply(t *testing.T) {
	s := mustCompile(t,
		limited("everything"),
		limited("api", path("/api/**")),
		limited("users-get", path("/api/users/*"), methods("GET", "HEAD")),
		limited("login", path("/auth/login"), methods("POST"), keyType("username")),
		limited("free-plan", conds("plan", "free")),
		limited("with-api-key", conds("x-api-key", "*"), keyType("x-api-key")),
		limited("root", path("/")),
		limited("off", path("/api/**"), disabled),
		limited("json", path("/files/*.json")),
		limited("deep-admin", path("/**/admin")),
		limited("per-tenant-user", keyType("tenant", "user_id")),
		limited("one-client", conds("ip", "2001:db8::1")),
	)
	tests := []struct {
		name  string
		attrs map[string]string
		want  []string
	}{
		{"no attributes", nil, []string{"everything"}},
		{"empty path is missing", map[string]string{"path": ""}, []string{"everything"}},
		{"root", map[string]string{"path": "/"}, []string{"everything", "root"}},
		{"api prefix itself", map[string]string{"path": "/api"}, []string{"everything", "api"}},
		{"api user with GET", map[string]string{"path": "/api/users/42", "method": "GET"}, []string{"everything", "api", "users-get"}},
		{"api user with POST", map[string]string{"path": "/api/users/42", "method": "POST"}, []string{"everything", "api"}},
		{"api user without method", map[string]string{"path": "/api/users/42"}, []string{"everything", "api"}},
		{"methods are case-sensitive", map[string]string{"path": "/api/users/42", "method": "get"}, []string{"everything", "api"}},
		{"doubled slashes", map[string]string{"path": "//api//users/42/", "method": "HEAD"}, []string{"everything", "api", "users-get"}},
		{"path without leading slash", map[string]string{"path": "api/users/42", "method": "GET"}, []string{"everything"}},
		{"login with username", map[string]string{"path": "/auth/login", "method": "POST", "username": "ann"}, []string{"everything", "login"}},
		{"login without username", map[string]string{"path": "/auth/login", "method": "POST"}, []string{"everything"}},
		{"login with empty username", map[string]string{"path": "/auth/login", "method": "POST", "username": ""}, []string{"everything"}},
		{"login with GET", map[string]string{"path": "/auth/login", "method": "GET", "username": "ann"}, []string{"everything"}},
		{"condition holds", map[string]string{"plan": "free"}, []string{"everything", "free-plan"}},
		{"condition differs", map[string]string{"plan": "pro"}, []string{"everything"}},
		{"condition is case-sensitive", map[string]string{"plan": "Free"}, []string{"everything"}},
		{"star condition present", map[string]string{"x-api-key": "k1"}, []string{"everything", "with-api-key"}},
		{"star condition empty", map[string]string{"x-api-key": ""}, []string{"everything"}},
		{"glob segment", map[string]string{"path": "/files/a.json"}, []string{"everything", "json"}},
		{"glob segment mismatch", map[string]string{"path": "/files/a.yaml"}, []string{"everything"}},
		{"double star first", map[string]string{"path": "/x/y/admin"}, []string{"everything", "deep-admin"}},
		{"composite key complete", map[string]string{"tenant": "acme", "user_id": "1"}, []string{"everything", "per-tenant-user"}},
		{"composite key partial", map[string]string{"tenant": "acme"}, []string{"everything"}},
		{"ip condition, canonical", map[string]string{"ip": "2001:db8::1"}, []string{"everything", "one-client"}},
		{"ip condition, written otherwise", map[string]string{"ip": "2001:DB8:0::1"}, []string{"everything", "one-client"}},
		{"ip condition, other address", map[string]string{"ip": "2001:db8::2"}, []string{"everything"}},
		{"composite key part empty", map[string]string{"tenant": "acme", "user_id": ""}, []string{"everything"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ids(s.Match(tt.attrs, nil))
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMatchAppendsToDst(t *testing.T) {
	s := mustCompile(t, limited("a"), limited("b"))
	dst := make([]ruleset.Match, 1, 8)
	got := s.Match(nil, dst)
	if len(got) != 3 || got[0].Rule != nil || &got[0] != &dst[0] {
		t.Fatalf("got %d matches %v, want the one given followed by 2, in dst's array", len(got), got)
	}
}

func TestMatchKeys(t *testing.T) {
	s := mustCompile(t,
		limited("global"),
		limited("per-user", keyType("user_id")),
		limited("tenant-user", keyType("tenant", "user_id")),
		limited("user-tenant", keyType("user_id", "tenant")),
	)
	tests := []struct {
		name  string
		attrs map[string]string
		want  []result
	}{
		{"plain", map[string]string{"tenant": "acme", "user_id": "42"}, []result{
			{ID: "global", Key: "", StoreKey: "shop/global/"},
			{ID: "per-user", Key: "42", StoreKey: "shop/per-user/42"},
			{ID: "tenant-user", Key: "acme|42", StoreKey: "shop/tenant-user/acme|42"},
			{ID: "user-tenant", Key: "42|acme", StoreKey: "shop/user-tenant/42|acme"},
		}},
		{"single dimension is not escaped", map[string]string{"user_id": `a|b\c`}, []result{
			{ID: "global", Key: "", StoreKey: "shop/global/"},
			{ID: "per-user", Key: `a|b\c`, StoreKey: `shop/per-user/a|b\c`},
		}},
		{"separator in the first value", map[string]string{"tenant": "a|b", "user_id": "c"}, []result{
			{ID: "global", Key: "", StoreKey: "shop/global/"},
			{ID: "per-user", Key: "c", StoreKey: "shop/per-user/c"},
			{ID: "tenant-user", Key: `a\|b|c`, StoreKey: `shop/tenant-user/a\|b|c`},
			{ID: "user-tenant", Key: `c|a\|b`, StoreKey: `shop/user-tenant/c|a\|b`},
		}},
		{"escape in a value", map[string]string{"tenant": `a\`, "user_id": `|b`}, []result{
			{ID: "global", Key: "", StoreKey: "shop/global/"},
			{ID: "per-user", Key: "|b", StoreKey: "shop/per-user/|b"},
			{ID: "tenant-user", Key: `a\\|\|b`, StoreKey: `shop/tenant-user/a\\|\|b`},
			{ID: "user-tenant", Key: `\|b|a\\`, StoreKey: `shop/user-tenant/\|b|a\\`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := results(s.Match(tt.attrs, nil))
			for i := range got {
				got[i].Action, got[i].Limit, got[i].Burst = "", 0, 0
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCompositeKeysDoNotCollide(t *testing.T) {
	s := mustCompile(t, limited("k", keyType("a", "b")))
	tuples := [][2]string{
		{"x|y", "z"}, {"x", "y|z"}, {`x\`, "y"}, {"x", `\y`}, {`x\|`, "y"}, {"x", `\|y`},
		{`x\\`, "y"}, {"x|", "y"}, {"x", "|y"}, {`\`, `\`}, {`\\`, "|"}, {"|", `\\`}, {"||", "|"}, {"|", "||"},
	}
	seen := map[string][2]string{}
	for _, tu := range tuples {
		ms := s.Match(map[string]string{"a": tu[0], "b": tu[1]}, nil)
		if len(ms) != 1 {
			t.Fatalf("%q: got %d matches, want 1", tu, len(ms))
		}
		if prev, dup := seen[ms[0].Key]; dup {
			t.Errorf("%q and %q: both got key %q, want different keys", prev, tu, ms[0].Key)
		}
		seen[ms[0].Key] = tu
		back, err := ms[0].Rule.KeyFor(ms[0].Key)
		if err != nil || back.Key != ms[0].Key {
			t.Errorf("%q: KeyFor(%q) got %q, %v; want the same key", tu, ms[0].Key, back.Key, err)
		}
	}
}

func TestOverridePrecedence(t *testing.T) {
	allow := rule.Action(rule.ActionAllow)
	deny := rule.Action(rule.ActionDeny)
	tests := []struct {
		name      string
		keyType   []string
		overrides []rule.Override
		attrs     map[string]string
		wantPos   int // the winning override, -1 for none
	}{
		{"none selects", []string{"user"}, []rule.Override{{Key: "bob", Action: deny}}, map[string]string{"user": "ann"}, -1},
		{"exact key", []string{"user"}, []rule.Override{{Key: "bob", Action: deny}, {Key: "ann", Limit: 99}}, map[string]string{"user": "ann"}, 1},
		{"key equals one-entry match", []string{"user"}, []rule.Override{{Match: map[string]string{"user": "ann"}, Action: allow}}, map[string]string{"user": "ann"}, 0},
		{"exact before CIDR listed first", []string{"ip"}, []rule.Override{{CIDR: "10.0.0.0/8", Action: allow}, {Key: "10.1.2.3", Action: deny}}, map[string]string{"ip": "10.1.2.3"}, 1},
		{"exact match before CIDR", []string{"ip", "user"}, []rule.Override{{CIDR: "10.1.2.3/32", Action: allow}, {Match: map[string]string{"user": "ann"}, Action: deny}}, map[string]string{"ip": "10.1.2.3", "user": "ann"}, 1},
		{"more dimensions first", []string{"tenant", "user"}, []rule.Override{
			{Match: map[string]string{"tenant": "acme"}, Limit: 50},
			{Match: map[string]string{"tenant": "acme", "user": "42"}, Action: deny},
		}, map[string]string{"tenant": "acme", "user": "42"}, 1},
		{"fewer dimensions when more do not select", []string{"tenant", "user"}, []rule.Override{
			{Match: map[string]string{"tenant": "acme"}, Limit: 50},
			{Match: map[string]string{"tenant": "acme", "user": "42"}, Action: deny},
		}, map[string]string{"tenant": "acme", "user": "7"}, 0},
		{"same size: first listed", []string{"tenant", "user"}, []rule.Override{
			{Match: map[string]string{"user": "42"}, Action: deny},
			{Match: map[string]string{"tenant": "acme"}, Limit: 50},
		}, map[string]string{"tenant": "acme", "user": "42"}, 0},
		{"same size: first listed, other order", []string{"tenant", "user"}, []rule.Override{
			{Match: map[string]string{"tenant": "acme"}, Limit: 50},
			{Match: map[string]string{"user": "42"}, Action: deny},
		}, map[string]string{"tenant": "acme", "user": "42"}, 0},
		{"three dimensions over two", []string{"a", "b", "c"}, []rule.Override{
			{Match: map[string]string{"a": "1", "b": "2"}, Action: deny},
			{Match: map[string]string{"b": "2", "c": "3"}, Action: deny},
			{Match: map[string]string{"a": "1", "b": "2", "c": "3"}, Action: allow},
		}, map[string]string{"a": "1", "b": "2", "c": "3"}, 2},
		{"two of three: first listed", []string{"a", "b", "c"}, []rule.Override{
			{Match: map[string]string{"a": "1"}, Action: deny},
			{Match: map[string]string{"b": "2", "c": "3"}, Action: allow},
			{Match: map[string]string{"a": "1", "c": "3"}, Limit: 5},
		}, map[string]string{"a": "1", "b": "2", "c": "3"}, 1},
		{"longer prefix first", []string{"ip"}, []rule.Override{
			{CIDR: "10.0.0.0/8", Action: allow},
			{CIDR: "10.1.0.0/16", Action: deny},
			{CIDR: "10.1.2.0/24", Limit: 7},
		}, map[string]string{"ip": "10.1.2.3"}, 2},
		{"shorter prefix when longer does not contain", []string{"ip"}, []rule.Override{
			{CIDR: "10.0.0.0/8", Action: allow},
			{CIDR: "10.1.0.0/16", Action: deny},
		}, map[string]string{"ip": "10.2.0.1"}, 0},
		{"whole v4 space", []string{"ip"}, []rule.Override{{CIDR: "0.0.0.0/0", Action: deny}}, map[string]string{"ip": "192.0.2.1"}, 0},
		{"v6 prefix does not hold v4", []string{"ip"}, []rule.Override{{CIDR: "::/0", Action: deny}}, map[string]string{"ip": "192.0.2.1"}, -1},
		{"v6 longer prefix first", []string{"ip"}, []rule.Override{
			{CIDR: "2001:db8::/32", Action: allow},
			{CIDR: "2001:db8:1::/48", Action: deny},
		}, map[string]string{"ip": "2001:db8:1::5"}, 1},
		{"v6 exact written differently", []string{"ip"}, []rule.Override{{Key: "2001:db8::1", Action: deny}}, map[string]string{"ip": "2001:DB8:0:0::1"}, 0},
		{"v4-mapped request in v4 prefix", []string{"ip"}, []rule.Override{{CIDR: "10.0.0.0/8", Action: deny}}, map[string]string{"ip": "::ffff:10.0.0.1"}, 0},
		{"v4-mapped prefix holds v4 request", []string{"ip"}, []rule.Override{{CIDR: "::ffff:10.0.0.0/104", Action: deny}}, map[string]string{"ip": "10.0.0.1"}, 0},
		{"v4-mapped key matches v4 request", []string{"ip"}, []rule.Override{{Key: "::ffff:10.0.0.1", Action: deny}}, map[string]string{"ip": "10.0.0.1"}, 0},
		{"zone is dropped", []string{"ip"}, []rule.Override{{CIDR: "fe80::/10", Action: deny}}, map[string]string{"ip": "fe80::1%eth0"}, 0},
		{"unparsable ip: no CIDR", []string{"ip"}, []rule.Override{{CIDR: "0.0.0.0/0", Action: deny}, {CIDR: "::/0", Action: deny}}, map[string]string{"ip": "unknown"}, -1},
		{"CIDR on a composite key", []string{"tenant", "ip"}, []rule.Override{{CIDR: "10.0.0.0/8", Action: allow}}, map[string]string{"tenant": "t", "ip": "10.9.9.9"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := limited("r", keyType(tt.keyType...), overrides(tt.overrides...))
			s := mustCompile(t, r)
			ms := s.Match(tt.attrs, nil)
			if len(ms) != 1 {
				t.Fatalf("got %d matches, want 1", len(ms))
			}
			m := ms[0]
			want := result{Action: rule.ActionLimit, Limit: 10}
			if tt.wantPos >= 0 {
				o := tt.overrides[tt.wantPos]
				want.Action, want.Limit, want.Burst = o.Action, o.Limit, o.Burst
				if want.Action == "" {
					want.Action = rule.ActionLimit
				}
				if want.Action != rule.ActionLimit {
					want.Limit = 10
				}
			}
			if m.Action != want.Action || m.Limit != want.Limit || m.Burst != want.Burst {
				t.Errorf("got %s limit %d burst %d, want %s limit %d burst %d (overrides[%d])",
					m.Action, m.Limit, m.Burst, want.Action, want.Limit, want.Burst, tt.wantPos)
			}
		})
	}
}

func TestOverrideBurst(t *testing.T) {
	s := mustCompile(t, limited("r", keyType("user"), func(r *rule.Rule) {
		r.Algorithm, r.Burst = algorithm.TokenBucket, 20
		r.Overrides = []rule.Override{{Key: "vip", Limit: 100, Burst: 500}, {Key: "mid", Limit: 50}, {Key: "bad", Action: rule.ActionDeny}}
	}))
	tests := []struct {
		user         string
		limit, burst int64
	}{
		{"someone", 10, 20},
		{"vip", 100, 500},
		{"mid", 50, 0}, // the algorithm's default for 50
		{"bad", 10, 20},
	}
	for _, tt := range tests {
		t.Run(tt.user, func(t *testing.T) {
			m := s.Match(map[string]string{"user": tt.user}, nil)[0]
			if m.Limit != tt.limit || m.Burst != tt.burst {
				t.Errorf("got limit %d burst %d, want %d and %d", m.Limit, m.Burst, tt.limit, tt.burst)
			}
			if p := m.Params(); p.Limit != tt.limit || p.Burst != tt.burst || p.Window != time.Minute || p.Algorithm != algorithm.TokenBucket {
				t.Errorf("Params: got %+v, want TokenBucket %d/%d per minute", p, tt.limit, tt.burst)
			}
		})
	}
}

func TestIPKeysAreCanonical(t *testing.T) {
	s := mustCompile(t, limited("per-ip", keyType("ip")), limited("per-ip-user", keyType("ip", "user")))
	tests := []struct {
		ip, want string
	}{
		{"192.0.2.1", "192.0.2.1"},
		{"2001:db8::1", "2001:db8::1"},
		{"2001:DB8::1", "2001:db8::1"},
		{"2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"},
		{"::ffff:192.0.2.1", "192.0.2.1"},
		{"fe80::1%eth0", "fe80::1"},
		{"192.000.002.001", "192.000.002.001"}, // not an address: as given
		{"unknown", "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.ip, func(t *testing.T) {
			ms := s.Match(map[string]string{"ip": tt.ip, "user": "u"}, nil)
			if len(ms) != 2 {
				t.Fatalf("got %d matches, want 2", len(ms))
			}
			if ms[0].Key != tt.want || ms[1].Key != tt.want+"|u" {
				t.Errorf("got keys %q and %q, want %q and %q", ms[0].Key, ms[1].Key, tt.want, tt.want+"|u")
			}
		})
	}
}

func TestUnlimited(t *testing.T) {
	s := mustCompile(t, limited("count-only", keyType("ip"), unlimited,
		overrides(rule.Override{CIDR: "198.51.100.0/24", Action: rule.ActionDeny})))
	tests := []struct {
		ip   string
		want result
	}{
		{"192.0.2.1", result{ID: "count-only", Key: "192.0.2.1", StoreKey: "shop/count-only/192.0.2.1", Action: rule.ActionLimit, Unlimited: true}},
		{"198.51.100.9", result{ID: "count-only", Key: "198.51.100.9", StoreKey: "shop/count-only/198.51.100.9", Action: rule.ActionDeny, Unlimited: true}},
	}
	for _, tt := range tests {
		t.Run(tt.ip, func(t *testing.T) {
			got := results(s.Match(map[string]string{"ip": tt.ip}, nil))
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("got %v, want [%v]", got, tt.want)
			}
		})
	}
}

func TestOversizedKeys(t *testing.T) {
	s := mustCompile(t,
		limited("global"),
		limited("one", keyType("v")),
		limited("two", keyType("v", "w")),
	)
	prefix := len("shop/one/")
	fits := strings.Repeat("a", algorithm.MaxKeyLen-prefix)
	tests := []struct {
		name  string
		attrs map[string]string
		want  []string
	}{
		{"at the limit", map[string]string{"v": fits}, []string{"global", "one"}},
		{"one byte over", map[string]string{"v": fits + "a"}, []string{"global", "one!"}},
		{"composite at the limit", map[string]string{"v": strings.Repeat("a", algorithm.MaxKeyLen-len("shop/two/")-2), "w": "b"}, []string{"global", "one", "two"}},
		{"composite over by escaping", map[string]string{"v": strings.Repeat("a", algorithm.MaxKeyLen-len("shop/two/")-3) + "|", "w": "b"}, []string{"global", "one", "two!"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := s.Match(tt.attrs, nil)
			// "id!" marks a match reported Oversized.
			var got []string
			for _, m := range ms {
				id := m.Rule.Spec.ID
				if m.Oversized {
					id += "!"
					if m.Key != "" || m.StoreKey != "" {
						t.Errorf("%s: oversized match carries key %q", id, m.StoreKey)
					}
				}
				got = append(got, id)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			for _, m := range ms {
				if len(m.StoreKey) > algorithm.MaxKeyLen {
					t.Errorf("%s: got a store key of %d bytes, want at most %d", m.Rule.Spec.ID, len(m.StoreKey), algorithm.MaxKeyLen)
				}
			}
		})
	}
}

func TestKeyFor(t *testing.T) {
	s := mustCompile(t,
		limited("global"),
		limited("per-ip", keyType("ip"), overrides(rule.Override{CIDR: "10.0.0.0/8", Action: rule.ActionAllow})),
		limited("tenant-user", keyType("tenant", "user"), overrides(rule.Override{Match: map[string]string{"tenant": "a|b"}, Limit: 70})),
		limited("off", keyType("user"), disabled),
	)
	tests := []struct {
		rule, key string
		want      result
		wantErr   bool
	}{
		{rule: "global", key: "", want: result{ID: "global", StoreKey: "shop/global/", Action: rule.ActionLimit, Limit: 10}},
		{rule: "global", key: "x", wantErr: true},
		{rule: "per-ip", key: "192.0.2.1", want: result{ID: "per-ip", Key: "192.0.2.1", StoreKey: "shop/per-ip/192.0.2.1", Action: rule.ActionLimit, Limit: 10}},
		{rule: "per-ip", key: "2001:DB8::1", want: result{ID: "per-ip", Key: "2001:db8::1", StoreKey: "shop/per-ip/2001:db8::1", Action: rule.ActionLimit, Limit: 10}},
		{rule: "per-ip", key: "10.2.3.4", want: result{ID: "per-ip", Key: "10.2.3.4", StoreKey: "shop/per-ip/10.2.3.4", Action: rule.ActionAllow, Limit: 10}},
		{rule: "per-ip", key: "not-an-ip", want: result{ID: "per-ip", Key: "not-an-ip", StoreKey: "shop/per-ip/not-an-ip", Action: rule.ActionLimit, Limit: 10}},
		{rule: "per-ip", key: "", wantErr: true},
		{rule: "per-ip", key: strings.Repeat("1", algorithm.MaxKeyLen), wantErr: true},
		{rule: "tenant-user", key: "acme|42", want: result{ID: "tenant-user", Key: "acme|42", StoreKey: "shop/tenant-user/acme|42", Action: rule.ActionLimit, Limit: 10}},
		{rule: "tenant-user", key: `a\|b|42`, want: result{ID: "tenant-user", Key: `a\|b|42`, StoreKey: `shop/tenant-user/a\|b|42`, Action: rule.ActionLimit, Limit: 70}},
		{rule: "tenant-user", key: `a\\|42`, want: result{ID: "tenant-user", Key: `a\\|42`, StoreKey: `shop/tenant-user/a\\|42`, Action: rule.ActionLimit, Limit: 10}},
		{rule: "tenant-user", key: "acme", wantErr: true},
		{rule: "tenant-user", key: "acme|42|x", wantErr: true},
		{rule: "tenant-user", key: "acme|", wantErr: true},
		{rule: "tenant-user", key: "|42", wantErr: true},
		{rule: "tenant-user", key: `acme\x|42`, wantErr: true},
		{rule: "tenant-user", key: `acme|42\`, wantErr: true},
		{rule: "off", key: "u", want: result{ID: "off", Key: "u", StoreKey: "shop/off/u", Action: rule.ActionLimit, Limit: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.rule+" "+tt.key[:min(len(tt.key), 20)], func(t *testing.T) {
			r, ok := s.Rule(tt.rule)
			if !ok {
				t.Fatalf("Rule(%q): got none", tt.rule)
			}
			m, err := r.KeyFor(tt.key)
			if tt.wantErr {
				if !errors.Is(err, ruleset.ErrInvalidKey) {
					t.Errorf("got %v, %v; want an error wrapping ErrInvalidKey", m, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if got := results([]ruleset.Match{m})[0]; got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRevision(t *testing.T) {
	base := limited("r", keyType("user"), overrides(rule.Override{Key: "vip", Limit: 100}))
	rev := func(r rule.Rule) uint64 {
		t.Helper()
		return mustCompile(t, r).Rules()[0].Revision
	}
	want := rev(base)
	same := map[string]func(*rule.Rule){
		"unchanged":  func(*rule.Rule) {},
		"timestamps": func(r *rule.Rule) { r.CreatedAt, r.UpdatedAt = time.Now(), time.Now() },
		"defaults written out": func(r *rule.Rule) {
			r.Algorithm, r.Scope, r.FailureMode, r.RetryAdvice = algorithm.Default, rule.ScopeGlobal, rule.FailLocal, rule.RetryAfter
		},
		"override action given": func(r *rule.Rule) { r.Overrides = []rule.Override{{Key: "vip", Limit: 100, Action: rule.ActionLimit}} },
		"domain given":          func(r *rule.Rule) { r.Domain = "shop" },
		"empty vs nil methods":  func(r *rule.Rule) { r.Methods = []string{} },
	}
	different := map[string]func(*rule.Rule){
		"limit":          func(r *rule.Rule) { r.Limit = 11 },
		"window":         func(r *rule.Rule) { r.WindowSeconds = 61 },
		"disabled":       func(r *rule.Rule) { r.Enabled = false },
		"shadow":         func(r *rule.Rule) { r.Shadow = true },
		"description":    func(r *rule.Rule) { r.Description = "x" },
		"override limit": func(r *rule.Rule) { r.Overrides = []rule.Override{{Key: "vip", Limit: 101}} },
		"key type":       func(r *rule.Rule) { r.KeyType = rule.Dimensions{"user_id"}; r.Overrides = nil },
		"path":           func(r *rule.Rule) { r.PathPattern = "/a" },
	}
	for name, change := range same {
		t.Run("same "+name, func(t *testing.T) {
			r := base
			r.Overrides = slices.Clone(base.Overrides)
			change(&r)
			if got := rev(r); got != want {
				t.Errorf("got revision %x, want %x", got, want)
			}
		})
	}
	for name, change := range different {
		t.Run("different "+name, func(t *testing.T) {
			r := base
			r.Overrides = slices.Clone(base.Overrides)
			change(&r)
			if got := rev(r); got == want {
				t.Errorf("got revision %x, want another", got)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	_, err := ruleset.Compile(rule.Set{Domain: "shop", Rules: []rule.Rule{
		limited("a", path("no-slash")),
		limited("a"),
	}})
	var ve *rule.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, rule.ErrInvalid) {
		t.Fatalf("got %v, want a *rule.ValidationError", err)
	}
	want := `compile rules of domain "shop": rules[0].path_pattern: "no-slash" must start with "/"` + "\n" +
		`rules[1].rule_id: "a" is also the id of rules[0]`
	if err.Error() != want {
		t.Errorf("got %q, want %q", err, want)
	}
	if _, err := ruleset.Compile(rule.Set{}); !errors.As(err, &ve) {
		t.Errorf("empty set: got %v, want a *rule.ValidationError", err)
	}
}

func TestCompileCopiesAndFillsDefaults(t *testing.T) {
	in := rule.Set{Domain: "shop", Rules: []rule.Rule{
		limited("r", keyType("user"), methods("GET"), conds("plan", "free"), overrides(rule.Override{Key: "vip", Limit: 100})),
	}}
	s := mustCompile(t, in.Rules...)
	in.Rules[0].KeyType[0] = "other"
	in.Rules[0].Methods[0] = "POST"
	in.Rules[0].Conditions["plan"] = "pro"
	in.Rules[0].Overrides[0].Key = "nobody"

	r, _ := s.Rule("r")
	if got := r.Spec; got.KeyType[0] != "user" || got.Methods[0] != "GET" || got.Conditions["plan"] != "free" || got.Overrides[0].Key != "vip" {
		t.Errorf("got spec %+v, want it unchanged by changes to the input", got)
	}
	if in.Rules[0].Overrides[0].Action != "" {
		t.Errorf("got input override action %q, want it left alone", in.Rules[0].Overrides[0].Action)
	}
	if got := r.Spec; got.Domain != "shop" || got.Algorithm != algorithm.Default || got.Scope != rule.ScopeGlobal ||
		got.FailureMode != rule.FailLocal || got.RetryAdvice != rule.RetryAfter || got.Overrides[0].Action != rule.ActionLimit {
		t.Errorf("got spec %+v, want its defaults filled in", got)
	}
	ms := s.Match(map[string]string{"user": "vip", "method": "GET", "plan": "free"}, nil)
	if len(ms) != 1 || ms[0].Limit != 100 {
		t.Errorf("got %v, want the vip override", results(ms))
	}
}

func TestSetAccessors(t *testing.T) {
	s := mustCompile(t, limited("a"), limited("b", disabled), limited("c"))
	if got := s.Domain(); got != "shop" {
		t.Errorf("Domain: got %q, want %q", got, "shop")
	}
	rules := s.Rules()
	var got []string
	for _, r := range rules {
		got = append(got, r.Spec.ID)
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("Rules: got %q, want %q", got, want)
	}
	rules[0] = nil
	if s.Rules()[0] == nil {
		t.Errorf("Rules: got the set's own slice, want a copy")
	}
	if r, ok := s.Rule("b"); !ok || r.Spec.ID != "b" || r.Spec.Enabled {
		t.Errorf("Rule(b): got %v, %t; want the disabled rule b", r, ok)
	}
	if _, ok := s.Rule("zz"); ok {
		t.Errorf("Rule(zz): got a rule, want none")
	}
	var zero ruleset.Set
	if got := zero.Match(map[string]string{"path": "/"}, nil); len(got) != 0 || zero.Domain() != "" || len(zero.Rules()) != 0 {
		t.Errorf("zero Set: got matches %v, want none", got)
	}
}

func TestMatchAllocations(t *testing.T) {
	s := mustCompile(t,
		limited("global", path("/api/**")),
		limited("per-user", path("/api/**"), keyType("user")),
		limited("per-ip-user", keyType("ip", "user")),
		limited("per-ip", keyType("ip"), overrides(rule.Override{CIDR: "10.0.0.0/8", Action: rule.ActionAllow})),
		limited("not-this", path("/other/**"), keyType("user")),
	)
	tests := []struct {
		name  string
		attrs map[string]string
		want  float64
	}{
		{"no keys", map[string]string{"path": "/api/x"}, 0},
		{"one key", map[string]string{"path": "/api/x", "user": "u"}, 1},
		{"all keys", map[string]string{"path": "/api/x", "user": "u", "ip": "10.0.0.1"}, 3},
		{"ip to canonicalise", map[string]string{"ip": "::FFFF:10.0.0.1"}, 1 + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := make([]ruleset.Match, 0, 8)
			got := testing.AllocsPerRun(100, func() { dst = s.Match(tt.attrs, dst[:0]) })
			if got != tt.want {
				t.Errorf("got %v allocations, want %v", got, tt.want)
			}
		})
	}
}

func TestEveryMethod(t *testing.T) {
	all := []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"}
	var rules []rule.Rule
	for _, m := range all {
		rules = append(rules, limited("only-"+m, methods(m)))
	}
	s := mustCompile(t, rules...)
	for _, m := range append(all, "QUERY", "") {
		t.Run(m, func(t *testing.T) {
			got := ids(s.Match(map[string]string{"method": m}, nil))
			want := []string{}
			if m != "QUERY" && m != "" {
				want = []string{"only-" + m}
			}
			if !slices.Equal(got, want) {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}
