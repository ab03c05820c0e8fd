package rulefile_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/envoyconf"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/rulefile"
	"github.com/weirhq/weir/pkg/ruleset"
)

// Configurations in the shape of envoyproxy/ratelimit's documented
// examples.
const (
	envoyDatabases = `
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500

  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
`
	envoyMessaging = `
domain: messaging
descriptors:
  # Only allow 5 marketing messages a day to each number.
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5

  # Only allow 100 messages a day to each number.
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
`
	envoyPerIP = `
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10

  # This address gets a counter of its own.
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 20
`
	envoyClusters = `
domain: rl
descriptors:
  - key: source_cluster
    value: proxy
    descriptors:
      - key: destination_cluster
        value: bar
        rate_limit:
          unit: MINUTE
          requests_per_unit: 1
      - key: destination_cluster
        value: mock
        rate_limit:
          unit: Minute
          requests_per_unit: 2
`
	envoyMixed = `
domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true
  - key: azure
    shadow_mode: true
    detailed_metric: true
    rate_limit:
      unit: hour
      requests_per_unit: 100
  - key: key1
    value: value1
    rate_limit:
      name: my-limit
      unit: week
      requests_per_unit: 10
  - key: client_id
    value: "*"
    descriptors:
      - key: path
        value: /upload
        rate_limit:
          unit: year
          requests_per_unit: 1000
  - key: client_id
    value: acme
    rate_limit:
      unit: month
      requests_per_unit: 7
`
)

// envoyRule returns a converted rule as ParseEnvoy fills it in.
func envoyRule(domain, id, desc string, opts ...func(*rule.Rule)) rule.Rule {
	r := rule.Rule{ID: id, Domain: domain, Description: "from envoyproxy/ratelimit: " + desc,
		Algorithm: algorithm.FixedWindow, Enabled: true}
	for _, o := range opts {
		o(&r)
	}
	r.SetDefaults()
	return r
}

func limit(n, window int64) func(*rule.Rule) {
	return func(r *rule.Rule) { r.Limit, r.WindowSeconds = n, window }
}
func cond(kv ...string) func(*rule.Rule) {
	return func(r *rule.Rule) {
		r.Conditions = map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			r.Conditions[kv[i]] = kv[i+1]
		}
	}
}
func dims(ds ...string) func(*rule.Rule) { return func(r *rule.Rule) { r.KeyType = ds } }
func allowing(dim string, values ...string) func(*rule.Rule) {
	return func(r *rule.Rule) {
		for _, v := range values {
			r.Overrides = append(r.Overrides, rule.Override{Match: map[string]string{dim: v}, Action: rule.ActionAllow})
		}
	}
}

func TestParseEnvoyExamples(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want rule.Set
	}{
		{"databases", envoyDatabases, rule.Set{Domain: "mongo_cps", Rules: []rule.Rule{
			envoyRule("mongo_cps", "database_users", "database=users", cond("database", "users"), limit(500, 1)),
			envoyRule("mongo_cps", "database_default", "database=default", cond("database", "default"), limit(500, 1)),
		}}},
		{"messaging", envoyMessaging, rule.Set{Domain: "messaging", Rules: []rule.Rule{
			envoyRule("messaging", "message_type_marketing.to_number", "message_type=marketing, to_number",
				cond("message_type", "marketing"), dims("to_number"), limit(5, 86400)),
			envoyRule("messaging", "to_number", "to_number", dims("to_number"), limit(100, 86400)),
		}}},
		{"per ip with an exception", envoyPerIP, rule.Set{Domain: "edge_proxy_per_ip", Rules: []rule.Rule{
			envoyRule("edge_proxy_per_ip", "remote_address", "remote_address", dims("remote_address"), limit(10, 1),
				allowing("remote_address", "50.0.0.5")),
			envoyRule("edge_proxy_per_ip", "remote_address_50.0.0.5", "remote_address=50.0.0.5",
				cond("remote_address", "50.0.0.5"), limit(20, 1)),
		}}},
		{"nested values, units in any case", envoyClusters, rule.Set{Domain: "rl", Rules: []rule.Rule{
			envoyRule("rl", "source_cluster_proxy.destination_cluster_bar", "source_cluster=proxy, destination_cluster=bar",
				cond("source_cluster", "proxy", "destination_cluster", "bar"), limit(1, 60)),
			envoyRule("rl", "source_cluster_proxy.destination_cluster_mock", "source_cluster=proxy, destination_cluster=mock",
				cond("source_cluster", "proxy", "destination_cluster", "mock"), limit(2, 60)),
		}}},
		{"unlimited, shadow, name, wildcard", envoyMixed, rule.Set{Domain: "internal", Rules: []rule.Rule{
			envoyRule("internal", "ldap", "ldap", dims("ldap"), func(r *rule.Rule) { r.Unlimited = true }),
			envoyRule("internal", "azure", "azure", dims("azure"), limit(100, 3600), func(r *rule.Rule) { r.Shadow = true }),
			envoyRule("internal", "my-limit", "key1=value1", cond("key1", "value1"), limit(10, 7*86400)),
			envoyRule("internal", "client_id.path__upload", "client_id, path=/upload",
				dims("client_id"), cond("path", "/upload"), limit(1000, 365*86400), allowing("client_id", "acme")),
			envoyRule("internal", "client_id_acme", "client_id=acme", cond("client_id", "acme"), limit(7, 30*86400)),
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rulefile.ParseEnvoy([]byte(tt.doc))
			if err != nil {
				t.Fatalf("ParseEnvoy: got error %v, want none", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseEnvoy:\ngot  %+v\nwant %+v", got, tt.want)
			}
			// Parse recognises the format.
			got, err = rulefile.Parse([]byte(tt.doc))
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse: got %+v, %v; want the same as ParseEnvoy", got, err)
			}
			if _, err := ruleset.Compile(got); err != nil {
				t.Errorf("Compile: got error %v, want none", err)
			}
		})
	}
}

// TestEnvoyPrecedence checks, through package ruleset, that converted
// rules count requests as envoyproxy/ratelimit would: a descriptor with a
// value takes its requests away from a sibling without one.
func TestEnvoyPrecedence(t *testing.T) {
	parsed, err := rulefile.Parse([]byte(envoyPerIP + `
  - key: tenant
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 60}
  - key: tenant
    value: acme
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 600}
`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ruleset.Compile(parsed)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		attrs map[string]string
		want  []string // the rules that count the request: id and limit
	}{
		{"any address", map[string]string{"remote_address": "10.0.0.1"}, []string{"remote_address 10"}},
		{"the special address", map[string]string{"remote_address": "50.0.0.5"}, []string{"remote_address_50.0.0.5 20"}},
		{"any tenant", map[string]string{"tenant": "t1", "user": "u"}, []string{"tenant.user 60"}},
		{"the special tenant", map[string]string{"tenant": "acme", "user": "u"}, []string{"tenant_acme.user 600"}},
		{"no user", map[string]string{"tenant": "acme"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, m := range s.Match(tt.attrs, nil) {
				if m.Action == rule.ActionLimit {
					got = append(got, fmt.Sprintf("%s %d", m.Rule.Spec.ID, m.Limit))
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseEnvoyIDs(t *testing.T) {
	long := strings.Repeat("k", 60)
	doc := `domain: d
descriptors:
  - key: "a b"
    value: "c/d"
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: a_b
    value: c_d
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: x
    value: "1"
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: other
    rate_limit: {unit: second, requests_per_unit: 1, name: x_1}
  - key: lead
    value: "é"
    rate_limit: {unit: second, requests_per_unit: 1, name: "..é/x"}
  - key: ` + long + `
    descriptors:
      - key: ` + long + `2
        descriptors:
          - key: ` + long + `3
            rate_limit: {unit: second, requests_per_unit: 1}
`
	// "a b" is not a valid attribute name, so validation refuses the
	// first rule, and says so at its descriptor.
	_, err := rulefile.ParseEnvoy([]byte(doc))
	want := `descriptors[0]: as Weir rule "a_b_c_d": conditions["a b"]: "a b" holds ' '; use letters, digits, '_', '-' and '.'`
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}

	s, err := rulefile.ParseEnvoy([]byte(strings.Replace(doc, `"a b"`, "a.b", 1)))
	if err != nil {
		t.Fatalf("got error %v, want none", err)
	}
	var got []string
	for _, r := range s.Rules {
		got = append(got, r.ID)
	}
	if len(got) != 6 {
		t.Fatalf("got ids %q, want 6", got)
	}
	longID := long + "." + long + "2." + long + "3"
	wantIDs := []string{
		"a.b_c_d",
		"a_b_c_d",
		"x_1-2", // the name x_1 was served first
		"x_1",
		"x", // "..é/x" is "..___x", less what a rule id cannot start with
		longID[:111] + "-" + got[5][112:],
	}
	if !slices.Equal(got, wantIDs) {
		t.Errorf("got ids %q, want %q", got, wantIDs)
	}
	if len(got[5]) != 128 || got[5][111] != '-' {
		t.Errorf("got a long id of %d characters, want 128 ending in a hash", len(got[5]))
	}
}

func TestParseEnvoyBadFiles(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string // the whole error
	}{
		{"unknown unit", `domain: d
descriptors:
  - key: a
    descriptors:
      - key: b
      - key: c
        rate_limit: {unit: fortnight, requests_per_unit: 5}
`, `descriptors[0].descriptors[1].rate_limit.unit: "fortnight" is not valid (want "second", "minute", "hour", "day", "week", "month" or "year")`},
		{"no domain", "descriptors: []\n", "domain: required"},
		{"empty domain", "domain: ''\ndescriptors: []\n", "domain: required"},
		{"descriptors not a list", "domain: d\ndescriptors: {key: a}\n", "descriptors: want a list of descriptors, got an object"},
		{"descriptor not an object", "domain: d\ndescriptors: [a]\n", `descriptors[0]: want a descriptor (an object with a key), got "a"`},
		{"no key", "domain: d\ndescriptors:\n  - value: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n", "descriptors[0].key: required"},
		{"empty key", "domain: d\ndescriptors:\n  - key: ''\n", "descriptors[0].key: empty"},
		{"unknown field", "domain: d\ndescriptors:\n  - key: a\n    rate_limits: {unit: second}\n",
			"descriptors[0].rate_limits: unknown field"},
		{"unknown top field", "domain: d\ndescriptors: []\nrule: x\n", "rule: unknown field (want domain or descriptors)"},
		{"null rate limit and value are absent, the unit is not", "domain: d\ndescriptors:\n  - {key: a, value: null, rate_limit: null}\n  - {key: b, rate_limit: {unit: null, requests_per_unit: 1}}\n",
			"descriptors[1].rate_limit.unit: want a string, got null"},
		{"no unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {requests_per_unit: 5}\n",
			"descriptors[0].rate_limit.unit: required (want second, minute, hour, day, week, month or year)"},
		{"requests as a string", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: '5'}\n",
			`descriptors[0].rate_limit.requests_per_unit: want an integer, got "5"`},
		{"fractional requests", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 2.5}\n",
			`descriptors[0].rate_limit.requests_per_unit: want an integer, got 2.5`},
		{"negative requests", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: -1}\n",
			`descriptors[0].rate_limit.requests_per_unit: -1 is out of range [0, 4294967295]`},
		{"replaces without a name", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: ''}]}\n",
			"descriptors[0].rate_limit.replaces[0].name: required: a replaces entry names the limit it replaces"},
		{"replaces itself", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, name: x, replaces: [{name: x}]}\n",
			`descriptors[0].rate_limit.replaces[0].name: "x" is this limit's own name; a limit cannot replace itself`},
		{"share_threshold without a wildcard", "domain: d\ndescriptors:\n  - {key: a, value: b, share_threshold: true}\n",
			"descriptors[0].share_threshold: only for a wildcard value (one holding '*'), as in envoyproxy/ratelimit"},
		{"unlimited with a unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unlimited: true, unit: second}\n",
			"descriptors[0].rate_limit.unit: must be absent when unlimited is true"},
		{"repeated descriptor", "domain: d\ndescriptors:\n  - {key: a, value: b}\n  - {key: a, value: b}\n",
			`descriptors[1]: repeats descriptors[0] (key "a", value "b")`},
		{"repeated descriptor without a value", "domain: d\ndescriptors:\n  - {key: a}\n  - {key: a}\n",
			`descriptors[1]: repeats descriptors[0] (key "a", value "")`},
		{"JSON duplicate field", `{"domain": "d", "descriptors": [{"key": "a", "key": "b"}]}`, "descriptors[0].key: appears more than once"},
		{"YAML duplicate field", "domain: d\ndomain: e\ndescriptors: []\n", "domain: appears more than once"},
		{"not an object", "- a\n", "want an object with domain and descriptors, got a list"},
		{"several problems", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: weeks, requests_per_unit: x}\n  - {value: v}\n",
			"descriptors[0].rate_limit.unit: \"weeks\" is not valid (want \"second\", \"minute\", \"hour\", \"day\", \"week\", \"month\" or \"year\")\n" +
				"descriptors[0].rate_limit.requests_per_unit: want an integer, got \"x\"\n" +
				"descriptors[1].key: required"},
		{"a bad domain, found by rule validation", "domain: 'my domain'\ndescriptors: []\n",
			`domain: "my domain" holds ' '; use letters, digits, '_', '-' and '.'`},
		{"metadata not an object", "domain: d\ndescriptors:\n  - {key: a, metadata: [x]}\n", "descriptors[0].metadata: want an object, got a list"},
		{"too many exceptions", tooManyExceptions(), `descriptors[0]: as Weir rule "k": overrides: 1001 overrides; a rule holds at most 1000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := rulefile.ParseEnvoy([]byte(tt.doc))
			if err == nil {
				t.Fatalf("got set %+v and no error, want an error", s)
			}
			if !errors.Is(err, rule.ErrInvalid) {
				t.Errorf("got %v, want an error matching rule.ErrInvalid", err)
			}
			if err.Error() != tt.want {
				t.Errorf("got  %s\nwant %s", err, tt.want)
			}
			if _, perr := rulefile.Parse([]byte(tt.doc)); tt.name != "not an object" && tt.name != "no domain" && (perr == nil || perr.Error() != err.Error()) {
				t.Errorf("Parse: got %v, want the same error as ParseEnvoy", perr)
			}
		})
	}
}

// tooManyExceptions is a configuration whose descriptor without a value
// has more siblings with a value than a rule can have overrides.
func tooManyExceptions() string {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	for i := range 1001 {
		fmt.Fprintf(&b, "  - {key: k, value: v%d}\n", i)
	}
	return b.String()
}

func TestParseEnvoySyntax(t *testing.T) {
	for _, doc := range []string{"domain: d\ndescriptors: [\n", "", "domain: d\n---\ndescriptors: []\n"} {
		if _, err := rulefile.ParseEnvoy([]byte(doc)); !errors.Is(err, rule.ErrSyntax) {
			t.Errorf("%q: got %v, want an error wrapping rule.ErrSyntax", doc, err)
		}
	}
}

func TestParseTellsFormatsApart(t *testing.T) {
	tests := []struct {
		name, doc string
		wantRules int
		wantErr   string
	}{
		{"envoy", "domain: d\ndescriptors:\n  - {key: a, rate_limit: {unit: second, requests_per_unit: 1}}\n", 1, ""},
		{"envoy without rules", "domain: d\ndescriptors: []\n", 0, ""},
		{"weir", "domain: d\nrules: []\n", 0, ""},
		{"both is weir's", "domain: d\nrules: []\ndescriptors: []\n", 0, "descriptors: unknown field (want domain or rules)"},
		{"a domain alone is envoy's, without limits", "domain: d\n", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := rulefile.Parse([]byte(tt.doc))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Errorf("got %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(s.Rules) != tt.wantRules {
				t.Errorf("got %d rules, %v; want %d and no error", len(s.Rules), err, tt.wantRules)
			}
		})
	}
}

// FuzzParseEnvoy checks that ParseEnvoy never panics and that what it
// accepts is a valid set that package ruleset compiles.
func FuzzParseEnvoy(f *testing.F) {
	for _, doc := range []string{envoyDatabases, envoyMessaging, envoyPerIP, envoyClusters, envoyMixed,
		`{"domain": "d", "descriptors": [{"key": "a", "value": "*", "descriptors": [{"key": "ip", "rate_limit": {"unit": "second", "requests_per_unit": 3}}]}, {"key": "a", "value": "b"}]}`,
		"domain: d\ndescriptors:\n  - {key: ip, rate_limit: {unlimited: true}}\n  - {key: ip, value: '::ffff:1.2.3.4'}\n",
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := rulefile.ParseEnvoy(data)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted set does not validate: %v", err)
		}
		if _, err := ruleset.Compile(s); err != nil {
			t.Fatalf("accepted set does not compile: %v", err)
		}
	})
}

// Keys and values, and the domain, are taken as written, as
// envoyproxy/ratelimit's YAML reader (yaml.v2 into strings) takes them:
// a YAML 1.1 boolean or number unquoted keeps its text, so that a request
// naming the value as written finds the limit, and one naming what YAML
// resolved it to does not.
func TestParseEnvoyScalarsAsWritten(t *testing.T) {
	for _, tt := range []struct {
		written  string // in the file, unquoted, as the value and the key
		resolved string // what YAML 1.1 makes of it, which must not match
	}{
		{"yes", "true"},
		{"On", "true"},
		{"Off", "false"},
		{"TRUE", "true"},
		{"y", "true"},
		{"0x1F", "31"},
		{"017", "15"},
		{"007", "7"},
		{"1_000", "1000"},
		{"+5", "5"}, // as a value only: a Weir attribute starts with a letter or digit
		{"1e3", "1000"},
		{"5.0", "5"},
	} {
		t.Run(tt.written, func(t *testing.T) {
			key, resolvedKey := tt.written, tt.resolved
			if strings.HasPrefix(key, "+") {
				key, resolvedKey = "k", "k"
			}
			doc := fmt.Sprintf("domain: 0x10\ndescriptors:\n  - key: %s\n    value: %s\n    rate_limit: {unit: minute, requests_per_unit: 7}\n", key, tt.written)
			cfg, err := rulefile.ParseConfig([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Tree == nil || cfg.Rules.Domain != "0x10" {
				t.Fatalf("domain %q (tree %v), want 0x10 as written", cfg.Rules.Domain, cfg.Tree)
			}
			if f := cfg.Tree.Lookup([]envoyconf.Entry{{Key: key, Value: tt.written}}); f.Limit == nil || f.Limit.RequestsPerUnit != 7 {
				t.Errorf("%s_%s as written: no limit of 7 (%+v)", key, tt.written, f.Limit)
			}
			if f := cfg.Tree.Lookup([]envoyconf.Entry{{Key: resolvedKey, Value: tt.resolved}}); f.Limit != nil {
				t.Errorf("%s_%s, as YAML resolves it: got a limit, want none", resolvedKey, tt.resolved)
			}
		})
	}
}

// A field envoyproxy/ratelimit knows, where it means nothing, is ignored
// as there (and listed, for the loader to say so); a field it does not
// know is refused as there.
func TestParseEnvoyIgnoresKnownFieldsOutOfPlace(t *testing.T) {
	for _, tt := range []struct {
		name, doc string
		ignored   []string
		shadow    bool // the limit of key a, value b
	}{
		{"shadow_mode in a rate_limit", "domain: d\ndescriptors:\n  - key: a\n    value: b\n    rate_limit: {unit: minute, requests_per_unit: 5, shadow_mode: true}\n",
			[]string{"descriptors[0].rate_limit.shadow_mode"}, false},
		{"requests_per_unit and unit in a descriptor", "domain: d\ndescriptors:\n  - key: a\n    value: b\n    unit: hour\n    requests_per_unit: 9\n    name: x\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
			[]string{"descriptors[0].unit", "descriptors[0].requests_per_unit", "descriptors[0].name"}, false},
		{"key at the top, unit in replaces", "key: k\ndomain: d\ndescriptors:\n  - key: a\n    value: b\n    shadow_mode: true\n    rate_limit: {unit: minute, requests_per_unit: 5, name: n, replaces: [{name: m, unit: hour}]}\n",
			[]string{"descriptors[0].rate_limit.replaces[0].unit", "key"}, true},
		{"none", "domain: d\ndescriptors:\n  - {key: a, value: b, rate_limit: {unit: minute, requests_per_unit: 5}}\n", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := rulefile.ParseConfig([]byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.Ignored, tt.ignored) {
				t.Errorf("ignored %q, want %q", cfg.Ignored, tt.ignored)
			}
			f := cfg.Tree.Lookup([]envoyconf.Entry{{Key: "a", Value: "b"}})
			if f.Limit == nil || f.Limit.RequestsPerUnit != 5 || f.Limit.ShadowMode != tt.shadow {
				t.Errorf("limit of a_b: %+v, want 5 a minute, shadow %v", f.Limit, tt.shadow)
			}
		})
	}
	if _, err := rulefile.ParseConfig([]byte("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 5, shadow: true}\n")); err == nil ||
		!strings.HasPrefix(err.Error(), "descriptors[0].rate_limit.shadow: unknown field") {
		t.Errorf("a field envoyproxy/ratelimit does not know: got %v, want it refused as unknown", err)
	}
}
