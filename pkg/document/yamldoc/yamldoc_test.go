package yamldoc_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/weirhq/weir/pkg/document"
	"github.com/weirhq/weir/pkg/document/yamldoc"
)

// flat writes a tree on one line: objects as {k=v ...}, lists as [...],
// scalars as their text (followed by ~ and the text as written when the
// parser resolved it otherwise), repeated keys as !k.
func flat(n *document.Node) string {
	switch n.Kind {
	case document.Object:
		var parts []string
		for _, f := range n.Fields {
			parts = append(parts, f.Key+"="+flat(f.Value))
		}
		for _, f := range n.Repeats {
			parts = append(parts, "!"+f.Key)
		}
		return "{" + strings.Join(parts, " ") + "}"
	case document.List:
		var parts []string
		for _, e := range n.Items {
			parts = append(parts, flat(e))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case document.String:
		return `"` + n.Text + `"`
	case document.Null:
		return "null"
	}
	if n.Written != "" {
		return n.Text + "~" + n.Written
	}
	return n.Text
}

func TestParse(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"order kept", "b: 1\na: 2\n", "{b=1 a=2}"},
		{"repeats kept", "a: 1\nb: 2\na: 3\n", "{a=1 b=2 !a}"},
		{"nested repeats", "x: {a: 1, a: 2}\n", "{x={a=1 !a}}"},
		{"YAML 1.1 booleans, and as written", "a: yes\nb: off\nc: true\n", "{a=true~yes b=false~off c=true}"},
		{"numbers as JSON writes them, and as written", "a: 1e6\nb: 2.50\nc: 0x10\nd: 017\ne: 5\n", "{a=1000000~1e6 b=2.5~2.50 c=16~0x10 d=15~017 e=5}"},
		{"as written in lists and merged fields", "l: [On, 0o7]\nbase: &b {w: 0x1}\nd:\n  <<: *b\n", "{l=[true~On 7~0o7] base={w=1~0x1} d={w=1~0x1}}"},
		{"quoted scalars are strings", "a: 'yes'\nb: \"0x1F\"\n", "{a=\"yes\" b=\"0x1F\"}"},
		{"infinity kept as YAML writes it", "a: .inf\nb: -.inf\nc: .nan\n", "{a=.inf b=-.inf c=.nan}"},
		{"keys of other kinds", "1: a\ntrue: b\n~: c\n", "{1=\"a\" true=\"b\" null=\"c\"}"},
		{"timestamp a string", "t: 2023-08-25\n", "{t=\"2023-08-25\"}"},
		{"merge keys", "base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  z: 3\n  x: 9\n", "{base={x=1 true=2} d={z=3 x=9 true=2}}"},
		{"list at the top", "- a\n- {b: 1}\n", "[\"a\" {b=1}]"},
		{"null at the top of JSON", "null", "null"},
		{"JSON", `{"b": 1, "a": [true], "b": 2}`, "{b=1 a=[true] !b}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := yamldoc.Parse([]byte(tt.doc), document.Limits{})
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			if got := flat(n); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		lim  document.Limits
		want error
		msg  string
	}{
		{"empty", "", document.Limits{}, document.ErrSyntax, "empty document"},
		{"comment only", "# x\n", document.Limits{}, document.ErrSyntax, "empty document"},
		{"null", "~\n", document.Limits{}, document.ErrSyntax, "empty document"},
		{"two documents", "a: 1\n---\nb: 2\n", document.Limits{}, document.ErrSyntax, "more than one YAML document (want one)"},
		{"empty second document", "a: 1\n---\n", document.Limits{}, document.ErrSyntax, "more than one YAML document (want one)"},
		{"bad indentation", "a:\n  - b: 1\n   c: 2\n", document.Limits{}, document.ErrSyntax, "line 2: did not find expected '-' indicator"},
		{"repeats in a list at the top", "- {a: 1, a: 2}\n", document.Limits{}, document.ErrSyntax, `line 1: key "a" already set in map`},
		{"a list as a key", "? [1]\n: 2\n", document.Limits{}, document.ErrSyntax, "invalid map key: []interface {}{1}"},
		{"broken JSON keeps its position", "{\"a\": 1,\n \"b\": [}\n", document.Limits{}, document.ErrSyntax, "line 2, column 8: invalid character '}' looking for beginning of value"},
		{"too large", "a: 12345\n", document.Limits{MaxSize: 4}, document.ErrTooLarge, "9 bytes; at most 4"},
		{"invalid UTF-8 in YAML", "a: 1\nb: x\xff\n", document.Limits{}, document.ErrSyntax, "line 2, column 5: not valid UTF-8 at byte offset 9"},
		{"invalid UTF-8 in JSON", "{\"b\": \"\xff\xfe\"}", document.Limits{}, document.ErrSyntax, "line 1, column 8: not valid UTF-8 at byte offset 7"},
		{"too deep", "a: [[[1]]]\n", document.Limits{MaxDepth: 3}, document.ErrTooLarge, "nested deeper than 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := yamldoc.Parse([]byte(tt.doc), tt.lim)
			if !errors.Is(err, tt.want) || err.Error() != tt.msg {
				t.Errorf("got %v, want %q matching %v", err, tt.msg, tt.want)
			}
		})
	}
}

// FuzzParse checks that Parse never panics, that its errors match one of
// the package document's sentinels, and that a JSON document gives the
// tree document.ParseJSON gives.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"a: 1\nb: [x, {c: yes}]\n", "a: 1\na: 2\n", "- 1\n- .inf\n", "base: &b {x: 1}\nd: {<<: *b}\n",
		`{"a": [1, "x"]}`, "a: 1\n---\n", "? [1]\n: 2\n", "a: !!binary aGk=\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := yamldoc.Parse(data, document.Limits{MaxSize: 1 << 16})
		if err != nil {
			if !errors.Is(err, document.ErrSyntax) && !errors.Is(err, document.ErrTooLarge) {
				t.Fatalf("got %v, want an error matching a sentinel of package document", err)
			}
			return
		}
		if j, jerr := document.ParseJSON(data, document.Limits{MaxSize: 1 << 16}); jerr == nil && !reflect.DeepEqual(flat(n), flat(j)) {
			t.Fatalf("JSON: got %s, want %s", flat(n), flat(j))
		}
	})
}

// TestNumberValue: document.NumberValue reads back every number as this
// parser writes it, infinities and NaN included.
func TestNumberValue(t *testing.T) {
	n, err := yamldoc.Parse([]byte("{a: .inf, b: -.inf, c: .nan, d: 2.5, e: 1e400, f: 0x1F, g: .Inf}"), document.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"a": math.Inf(1), "b": math.Inf(-1), "d": 2.5, "e": math.Inf(1), "f": 31, "g": math.Inf(1)}
	for _, f := range n.Fields {
		got := document.NumberValue(f.Value)
		if w, ok := want[f.Key]; ok && got != w || !ok && !math.IsNaN(got) {
			t.Errorf("%s (%q): got %v, want %v (NaN for c)", f.Key, f.Value.Text, got, w)
		}
	}
}
