package document_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/pkg/document"
	"github.com/weirhq/weir/pkg/fielderr"
)

var errTest = errors.New("test: invalid")

type kind struct{}

func (kind) Sentinel() error { return errTest }

type report = fielderr.Report[kind]

// decode parses doc as JSON and runs read on its top object, returning the
// problems reported, one "path: reason" a line.
func decode(t *testing.T, doc string, read func(r *report, o *document.Obj)) string {
	t.Helper()
	tree, err := document.ParseJSON([]byte(doc), document.Limits{})
	if err != nil {
		t.Fatalf("ParseJSON(%s): %v", doc, err)
	}
	var r report
	if o := document.Open(&r, "", tree); o != nil {
		read(&r, o)
		o.Done()
	}
	if err := r.Err(); err != nil {
		return err.Error()
	}
	return ""
}

func TestMistakes(t *testing.T) {
	str := func(_ *report, o *document.Obj) { o.String("s") }
	integer := func(_ *report, o *document.Obj) { o.Int("n") }
	float := func(_ *report, o *document.Obj) { o.Float("x") }
	boolean := func(_ *report, o *document.Obj) { o.Bool("b") }
	duration := func(_ *report, o *document.Obj) { o.Duration("d") }
	tm := func(_ *report, o *document.Obj) { o.Time("t") }
	list := func(_ *report, o *document.Obj) { o.Strings("l") }
	smap := func(_ *report, o *document.Obj) { o.StringMap("m") }
	enum := func(_ *report, o *document.Obj) { o.Enum("e", "a", "a", "b", "c") }
	nested := func(r *report, o *document.Obj) {
		if v, ok := o.Get("o"); ok {
			if no := document.Open(r, o.FieldPath("o"), v); no != nil {
				no.Int("n")
				no.Done()
			}
		}
	}
	required := func(_ *report, o *document.Obj) { o.Required("s", "n") }
	tests := []struct {
		name string
		doc  string
		read func(*report, *document.Obj)
		want string
	}{
		{"fine", `{"s": "x", "n": 5}`, func(_ *report, o *document.Obj) { o.String("s"); o.Int("n") }, ""},
		{"absent and null are not mistakes", `{"s": null}`, str, ""},
		{"not an object", `[1]`, str, "want an object, got a list"},
		{"repeated key", `{"s": "a", "s": "b"}`, str, "s: appears more than once"},
		{"repeated key, nested", `{"o": {"n": 1, "n": 2}}`, nested, "o.n: appears more than once"},
		{"repeated key in a map", `{"m": {"x.y": "a", "x.y": "b"}}`, smap, `m["x.y"]: appears more than once`},
		{"unknown field", `{"s": "a", "limt": 5, "zz": 1}`, str, "limt: unknown field (want s)\nzz: unknown field (want s)"},
		{"unknown field, many known", `{"a": 1, "x": 1}`, func(_ *report, o *document.Obj) {
			for _, n := range []string{"a", "b", "c", "d", "e", "f", "g"} {
				o.Get(n)
			}
		}, "x: unknown field"},
		{"unknown field, nothing known", `{"x": 1}`, func(*report, *document.Obj) {}, "x: unknown field"},
		{"ignored field", `{"_id": 1}`, func(_ *report, o *document.Obj) { o.Ignore("_id") }, ""},
		{"string a number", `{"s": 5}`, str, "s: want a string, got 5 (quote it)"},
		{"string a boolean", `{"s": true}`, str, "s: want a string, got true (quote it: YAML reads yes, no, on, off, true and false unquoted as booleans)"},
		{"string a list", `{"s": []}`, str, "s: want a string, got a list"},
		{"integer a string", `{"n": "5"}`, integer, `n: want an integer, got "5"`},
		{"integer a fraction", `{"n": 2.5}`, integer, "n: want an integer, got 2.5"},
		{"integer whole with a fraction", `{"n": 5.0}`, integer, ""},
		{"integer out of range", `{"n": 1e300}`, integer, "n: 1e300 is out of range"},
		{"integer too long", `{"n": 99999999999999999999}`, integer, "n: 99999999999999999999 is out of range"},
		{"number an object", `{"x": {}}`, float, "x: want a number, got an object"},
		{"number out of range", `{"x": 1e999}`, float, "x: 1e999 is out of range"},
		{"boolean a string", `{"b": "yes"}`, boolean, `b: want true or false, got "yes"`},
		{"duration a number", `{"d": 30}`, duration, `d: want a duration such as "30s" or "1m30s", got 30`},
		{"duration not one", `{"d": "a minute"}`, duration, `d: want a duration such as "30s" or "1m30s", got "a minute"`},
		{"time not one", `{"t": "yesterday"}`, tm, `t: want an RFC 3339 time such as 2023-08-25T10:00:00Z, got "yesterday"`},
		{"list an object", `{"l": {}}`, list, "l: want a list, got an object"},
		{"list item", `{"l": ["a", null]}`, list, "l[1]: want a string, got null"},
		{"map a list", `{"m": []}`, smap, "m: want an object of strings, got a list"},
		{"map entry", `{"m": {"user id": 1}}`, smap, `m["user id"]: want a string, got 1 (quote it)`},
		{"enum", `{"e": "d"}`, enum, `e: "d" is not valid (want "a", "b" or "c")`},
		{"enum not a string", `{"e": 1}`, enum, `e: want a string, got 1 (quote it)`},
		{"required", `{"s": null}`, required, "s: required\nn: required"},
		{"long string cut", `{"n": "` + strings.Repeat("x", 50) + `"}`, integer, `n: want an integer, got "` + strings.Repeat("x", 37) + `..."`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decode(t, tt.doc, tt.read); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestValues(t *testing.T) {
	tree, err := document.ParseJSON([]byte(`{"s": "x", "n": -7, "f": 2.5, "b": false, "d": "1m30s",
 "t": "2023-08-25T12:00:00+02:00", "l": ["a", "b"], "m": {"k": "v"}, "e": "b"}`), document.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var r report
	o := document.Open(&r, "", tree)
	s, _ := o.String("s")
	n, _ := o.Int("n")
	f, _ := o.Float("f")
	b, ok := o.Bool("b")
	d, _ := o.Duration("d")
	tm := o.Time("t")
	l := o.Strings("l")
	m, _ := o.StringMap("m")
	e := o.Enum("e", "a", "a", "b")
	def := o.Enum("absent", "a", "a", "b")
	o.Done()
	got := []any{s, n, f, b, ok, d, tm, l, m, e, def}
	want := []any{"x", int64(-7), 2.5, false, true, 90 * time.Second, time.Date(2023, 8, 25, 10, 0, 0, 0, time.UTC),
		[]string{"a", "b"}, map[string]string{"k": "v"}, "b", "a"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if err := r.Err(); err != nil {
		t.Errorf("got %v, want no problems", err)
	}
}

func TestParseJSONTree(t *testing.T) {
	tree, err := document.ParseJSON([]byte("{\"b\": 1,\n \"a\": [true,\n  {\"x\": null, \"x\": 2}],\n \"b\": 3}"), document.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, f := range tree.Fields {
		keys = append(keys, f.Key)
	}
	if want := []string{"b", "a"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("keys: got %q, want %q (document order)", keys, want)
	}
	a, _ := tree.Get("a")
	if got := []int{tree.Line, tree.Fields[1].Line, a.Items[1].Line}; !reflect.DeepEqual(got, []int{1, 2, 3}) {
		t.Errorf("lines: got %v, want [1 2 3]", got)
	}
	if got, want := tree.Duplicates(""), []string{"b", "a[1].x"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Duplicates: got %q, want %q", got, want)
	}
	if b, _ := tree.Get("b"); b.Text != "1" {
		t.Errorf("b: got %q, want the first occurrence, 1", b.Text)
	}
}

func TestParseJSONErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		lim  document.Limits
		want error
		msg  string
	}{
		{"empty", " \n", document.Limits{}, document.ErrSyntax, "empty document"},
		{"truncated", `{"a": [1, 2`, document.Limits{}, document.ErrSyntax, "unexpected end of document"},
		{"bad token", "{\"a\": 1,\n \"b\": [}", document.Limits{}, document.ErrSyntax, "line 2, column 8: invalid character '}' looking for beginning of value"},
		{"trailing data", `{} {}`, document.Limits{}, document.ErrSyntax, "line 1, column 4: data after the end of the document"},
		{"too large", `"abcdef"`, document.Limits{MaxSize: 4}, document.ErrTooLarge, "8 bytes; at most 4"},
		// Decoded, \xff\xfe would become U+FFFD and the document read
		// as another one.
		{"invalid UTF-8 in a string", "{\"a\":\n \"x\xff\xfe\"}", document.Limits{}, document.ErrSyntax, "line 2, column 4: not valid UTF-8 at byte offset 9"},
		{"invalid UTF-8 in a key", "{\"\xc3\": 1}", document.Limits{}, document.ErrSyntax, "line 1, column 3: not valid UTF-8 at byte offset 2"},
		{"truncated UTF-8 at the end", "\"\xe2\x82", document.Limits{}, document.ErrSyntax, "line 1, column 2: not valid UTF-8 at byte offset 1"},
		{"too deep", strings.Repeat("[", 5) + strings.Repeat("]", 5), document.Limits{MaxDepth: 4}, document.ErrTooLarge, "line 1: nested deeper than 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := document.ParseJSON([]byte(tt.doc), tt.lim)
			if !errors.Is(err, tt.want) || err.Error() != tt.msg {
				t.Errorf("got %v, want %q matching %v", err, tt.msg, tt.want)
			}
		})
	}
}

func TestWrap(t *testing.T) {
	syntax, tooLarge := errors.New("x: malformed"), errors.New("x: too large")
	_, err := document.ParseJSON([]byte(`{`), document.Limits{})
	if err := document.Wrap(err, syntax, tooLarge); !errors.Is(err, syntax) || !errors.Is(err, document.ErrSyntax) || err.Error() != "x: malformed: unexpected end of document" {
		t.Errorf("got %v, want x: malformed: unexpected end of document, matching both sentinels", err)
	}
	_, err = document.ParseJSON([]byte(`[[1]]`), document.Limits{MaxDepth: 1})
	if err := document.Wrap(err, syntax, tooLarge); !errors.Is(err, tooLarge) || errors.Is(err, syntax) {
		t.Errorf("got %v, want an error matching %v only", err, tooLarge)
	}
	if err := document.Wrap(nil, syntax, tooLarge); err != nil {
		t.Errorf("got %v, want nil", err)
	}
}

// FuzzParseJSON checks ParseJSON against encoding/json: it accepts what
// json.Valid accepts (unless nested too deep), and its tree holds the
// values json.Unmarshal finds when no key is repeated.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.5e3, "x\u00e9", true, null, {}]}`, `{"a": 1, "a": 2}`, `[]`, `"s"`, `-0`, `{"a":`, "{\n}\n ", `[[[[]]]]`, `{"\ud800": 1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tree, err := document.ParseJSON(data, document.Limits{})
		if errors.Is(err, document.ErrTooLarge) {
			return
		}
		if valid := json.Valid(data); valid != (err == nil) {
			t.Fatalf("json.Valid: %v, ParseJSON: %v", valid, err)
		}
		if err != nil {
			if !errors.Is(err, document.ErrSyntax) {
				t.Fatalf("got %v, want an error matching ErrSyntax", err)
			}
			return
		}
		if len(tree.Duplicates("")) > 0 {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var want any
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if got := toAny(tree); !reflect.DeepEqual(got, want) {
			t.Fatalf("got %#v, want %#v", got, want)
		}
	})
}

// toAny returns the tree as json.Unmarshal would with UseNumber.
func toAny(n *document.Node) any {
	switch n.Kind {
	case document.Bool:
		return n.Text == "true"
	case document.Number:
		return json.Number(n.Text)
	case document.String:
		return n.Text
	case document.List:
		l := make([]any, len(n.Items))
		for i, e := range n.Items {
			l[i] = toAny(e)
		}
		return l
	case document.Object:
		m := make(map[string]any, len(n.Fields))
		for _, f := range n.Fields {
			m[f.Key] = toAny(f.Value)
		}
		return m
	}
	return nil
}
