package sharepolicy

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/pkg/document"
)

func TestDecodeAndSettings(t *testing.T) {
	dcs := []string{"a", "b", "c"}
	tests := []struct {
		name, doc string
		ok        bool
	}{
		{"empty", `{}`, true},
		{"pin floor ceiling drain", `{"dcs":{"a":{"pin":0.5},"b":{"floor":0.1,"ceiling":0.8},"c":{"drained":true}}}`, true},
		{"unknown field", `{"dcs":{"a":{"pinned":0.5}}}`, false},
		{"unknown DC", `{"dcs":{"zz":{"pin":0.5}}}`, false},
		{"pin above 1", `{"dcs":{"a":{"pin":1.5}}}`, false},
		{"negative floor", `{"dcs":{"a":{"floor":-0.1}}}`, false},
		{"trailing data", `{"dcs":{}} {}`, false},
		{"not JSON", `pin a`, false},
		{"repeated pin", `{"dcs":{"a":{"pin":0.9,"pin":0.1}}}`, false},
		{"repeated DC", `{"dcs":{"a":{"pin":0.9},"a":{"drained":true}}}`, false},
		{"repeated dcs", `{"dcs":{"a":{"pin":0.9}},"dcs":{}}`, false},
		{"null settings", `{"dcs":{"a":{"pin":null,"floor":null}}}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Decode([]byte(tt.doc))
			if err == nil {
				_, err = p.Settings(dcs)
			}
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrPolicy) {
				t.Fatalf("err %v does not wrap ErrPolicy", err)
			}
		})
	}
}

// TestDecodeErrors checks that every problem of a document is reported at
// its field path, repeated keys at any level included: the coordinator
// and a proxy reading the first value must not disagree with a reader of
// the last.
func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string // "path: reason"
	}{
		{"repeated pin", `{"dcs":{"a":{"pin":0.9,"pin":0.1}}}`, []string{"dcs.a.pin: appears more than once"}},
		{"repeated DC", `{"dcs":{"a":{"pin":0.9},"a":{"drained":true}}}`, []string{"dcs.a: appears more than once"}},
		{"repeated dcs", `{"dcs":{},"dcs":{"a":{"pin":0.9}}}`, []string{"dcs: appears more than once"}},
		{"unknown field", `{"dcs":{"a":{"pinned":0.5}}}`, []string{"dcs.a.pinned: unknown field (want pin, floor, ceiling or drained)"}},
		{"case matters", `{"DCs":{}}`, []string{"DCs: unknown field (want dcs)"}},
		{"wrong types", `{"dcs":{"a":{"pin":"0.5","drained":1},"b":[]}}`, []string{
			`dcs.a.pin: want a number, got "0.5"`, "dcs.a.drained: want true or false, got 1", "dcs.b: want a DC's settings (an object), got a list"}},
		{"dcs not an object", `{"dcs":[]}`, []string{"dcs: want an object of DC settings, got a list"}},
		{"not an object", `null`, []string{"want an object, got null"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.doc))
			ve, ok := errors.AsType[*ValidationError](err)
			if !ok {
				t.Fatalf("got %v, want a *ValidationError", err)
			}
			if !errors.Is(err, ErrPolicy) {
				t.Errorf("got %v, want an error matching ErrPolicy", err)
			}
			var got []string
			for _, fe := range ve.Errors {
				got = append(got, fe.Error())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	for _, doc := range []string{`{"dcs":`, `{} {}`, `{"dcs":{}}` + strings.Repeat(" ", MaxBytes)} {
		if _, err := Decode([]byte(doc)); !errors.Is(err, ErrPolicy) || errors.As(err, new(*ValidationError)) {
			t.Errorf("%.20q: got %v, want an error matching ErrPolicy that is no *ValidationError", doc, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"dcs":{"a":{"pin":0.5},"b":{"floor":0.1,"ceiling":0.8},"c":{"drained":true}}}`))
	f.Add([]byte(`{"dcs":{"a":{"pin":1e308}}}`))
	f.Add([]byte(`{"dcs":{"a":{"pin":0.9,"pin":0.1},"a":{}},"dcs":null}`))
	f.Add([]byte(`{"dcs":{"b":{"floor":0.1,"\u0066loor":0.9}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(data)
		if err != nil {
			return
		}
		if tree, err := document.ParseJSON(data, document.Limits{}); err != nil || len(tree.Duplicates("")) > 0 {
			t.Fatalf("accepted %q, which repeats a key or is malformed (%v)", data, err)
		}
		s, err := p.Settings([]string{"a", "b", "c"})
		if err != nil {
			return
		}
		for _, d := range s {
			if d.Pinned && !(d.Pin >= 0 && d.Pin <= 1) || !(d.Floor >= 0 && d.Floor <= 1) {
				t.Fatalf("accepted setting out of range: %+v", d)
			}
		}
	})
}

// TestContradictions checks that a pin outside its DC's floor and
// ceiling is reported at the field paths, and that settings that agree,
// or that a drain overrides, are not.
func TestContradictions(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string // "path: reason"; none when the settings agree
	}{
		{"pin below floor", `{"dcs":{"a":{"pin":0.5,"floor":0.6}}}`, []string{"dcs.a.floor: floor 0.6 is above the pin 0.5: a pinned DC's share is its pin"}},
		{"pin above ceiling", `{"dcs":{"a":{"pin":0.5,"ceiling":0.4}}}`, []string{"dcs.a.ceiling: ceiling 0.4 is below the pin 0.5: a pinned DC's share is its pin"}},
		{"several, in DC order", `{"dcs":{"c":{"pin":0.1,"floor":0.2},"a":{"pin":0.2,"floor":0.3,"ceiling":0.1}}}`, []string{
			"dcs.a.floor: floor 0.3 is above the pin 0.2: a pinned DC's share is its pin",
			"dcs.a.ceiling: ceiling 0.1 is below the pin 0.2: a pinned DC's share is its pin",
			"dcs.c.floor: floor 0.2 is above the pin 0.1: a pinned DC's share is its pin"}},
		{"drained over contradicting settings", `{"dcs":{"a":{"drained":true,"pin":0.5,"floor":0.6}}}`, []string{"dcs.a.floor: floor 0.6 is above the pin 0.5: a pinned DC's share is its pin"}},
		{"pin between floor and ceiling", `{"dcs":{"a":{"pin":0.5,"floor":0.5,"ceiling":0.6}}}`, nil},
		{"pin without ceiling", `{"dcs":{"a":{"pin":0.9,"ceiling":0}}}`, nil},
		{"drained over a pin and a floor", `{"dcs":{"a":{"drained":true,"pin":0.3,"floor":0.2}}}`, nil},
		{"drained with a ceiling", `{"dcs":{"a":{"drained":true,"ceiling":0.4}}}`, nil},
		{"floor and ceiling", `{"dcs":{"a":{"floor":0.1,"ceiling":0.8}}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Decode([]byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			err = p.Contradictions()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("got %v, want none", err)
				}
				return
			}
			ve, ok := errors.AsType[*ValidationError](err)
			if !ok || !errors.Is(err, ErrPolicy) {
				t.Fatalf("got %v, want a *ValidationError matching ErrPolicy", err)
			}
			var got []string
			for _, fe := range ve.Errors {
				got = append(got, fe.Error())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
