package scenario

import (
	"math"
	"sort"
	"time"
)

// Curve is a base rate curve: requests per second as a function of the
// time since the start of the run. The implementations are Constant,
// Steps, Ramp and Diurnal; the set is closed so that Validate knows every
// curve. Rate is pure and safe for concurrent use.
type Curve interface {
	// Rate returns the rate at t, in requests per second. Only a Diurnal
	// whose amplitude exceeds its mean can return a negative rate;
	// Flow.Rate clips the total at 0.
	Rate(t time.Duration) float64
	// validate reports the curve's problems under path, the flow's.
	validate(r *report, path string)
}

// Constant is a constant rate (YAML: `rate: 300`).
type Constant float64

// Rate returns c at every t.
func (c Constant) Rate(time.Duration) float64 { return float64(c) }

// Step is one level of a Steps curve: Rate from At until the next step.
type Step struct {
	// At is when the level starts, from the start of the run.
	At time.Duration
	// Rate is the level, in requests per second.
	Rate float64
}

// Steps is a piecewise constant rate (YAML:
// `steps: [{at: 0s, rate: 600}, {at: 30s, rate: 30}]`): each step's rate
// holds from its At until the next step's, the last one's until the end of
// the run. Before the first step the rate is 0. Steps are in strictly
// increasing order of At.
type Steps []Step

// Rate returns the rate of the last step at or before t, or 0 before the
// first.
func (s Steps) Rate(t time.Duration) float64 {
	i := sort.Search(len(s), func(i int) bool { return s[i].At > t })
	if i == 0 {
		return 0
	}
	return s[i-1].Rate
}

// Ramp moves linearly from one rate to another (YAML:
// `ramp: {from: 0, to: 600, start: 10s, end: 40s}`): From until Start, To
// from End on, and on the straight line between them in between.
type Ramp struct {
	From, To   float64
	Start, End time.Duration
}

// Rate returns the ramp's rate at t.
func (r Ramp) Rate(t time.Duration) float64 {
	switch {
	case t <= r.Start:
		return r.From
	case t >= r.End:
		return r.To
	}
	f := float64(t-r.Start) / float64(r.End-r.Start)
	return r.From + (r.To-r.From)*f
}

// Diurnal is a sine wave, a day compressed into Period (YAML:
// `diurnal: {mean: 300, amplitude: 200, period: 60s, phase: 0s}`):
//
//	Mean + Amplitude × sin(2π (t − Phase) / Period)
//
// so the rate is at its mean and rising at t = Phase, at its peak a
// quarter of a period later.
type Diurnal struct {
	Mean, Amplitude float64
	Period, Phase   time.Duration
}

// Rate returns the wave's value at t, which is negative where Amplitude
// exceeds Mean and the wave dips below 0.
func (d Diurnal) Rate(t time.Duration) float64 {
	x := 2 * math.Pi * float64(t-d.Phase) / float64(d.Period)
	return d.Mean + d.Amplitude*math.Sin(x)
}

// Flash is a flash crowd added to a flow's base curve (YAML:
// `flash: {at: 20s, peak: 2000, rise: 1s, decay: 5s}`): 0 before At, then
// rising linearly to Peak over Rise, then falling linearly back to 0 over
// Decay, and 0 after that. A zero Rise jumps to Peak at At; a zero Decay
// drops to 0 at once.
type Flash struct {
	At          time.Duration
	Peak        float64
	Rise, Decay time.Duration
}

// Rate returns the extra rate of the flash crowd at t.
func (f Flash) Rate(t time.Duration) float64 {
	switch {
	case t < f.At:
		return 0
	case t < f.At+f.Rise:
		return f.Peak * float64(t-f.At) / float64(f.Rise)
	case t < f.At+f.Rise+f.Decay:
		return f.Peak * (1 - float64(t-f.At-f.Rise)/float64(f.Decay))
	}
	return 0
}

// Noise says how a flow's requests are spread in time.
type Noise string

// The kinds of noise.
const (
	// NoiseEven paces requests evenly at the instantaneous rate (the
	// default; YAML: `noise: even`, or no noise field).
	NoiseEven Noise = "even"
	// NoisePoisson draws requests as a Poisson process at the
	// instantaneous rate (YAML: `noise: poisson`).
	NoisePoisson Noise = "poisson"
)
