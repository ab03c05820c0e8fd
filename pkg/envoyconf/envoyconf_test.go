package envoyconf_test

import (
	"testing"

	"github.com/weirhq/weir/pkg/envoyconf"
)

// TestLookup checks the lookup against envoyproxy/ratelimit's rules: a
// specific value first, then the first matching wildcard, then the key's
// default; a limit only at the descriptor's last entry.
func TestLookup(t *testing.T) {
	var d envoyconf.Domain
	d.Name = "d"
	add := func(n *envoyconf.Node, k, v, name string, share bool) *envoyconf.Node {
		t.Helper()
		c, ok := n.Add(k, v, &envoyconf.Limit{Name: name, RequestsPerUnit: 1, Unit: envoyconf.Second}, share)
		if !ok {
			t.Fatalf("Add(%s, %s): got a duplicate, want none", k, v)
		}
		return c
	}
	add(&d.Root, "k", "", "default", false)
	add(&d.Root, "k", "exact", "exact", false)
	add(&d.Root, "k", "pre*", "prefix", false)
	add(&d.Root, "k", "a*b*c", "middle", true)
	p := add(&d.Root, "p", "", "parent", false)
	add(p, "c", "", "child", false)
	if _, ok := d.Root.Add("k", "exact", nil, false); ok {
		t.Errorf("Add of a repeated key and value: got ok, want refused")
	}
	tests := []struct {
		entries []envoyconf.Entry
		want    string // limit name, "" for none
		shared  string
	}{
		{[]envoyconf.Entry{{"k", "exact"}}, "exact", ""},
		{[]envoyconf.Entry{{"k", "prefix-x"}}, "prefix", ""},
		{[]envoyconf.Entry{{"k", "pre"}}, "prefix", ""},
		{[]envoyconf.Entry{{"k", "aXbYc"}}, "middle", "a*b*c"},
		{[]envoyconf.Entry{{"k", "abc"}}, "middle", "a*b*c"},
		{[]envoyconf.Entry{{"k", "acb"}}, "default", ""},
		{[]envoyconf.Entry{{"k", ""}}, "default", ""},
		{[]envoyconf.Entry{{"p", "x"}}, "parent", ""},
		{[]envoyconf.Entry{{"p", "x"}, {"c", "y"}}, "child", ""},
		{[]envoyconf.Entry{{"c", "y"}, {"p", "x"}}, "", ""},
		{[]envoyconf.Entry{{"k", "exact"}, {"c", "y"}}, "", ""},
		{[]envoyconf.Entry{{"other", "x"}}, "", ""},
	}
	for _, tt := range tests {
		f := d.Lookup(tt.entries)
		got := ""
		if f.Limit != nil {
			got = f.Limit.Name
		}
		shared := ""
		if len(f.Shared) > 0 {
			shared = f.Shared[0]
		}
		if got != tt.want || shared != tt.shared {
			t.Errorf("Lookup(%v): got %q shared %q, want %q shared %q", tt.entries, got, shared, tt.want, tt.shared)
		}
	}
	if got, want := envoyconf.CounterKey("d", []envoyconf.Entry{{"k", "aXbYc"}}, d.Lookup([]envoyconf.Entry{{"k", "aXbYc"}})), "d_k_a*b*c_"; got != want {
		t.Errorf("CounterKey: got %q, want %q", got, want)
	}
}
