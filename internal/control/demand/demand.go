package demand

import (
	"errors"
	"fmt"
	"math"
)

// Defaults for the zero fields of Config.
const (
	DefaultHalfLife  = 3
	DefaultDeadband  = 0.05
	DefaultMinChange = 0.005
	DefaultConfirm   = 2
)

// MaxConfirm is the largest Config.Confirm.
const MaxConfirm = 8

// MaxOffered is the largest observation; larger ones (and +Inf) count as
// MaxOffered, so that sums of observations stay finite.
const MaxOffered = 1e12

// The estimator's constants, fixed because they follow from the statistics
// rather than from the deployment.
const (
	// stepNoise is the step threshold in units of the noise (the
	// observations' mean absolute deviation from the mean): 5 deviations
	// are 4 standard deviations of Gaussian noise.
	stepNoise = 5
	// stepContinue is the part of the threshold beyond which observations
	// are held back as a possible step; the held-back observations' mean
	// must then pass the whole threshold. So a step is recognised even when
	// noise at the new level pulls one observation back a little, while
	// noise alone needs two deviations of 3σ or more on the same side,
	// averaging 4σ, to pass for a step: about once in 10^8 intervals, and
	// once in 10^6 when the noise estimate runs 20% low.
	stepContinue = 0.75
	// stepNoiseCap bounds the noise part of the step threshold to this
	// fraction of the mean, so that demand doubling or stopping is
	// detected however noisy it is (a few requests per interval), at the
	// price of an occasional false step there.
	stepNoiseCap = 0.8
	// transitionNoise: the first observation of a step's run is set aside
	// as transitional when it lies between the old level and the rest of
	// the run, and further from the rest than this many times the noise's
	// mean absolute deviation (scaled to the new level) — about 2.4
	// standard deviations: noise alone seldom puts it there, and when it
	// does, leaving out one good observation costs little.
	transitionNoise = 3
	// slowFactor is how much slower the mean is than the fast average: its
	// half-life is slowFactor × HalfLife (12 intervals by default).
	slowFactor = 4
	// devFactor is how much slower the noise estimate is than the fast
	// average: with a half-life of 16 × 3 intervals, its own relative
	// standard deviation is under 10%, so the step threshold does not sink
	// into the noise with it.
	devFactor = 16
	// pubSigmas, slowSigmas and fastSigmas size the publication bands, in
	// standard deviations of the noise in the published estimate (the mean
	// of the settling observations), in the slow mean and in the fast
	// average. The published estimate's error is fixed until it changes,
	// while the averages take a new independent look every 2/weight
	// intervals (about 40 and 10), so the bands add the errors rather than
	// their root sum of squares: noise alone then crosses a band about once
	// in 10^5 looks of the slow mean, and less for the fast average.
	pubSigmas  = 4
	slowSigmas = 4
	fastSigmas = 5
)

// ErrConfig is wrapped by Config.Validate's errors.
var ErrConfig = errors.New("demand: invalid config")

// Config configures an Estimator. The zero value is usable: every zero
// field takes its default.
//
// Observations are in the caller's unit; the coordinator feeds fractions of
// the entry's global limit per interval (offered count ÷ the limit's count
// per interval), so that estimates are allocate.DC demands directly, and
// MinChange's default assumes that unit.
type Config struct {
	// HalfLife is the smoothing half-life in intervals: an observation's
	// weight in the fast average halves every HalfLife intervals (in the
	// mean, every 4 × HalfLife), and the estimate of a DC that stops
	// reporting halves every HalfLife intervals. It is a count of intervals
	// rather than a time.Duration because the estimator never sees time,
	// only numbered intervals. Default 3.
	HalfLife float64
	// Deadband is the relative change of the averages, from the published
	// estimate, below which the estimate is not republished; it is also the
	// smallest relative step the step detector reacts to. Default 0.05
	// (5%).
	Deadband float64
	// MinChange is the absolute change below which the estimate is never
	// republished, however small the estimate: changes of demand below it
	// do not matter to the shares. Default 0.005 (0.5% of the limit).
	MinChange float64
	// Confirm is how many consecutive observations on the same side, each
	// beyond three quarters of the step threshold and on average beyond
	// all of it, confirm a step. 1 reacts to a single outlier; each more
	// costs an interval of reaction time. Default 2, at most MaxConfirm.
	Confirm int
}

// Validate reports whether c is usable. Its errors wrap ErrConfig.
func (c Config) Validate() error {
	switch {
	case !(c.HalfLife >= 0) || math.IsInf(c.HalfLife, 1):
		return fmt.Errorf("%w: HalfLife %v, want a finite number of intervals >= 0", ErrConfig, c.HalfLife)
	case !(c.Deadband >= 0 && c.Deadband < 1):
		return fmt.Errorf("%w: Deadband %v, want in [0, 1)", ErrConfig, c.Deadband)
	case !(c.MinChange >= 0) || math.IsInf(c.MinChange, 1):
		return fmt.Errorf("%w: MinChange %v, want a finite number >= 0", ErrConfig, c.MinChange)
	case c.Confirm < 0 || c.Confirm > MaxConfirm:
		return fmt.Errorf("%w: Confirm %d, want in [0, %d]", ErrConfig, c.Confirm, MaxConfirm)
	}
	return nil
}

// Estimator holds a configuration and updates States with it. It is
// immutable and safe for concurrent use (on distinct States). Create it with
// New.
type Estimator struct {
	cfg        Config
	alpha      float64 // weight of a new observation in the fast average
	slowAlpha  float64 // weight of a new observation in the mean
	devAlpha   float64 // weight of a new sample in the noise
	keep       float64 // 1 - alpha: the decay per interval without a report
	settle     int32   // observations after a (re)start during which the noise is not trusted for steps
	slowSettle int32   // observations after a (re)start during which the mean is their plain mean, and the estimate follows it
	slowBand   float64 // publication band around the mean, per unit of mean absolute deviation
	fastBand   float64 // publication band around the fast average, likewise
}

// New returns an Estimator for cfg.
func New(cfg Config) (*Estimator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.HalfLife == 0 {
		cfg.HalfLife = DefaultHalfLife
	}
	if cfg.Deadband == 0 {
		cfg.Deadband = DefaultDeadband
	}
	if cfg.MinChange == 0 {
		cfg.MinChange = DefaultMinChange
	}
	if cfg.Confirm == 0 {
		cfg.Confirm = DefaultConfirm
	}
	e := &Estimator{cfg: cfg}
	e.keep = math.Exp2(-1 / cfg.HalfLife)
	e.alpha = 1 - e.keep
	e.slowAlpha = e.alpha / slowFactor
	e.devAlpha = e.alpha / devFactor
	// A plain mean weighs each observation 1/n; an EWMA takes over once 1/n
	// falls below its weight.
	e.settle = int32(math.Min(math.Ceil(1/e.alpha), 1<<20))
	e.slowSettle = int32(math.Min(math.Ceil(1/e.slowAlpha), 1<<20))
	// Gaussian noise of standard deviation σ has mean absolute deviation
	// σ·√(2/π). An EWMA of weight a has standard deviation σ·√(a/(2−a));
	// the published estimate, about the mean of the settling observations,
	// σ/√slowSettle.
	pub := pubSigmas / math.Sqrt(float64(e.slowSettle))
	ewma := func(a float64) float64 { return math.Sqrt(a / (2 - a)) }
	e.slowBand = math.Sqrt(math.Pi/2) * (pub + slowSigmas*ewma(e.slowAlpha))
	e.fastBand = math.Sqrt(math.Pi/2) * (pub + fastSigmas*ewma(e.alpha))
	return e, nil
}

// Config returns the configuration in force, defaults filled in.
func (e *Estimator) Config() Config { return e.cfg }

// State is one DC's demand estimate for one entry. The zero value has seen
// no observation and estimates 0. A State is updated only through an
// Estimator, always the same one; it is a value without pointers, so a
// coordinator keeps States in flat slices.
type State struct {
	fast      float64 // EWMA of weight alpha (a plain mean while settling): follows ramps for publication
	mean      float64 // EWMA of weight slowAlpha (a plain mean while settling): the step detector's reference, and what is published
	dev       float64 // the noise: EWMA of |observation − previous observation|/√2, each clipped to the step threshold
	published float64 // the estimate
	runSum    float64 // sum of the held-back observations
	prev      float64 // the previous observation
	last      int64   // the last interval accounted for
	n         int32   // observations since the last (re)start, saturated at slowSettle
	run       int8    // held-back observations: +k above the mean, −k below
	devN      uint8   // samples in dev, saturated
	started   bool
	tentative int8 // direction of the step just made, until the next observation; 0 when none
}

// Estimate returns the published estimate.
func (s *State) Estimate() float64 { return s.published }

// Smoothed returns the mean behind the estimate, for display.
func (s *State) Smoothed() float64 { return s.mean }

// Last returns the last interval accounted for, and false when there has
// been no observation yet.
func (s *State) Last() (int64, bool) { return s.last, s.started }

// Observe accounts for the offered demand observed in interval and reports
// whether the published estimate changed. Intervals between the last one
// accounted for and this one count as missing (see Advance). An observation
// for an interval already accounted for — a duplicate, or a report that
// arrived after Advance closed its interval — is ignored, as is one that is
// negative or NaN; values above MaxOffered count as MaxOffered.
func (e *Estimator) Observe(s *State, interval int64, offered float64) (changed bool) {
	if !(offered >= 0) {
		return false
	}
	offered = min(offered, MaxOffered)
	if !s.started {
		*s = State{fast: offered, mean: offered, prev: offered, last: interval, n: 1, started: true}
		s.published = e.snap(offered)
		return s.published != 0
	}
	if interval <= s.last {
		return false
	}
	old := s.published
	if gap := interval - s.last - 1; gap > 0 {
		e.flush(s)
		e.decay(s, gap)
	}
	s.last = interval
	stepped := e.step(s, offered)
	e.noise(s, offered)
	if !stepped {
		e.publish(s)
	}
	return s.published != old
}

// noise weighs observation x into the noise estimate, after the step
// detector has judged x against the noise as it was. The noise is measured
// between consecutive observations — |x − prev|/√2 has the mean absolute
// deviation of the noise as its mean — rather than from an average, so that
// a level shift, however persistent, counts once (clipped to the step
// threshold) and not at every observation until the averages catch up.
func (e *Estimator) noise(s *State, x float64) {
	if s.devN < math.MaxUint8 {
		s.devN++
	}
	sample := min(math.Abs(x-s.prev)/math.Sqrt2, e.threshold(s))
	s.dev += max(e.devAlpha, 1/float64(s.devN)) * (sample - s.dev)
	s.prev = x
}

// Advance accounts for every interval up to and including interval that has
// no observation — the DC sent no report, or it is too late — and reports
// whether the published estimate changed. Each missing interval multiplies
// the averages by 2^(−1/HalfLife), as an observation of zero demand would
// the fast average, but without the step detector: a silent DC's estimate
// halves every HalfLife intervals (as the bands let it through) and is
// never dropped at once. Call it only for intervals whose reports are no
// longer expected: a report for an interval already advanced over is
// ignored.
func (e *Estimator) Advance(s *State, interval int64) (changed bool) {
	if !s.started || interval <= s.last {
		return false
	}
	old := s.published
	e.flush(s)
	e.decay(s, interval-s.last)
	s.last = interval
	e.publish(s)
	return s.published != old
}

// Hold accounts for every interval up to and including interval as unseen
// rather than missing: the estimate stays as it is. Use it when the
// observer, not the DC, was blind — no report from any DC reached the
// coordinator for the interval, so the pipeline failed, not the demand;
// decaying every DC's estimate then would move shares away from DCs that
// still have their demand. Held-back observations stay held back. It
// reports nothing: the published estimate does not change.
func (e *Estimator) Hold(s *State, interval int64) {
	if s.started && interval > s.last {
		s.last = interval
	}
}

// threshold is the distance from the mean beyond which an observation may
// be part of a step. Until the noise has been sampled as often as the
// fast average takes to settle, it is not known well yet, and only steps
// of more than stepNoiseCap count. After a step the noise is known (scaled
// to the new level), so a restart that was itself off — from a
// transitional interval, say — is corrected by the next step at once,
// rather than worked off by the plain mean as 1/n.
func (e *Estimator) threshold(s *State) float64 {
	noise := min(stepNoise*s.dev, stepNoiseCap*s.mean)
	if int32(s.devN) < min(e.settle, math.MaxUint8) {
		noise = stepNoiseCap * s.mean
	}
	return max(e.floor(s), noise)
}

// floor is the part of the step threshold that does not depend on the
// noise: the deadband and MinChange.
func (e *Estimator) floor(s *State) float64 {
	return max(e.cfg.Deadband*s.mean, e.cfg.MinChange)
}

// step takes observation x and reports whether it confirmed a step (which
// is then already published). Observations further than stepContinue times
// the threshold from the mean are held back, as a run on their side;
// Confirm or more of them in a row whose mean is beyond the full threshold
// make a step, and so do twice Confirm of them in a row whose mean is beyond
// the deadband and MinChange: noise does not put four observations in a row
// 3σ out on one side, while a shift just short of the threshold does. A run
// that ends otherwise was noise, or a change too small to matter, and is
// weighed in.
func (e *Estimator) step(s *State, x float64) bool {
	if e.retrim(s, x) {
		return true
	}
	d := x - s.mean
	th := e.threshold(s)
	if math.Abs(d) <= stepContinue*th {
		e.flush(s)
		e.update(s, x)
		return false
	}
	dir := int8(1)
	if d < 0 {
		dir = -1
	}
	if s.run*dir < 0 {
		// Held back on the other side: those were noise. Weigh them in,
		// then look at x afresh.
		e.flush(s)
		return e.step(s, x)
	}
	s.run += dir
	s.runSum += x
	k := int32(s.run * dir)
	if k < int32(e.cfg.Confirm) {
		return false
	}
	m := s.runSum / float64(k)
	if d := math.Abs(m - s.mean); d <= th {
		switch {
		case k < 2*int32(e.cfg.Confirm):
			return false
		case d <= e.floor(s):
			// Consistent, but too small to matter.
			e.flush(s)
			return false
		}
	}
	// A step: restart from the mean of the observations that confirmed it,
	// less the first of them when it was a transitional interval (judged
	// with the noise scaled to the level of all of them).
	if first, ok := s.firstHeld(x, k); ok && k > 1 {
		rest := (s.runSum - first) / float64(k-1)
		if (first-s.mean)*(rest-first) > 0 && math.Abs(first-rest) > max(e.cfg.Deadband*rest, e.cfg.MinChange, transitionNoise*scaleNoise(s.dev, s.mean, m)) {
			m, k = rest, k-1
		}
	}
	s.restart(m, k, dir)
	s.published = e.snap(m)
	return true
}

// restart restarts the averages from m, the mean of the k observations
// that made a step in direction dir.
func (s *State) restart(m float64, k int32, dir int8) {
	s.dev = scaleNoise(s.dev, s.mean, m)
	s.fast, s.mean = m, m
	s.n = k
	s.run, s.runSum = 0, 0
	s.tentative = dir
}

// retrim takes the observation x right after a step and reports whether
// it restarted the step from x alone: when x carries on in the step's
// direction further than a transitional interval would lie from the new
// level, the observations the step restarted from were not all at the new
// level — a transitional interval, or noise of the old level held back
// just before the step — and a plain mean would work them off only as
// 1/n. A ramp restarts at every interval this way, following it.
func (e *Estimator) retrim(s *State, x float64) bool {
	dir := s.tentative
	s.tentative = 0
	if dir == 0 {
		return false
	}
	d := x - s.mean
	if d*float64(dir) <= 0 || math.Abs(d) <= max(e.cfg.Deadband*x, e.cfg.MinChange, transitionNoise*scaleNoise(s.dev, s.mean, x)) {
		return false
	}
	s.restart(x, 1, dir)
	s.published = e.snap(x)
	return true
}

// scaleNoise returns the noise dev measured at level from scaled to level
// to: the noise at a new level is not known yet, so it is scaled by the
// ratio of the levels or by its square root, whichever is larger — the
// larger threshold under both multiplicative and Poisson noise. (It then
// adapts at its usual pace: re-learning it fast would take the rest of a
// ramp for noise.)
func scaleNoise(dev, from, to float64) float64 {
	if from <= 0 {
		return dev
	}
	r := to / from
	return dev * max(r, math.Sqrt(r))
}

// firstHeld returns the first of the k held-back observations when it can
// be told from the state: the last one is x, the one before it s.prev (the
// noise estimate records every observation), and the sum of all of them
// s.runSum. When the first was a transitional interval — the step came in
// its middle, so it holds part of the old level and part of the new — it
// lies between the two levels, inconsistent with the rest, and restarting
// from a mean that includes it would leave a bias that a plain mean works
// off only as 1/n: a coordinator would hand out the old share for several
// intervals more.
func (s *State) firstHeld(x float64, k int32) (float64, bool) {
	switch k {
	case 2:
		return s.prev, true
	case 3:
		return s.runSum - x - s.prev, true
	}
	return 0, false
}

// update weighs observation x into the averages. Since the last (re)start,
// each is the plain mean of the observations until its EWMA weight is the
// larger.
func (e *Estimator) update(s *State, x float64) {
	if s.n < e.slowSettle {
		s.n++
	}
	n := float64(s.n)
	s.fast = max(0, s.fast+max(e.alpha, 1/n)*(x-s.fast))
	s.mean = max(0, s.mean+max(e.slowAlpha, 1/n)*(x-s.mean))
}

// flush weighs in the held-back observations, which did not make a step:
// each as their mean, clipped to the step threshold, so that a lone outlier
// moves the averages no more than an observation at the threshold would.
func (e *Estimator) flush(s *State) {
	if s.run == 0 {
		return
	}
	k := int(s.run)
	if k < 0 {
		k = -k
	}
	m := s.runSum / float64(k)
	s.run, s.runSum = 0, 0
	for range k {
		th := e.threshold(s)
		e.update(s, max(s.mean-th, min(m, s.mean+th)))
	}
}

// decay accounts for gap intervals without a report.
func (e *Estimator) decay(s *State, gap int64) {
	f := math.Pow(e.keep, float64(gap))
	s.fast *= f
	s.mean *= f
	s.tentative = 0
}

// publish republishes when the mean, or the fast average, has left its band
// around the published estimate. While settling — as long as the mean is a
// plain mean of the observations since the (re)start — the band is only a
// quarter of the deadband (and of MinChange), so the published estimate
// follows that mean, in steps that shrink as it converges, and ends close
// enough to the truth that noise does not carry the mean out of the full
// band later.
func (e *Estimator) publish(s *State) {
	if e.snap(s.mean) == 0 {
		s.published = 0
		return
	}
	floor := max(e.cfg.MinChange, e.cfg.Deadband*s.published)
	switch {
	case s.n < e.slowSettle:
		if math.Abs(s.mean-s.published) > floor/4 {
			s.published = s.mean
		}
	case math.Abs(s.mean-s.published) > max(floor, e.slowBand*s.dev):
		s.published = s.mean
	case math.Abs(s.fast-s.published) > max(floor, e.fastBand*s.dev):
		s.published = e.snap(s.fast)
	}
}

// snap returns v, or 0 when v is below MinChange/2. Coming back from 0 needs
// more than MinChange, so a demand near MinChange/2 does not flicker.
func (e *Estimator) snap(v float64) float64 {
	if v < e.cfg.MinChange/2 {
		return 0
	}
	return v
}
