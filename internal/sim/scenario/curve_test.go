package scenario_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/sim/scenario"
)

func TestFlowRate(t *testing.T) {
	s := time.Second
	ms := time.Millisecond
	steps := scenario.Steps{{At: 5 * s, Rate: 600}, {At: 30 * s, Rate: 30}}
	ramp := scenario.Ramp{From: 100, To: 700, Start: 10 * s, End: 40 * s}
	diurnal := scenario.Diurnal{Mean: 300, Amplitude: 200, Period: 60 * s, Phase: 15 * s}
	flash := &scenario.Flash{At: 20 * s, Peak: 2000, Rise: s, Decay: 4 * s}
	tests := []struct {
		name string
		flow scenario.Flow
		at   time.Duration
		want float64
	}{
		{"constant", scenario.Flow{Base: scenario.Constant(300)}, 17 * s, 300},
		{"no curve", scenario.Flow{}, 0, 0},
		{"steps before the first", scenario.Flow{Base: steps}, 4999 * ms, 0},
		{"steps at the first", scenario.Flow{Base: steps}, 5 * s, 600},
		{"steps inside", scenario.Flow{Base: steps}, 29999 * ms, 600},
		{"steps at the second", scenario.Flow{Base: steps}, 30 * s, 30},
		{"steps after the last", scenario.Flow{Base: steps}, time.Hour, 30},
		{"ramp before", scenario.Flow{Base: ramp}, 0, 100},
		{"ramp at start", scenario.Flow{Base: ramp}, 10 * s, 100},
		{"ramp a third of the way", scenario.Flow{Base: ramp}, 20 * s, 300},
		{"ramp at end", scenario.Flow{Base: ramp}, 40 * s, 700},
		{"ramp after", scenario.Flow{Base: ramp}, 50 * s, 700},
		{"ramp down", scenario.Flow{Base: scenario.Ramp{From: 600, To: 0, Start: 0, End: 60 * s}}, 15 * s, 450},
		{"diurnal at its phase", scenario.Flow{Base: diurnal}, 15 * s, 300},
		{"diurnal at its peak", scenario.Flow{Base: diurnal}, 30 * s, 500},
		{"diurnal at its trough", scenario.Flow{Base: diurnal}, 60 * s, 100},
		{"diurnal a period later", scenario.Flow{Base: diurnal}, 90 * s, 500},
		{"diurnal clipped at 0", scenario.Flow{Base: scenario.Diurnal{Mean: 100, Amplitude: 300, Period: 4 * s}}, 3 * s, 0},
		{"flash before", scenario.Flow{Flash: flash}, 19999 * ms, 0},
		{"flash rising", scenario.Flow{Flash: flash}, 20500 * ms, 1000},
		{"flash at its peak", scenario.Flow{Flash: flash}, 21 * s, 2000},
		{"flash decaying", scenario.Flow{Flash: flash}, 24 * s, 500},
		{"flash over", scenario.Flow{Flash: flash}, 25 * s, 0},
		{"flash without rise jumps", scenario.Flow{Flash: &scenario.Flash{At: s, Peak: 10, Decay: s}}, s, 10},
		{"flash without decay drops", scenario.Flow{Flash: &scenario.Flash{At: s, Peak: 10, Rise: s}}, 2 * s, 0},
		{"base plus flash", scenario.Flow{Base: scenario.Constant(300), Flash: flash}, 21 * s, 2300},
		{"steps plus flash", scenario.Flow{Base: steps, Flash: flash}, 22 * s, 600 + 1500},
		{"diurnal plus flash, clipped after", scenario.Flow{Base: scenario.Diurnal{Mean: 0, Amplitude: 100, Period: 4 * s}, Flash: &scenario.Flash{At: 0, Peak: 50, Decay: 10 * s}}, 3 * s, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.flow.Rate(tt.at); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("Rate(%v) = %v, want %v", tt.at, got, tt.want)
			}
		})
	}
}

// randomFlow returns a valid flow with random curves.
func randomFlow(rng *rand.Rand) scenario.Flow {
	d := func(max time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(max))) }
	r := func() float64 { return rng.Float64() * 1000 }
	var f scenario.Flow
	switch rng.IntN(5) {
	case 0:
		f.Base = scenario.Constant(r())
	case 1:
		var st scenario.Steps
		at := d(5 * time.Second)
		for range 1 + rng.IntN(6) {
			st = append(st, scenario.Step{At: at, Rate: r()})
			at += time.Millisecond + d(10*time.Second)
		}
		f.Base = st
	case 2:
		start := d(20 * time.Second)
		f.Base = scenario.Ramp{From: r(), To: r(), Start: start, End: start + time.Millisecond + d(20*time.Second)}
	case 3:
		f.Base = scenario.Diurnal{Mean: r(), Amplitude: r(), Period: time.Millisecond + d(time.Minute), Phase: d(time.Minute)}
	}
	if f.Base == nil || rng.IntN(2) == 0 {
		f.Flash = &scenario.Flash{At: d(30 * time.Second), Peak: 1 + r(), Rise: d(3 * time.Second), Decay: time.Millisecond + d(5*time.Second)}
	}
	return f
}

func TestFlowRateProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		f := randomFlow(rng)
		for at := time.Duration(0); at < time.Minute; at += 37 * time.Millisecond {
			v := f.Rate(at)
			if !(v >= 0) || math.IsInf(v, 0) {
				t.Fatalf("flow %d %+v: Rate(%v) = %v, want a finite rate ≥ 0", i, f, at, v)
			}
			if f.Rate(at) != v {
				t.Fatalf("flow %d: Rate(%v) is not repeatable", i, at)
			}
		}
	}
}

func TestStepsPiecewiseConstant(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 200 {
		var st scenario.Steps
		at := time.Duration(rng.Int64N(int64(5 * time.Second)))
		for range 1 + rng.IntN(8) {
			st = append(st, scenario.Step{At: at, Rate: rng.Float64() * 500})
			at += time.Millisecond + time.Duration(rng.Int64N(int64(10*time.Second)))
		}
		f := scenario.Flow{Base: st}
		// Between two step times the rate is the earlier step's, at every
		// point sampled; before the first it is 0.
		for _, probe := range []time.Duration{0, st[0].At - 1} {
			if probe >= 0 && probe < st[0].At && f.Rate(probe) != 0 {
				t.Fatalf("steps %d: Rate(%v) = %v before the first step, want 0", i, probe, f.Rate(probe))
			}
		}
		for j, s := range st {
			end := s.At + time.Minute
			if j+1 < len(st) {
				end = st[j+1].At
			}
			for k := range 20 {
				probe := s.At + (end-s.At)*time.Duration(k)/20
				if got := f.Rate(probe); got != s.Rate {
					t.Fatalf("steps %d: Rate(%v) = %v inside step %d, want %v", i, probe, got, j, s.Rate)
				}
			}
		}
	}
}

func TestPoissonPreserved(t *testing.T) {
	for _, tt := range []struct {
		noise string
		want  bool
	}{{"", false}, {"noise: even,", false}, {"noise: poisson,", true}} {
		t.Run(tt.noise, func(t *testing.T) {
			s, err := scenario.Parse([]byte(flow(t, "{"+tt.noise+" dc: dc-a, rule: total, attributes: {path: /total}, rate: 5}")))
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Traffic[0].Poisson(); got != tt.want {
				t.Errorf("got Poisson() %v, want %v", got, tt.want)
			}
		})
	}
}
