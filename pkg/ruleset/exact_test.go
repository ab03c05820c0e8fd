package ruleset_test

import (
	"testing"

	"github.com/weirhq/weir/internal/testkit/rulesettest"
)

func TestNamesExactly(t *testing.T) {
	set := rulesettest.Compile(t, `
domain: d
rules:
  - {rule_id: tenant, key_type: tenant, limit: 1, window_seconds: 1}
  - {rule_id: tenant-user, key_type: [tenant, user], limit: 1, window_seconds: 1}
  - {rule_id: gold, conditions: {plan: gold}, key_type: tenant, limit: 1, window_seconds: 1}
  - {rule_id: pathed, path_pattern: /api/*, key_type: tenant, limit: 1, window_seconds: 1}
`)
	for _, tc := range []struct {
		rule  string
		attrs map[string]string
		want  bool
	}{
		{"tenant", map[string]string{"tenant": "a"}, true},
		{"tenant", map[string]string{"tenant": "a", "user": "u"}, false},
		{"tenant", map[string]string{"user": "u"}, false},
		{"tenant-user", map[string]string{"tenant": "a", "user": "u"}, true},
		{"tenant-user", map[string]string{"tenant": "a"}, false},
		{"gold", map[string]string{"plan": "gold", "tenant": "a"}, true},
		{"gold", map[string]string{"tenant": "a"}, false},
		{"pathed", map[string]string{"tenant": "a"}, false},
	} {
		r, ok := set.Rule(tc.rule)
		if !ok {
			t.Fatalf("no rule %q", tc.rule)
		}
		if got := r.NamesExactly(tc.attrs); got != tc.want {
			t.Errorf("%s.NamesExactly(%v) = %v, want %v", tc.rule, tc.attrs, got, tc.want)
		}
	}
}
