package limiter

import "testing"

func TestOutageKeys(t *testing.T) {
	o := newOutageKeys(2)
	o.hold("a", 100, 0)
	o.hold("a", 50, 0) // an earlier until never shortens the hold
	o.hold("b", 30, 0)
	o.hold("c", 200, 10) // full, nothing expired: every key held until 200
	steps := []struct {
		key  string
		now  int64
		want bool
	}{
		{"a", 99, true},
		{"b", 29, true},
		{"z", 150, true}, // held by the overflow
		{"b", 200, false},
		{"a", 200, false},
		{"c", 200, false},
		{"z", 200, false},
	}
	for _, s := range steps {
		if got := o.held(s.key, s.now); got != s.want {
			t.Errorf("held(%q, %d) = %v, want %v", s.key, s.now, got, s.want)
		}
	}
	o.hold("d", 300, 200) // expired entries make room again
	if !o.held("d", 250) || o.held("e", 250) {
		t.Errorf("after expiry: d held %v, e held %v; want true, false", o.held("d", 250), o.held("e", 250))
	}
}
