package rule_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/pkg/rule"
)

// r returns a rule document: a valid minimal rule with the given fields
// (JSON object members) added.
func r(members string) string {
	if members == "" {
		return `{"rule_id":"r","limit":5,"window_seconds":60}`
	}
	return `{"rule_id":"r","limit":5,"window_seconds":60,` + members + `}`
}

// ipRule returns a rule document keyed by IP with the given overrides.
func ipRule(overrides string) string {
	return `{"rule_id":"r","key_type":"ip","limit":5,"window_seconds":60,"overrides":[` + overrides + `]}`
}

func TestParseRuleBadDocuments(t *testing.T) {
	long := strings.Repeat("x", 129)
	tests := []struct {
		name  string
		doc   string
		paths []string // exactly the paths reported, in any order
	}{
		{"empty object", `{}`, []string{"rule_id", "limit", "window_seconds"}},
		{"list", `[]`, []string{""}},
		{"string", `"rule"`, []string{""}},
		{"null", `null`, []string{""}},
		{"typo of limit", `{"rule_id":"r","limt":5,"window_seconds":60}`, []string{"limit", "limt"}},
		{"limit is a string", `{"rule_id":"r","limit":"5","window_seconds":60}`, []string{"limit"}},
		{"limit has a fraction", `{"rule_id":"r","limit":5.5,"window_seconds":60}`, []string{"limit"}},
		{"limit negative", `{"rule_id":"r","limit":-1,"window_seconds":60}`, []string{"limit"}},
		{"limit zero", `{"rule_id":"r","limit":0,"window_seconds":60}`, []string{"limit"}},
		{"limit above MaxLimit", `{"rule_id":"r","limit":1e13,"window_seconds":60}`, []string{"limit"}},
		{"limit overflows", `{"rule_id":"r","limit":1e400,"window_seconds":60}`, []string{"limit"}},
		{"limit overflows int64", `{"rule_id":"r","limit":99999999999999999999,"window_seconds":60}`, []string{"limit"}},
		{"window zero", `{"rule_id":"r","limit":5,"window_seconds":0}`, []string{"window_seconds"}},
		{"window above MaxWindow", `{"rule_id":"r","limit":5,"window_seconds":31622401}`, []string{"window_seconds"}},
		{"window is a bool", `{"rule_id":"r","limit":5,"window_seconds":true}`, []string{"window_seconds"}},
		{"calendar unknown", `{"rule_id":"r","limit":5,"window_seconds":60,"calendar":"week"}`, []string{"calendar"}},
		{"calendar month with a sliding algorithm", `{"rule_id":"r","limit":5,"calendar":"month","algorithm":"SlidingWindowLog"}`, []string{"calendar"}},
		{"calendar month with a window of 30 days", `{"rule_id":"r","limit":5,"calendar":"month","algorithm":"FixedWindow","window_seconds":2592000}`, []string{"window_seconds"}},
		{"unknown algorithm", r(`"algorithm":"sliding"`), []string{"algorithm"}},
		{"algorithm is a number", r(`"algorithm":3`), []string{"algorithm"}},
		{"log limit too large", `{"rule_id":"r","limit":100001,"window_seconds":60,"algorithm":"SlidingWindowLog"}`, []string{"limit"}},
		{"burst on a window algorithm", r(`"algorithm":"FixedWindow","burst":10`), []string{"burst"}},
		{"burst on the default algorithm", r(`"burst":10`), []string{"burst"}},
		{"burst negative", r(`"algorithm":"TokenBucket","burst":-1`), []string{"burst"}},
		{"burst breaks 2^53", `{"rule_id":"r","limit":5,"window_seconds":86400,"algorithm":"TokenBucket","burst":1000000000000}`, []string{"burst"}},
		{"default burst breaks 2^53", `{"rule_id":"r","limit":1000000000,"window_seconds":86400,"algorithm":"TokenBucket"}`, []string{"limit"}},
		{"unlimited with a limit", `{"rule_id":"r","unlimited":true,"limit":5}`, []string{"limit"}},
		{"unlimited with a burst", `{"rule_id":"r","unlimited":true,"algorithm":"TokenBucket","burst":5}`, []string{"burst"}},
		{"unlimited is a string", `{"rule_id":"r","unlimited":"yes"}`, []string{"unlimited"}},
		{"id missing", `{"limit":5,"window_seconds":60}`, []string{"rule_id"}},
		{"id null", `{"rule_id":null,"limit":5,"window_seconds":60}`, []string{"rule_id"}},
		{"id with a space", `{"rule_id":"a b","limit":5,"window_seconds":60}`, []string{"rule_id"}},
		{"id starts with a dash", `{"rule_id":"-a","limit":5,"window_seconds":60}`, []string{"rule_id"}},
		{"id too long", `{"rule_id":"` + long + `","limit":5,"window_seconds":60}`, []string{"rule_id"}},
		{"bad domain", r(`"domain":"a/b"`), []string{"domain"}},
		{"description not a string", r(`"description":["a"]`), []string{"description"}},
		{"path without slash", r(`"path_pattern":"api/v1"`), []string{"path_pattern"}},
		{"path with ** in a segment", r(`"path_pattern":"/api/v1**"`), []string{"path_pattern"}},
		{"path with empty segment", r(`"path_pattern":"/api//v1"`), []string{"path_pattern"}},
		{"path with query", r(`"path_pattern":"/search?q=*"`), []string{"path_pattern"}},
		{"path with dot-dot", r(`"path_pattern":"/a/../b"`), []string{"path_pattern"}},
		{"methods", r(`"methods":["get","FETCH","GET","GET"]`), []string{"methods[0]", "methods[1]", "methods[3]"}},
		{"methods not a list", r(`"methods":"GET"`), []string{"methods"}},
		{"method not a string", r(`"methods":[1]`), []string{"methods[0]"}},
		{"conditions", r(`"conditions":{"bad name":"x","plan":"","n":5,"ok":"*"}`), []string{`conditions["bad name"]`, "conditions.plan", "conditions.n"}},
		{"conditions not an object", r(`"conditions":["plan"]`), []string{"conditions"}},
		{"condition repeated", r(`"conditions":{"plan":"a","plan":"b"}`), []string{"conditions.plan"}},
		{"key_type a number", r(`"key_type":5`), []string{"key_type"}},
		{"key_type repeated and bad", r(`"key_type":["ip","ip","user id",7]`), []string{"key_type[1]", "key_type[2]", "key_type[3]"}},
		{"key_type too long name", r(`"key_type":"` + strings.Repeat("k", 65) + `"`), []string{"key_type[0]"}},
		{"unknown scope", r(`"scope":"regional"`), []string{"scope"}},
		{"shares on a local rule", r(`"scope":"local","shares":{"us":1}`), []string{"shares"}},
		{"shares above 1", r(`"shares":{"us":0.7,"eu":0.4}`), []string{"shares"}},
		{"bad shares", r(`"shares":{"US":0.1,"eu":-0.1,"ap":"0.2","sa":2}`), []string{"shares.US", "shares.eu", "shares.ap", "shares.sa"}},
		{"shares not an object", r(`"shares":0.5`), []string{"shares"}},
		{"overrides without key_type", r(`"overrides":[{"key":"a","limit":9}]`), []string{"overrides"}},
		{"overrides not a list", r(`"key_type":"ip","overrides":{"key":"a"}`), []string{"overrides"}},
		{"override not an object", ipRule(`"10.0.0.1"`), []string{"overrides[0]"}},
		{"override selects nothing", ipRule(`{"action":"deny"}`), []string{"overrides[0]"}},
		{"override with key and cidr", ipRule(`{"key":"10.0.0.1","cidr":"10.0.0.0/8","action":"deny"}`), []string{"overrides[0]"}},
		{"override cidr malformed", ipRule(`{"cidr":"10.0.0/8","action":"allow"}`), []string{"overrides[0].cidr"}},
		{"override cidr host bits", ipRule(`{"cidr":"10.0.0.1/8","action":"allow"}`), []string{"overrides[0].cidr"}},
		{"override cidr empty", ipRule(`{"cidr":"","action":"allow"}`), []string{"overrides[0].cidr"}},
		{"override cidr without ip", r(`"key_type":"user_id","overrides":[{"cidr":"10.0.0.0/8","action":"allow"}]`), []string{"overrides[0].cidr"}},
		{"override key not an ip", ipRule(`{"key":"localhost","action":"allow"}`), []string{"overrides[0].key"}},
		{"override ipv6 key not canonical", ipRule(`{"key":"2001:DB8::1","action":"allow"}`), []string{"overrides[0].key"}},
		{"override key on composite key", r(`"key_type":["tenant","user_id"],"overrides":[{"key":"acme","limit":9}]`), []string{"overrides[0].key"}},
		{"override match on other dimension", r(`"key_type":["tenant","user_id"],"overrides":[{"match":{"region":"eu","tenant":""},"limit":9}]`), []string{"overrides[0].match.region", "overrides[0].match.tenant"}},
		{"override match empty", r(`"key_type":"tenant","overrides":[{"match":{},"limit":9}]`), []string{"overrides[0].match"}},
		{"override match ip not an ip", r(`"key_type":["ip","tenant"],"overrides":[{"match":{"ip":"x"},"action":"deny"}]`), []string{"overrides[0].match.ip"}},
		{"override unknown action", ipRule(`{"key":"10.0.0.1","action":"block"}`), []string{"overrides[0].action"}},
		{"override allow with limit and burst", ipRule(`{"key":"10.0.0.1","action":"allow","limit":5,"burst":5}`), []string{"overrides[0].limit", "overrides[0].burst"}},
		{"override without action or limit", ipRule(`{"key":"10.0.0.1"}`), []string{"overrides[0].action"}},
		{"override limit out of range", ipRule(`{"key":"10.0.0.1","limit":-3}`), []string{"overrides[0].limit"}},
		{"override burst on window algorithm", ipRule(`{"key":"10.0.0.1","limit":3,"burst":4}`), []string{"overrides[0].burst"}},
		{"override burst breaks 2^53", `{"rule_id":"r","key_type":"ip","limit":5,"window_seconds":86400,"algorithm":"LeakyBucket","overrides":[{"key":"10.0.0.1","limit":3,"burst":1000000000000}]}`, []string{"overrides[0].burst"}},
		{"duplicate override keys", ipRule(`{"key":"10.0.0.1","action":"allow"},{"key":"10.0.0.1","limit":3}`), []string{"overrides[1]"}},
		{"duplicate override cidrs", ipRule(`{"cidr":"10.0.0.0/8","action":"allow"},{"cidr":"10.0.0.0/8","action":"deny"}`), []string{"overrides[1]"}},
		{"duplicate override key and match", r(`"key_type":"user","overrides":[{"key":"u1","action":"allow"},{"match":{"user":"u1"},"action":"deny"}]`), []string{"overrides[1]"}},
		{"limiting override on unlimited rule", `{"rule_id":"r","key_type":"ip","unlimited":true,"overrides":[{"key":"10.0.0.1","limit":3}]}`, []string{"overrides[0].action"}},
		{"override unknown field", ipRule(`{"key":"10.0.0.1","action":"deny","comment":"x"}`), []string{"overrides[0].comment"}},
		{"too many overrides", ipRule(strings.TrimSuffix(strings.Repeat(`{"key":"10.0.0.1","action":"deny"},`, 1001), ",")), []string{"overrides"}},
		{"unknown failure mode", r(`"failure_mode":"fail-open"`), []string{"failure_mode"}},
		{"unknown retry advice", r(`"retry_advice":"later"`), []string{"retry_advice"}},
		{"enabled is a string", r(`"enabled":"true"`), []string{"enabled"}},
		{"shadow is a number", r(`"shadow":1`), []string{"shadow"}},
		{"rejection message too long", r(`"rejection_message":"` + strings.Repeat("m", 1025) + `"`), []string{"rejection_message"}},
		{"created_at not RFC 3339", r(`"created_at":"25/08/2023"`), []string{"created_at"}},
		{"updated_at a number", r(`"updated_at":1692957600`), []string{"updated_at"}},
		{"field repeated", `{"rule_id":"r","limit":5,"limit":6,"window_seconds":60}`, []string{"limit"}},
		{"three problems at once", `{"rule_id":"r","limit":"5","window_seconds":60,"algorithm":"Sliding","windw":1}`, []string{"limit", "algorithm", "windw"}},
		{"everything wrong", `{"rule_id":"","key_type":["ip"],"limit":-5,"window_seconds":-1,"scope":"both","failure_mode":"maybe","retry_advice":"never","overrides":[{"cidr":"300.0.0.0/8","action":"allow"}]}`,
			[]string{"rule_id", "limit", "window_seconds", "scope", "failure_mode", "retry_advice", "overrides[0].cidr"}},
	}
	if len(tests) < 40 {
		t.Fatalf("got %d bad documents, want at least 40", len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rule.ParseRule([]byte(tt.doc))
			if err == nil {
				t.Fatalf("got rule %+v and no error, want errors at %q", got, tt.paths)
			}
			if !errors.Is(err, rule.ErrInvalid) {
				t.Fatalf("got error %v, want one matching ErrInvalid", err)
			}
			gotPaths := slices.Sorted(slices.Values(paths(t, err)))
			wantPaths := slices.Sorted(slices.Values(tt.paths))
			if !reflect.DeepEqual(gotPaths, wantPaths) {
				t.Errorf("got paths %q, want %q; error:\n%v", gotPaths, wantPaths, err)
			}
			if !reflect.DeepEqual(got, rule.Rule{}) {
				t.Errorf("got rule %+v with the error, want the zero Rule", got)
			}
		})
	}
}

func TestParseSetBadDocuments(t *testing.T) {
	ok := `{"rule_id":"a","limit":1,"window_seconds":1}`
	tests := []struct {
		name  string
		doc   string
		paths []string
	}{
		{"no domain", `{"rules":[]}`, []string{"domain"}},
		{"bad domain", `{"domain":"a b","rules":[` + ok + `]}`, []string{"domain"}},
		{"domain not a string", `{"domain":1,"rules":[` + ok + `]}`, []string{"domain"}},
		{"no rules", `{"domain":"d"}`, []string{"rules"}},
		{"rules not a list", `{"domain":"d","rules":{"a":1}}`, []string{"rules"}},
		{"rule not an object", `{"domain":"d","rules":[` + ok + `,5]}`, []string{"rules[1]"}},
		{"unknown top-level field", `{"domain":"d","version":2,"rules":[]}`, []string{"version"}},
		{"duplicate rule ids", `{"domain":"d","rules":[` + ok + `,` + ok + `,` + ok + `]}`, []string{"rules[1].rule_id", "rules[2].rule_id"}},
		{"rule of another domain", `{"domain":"d","rules":[{"rule_id":"a","domain":"e","limit":1,"window_seconds":1}]}`, []string{"rules[0].domain"}},
		{"problems in several rules", `{"domain":"d","rules":[` + ok + `,{"rule_id":"b","limit":"5","window_seconds":1,"algorithm":"x","limt":1},{"rule_id":"c"}]}`,
			[]string{"rules[1].limit", "rules[1].algorithm", "rules[1].limt", "rules[2].limit", "rules[2].window_seconds"}},
		{"too many rules", `{"domain":"d","rules":[` + strings.TrimSuffix(strings.Repeat(`{},`, rule.MaxRules+1), ",") + `]}`, []string{"rules"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := rule.ParseSet([]byte(tt.doc))
			gotPaths := slices.Sorted(slices.Values(paths(t, err)))
			wantPaths := slices.Sorted(slices.Values(tt.paths))
			if !reflect.DeepEqual(gotPaths, wantPaths) {
				t.Errorf("got paths %q, want %q; error:\n%v", gotPaths, wantPaths, err)
			}
		})
	}
}

func TestParseMalformed(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want error
		msg  string // a part of the message
	}{
		{"empty", ``, rule.ErrSyntax, "empty document"},
		{"blank", " \n\t", rule.ErrSyntax, "empty document"},
		{"truncated", `{"rule_id":"r",`, rule.ErrSyntax, "unexpected end"},
		{"bad token", "{\n  \"rule_id\": 'r'}", rule.ErrSyntax, "line 2, column 14"},
		{"trailing comma", `{"rule_id":"r",}`, rule.ErrSyntax, "line 1"},
		{"two documents", `{"rule_id":"r"} {}`, rule.ErrSyntax, "data after the end"},
		{"trailing garbage", `{"rule_id":"r"} x`, rule.ErrSyntax, "invalid character"},
		{"too deep", strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat(`}`, 100), rule.ErrTooLarge, "nested deeper"},
		{"too large", `{"description":"` + strings.Repeat("d", rule.MaxDocumentSize) + `"}`, rule.ErrTooLarge, "at most 4194304"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, parse := range []func([]byte) error{
				func(b []byte) error { _, err := rule.ParseRule(b); return err },
				func(b []byte) error { _, err := rule.ParseSet(b); return err },
			} {
				err := parse([]byte(tt.doc))
				if !errors.Is(err, tt.want) || !strings.Contains(fmt.Sprint(err), tt.msg) {
					t.Errorf("got %v, want an error wrapping %v that says %q", err, tt.want, tt.msg)
				}
			}
		})
	}
}
