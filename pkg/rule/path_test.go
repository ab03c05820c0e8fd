package rule_test

import (
	"errors"
	"testing"

	"github.com/weirhq/weir/pkg/rule"
)

func TestPathMatch(t *testing.T) {
	tests := []struct {
		pattern string
		path    string
		want    bool
	}{
		// The empty pattern and the zero PathMatcher match everything.
		{"", "/anything/at/all", true},
		{"", "", true},
		// Literal segments.
		{"/auth/login", "/auth/login", true},
		{"/auth/login", "/auth/login/", true}, // empty segments are ignored
		{"/auth/login", "//auth//login", true},
		{"/auth/login", "/auth/logins", false},
		{"/auth/login", "/auth", false},
		{"/auth/login", "/auth/login/x", false},
		{"/auth/login", "/Auth/login", false}, // case-sensitive
		{"/auth/login", "auth/login", false},  // not a path
		{"/auth/login", "", false},
		{"/", "/", true},
		{"/", "//", true},
		{"/", "/a", false},
		// "*" is one segment.
		{"/users/*", "/users/42", true},
		{"/users/*", "/users", false},
		{"/users/*", "/users/", false},
		{"/users/*", "/users/42/posts", false},
		{"/users/*/posts", "/users/42/posts", true},
		{"/*", "/", false},
		{"/*", "/x", true},
		// "*" inside a segment.
		{"/v1/*.json", "/v1/a.json", true},
		{"/v1/*.json", "/v1/.json", true},
		{"/v1/*.json", "/v1/a.jsonx", false},
		{"/v1/*.json", "/v1/a/b.json", false},
		{"/v1/*.json", "/v1/json", false},
		{"/files/*-*.png", "/files/a-b.png", true},
		{"/files/*-*.png", "/files/a-b-c.png", true},
		{"/files/*-*.png", "/files/ab.png", false},
		{"/files/img*", "/files/img", true},
		{"/files/img*", "/files/img01", true},
		{"/files/*img", "/files/my-img", true},
		{"/a/x*y*z", "/a/xyz", true},
		{"/a/x*y*z", "/a/xzyz", true},
		{"/a/x*y*z", "/a/xzy", false},
		{"/a/aa*aa", "/a/aaa", false},
		{"/a/aa*aa", "/a/aaaa", true},
		// "**" is any number of segments.
		{"/api/v1/**", "/api/v1", true},
		{"/api/v1/**", "/api/v1/", true},
		{"/api/v1/**", "/api/v1/users", true},
		{"/api/v1/**", "/api/v1/users/42/posts", true},
		{"/api/v1/**", "/api/v2/users", false},
		{"/api/v1/**", "/api", false},
		{"/**", "/", true},
		{"/**", "/a/b/c", true},
		{"/**/admin", "/admin", true},
		{"/**/admin", "/x/y/admin", true},
		{"/**/admin", "/x/y/admin/z", false},
		{"/**/admin/**", "/x/admin/y/z", true},
		{"/a/**/b/**/c", "/a/b/c", true},
		{"/a/**/b/**/c", "/a/x/b/y/z/c", true},
		{"/a/**/b/**/c", "/a/x/b/y/z/c/d", false},
		{"/a/**/b/**/c", "/a/c/b", false},
		{"/a/**/b", "/a/b/b/b", true},
		{"/a/**/*.json", "/a/x/y/z.json", true},
		{"/a/**/*.json", "/a/z.json", true},
		{"/a/**/*.json", "/a/x/y/z.xml", false},
		{"/**/**/x", "/x", true},
		{"/**/*/x", "/x", false},
		{"/**/*/x", "/y/x", true},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+" "+tt.path, func(t *testing.T) {
			m, err := rule.CompilePath(tt.pattern)
			if err != nil {
				t.Fatalf("CompilePath(%q): %v", tt.pattern, err)
			}
			if got := m.Match(tt.path); got != tt.want {
				t.Errorf("Match(%q) with %q: got %v, want %v", tt.path, tt.pattern, got, tt.want)
			}
			if m.String() != tt.pattern {
				t.Errorf("String: got %q, want %q", m.String(), tt.pattern)
			}
		})
	}
	var zero rule.PathMatcher
	if !zero.Match("/x") {
		t.Errorf("zero PathMatcher: got false, want true")
	}
}

func TestCompilePathErrors(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
	}{
		{"relative", "api/v1"},
		{"empty segment", "/a//b"},
		{"trailing slash", "/a/"},
		{"dot", "/a/./b"},
		{"dot-dot", "/a/../b"},
		{"** inside a segment", "/a/b**"},
		{"*** segment", "/a/***"},
		{"space", "/a b"},
		{"tab", "/a\tb"},
		{"query", "/a?b=1"},
		{"fragment", "/a#top"},
		{"invalid UTF-8", "/a\xff"},
		{"too long", "/" + string(make([]byte, 1024))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := rule.CompilePath(tt.pattern)
			if !errors.Is(err, rule.ErrPathPattern) {
				t.Errorf("CompilePath(%q): got %v, want an error wrapping ErrPathPattern", tt.pattern, err)
			}
		})
	}
}

func TestPathMatchDoesNotAllocate(t *testing.T) {
	m, err := rule.CompilePath("/api/**/items/*.json")
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if !m.Match("/api/v1/shop/items/42.json") {
			t.Fatal("got no match, want one")
		}
	})
	if allocs != 0 {
		t.Errorf("got %v allocations per Match, want 0", allocs)
	}
}

func BenchmarkPathMatch(b *testing.B) {
	m, err := rule.CompilePath("/api/**/items/*.json")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		m.Match("/api/v1/shop/items/42.json")
	}
}
