package sharepolicy

import (
	"errors"
	"testing"
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

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"dcs":{"a":{"pin":0.5},"b":{"floor":0.1,"ceiling":0.8},"c":{"drained":true}}}`))
	f.Add([]byte(`{"dcs":{"a":{"pin":1e308}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(data)
		if err != nil {
			return
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
