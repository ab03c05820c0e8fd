package series

import (
	"testing"
	"time"
)

func round(at time.Time, rules ...string) []Sample {
	var out []Sample
	for _, id := range rules {
		out = append(out, Sample{Domain: "d", RuleID: id, Limit: 100, WindowSeconds: 1, DCs: []DCSample{
			{DC: "a", Point: Point{At: at, Share: 0.5, Admitted: uint64(at.Unix())}},
			{DC: "b", Point: Point{At: at, Share: 0.5}},
		}})
	}
	return out
}

func TestSize(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want int
	}{
		{"default span, 1s", Config{Interval: time.Second}, 900},
		{"default span, 5s", Config{Interval: 5 * time.Second}, 180},
		{"span shorter than interval", Config{Interval: time.Minute, Span: time.Second}, 1},
		{"bounded", Config{Interval: time.Millisecond, Span: time.Hour}, MaxPoints},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Size(); got != tc.want {
				t.Errorf("got size %d, want %d", got, tc.want)
			}
		})
	}
}

func TestInvalid(t *testing.T) {
	for _, cfg := range []Config{{}, {Interval: -1}, {Interval: time.Second, Span: -1}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v): got no error, want one", cfg)
		}
	}
}

func TestRingKeepsNewest(t *testing.T) {
	s, err := New(Config{Interval: time.Second, Span: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	for i := range 5 {
		s.Record(round(t0.Add(time.Duration(i)*time.Second), "r"))
	}
	r, ok := s.Rule("d", "r")
	if !ok {
		t.Fatal("got no history of r, want one")
	}
	if len(r.DCs) != 2 || r.DCs[0].DC != "a" || r.DCs[1].DC != "b" {
		t.Fatalf("got DCs %+v, want a then b", r.DCs)
	}
	var got []uint64
	for _, p := range r.DCs[0].Points {
		got = append(got, p.Admitted)
	}
	want := []uint64{1002, 1003, 1004}
	if len(got) != len(want) {
		t.Fatalf("got points %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got points %v, want %v", got, want)
		}
	}
}

func TestForgetsRulesNoLongerPlanned(t *testing.T) {
	s, err := New(Config{Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	s.Record(round(t0, "r1", "r2"))
	if got := len(s.Rules()); got != 2 {
		t.Fatalf("got %d rules, want 2", got)
	}
	s.Record(round(t0.Add(time.Second), "r2"))
	rules := s.Rules()
	if len(rules) != 1 || rules[0].RuleID != "r2" {
		t.Fatalf("got rules %+v, want only r2", rules)
	}
	if _, ok := s.Rule("d", "r1"); ok {
		t.Error("got a history of r1 after it left the round, want none")
	}
	s.Reset()
	if got := len(s.Rules()); got != 0 {
		t.Errorf("got %d rules after Reset, want 0", got)
	}
}

func TestCopiesAreIndependent(t *testing.T) {
	s, err := New(Config{Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.Record(round(time.Unix(1000, 0), "r"))
	r, _ := s.Rule("d", "r")
	r.DCs[0].Points[0].Share = 9
	again, _ := s.Rule("d", "r")
	if got := again.DCs[0].Points[0].Share; got != 0.5 {
		t.Errorf("got share %v after changing a copy, want 0.5", got)
	}
}
