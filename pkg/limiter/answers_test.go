package limiter_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/ruleset"
)

// TestDecisiveIsEnforcing checks that the most constraining result is
// chosen among enforcing rules only, that a deny override wins over a
// limit, and that admissions given back are marked refunded.
func TestDecisiveIsEnforcing(t *testing.T) {
	c := newClock()
	l := newLimiter(t, mem(t), c)
	decisive := func(it limiter.ItemResult) string {
		if it.Decisive < 0 {
			return ""
		}
		return it.Results[it.Decisive].Match.Rule.Spec.ID
	}
	// shadowed (1 a minute) is spent after the first request; per-user-day
	// (5 a day) and per-user-second (2 a second) keep some.
	attrs := map[string]string{"user_id": "s1", "ip": "192.0.2.7"}
	tests := []struct {
		name         string
		attrs        map[string]string
		wantAllowed  bool
		wantDecisive string
		wantRefunded []string
	}{
		{"shadow spent, enforcing rules allow", attrs, true, "per-user-second", nil},
		{"shadow rejects, enforcing rules allow", attrs, true, "per-user-second", nil},
		{"only a shadow rule", map[string]string{"ip": "192.0.2.7"}, true, "", nil},
		{"limit rejects: the admissions of the others are refunded", attrs, false, "per-user-second", []string{"per-user-day"}},
		{"deny beside a limit", map[string]string{"user_id": "blocked"}, false, "per-user-day", []string{"per-user-second"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it := check(t, l, tt.attrs, 1)
			if it.Allowed != tt.wantAllowed || decisive(it) != tt.wantDecisive {
				t.Fatalf("got allowed=%v decisive %q, want %v %q (results %v)", it.Allowed, decisive(it), tt.wantAllowed, tt.wantDecisive, ruleIDs(it))
			}
			var refunded []string
			for _, r := range it.Results {
				if r.Refunded {
					refunded = append(refunded, r.Match.Rule.Spec.ID)
				}
				if r.Source == limiter.SourceOverrideDeny && (r.RetryAfter != 0 || r.Limited()) {
					t.Errorf("deny: got retry-after %v limited %v, want 0 and false", r.RetryAfter, r.Limited())
				}
			}
			if len(refunded) != len(tt.wantRefunded) || (len(refunded) > 0 && refunded[0] != tt.wantRefunded[0]) {
				t.Errorf("refunded: got %v, want %v", refunded, tt.wantRefunded)
			}
		})
	}
}

func TestStatusWithoutLimit(t *testing.T) {
	l := newLimiter(t, mem(t), newClock())
	tests := []struct {
		rule, key  string
		wantSource limiter.Source
	}{
		{"disabled-rule", "u1", limiter.SourceDisabled},
		{"per-user-day", "blocked", limiter.SourceOverrideDeny},
		{"per-user-day", "friend", limiter.SourceOverrideAllow},
		{"health", "198.51.100.1", limiter.SourceUnlimited},
	}
	for _, tt := range tests {
		t.Run(tt.rule+"/"+tt.key, func(t *testing.T) {
			res, err := l.Status(context.Background(), "", tt.rule, tt.key)
			if err != nil {
				t.Fatal(err)
			}
			if res.Source != tt.wantSource || res.Limited() || res.RetryAfter != 0 {
				t.Errorf("got source %v limited %v retry-after %v, want %v, false, 0", res.Source, res.Limited(), res.RetryAfter, tt.wantSource)
			}
		})
	}
}

// TestEmptyRules checks that loaded rules holding no rule allow every
// check, while a limiter that never loaded rules is unavailable.
func TestEmptyRules(t *testing.T) {
	tests := []struct {
		name      string
		anyDomain bool
		domain    string
		wantErr   error // nil: allowed, no rule matched
	}{
		{"no domain named", false, "", nil},
		{"a domain named, rule file", false, "shop", limiter.ErrUnknownDomain},
		{"a domain named, any domain", true, "shop", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := limiter.New(limiter.Config{Store: mem(t), Now: newClock().Now, AnyDomain: tt.anyDomain})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(l.Close)
			req := limiter.Request{Domain: tt.domain, Items: []limiter.Item{{Attributes: map[string]string{"user_id": "u"}}}}
			if _, err := l.Check(context.Background(), req); !errors.Is(err, limiter.ErrNoRules) {
				t.Fatalf("before rules: got %v, want ErrNoRules", err)
			}
			if err := l.Ready(context.Background()); !errors.Is(err, limiter.ErrNoRules) {
				t.Fatalf("ready before rules: got %v, want ErrNoRules", err)
			}
			if err := l.SetRules(); err != nil {
				t.Fatal(err)
			}
			if st := l.RuleState(); !st.Loaded || st.Rules != 0 {
				t.Errorf("rule state: got %+v, want loaded with no rule", st)
			}
			if err := l.Ready(context.Background()); err != nil {
				t.Errorf("ready with no rule: got %v, want nil", err)
			}
			resp, err := l.Check(context.Background(), req)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("got %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || !resp.Allowed || len(resp.Items[0].Results) != 0 || resp.Items[0].Decisive != -1 {
				t.Fatalf("got %+v, %v; want allowed, no rule matched", resp, err)
			}
		})
	}
}

// TestDefaultDomain checks that Config.DefaultDomain decides the domain of
// a check or status request that names none, whatever domains are loaded,
// and that without it such a request is the only domain's, or refused
// while several are loaded.
func TestDefaultDomain(t *testing.T) {
	const blogYAML = `
domain: blog
rules:
  - rule_id: per-client
    key_type: client_id
    limit: 1
    window_seconds: 60
`
	tests := []struct {
		name          string
		defaultDomain string
		anyDomain     bool
		loaded        []string // the domains loaded: "shop" (rulesYAML) and "blog"
		domain        string   // the request's
		wantRule      string   // the rule matched; "" for none
		wantErr       error
	}{
		{"no default, one domain", "", false, []string{"shop"}, "", "per-user-day", nil},
		{"no default, two domains", "", false, []string{"shop", "blog"}, "", "", limiter.ErrInvalid},
		{"default, two domains", "blog", false, []string{"shop", "blog"}, "", "per-client", nil},
		{"default, two domains, another named", "blog", false, []string{"shop", "blog"}, "shop", "per-user-day", nil},
		{"default other than the one domain", "blog", false, []string{"shop"}, "", "", limiter.ErrUnknownDomain},
		{"default not loaded, any domain", "blog", true, []string{"shop"}, "", "", nil},
		{"default, no domain loaded", "blog", false, nil, "", "", nil},
	}
	sets := map[string]string{"shop": rulesYAML, "blog": blogYAML}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := limiter.New(limiter.Config{Store: mem(t), Now: newClock().Now, DefaultDomain: tt.defaultDomain, AnyDomain: tt.anyDomain})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(l.Close)
			var loaded []*ruleset.Set
			for _, d := range tt.loaded {
				loaded = append(loaded, compile(t, sets[d]))
			}
			if err := l.SetRules(loaded...); err != nil {
				t.Fatal(err)
			}
			attrs := map[string]string{"user_id": "u1", "client_id": "c1"}
			resp, err := l.Check(context.Background(), limiter.Request{Domain: tt.domain, Items: []limiter.Item{{Attributes: attrs}}})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("check: got %v, want %v", err, tt.wantErr)
			}
			if err == nil && !slices.Contains(append(ruleIDs(resp.Items[0]), ""), tt.wantRule) {
				t.Errorf("check: got rules %v, want %q among them", ruleIDs(resp.Items[0]), tt.wantRule)
			}
			if err == nil && tt.wantRule == "" && len(resp.Items[0].Results) != 0 {
				t.Errorf("check: got rules %v, want none", ruleIDs(resp.Items[0]))
			}
			if tt.wantRule == "" {
				return
			}
			res, err := l.Status(context.Background(), tt.domain, tt.wantRule, "c1")
			if err != nil || res.Match.Rule.Spec.ID != tt.wantRule {
				t.Errorf("status of %s: got %+v, %v; want the rule", tt.wantRule, res.Match, err)
			}
		})
	}
}
