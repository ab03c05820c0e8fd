package demand

import (
	"errors"
	"math"
	"testing"
	"unsafe"
)

func newEstimator(t testing.TB, cfg Config) *Estimator {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return e
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero value", Config{}, true},
		{"all set", Config{HalfLife: 1.5, Deadband: 0.1, MinChange: 2, Confirm: 3}, true},
		{"negative half-life", Config{HalfLife: -1}, false},
		{"NaN half-life", Config{HalfLife: math.NaN()}, false},
		{"infinite half-life", Config{HalfLife: math.Inf(1)}, false},
		{"deadband 1", Config{Deadband: 1}, false},
		{"negative deadband", Config{Deadband: -0.1}, false},
		{"NaN min change", Config{MinChange: math.NaN()}, false},
		{"infinite min change", Config{MinChange: math.Inf(1)}, false},
		{"negative confirm", Config{Confirm: -1}, false},
		{"confirm above max", Config{Confirm: MaxConfirm + 1}, false},
		{"confirm at max", Config{Confirm: MaxConfirm}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.ok != (err == nil) {
				t.Fatalf("Validate() = %v, want ok %v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrConfig) {
				t.Errorf("error %v does not wrap ErrConfig", err)
			}
			if _, nerr := New(tt.cfg); (nerr == nil) != tt.ok {
				t.Errorf("New: got %v, want ok %v", nerr, tt.ok)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	e := newEstimator(t, Config{})
	want := Config{HalfLife: 3, Deadband: 0.05, MinChange: 0.005, Confirm: 2}
	if got := e.Config(); got != want {
		t.Errorf("Config() = %+v, want %+v", got, want)
	}
	if math.Abs(e.alpha-0.2063) > 1e-4 || e.settle != 5 {
		t.Errorf("alpha %v, settle %d, want 0.2063 and 5", e.alpha, e.settle)
	}
}

func TestStateSize(t *testing.T) {
	if got := unsafe.Sizeof(State{}); got > 64 {
		t.Errorf("State is %d bytes, want at most 64 (docs say so)", got)
	}
}

// obs is one call: an observation, or an Advance when advance is set.
type obs struct {
	interval int64
	offered  float64
	advance  bool
}

func steady(from, to int64, v float64) []obs {
	var o []obs
	for i := from; i < to; i++ {
		o = append(o, obs{interval: i, offered: v})
	}
	return o
}

// wiggle observes v+w and v−w in turn over intervals [from, to):
// consecutive observations differ by 2w, so the noise estimate settles at
// 2w/√2 and the step threshold at five times that.
func wiggle(from, to int64, v, w float64) []obs {
	var o []obs
	for i := from; i < to; i++ {
		o = append(o, obs{interval: i, offered: v + w*float64(1-2*(i%2))})
	}
	return o
}

// ramp observes from a to b linearly over intervals [from, to).
func ramp(from, to int64, a, b float64) []obs {
	var o []obs
	for i := from; i < to; i++ {
		o = append(o, obs{interval: i, offered: a + (b-a)*float64(i-from+1)/float64(to-from)})
	}
	return o
}

func seq(parts ...[]obs) []obs {
	var o []obs
	for _, p := range parts {
		o = append(o, p...)
	}
	return o
}

func TestObserve(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		in   []obs
		// want is the published estimate after each call, from the end:
		// want[len(want)-1] after the last call, and so on.
		want []float64
		tol  float64 // relative; 1e-9 when zero
	}{
		{name: "first observation is published", in: steady(7, 8, 0.4), want: []float64{0.4}},
		{name: "tiny first observation is 0", in: steady(0, 1, 0.002), want: []float64{0}},
		{name: "constant demand", in: steady(0, 50, 0.4), want: []float64{0.4, 0.4, 0.4}},
		{name: "drift inside the deadband is not published",
			in:   seq(steady(0, 20, 1), steady(20, 60, 1.03)),
			want: []float64{1, 1, 1}},
		{name: "slow ramp is followed without a step",
			in:   seq(steady(0, 20, 1), ramp(20, 40, 1, 1.2), steady(40, 50, 1.2)),
			want: []float64{1.2}, tol: 0.05},
		{name: "step up published on the second observation",
			in:   seq(steady(0, 20, 1), steady(20, 22, 2)),
			want: []float64{1, 2}},
		{name: "step down to zero published on the second observation",
			in:   seq(steady(0, 20, 1), steady(20, 22, 0)),
			want: []float64{1, 0}},
		{name: "step from zero published on the second observation",
			in:   seq(steady(0, 20, 0), steady(20, 22, 0.5)),
			want: []float64{0, 0.5}},
		{name: "small step beyond the deadband detected",
			in:   seq(steady(0, 20, 1), steady(20, 22, 1.07)),
			want: []float64{1, 1.07}},
		{name: "step needing three confirmations",
			cfg:  Config{Confirm: 3},
			in:   seq(steady(0, 20, 1), steady(20, 23, 3)),
			want: []float64{1, 1, 3}},
		{name: "confirm 1 follows at once",
			cfg:  Config{Confirm: 1},
			in:   seq(steady(0, 20, 1), steady(20, 21, 3)),
			want: []float64{3}},
		{name: "lone outlier barely moves the estimate",
			in:   seq(steady(0, 20, 1), []obs{{20, 5, false}}, steady(21, 40, 1)),
			want: []float64{1, 1, 1, 1}},
		{name: "outliers on alternating sides are no step",
			in:   seq(steady(0, 20, 1), []obs{{20, 3, false}, {21, 0, false}, {22, 3, false}, {23, 0, false}, {24, 1, false}}),
			want: []float64{1, 1, 1, 1, 1}, tol: 0.05},
		{name: "settling follows the mean of the first observations",
			in:   []obs{{0, 1, false}, {1, 1.04, false}, {2, 0.98, false}},
			want: []float64{(1 + 1.04 + 0.98) / 3}},
		{name: "duplicate interval ignored",
			in:   seq(steady(0, 10, 1), []obs{{9, 7, false}, {5, 7, false}}),
			want: []float64{1, 1, 1}},
		{name: "negative and NaN ignored",
			in:   seq(steady(0, 10, 1), []obs{{10, -1, false}, {10, math.NaN(), false}}),
			want: []float64{1, 1, 1}},
		{name: "infinite counts as MaxOffered",
			cfg:  Config{Confirm: 1},
			in:   seq(steady(0, 10, 1), []obs{{10, math.Inf(1), false}}),
			want: []float64{MaxOffered}},
		{name: "missing intervals decay, not at once",
			in:   seq(steady(0, 20, 1), []obs{{20, 0, true}, {21, 0, true}, {22, 0, true}}),
			want: []float64{math.Exp2(-1.0 / 3), math.Exp2(-2.0 / 3), 0.5}, tol: 1e-6},
		{name: "long silence decays to exactly 0",
			in:   seq(steady(0, 20, 1), []obs{{60, 0, true}}),
			want: []float64{0}},
		{name: "a gap decays before the next observation",
			in:   seq(steady(0, 20, 1), []obs{{23, 1, false}}),
			want: []float64{0.5}, tol: 1e-6},
		{name: "report after advance is stale",
			in:   seq(steady(0, 20, 1), []obs{{22, 0, true}, {21, 1, false}}),
			want: []float64{0.5, 0.5}, tol: 1e-6},
		{name: "advance before any observation is a no-op",
			in:   []obs{{5, 0, true}, {3, 0.3, false}},
			want: []float64{0, 0.3}},
		{name: "coming back from zero needs more than MinChange",
			in:   seq(steady(0, 20, 0), steady(20, 300, 0.004)),
			want: []float64{0}},
		{name: "shift just short of the threshold is confirmed by four in a row",
			in:   seq(wiggle(0, 100, 1, 0.02), steady(100, 104, 1.12)),
			want: []float64{1, 1, 1, 1.12}},
		{name: "shift short of the threshold, broken by noise, is not a step",
			in:   seq(wiggle(0, 100, 1, 0.02), steady(100, 103, 1.12), []obs{{103, 1, false}}),
			want: []float64{1, 1, 1, 1}, tol: 0.01},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEstimator(t, tt.cfg)
			var s State
			got := make([]float64, len(tt.in))
			for i, o := range tt.in {
				before := s.Estimate()
				var changed bool
				if o.advance {
					changed = e.Advance(&s, o.interval)
				} else {
					changed = e.Observe(&s, o.interval, o.offered)
				}
				got[i] = s.Estimate()
				if changed != (got[i] != before) {
					t.Errorf("call %d: changed = %v, but estimate went from %v to %v", i, changed, before, got[i])
				}
			}
			tol := tt.tol
			if tol == 0 {
				tol = 1e-9
			}
			off := len(got) - len(tt.want)
			for i, w := range tt.want {
				g := got[off+i]
				if math.Abs(g-w) > tol*max(math.Abs(w), 1e-9) && !(w == 0 && g == 0) {
					t.Errorf("estimate after call %d = %v, want %v (last estimates %v)", off+i, g, w, got[off:])
				}
			}
		})
	}
}

func TestLast(t *testing.T) {
	e := newEstimator(t, Config{})
	var s State
	if _, ok := s.Last(); ok {
		t.Errorf("zero State: Last ok = true, want false")
	}
	e.Observe(&s, 4, 1)
	e.Advance(&s, 6)
	if last, ok := s.Last(); last != 6 || !ok {
		t.Errorf("Last() = %d, %v, want 6, true", last, ok)
	}
}

// Hold skips intervals without decaying the estimate; Advance over the same
// intervals halves it every HalfLife intervals.
func TestHold(t *testing.T) {
	e := newEstimator(t, Config{})
	for _, tc := range []struct {
		name string
		skip func(s *State, iv int64)
		want func(before float64) (lo, hi float64)
	}{
		{"hold", func(s *State, iv int64) { e.Hold(s, iv) }, func(b float64) (float64, float64) { return b, b }},
		{"advance", func(s *State, iv int64) { e.Advance(s, iv) }, func(b float64) (float64, float64) { return b * 0.2, b * 0.3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s State
			for iv := range int64(30) {
				e.Observe(&s, iv, 100)
			}
			before := s.Estimate()
			tc.skip(&s, 35) // intervals 30..35: six, two half-lives
			if lo, hi := tc.want(before); s.Estimate() < lo || s.Estimate() > hi {
				t.Fatalf("estimate %v after skipping 30..35 from %v, want in [%v, %v]", s.Estimate(), before, lo, hi)
			}
			if last, _ := s.Last(); last != 35 {
				t.Fatalf("Last() = %d, want 35", last)
			}
			if tc.name == "hold" {
				e.Observe(&s, 36, 100)
				if s.Estimate() != before {
					t.Fatalf("estimate %v after holding and observing the same level, want %v", s.Estimate(), before)
				}
			}
		})
	}
}
