package rule_test

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/weirhq/weir/pkg/rule"
)

// FuzzParseSet checks that ParseSet never panics, and that a set it accepts
// validates, marshals, and parses back to the same set.
func FuzzParseSet(f *testing.F) {
	for _, doc := range []string{
		fullSetJSON,
		`{"domain":"seed","rules":[` + seedSchemaDocument + `,` + seedCreateRequest + `]}`,
		`{"domain":"d","rules":[]}`,
		`{"domain":"d","rules":[{"rule_id":"a","key_type":["ip","user"],"limit":3,"window_seconds":1,"algorithm":"TokenBucket","burst":9,` +
			`"overrides":[{"cidr":"::/0","action":"deny"},{"match":{"user":"u"},"limit":1}]}]}`,
		`{"domain":"d","rules":[{"rule_id":"a","unlimited":true,"shares":{"a":0.5,"b":0.5},"created_at":"2023-08-25T10:00:00+01:00"}]}`,
		`{"domain":"d","rules":[{"rule_id":"a","limit":"5","limt":1}]}`,
		`{"domain":"d","rules":[{}, 5, null, {"rule_id":"a","rule_id":"b"}]}`,
		`[1, {"a": [true, null, -0.0e-1]}]`,
		`{"domain":"d","rules":[{"rule_id":"a","limit":5,"window_seconds":60,"path_pattern":"/a/**/b*c"}]}`,
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := rule.ParseSet(data)
		if err != nil {
			if !reflect.DeepEqual(s, rule.Set{}) {
				t.Fatalf("got set %+v with error %v, want the zero Set", s, err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted set does not validate: %v", err)
		}
		b, err := json.Marshal(&s)
		if err != nil {
			t.Fatalf("accepted set does not marshal: %v", err)
		}
		s2, err := rule.ParseSet(b)
		if err != nil {
			t.Fatalf("marshalled set %s does not parse: %v", b, err)
		}
		if !reflect.DeepEqual(s, s2) {
			t.Fatalf("round trip: got %+v, want %+v", s2, s)
		}
	})
}

// FuzzPathMatch checks PathMatcher against a regular-expression
// translation of the same pattern.
func FuzzPathMatch(f *testing.F) {
	for _, c := range [][2]string{
		{"/api/v1/**", "/api/v1/users"},
		{"/a/**/b/**/c", "/a/x/b/y/z/c"},
		{"/v1/*.json", "/v1/a.json"},
		{"/files/*-*.png", "/files/a-b-c.png"},
		{"/**/*/x", "/x"},
		{"/", "//"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, pattern, path string) {
		m, err := rule.CompilePath(pattern)
		if err != nil || pattern == "" {
			return
		}
		got := m.Match(path)
		want := referenceMatch(pattern, path)
		if got != want {
			t.Fatalf("Match(%q) with %q: got %v, want %v", path, pattern, got, want)
		}
	})
}

// referenceMatch matches path against a valid, non-empty pattern by
// translating both: the path loses its empty segments, and the pattern
// becomes a regular expression.
func referenceMatch(pattern, path string) bool {
	if !strings.HasPrefix(path, "/") {
		return false
	}
	var norm strings.Builder
	for _, seg := range strings.Split(path, "/") {
		if seg != "" {
			norm.WriteString("/" + seg)
		}
	}
	var re strings.Builder
	re.WriteString("^")
	if pattern != "/" {
		for _, seg := range strings.Split(pattern[1:], "/") {
			switch seg {
			case "**":
				re.WriteString("(?:/[^/]+)*")
			case "*":
				re.WriteString("/[^/]+")
			default:
				parts := strings.Split(seg, "*")
				for i := range parts {
					parts[i] = regexp.QuoteMeta(parts[i])
				}
				re.WriteString("/" + strings.Join(parts, "[^/]*"))
			}
		}
	}
	re.WriteString("$")
	return regexp.MustCompile(re.String()).MatchString(norm.String())
}
