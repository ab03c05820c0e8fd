package document_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/pkg/document"
)

func TestRepeatedKeys(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string
	}{
		{"none", `{"domain":"shop","attributes":{"ip":"1.2.3.4","user_id":"a"},"hits":1}`, nil},
		{"top level", `{"hits":1,"hits":500}`, []string{"hits"}},
		{"nested", `{"attributes":{"user_id":"a","user_id":"b"}}`, []string{"attributes.user_id"}},
		{"in a list", `{"descriptors":[{"key":"a","value":"x"},{"key":"b","key":"c"}]}`, []string{"descriptors[1].key"}},
		{"each repeat", `{"a":1,"a":2,"a":3}`, []string{"a", "a"}},
		{"an object's own repeats first", `{"o":{"x":1,"x":2},"p":1,"p":2}`, []string{"p", "o.x"}},
		{"not within a repeated key's value", `{"o":{},"o":{"x":1,"x":2}}`, []string{"o"}},
		{"within the first value of a repeated key", `{"o":{"x":1,"x":2},"o":{}}`, []string{"o", "o.x"}},
		{"escaped", `{"a":1,"\u0061":2}`, []string{"a"}},
		{"quoted in the path", `{"m":{"x.y":1,"x.y":2}}`, []string{`m["x.y"]`}},
		{"empty key", `{"":1,"":2}`, []string{`[""]`}},
		{"same key at other levels", `{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}`, nil},
		{"many keys", `{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k3":3,"k17":0}`, []string{"k3", "k17"}},
		{"scalars", `[1, "a", true, null, {"x": [], "x": {}}]`, []string{"[4].x"}},
		{"white space", " { \"a\" : 1 ,\n\t\"a\" : 2 } ", []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := document.RepeatedKeys([]byte(tt.doc), document.Limits{})
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRepeatedKeysErrors(t *testing.T) {
	tests := []struct {
		name, doc string
		lim       document.Limits
		want      error
	}{
		{"too large", `{"a":1}`, document.Limits{MaxSize: 3}, document.ErrTooLarge},
		{"too deep", `[[[1]]]`, document.Limits{MaxDepth: 2}, document.ErrTooLarge},
		{"too deep in a repeated key's value", `{"a":1,"a":[[1]]}`, document.Limits{MaxDepth: 2}, document.ErrTooLarge},
		{"empty", ``, document.Limits{}, document.ErrSyntax},
		{"unterminated string", `{"a":"x`, document.Limits{}, document.ErrSyntax},
		{"unterminated object", `{"a":1`, document.Limits{}, document.ErrSyntax},
		{"missing colon", `{"a" 1}`, document.Limits{}, document.ErrSyntax},
		{"missing value", `{"a":}`, document.Limits{}, document.ErrSyntax},
		{"key not a string", `{a:1}`, document.Limits{}, document.ErrSyntax},
		{"data after", `{} {}`, document.Limits{}, document.ErrSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := document.RepeatedKeys([]byte(tt.doc), tt.lim)
			if !errors.Is(err, tt.want) {
				t.Errorf("got %q, %v; want an error matching %v", got, err, tt.want)
			}
		})
	}
}

func TestReportRepeats(t *testing.T) {
	var r report
	document.ReportRepeats(&r, []string{"hits", "attributes.user_id"})
	want := "hits: appears more than once\nattributes.user_id: appears more than once"
	if err := r.Err(); err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
	// The wording is Open's.
	if got := decode(t, `{"a":1,"a":2}`, func(*report, *document.Obj) {}); !strings.HasPrefix(got, "a: appears more than once") {
		t.Errorf("Open: got %q, want a: appears more than once", got)
	}
}

// FuzzRepeatedKeys checks RepeatedKeys against the full parser: for every
// document ParseJSON accepts, the same paths as the tree's Duplicates; for
// any other, no panic. The seeds hold repeated keys at every level.
func FuzzRepeatedKeys(f *testing.F) {
	for _, s := range []string{
		`{"hits":1,"hits":500}`,
		`{"attributes":{"user_id":"a","user_id":"b"}}`,
		`{"descriptors":[{"key":"a","key":"b"}],"descriptors":[]}`,
		`{"o":{"x":1,"x":2},"o":{"y":1,"y":2},"p":[{"q":1,"q":2}]}`,
		`{"a":1,"\u0061":2,"\ud800":3,"\udc00":4}`,
		"{\"\xff\":1,\"\xfe\":2}",
		`{"x.y":{"":1,"":2},"x.y":0}`,
		`[[[[{"a":[{"b":1,"b":2}]}]]]]`,
		`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k3":3}`,
		`{"a":"\"}","a":"\\"}`,
		`{"a":1`, `"s"`, `-1.5e3`, ` `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := document.Limits{MaxDepth: 8}
		got, err := document.RepeatedKeys(data, lim)
		tree, perr := document.ParseJSON(data, lim)
		if perr != nil {
			if errors.Is(perr, document.ErrTooLarge) && err == nil {
				t.Fatalf("ParseJSON: %v; RepeatedKeys: no error, want one", perr)
			}
			return
		}
		if err != nil {
			t.Fatalf("ParseJSON accepts %q; RepeatedKeys: %v", data, err)
		}
		if want := tree.Duplicates(""); !slices.Equal(got, want) {
			t.Fatalf("%q: got %q, want %q", data, got, want)
		}
	})
}
