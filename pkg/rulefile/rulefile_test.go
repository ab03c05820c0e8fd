package rulefile_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/rulefile"
)

// Seed 003's rule documents, verbatim, and the same in YAML.
const (
	seedJSON = `{
"rule_id": "api-global-default",
"path_pattern": "/api/v1/**",
"key_type": "ip",
"limit": 100,
"window_seconds": 60,
"algorithm": "SlidingWindowCounter",
"enabled": true
}`
	seedYAML = `rule_id: api-global-default
path_pattern: /api/v1/**
key_type: ip
limit: 100
window_seconds: 60
algorithm: SlidingWindowCounter
enabled: true
`
	seedSchemaJSON = `{
"_id": "64e5f2c3d5b6b9a01d2f4e12",
"rule_id": "user-login-attempt",
"path_pattern": "/auth/login",
"key_type": "username",
"limit": 5,
"window_seconds": 300,
"algorithm": "SlidingWindowLog",
"enabled": true,
"created_at": "2023-08-25T10:00:00Z",
"updated_at": "2023-08-25T10:00:00Z"
}`
	seedSchemaYAML = `_id: 64e5f2c3d5b6b9a01d2f4e12
rule_id: user-login-attempt
path_pattern: /auth/login
key_type: username
limit: 5
window_seconds: 300
algorithm: SlidingWindowLog
enabled: true
created_at: 2023-08-25T10:00:00Z
updated_at: 2023-08-25T10:00:00Z
`
)

func TestParseRuleSeedInBothFormats(t *testing.T) {
	created := time.Date(2023, 8, 25, 10, 0, 0, 0, time.UTC)
	api := rule.Rule{ID: "api-global-default", PathPattern: "/api/v1/**", KeyType: rule.Dimensions{"ip"},
		Limit: 100, WindowSeconds: 60, Algorithm: algorithm.SlidingWindowCounter, Scope: rule.ScopeGlobal,
		FailureMode: rule.FailLocal, Enabled: true, RetryAdvice: rule.RetryAfter}
	login := rule.Rule{ID: "user-login-attempt", PathPattern: "/auth/login", KeyType: rule.Dimensions{"username"},
		Limit: 5, WindowSeconds: 300, Algorithm: algorithm.SlidingWindowLog, Scope: rule.ScopeGlobal,
		FailureMode: rule.FailLocal, Enabled: true, RetryAdvice: rule.RetryAfter, CreatedAt: created, UpdatedAt: created}
	tests := []struct {
		name string
		doc  string
		want rule.Rule
	}{
		{"create request JSON", seedJSON, api},
		{"create request YAML", seedYAML, api},
		{"schema document JSON", seedSchemaJSON, login},
		{"schema document YAML", seedSchemaYAML, login},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rulefile.ParseRule([]byte(tt.doc))
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestLoadFullFile(t *testing.T) {
	s, err := rulefile.Load(filepath.Join("testdata", "shop.yaml"))
	if err != nil {
		t.Fatalf("Load: got error %v, want none", err)
	}
	if got, want := s.Domain, "shop"; got != want {
		t.Errorf("domain: got %q, want %q", got, want)
	}
	ids := make([]string, len(s.Rules))
	for i, r := range s.Rules {
		ids[i] = r.ID
	}
	if want := []string{"api-global-default", "user-login-attempt", "tenant-user-orders", "everyone", "migrated-unlimited"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("rule ids: got %q, want %q", ids, want)
	}
	want := rule.Rule{
		ID:            "tenant-user-orders",
		Domain:        "shop",
		Description:   "per user of each tenant",
		PathPattern:   "/orders/*/items/*.json",
		Methods:       []string{"GET", "POST"},
		Conditions:    map[string]string{"plan": "free", "x-api-key": "*"},
		KeyType:       rule.Dimensions{"tenant", "user_id"},
		Limit:         1000,
		WindowSeconds: 86400,
		Algorithm:     algorithm.TokenBucket,
		Burst:         50,
		Scope:         rule.ScopeGlobal,
		Shares:        map[string]float64{"us-east": 0.5, "eu-west": 0.3, "ap-south": 0.2},
		Overrides: []rule.Override{
			{Match: map[string]string{"tenant": "acme"}, Action: rule.ActionLimit, Limit: 5000, Burst: 200},
			{Match: map[string]string{"tenant": "acme", "user_id": "42"}, Action: rule.ActionDeny},
		},
		Shadow:      true,
		FailureMode: rule.FailLocal,
		Enabled:     false,
		RetryAdvice: rule.DailyLimitReached,
		CreatedAt:   time.Date(2023, 8, 25, 10, 0, 0, 0, time.UTC),
		UpdatedAt:   time.Date(2023, 8, 26, 7, 30, 0, 5e8, time.UTC),
	}
	if got := s.Rules[2]; !reflect.DeepEqual(got, want) {
		t.Errorf("rules[2]: got %+v, want %+v", got, want)
	}
	wantOverrides := []rule.Override{
		{CIDR: "10.0.0.0/8", Action: rule.ActionAllow},
		{CIDR: "2001:db8::/32", Action: rule.ActionDeny},
		{Key: "203.0.113.7", Action: rule.ActionLimit, Limit: 1000},
	}
	if got := s.Rules[0].Overrides; !reflect.DeepEqual(got, wantOverrides) {
		t.Errorf("rules[0].overrides: got %+v, want %+v", got, wantOverrides)
	}
	if got := s.Rules[1]; got.FailureMode != rule.FailClosed || got.RejectionMessage == "" || !slices.Equal(got.Methods, []string{"POST"}) {
		t.Errorf("rules[1]: got %+v, want POST only, failure mode closed and a rejection message", got)
	}

	// The same set, written as JSON, reads the same.
	b, err := json.Marshal(&s)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := rulefile.Parse(b)
	if err != nil {
		t.Fatalf("Parse of the marshalled set: got error %v, want none", err)
	}
	if !reflect.DeepEqual(s, s2) {
		t.Errorf("round trip: got %+v, want %+v", s2, s)
	}
}

func TestParseBadFiles(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		paths []string // the field paths reported, in any order; nil for a syntax error
	}{
		{"unknown field", "domain: d\nrules:\n  - rule_id: a\n    limt: 5\n    window_seconds: 1\n", []string{"rules[0].limit", "rules[0].limt"}},
		{"limit quoted", "domain: d\nrules:\n  - {rule_id: a, limit: \"5\", window_seconds: 1}\n", []string{"rules[0].limit"}},
		{"numeric key needs quotes", "domain: d\nrules:\n  - {rule_id: a, key_type: user_id, limit: 5, window_seconds: 1,\n     overrides: [{key: 42, limit: 9}]}\n", []string{"rules[0].overrides[0].key"}},
		{"yes is a boolean in YAML 1.1", "domain: d\nrules:\n  - {rule_id: a, limit: 5, window_seconds: 1, conditions: {country: NO}}\n", []string{"rules[0].conditions.country"}},
		{"three problems", "domain: d\nrules:\n  - rule_id: a\n    limit: five\n    window_seconds: 1\n    algorithm: Sliding\n    scope: galactic\n", []string{"rules[0].limit", "rules[0].algorithm", "rules[0].scope"}},
		{"no domain", "rules: []\n", []string{"domain"}},
		{"a list at the top", "- rule_id: a\n", []string{""}},
		{"duplicate key", "domain: d\ndomain: e\nrules: []\n", []string{"domain"}},
		{"duplicate nested key", "domain: d\nrules:\n  - rule_id: a\n    limit: 5\n    limit: 6\n", []string{"rules[0].limit", "rules[0].window_seconds"}},
		{"duplicate key in JSON", `{"domain": "d", "rules": [], "rules": []}`, []string{"rules"}},
		{"two documents", "domain: d\nrules: []\n---\ndomain: e\nrules: []\n", nil},
		{"empty second document", "domain: d\nrules: []\n---\n", nil},
		{"bad indentation", "domain: d\nrules:\n  - rule_id: a\n   limit: 5\n", nil},
		{"unclosed flow", "domain: d\nrules: [\n", nil},
		{"infinity", "domain: d\nrules:\n  - {rule_id: a, limit: .inf, window_seconds: 1}\n", []string{"rules[0].limit"}},
		{"empty", "", nil},
		{"comment only", "# nothing\n", nil},
		{"broken JSON", "{\"domain\": \"d\",\n \"rules\": [}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := rulefile.Parse([]byte(tt.doc))
			if err == nil {
				t.Fatalf("got set %+v and no error, want an error", s)
			}
			if tt.paths == nil {
				if !errors.Is(err, rule.ErrSyntax) {
					t.Errorf("got %v, want an error wrapping ErrSyntax", err)
				}
				return
			}
			var ve *rule.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("got %v, want a *rule.ValidationError", err)
			}
			got := slices.Sorted(slices.Values(ve.Paths()))
			want := slices.Sorted(slices.Values(tt.paths))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got paths %q, want %q; error:\n%v", got, want, err)
			}
		})
	}
}

func TestParseMessages(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{"duplicate key", "domain: d\nrules:\n  - rule_id: a\n    limit: 5\n    limit: 6\n", "rules[0].limit: appears more than once\nrules[0].window_seconds: required, from 1 to 31622400"},
		{"not a finite number", "domain: d\nrules:\n  - {rule_id: a, limit: 1, window_seconds: 1, shares: {a: .nan}}\n", "rules[0].shares.a: want a finite number, got .nan"},
		{"two documents", "domain: d\nrules: []\n---\nrules: []\n", "rule: malformed document: more than one YAML document (want one)"},
		{"broken JSON keeps its position", "{\"domain\": \"d\",\n \"rules\": [}\n", "rule: malformed document: line 2, column 12: invalid character '}' looking for beginning of value"},
		{"quote hint", "domain: d\nrules:\n  - {rule_id: a, key_type: user_id, limit: 5, window_seconds: 1, overrides: [{key: 42, action: allow}]}\n", "rules[0].overrides[0].key: want a string, got 42 (quote it)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := rulefile.Parse([]byte(tt.doc))
			if err == nil || err.Error() != tt.want {
				t.Errorf("got %v, want %s", err, tt.want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("domain: d\nrules:\n  - rule_id: a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := rulefile.Load(bad)
	want := "load rules from " + bad + ": rules[0].limit: required, from 1 to 1000000000000\nrules[0].window_seconds: required, from 1 to 31622400"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	if !errors.Is(err, rule.ErrInvalid) {
		t.Errorf("got %v, want it to match rule.ErrInvalid", err)
	}

	missing := filepath.Join(dir, "missing.yaml")
	if _, err := rulefile.Load(missing); !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "load rules from "+missing+": ") {
		t.Errorf("got %v, want a not-exist error naming the path", err)
	}

	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("# "+strings.Repeat("x", rule.MaxDocumentSize)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := rulefile.Load(big); !errors.Is(err, rule.ErrTooLarge) {
		t.Errorf("got %v, want an error wrapping rule.ErrTooLarge", err)
	}
}

// FuzzParse checks that Parse never panics, and that a set it accepts
// validates and reads back the same from JSON.
func FuzzParse(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("testdata", "shop.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte("domain: d\nrules:\n  - " + strings.ReplaceAll(seedYAML, "\n", "\n    ")))
	f.Add([]byte("domain: d\nrules: []\n---\n"))
	f.Add([]byte("a: &a [1, *a]\n"))
	f.Add([]byte(`{"domain":"d","rules":[` + seedJSON + `]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := rulefile.Parse(data)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted set does not validate: %v", err)
		}
		b, err := json.Marshal(&s)
		if err != nil {
			t.Fatalf("accepted set does not marshal: %v", err)
		}
		s2, err := rulefile.Parse(b)
		if err != nil || !reflect.DeepEqual(s, s2) {
			t.Fatalf("round trip: got %+v, %v, want %+v", s2, err, s)
		}
	})
}
