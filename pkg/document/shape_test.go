package document_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/pkg/document"
)

type shapeBase struct {
	Region string `json:"region"`
	Shadow string `json:"hits"` // the outer struct's hits wins
}

type shapeItem struct {
	Key   string `json:"key"`
	Value string `json:"value,omitempty"`
}

type shapeNode struct {
	Name     string       `json:"name"`
	Children []*shapeNode `json:"children"`
}

type shapeBody struct {
	shapeBase
	Domain     string                `json:"domain"`
	Attributes map[string]string     `json:"attributes"`
	Items      []shapeItem           `json:"items"`
	ByName     map[string]*shapeItem `json:"by_name"`
	Hits       *int64                `json:"hits"`
	Untagged   string
	Skipped    string     `json:"-"`
	Tree       *shapeNode `json:"tree"`
}

func TestScanKeysMiscased(t *testing.T) {
	shape := document.ShapeOf(reflect.TypeFor[shapeBody]())
	tests := []struct {
		name, doc string
		want      []document.Miscased
	}{
		{"exact names", `{"domain":"d","region":"r","hits":1,"Untagged":"u","attributes":{"A":"1","a":"2"},"items":[{"key":"k"}],"by_name":{"X":{"value":"v"}},"tree":{"name":"n","children":[{"name":"m"}]}}`, nil},
		{"top level", `{"HITS":500}`, []document.Miscased{{"HITS", "hits"}}},
		{"beside the exact name", `{"hits":1,"Hits":500}`, []document.Miscased{{"Hits", "hits"}}},
		{"promoted field", `{"Region":"r"}`, []document.Miscased{{"Region", "region"}}},
		{"untagged field", `{"untagged":"u"}`, []document.Miscased{{"untagged", "Untagged"}}},
		{"in a list's items", `{"items":[{"key":"a"},{"KEY":"b","Value":"c"}]}`, []document.Miscased{{"items[1].KEY", "key"}, {"items[1].Value", "value"}}},
		{"in a map's values", `{"by_name":{"x":{"Key":"k"}}}`, []document.Miscased{{"by_name.x.Key", "key"}}},
		{"map keys are free", `{"attributes":{"DOMAIN":"x"}}`, nil},
		{"recursive type", `{"tree":{"children":[{"children":[{"NAME":"deep"}]}]}}`, []document.Miscased{{"tree.children[0].children[0].NAME", "name"}}},
		{"no such field", `{"nope":1}`, []document.Miscased{{"nope", ""}}},
		{"not decoded", `{"Skipped":"x"}`, []document.Miscased{{"Skipped", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := document.ScanKeys([]byte(tt.doc), document.Limits{}, shape)
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if !slices.Equal(got.Miscased, tt.want) {
				t.Errorf("got %q, want %q", got.Miscased, tt.want)
			}
			// Every key ScanKeys accepts is one encoding/json decodes by
			// that exact name: decoding with unknown fields refused
			// succeeds exactly when nothing is reported by a name.
			var body shapeBody
			dec := json.NewDecoder(strings.NewReader(tt.doc))
			dec.DisallowUnknownFields()
			decErr := dec.Decode(&body)
			unknown := slices.ContainsFunc(got.Miscased, func(m document.Miscased) bool { return m.Want == "" })
			if (decErr != nil) != unknown {
				t.Errorf("encoding/json: %v; ScanKeys reported an unknown name: %v", decErr, unknown)
			}
		})
	}
}

func TestScanKeysWithoutShape(t *testing.T) {
	got, err := document.ScanKeys([]byte(`{"HITS":1,"hits":2,"hits":3}`), document.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Miscased) != 0 || !slices.Equal(got.Repeated, []string{"hits"}) {
		t.Errorf("got %+v, want only the repeat of hits", got)
	}
}
