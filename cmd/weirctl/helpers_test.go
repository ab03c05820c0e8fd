package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestDiffJSON(t *testing.T) {
	tests := []struct {
		name, old, new string
		want           []string
	}{
		{"same", `{"a": 1, "b": [1, 2]}`, `{"b": [1, 2], "a": 1.0}`, nil},
		{"changed, in new's order", `{"a": 1, "b": 2}`, `{"b": 3, "a": 4}`, []string{"b: 2 → 3", "a: 1 → 4"}},
		{"added and removed", `{"a": 1, "gone": "x"}`, `{"a": 1, "new": true}`, []string{`new: (unset) → true`, `gone: "x" → (unset)`}},
		{"null is absent", `{"a": null}`, `{}`, nil},
		{"maps by value", `{"m": {"x": 1, "y": 2}}`, `{"m": {"y": 2, "x": 1}}`, nil},
		{"bookkeeping skipped", `{"rule_id": "a", "created_at": "t1", "domain": "x"}`, `{"rule_id": "a", "created_at": "t2"}`, nil},
		{"from nothing", ``, `{"limit": 5}`, []string{"limit: (unset) → 5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, err := diffJSON([]byte(tt.old), []byte(tt.new), bookkeeping)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range cs {
				got = append(got, c.String())
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := diffJSON([]byte(`[1]`), []byte(`{}`), nil); err == nil {
		t.Errorf("diff of a list: got no error, want one")
	}
}

func TestFormats(t *testing.T) {
	tests := []struct{ got, want string }{
		{count(0), "0"},
		{count(999), "999"},
		{count(1000), "1,000"},
		{count(1234567), "1,234,567"},
		{count(-1234), "-1,234"},
		{percent(0.125), "12.5%"},
		{percent(1), "100.0%"},
		{percent(0.0004), "0.0%"},
		{ratio(1, 3), "33.3%"},
		{ratio(1, 0), "-"},
		{window(1), "1s"},
		{window(90), "90s"},
		{window(60), "1m"},
		{window(300), "5m"},
		{window(7200), "2h"},
		{window(86400), "1d"},
		{window(31622400), "366d"},
		{truncate("abcdef", 4), "abc…"},
		{truncate("abc", 4), "abc"},
		{indent("a\nb\n  c"), "a\n  b\n  c"},
	}
	for i, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("case %d: got %q, want %q", i, tt.got, tt.want)
		}
	}
}

func TestParseShare(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"0.25", 0.25, true},
		{"25%", 0.25, true},
		{"0", 0, true},
		{"1", 1, true},
		{"100%", 1, true},
		{"30%", 0.3, true},
		{"1.5", 0, false},
		{"-0.1", 0, false},
		{"NaN", 0, false},
		{"half", 0, false},
		{"%", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseShare(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("got %v, %v; want %v (ok %v)", got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestTableTrimsPadding(t *testing.T) {
	var buf bytes.Buffer
	tb := newTable(&buf, "A", "LONG HEADER")
	tb.row("x", "")
	tb.row("tab\there", "y")
	if err := tb.flush(); err != nil {
		t.Fatal(err)
	}
	want := "A         LONG HEADER\nx\ntab here  y\n"
	if buf.String() != want {
		t.Errorf("got %q, want %q", buf.String(), want)
	}
}
