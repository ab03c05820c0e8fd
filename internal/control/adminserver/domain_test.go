package adminserver_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/weirhq/weir/pkg/adminapi"
)

// TestDomainInference checks that a request naming no domain goes to the
// default domain when it holds the rule, else to the only domain that
// does, on every endpoint of one rule; and that an id held by several
// other domains, or by none, is refused with the domains named.
func TestDomainInference(t *testing.T) {
	e := newEnv(t)
	rule := func(id string) string { return `{"rule_id": "` + id + `", "limit": 5, "window_seconds": 60}` }
	e.create(rule("only-api"), "domain=api")
	e.create(rule("both"), "domain=api")
	e.create(rule("both"), "domain=shop")
	e.create(rule("def"), "domain=api")
	e.create(rule("def"))
	for _, k := range []string{"api/only-api", "api/both", "shop/both", "api/def", "default/def"} {
		e.live.stats[k] = adminapi.RuleStats{TotalRequests: 1}
		e.live.shares[k] = []adminapi.DCShare{{DC: "us-east", Share: 1}}
		e.live.keys[k+"/k"] = []adminapi.DCKeyStatus{{DC: "us-east", Limit: 5, Remaining: 5}}
	}

	endpoints := []struct {
		name, method, suffix, body string
		code                       int // of a request that resolves
	}{
		{"get rule", "GET", "", "", 200},
		{"update rule", "PUT", "", `{"limit": 6}`, 200},
		{"stats", "GET", "/stats", "", 200},
		{"shares", "GET", "/shares", "", 200},
		{"set shares", "PUT", "/shares", `{"dcs": {}}`, 200},
		{"key status", "GET", "/k", "", 200},
	}
	tests := []struct {
		name, id, query string
		domain          string // the domain it resolves to; empty: refused
		code            int
		msg             string
	}{
		{"only one domain holds it", "only-api", "", "api", 0, ""},
		{"the default domain holds it, another too", "def", "", "default", 0, ""},
		{"several other domains hold it", "both", "", "", 409, "rule 'both' exists in several domains (api, shop)"},
		{"no domain holds it", "nope", "", "", 404, "rule 'nope' not found in any domain"},
		{"named domain wins", "both", "?domain=shop", "shop", 0, ""},
		{"named domain without it", "only-api", "?domain=shop", "", 404, "rule 'only-api' not found in domain 'shop'"},
	}
	for _, ep := range endpoints {
		for _, tt := range tests {
			t.Run(ep.name+"/"+tt.name, func(t *testing.T) {
				rec := e.do(ep.method, "/rate-limits/"+tt.id+ep.suffix+tt.query, ep.body)
				if tt.domain == "" {
					wantError(t, rec, tt.code, tt.msg)
					return
				}
				want(t, rec, ep.code)
				m := decode(t, rec)
				if d, ok := m["domain"]; ok && d != tt.domain {
					t.Errorf("domain of the answer: got %v, want %s", d, tt.domain)
				}
				if ep.method == "PUT" && ep.suffix == "/shares" {
					if v, _ := e.get(e.layout.Policy(tt.domain, tt.id)); v == "" {
						t.Errorf("no policy written for %s/%s", tt.domain, tt.id)
					}
				}
			})
		}
	}

	// Delete, last: it goes to the inferred domain and leaves the others.
	want(t, e.do("DELETE", "/rate-limits/only-api", ""), http.StatusOK)
	if v, _ := e.get(e.layout.Rule("api", "only-api")); v != "" {
		t.Errorf("api/only-api still stored after DELETE without a domain")
	}
	wantError(t, e.do("DELETE", "/rate-limits/both", ""), http.StatusConflict, "api, shop")
	for _, d := range []string{"api", "shop"} {
		if v, _ := e.get(e.layout.Rule(d, "both")); !strings.Contains(v, "both") {
			t.Errorf("%s/both gone after a refused DELETE", d)
		}
	}
}
