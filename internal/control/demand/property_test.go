package demand_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/control/demand"
	"github.com/weirhq/weir/pkg/allocate"
)

// noise draws an observation around mean.
type noise struct {
	name string
	draw func(r *rand.Rand, mean float64) float64
}

// poissonNoise draws a count from a Poisson distribution whose mean at 1.0
// (the whole limit) is perLimit, as a fraction of perLimit; at mean m its
// relative standard deviation is 1/√(m·perLimit).
func poissonNoise(perLimit float64) func(*rand.Rand, float64) float64 {
	return func(r *rand.Rand, m float64) float64 { return float64(poisson(r, m*perLimit)) / perLimit }
}

// steadyNoises are "±10%" noises: uniform in ±10%, or Gaussian or Poisson
// with ±10% as two standard deviations (Poisson: 400 requests per interval
// at the smallest mean, so perLimit is set per scenario).
func steadyNoises(smallest float64) []noise {
	return []noise{
		{"uniform ±10%", func(r *rand.Rand, m float64) float64 { return m * (1 + 0.1*(2*r.Float64()-1)) }},
		{"Gaussian σ=5%", func(r *rand.Rand, m float64) float64 { return max(0, m*(1+0.05*r.NormFloat64())) }},
		{"Poisson ≥400/interval", poissonNoise(400 / smallest)},
	}
}

// roughNoises have a standard deviation of 10%: Gaussian, and Poisson with
// 100 requests per interval at the mean before a step.
func roughNoises(before float64) []noise {
	return []noise{
		{"uniform ±10%", func(r *rand.Rand, m float64) float64 { return m * (1 + 0.1*(2*r.Float64()-1)) }},
		{"Gaussian σ=10%", func(r *rand.Rand, m float64) float64 { return max(0, m*(1+0.1*r.NormFloat64())) }},
		{"Poisson 100/interval", poissonNoise(100 / before)},
	}
}

// poisson draws from a Poisson distribution of mean lambda: by Knuth's
// method on pieces of at most 20 up to 1,000, by the normal approximation
// beyond.
func poisson(r *rand.Rand, lambda float64) int {
	if lambda > 1000 {
		return max(0, int(math.Round(lambda+math.Sqrt(lambda)*r.NormFloat64())))
	}
	n := 0
	for lambda > 0 {
		l := min(lambda, 20)
		lambda -= l
		limit, p := math.Exp(-l), r.Float64()
		for p > limit {
			n++
			p *= r.Float64()
		}
	}
	return n
}

func newEstimator(t testing.TB) *demand.Estimator {
	t.Helper()
	e, err := demand.New(demand.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var steadyScenarios = []struct {
	name  string
	means []float64
}{
	{"congested", []float64{0.5, 0.3, 0.4}},
	{"below the limit", []float64{0.2, 0.1, 0.3}},
	{"one DC dominant, two small", []float64{0.9, 0.02, 0.05}},
}

// runSteady feeds the DCs' means with noise for warmup+intervals intervals
// and returns, after the warm-up, the most changes of one DC's estimate and
// the largest move of a share from one interval to the next, and how many
// intervals had a share move by more than 1% of the limit.
func runSteady(e *demand.Estimator, r *rand.Rand, means []float64, nz noise, warmup, intervals int64) (changes int, worstMove float64, bigMoves int) {
	n := len(means)
	states := make([]demand.State, n)
	dcs := make([]allocate.DC, n)
	shares, prev := make([]float64, n), make([]float64, n)
	perDC := make([]int, n)
	for iv := range warmup + intervals {
		for i, m := range means {
			if e.Observe(&states[i], iv, nz.draw(r, m)) && iv >= warmup {
				perDC[i]++
			}
			dcs[i].Demand = states[i].Estimate()
		}
		allocate.Allocate(dcs, shares)
		if iv > warmup {
			move := 0.0
			for i := range shares {
				move = max(move, math.Abs(shares[i]-prev[i]))
			}
			worstMove = max(worstMove, move)
			if move > 0.01 {
				bigMoves++
			}
		}
		copy(prev, shares)
	}
	for _, c := range perDC {
		changes = max(changes, c)
	}
	return changes, worstMove, bigMoves
}

// TestNoOscillation feeds three DCs steady demand with ±10% noise and
// checks, after a warm-up of 30 intervals, that over 500 intervals each
// published estimate changes at most a few times and that the shares
// Allocate computes from them never move by more than 1% of the limit from
// one interval to the next.
func TestNoOscillation(t *testing.T) {
	const warmup, intervals, seeds = 30, 500, 20
	const maxChanges = 3
	e := newEstimator(t)
	for _, sc := range steadyScenarios {
		for _, nz := range steadyNoises(slices.Min(sc.means)) {
			t.Run(sc.name+"/"+nz.name, func(t *testing.T) {
				worstChanges, worstMove := 0, 0.0
				for seed := range uint64(seeds) {
					r := rand.New(rand.NewPCG(seed, 99))
					changes, move, _ := runSteady(e, r, sc.means, nz, warmup, intervals)
					if changes > maxChanges {
						t.Errorf("seed %d: a DC's estimate changed %d times in %d intervals, want at most %d", seed, changes, intervals, maxChanges)
					}
					if move > 0.01 {
						t.Errorf("seed %d: a share moved by %.4f of the limit between intervals, want at most 0.01", seed, move)
					}
					worstChanges, worstMove = max(worstChanges, changes), max(worstMove, move)
				}
				t.Logf("over %d seeds: at most %d changes of a DC's estimate, shares moved at most %.4f per interval", seeds, worstChanges, worstMove)
			})
		}
	}
}

// TestNoOscillationRough does the same with noise of 10% standard
// deviation, where the step detector and the publication bands work closer
// to the noise: a rare false step or republication is allowed, but
// no back-and-forth: at most 5 changes of an estimate in 500 intervals, and
// shares moving by more than 1% in at most 1% of the intervals.
func TestNoOscillationRough(t *testing.T) {
	const warmup, intervals, seeds = 30, 500, 20
	e := newEstimator(t)
	for _, sc := range steadyScenarios {
		for _, nz := range roughNoises(slices.Min(sc.means)) {
			t.Run(sc.name+"/"+nz.name, func(t *testing.T) {
				worstChanges, worstMove, big := 0, 0.0, 0
				for seed := range uint64(seeds) {
					r := rand.New(rand.NewPCG(seed, 98))
					changes, move, bigMoves := runSteady(e, r, sc.means, nz, warmup, intervals)
					if changes > 5 {
						t.Errorf("seed %d: a DC's estimate changed %d times in %d intervals, want at most 5", seed, changes, intervals)
					}
					worstChanges, worstMove, big = max(worstChanges, changes), max(worstMove, move), big+bigMoves
				}
				if big > seeds*intervals/100 {
					t.Errorf("shares moved by more than 1%% in %d of %d intervals, want at most 1%%", big, seeds*intervals)
				}
				t.Logf("over %d seeds: at most %d changes of a DC's estimate; shares moved by more than 1%% in %d of %d intervals, at most %.4f",
					seeds, worstChanges, big, seeds*intervals, worstMove)
			})
		}
	}
}

// TestStepResponse checks that after a step of demand the estimate is
// within 5% of the new level (or MinChange, for levels so small that 5% is
// less) by the third observation (the second without noise), up and down,
// for steps from 4% to ×10 and to and from zero. With noise, a step within
// the deadband plus the noise may go unpublished: the estimate is then
// within 10% of the new level.
func TestStepResponse(t *testing.T) {
	factors := []float64{0, 0.1, 0.5, 0.8, 0.94, 0.96, 1.04, 1.06, 1.25, 2, 10}
	e := newEstimator(t)
	for _, jitter := range []float64{0, 0.02} {
		for _, f := range factors {
			t.Run(fmt.Sprintf("jitter %v/×%v", jitter, f), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(f*1000), uint64(jitter*1000)))
				for trial := range 200 {
					old := 0.05 + 2*r.Float64()
					next := old * f
					if trial%10 == 0 { // from zero
						old, next = 0, 0.05+2*r.Float64()
					}
					draw := func(m float64) float64 { return m * (1 + jitter*(2*r.Float64()-1)) }
					var s demand.State
					iv := int64(0)
					for ; iv < 30; iv++ {
						e.Observe(&s, iv, draw(old))
					}
					after := 3
					if jitter == 0 {
						after = 2
					}
					for k := range after {
						e.Observe(&s, iv+int64(k), draw(next))
					}
					got := s.Estimate()
					rel := 0.05
					if jitter > 0 && math.Abs(f-1) < 0.05+2*jitter {
						rel = 0.1
					}
					if math.Abs(got-next) > max(rel*next, e.Config().MinChange)+1e-12 {
						t.Fatalf("trial %d: %v → %v: estimate %v after %d observations, want within %v%%", trial, old, next, got, after, rel*100)
					}
				}
			})
		}
	}
}

// TestStepResponseNoisy checks steps under noise of 10% standard
// deviation, after a warm-up of 60 intervals: steps of six standard
// deviations or more (×0.4, ×0.3, to 0, ×2, ×3; halving is only five) are
// published by the third observation — the estimate has moved past halfway
// — in at least 99% of the trials, and the estimate is then on average
// within 6% of the new level (for Poisson noise, 0.6 standard deviations of
// the noise at the new level, where it is larger): a couple of observations
// with 10% noise allow no better.
func TestStepResponseNoisy(t *testing.T) {
	e := newEstimator(t)
	const warmup = 60
	for _, f := range []float64{0, 0.3, 0.4, 2, 3} {
		for i := range roughNoises(1) {
			r := rand.New(rand.NewPCG(uint64(f*10), uint64(i)))
			const trials = 1000
			errSum, missed := 0.0, 0
			name := ""
			for trial := range trials {
				old := 0.2 + 0.6*r.Float64()
				next := old * f
				nz := roughNoises(old)[i]
				name = nz.name
				var s demand.State
				var xs []float64
				for iv := range int64(warmup + 3) {
					m := old
					if iv >= warmup {
						m = next
					}
					xs = append(xs, nz.draw(r, m))
					e.Observe(&s, iv, xs[iv])
				}
				got := s.Estimate()
				if math.Abs(got-next) > math.Abs(old-next)/2 {
					missed++
					t.Logf("%s trial %d: %v → %v: estimate %v after 3 observations, not past halfway; observations %v", name, trial, old, next, got, xs)
					continue
				}
				if next > 0 {
					errSum += math.Abs(got-next) / next
				} else if got != 0 {
					t.Errorf("%s trial %d: %v → 0: estimate %v after 3 observations, want 0", name, trial, old, got)
				}
			}
			mean := errSum / float64(trials-missed)
			if missed > trials/100 {
				t.Errorf("%s ×%v: %d of %d steps not past halfway after 3 observations, want at most 1%%", name, f, missed, trials)
			}
			wantErr := 0.06
			if strings.HasPrefix(name, "Poisson") && f > 0 {
				wantErr = max(wantErr, 0.6/math.Sqrt(100*f))
			}
			if mean > wantErr {
				t.Errorf("%s ×%v: mean relative error %.4f after 3 observations, want at most %.3f", name, f, mean, wantErr)
			}
			t.Logf("%s ×%v: %d of %d steps not past halfway; mean relative error of the others %.4f after 3 observations", name, f, missed, trials, mean)
		}
	}
}

// TestDemandMovesBetweenDCs is the combined test: two DCs, demand moves from
// one to the other, and the shares Allocate computes from the estimates are
// within 5% of the max-min fair shares of the true demand three intervals
// after the move.
func TestDemandMovesBetweenDCs(t *testing.T) {
	scenarios := []struct {
		name          string
		before, after [2]float64
	}{
		{"congested, moves from a to b", [2]float64{1.5, 0.1}, [2]float64{0.1, 1.5}},
		{"below the limit, moves from a to b", [2]float64{0.6, 0.1}, [2]float64{0.1, 0.6}},
		{"all of it moves from a to b", [2]float64{1.2, 0}, [2]float64{0, 1.2}},
		{"b starts from nothing and takes half", [2]float64{0.8, 0}, [2]float64{0.8, 0.8}},
		{"a stops", [2]float64{0.7, 0.7}, [2]float64{0, 0.7}},
	}
	e := newEstimator(t)
	for _, sc := range scenarios {
		for _, jitter := range []float64{0, 0.02} {
			t.Run(fmt.Sprintf("%s/jitter %v", sc.name, jitter), func(t *testing.T) {
				r := rand.New(rand.NewPCG(1, 1))
				fair := make([]float64, 2)
				allocate.Allocate([]allocate.DC{{Demand: sc.after[0]}, {Demand: sc.after[1]}}, fair)
				for trial := range 50 {
					var states [2]demand.State
					dcs := make([]allocate.DC, 2)
					shares := make([]float64, 2)
					const step = 30
					for iv := range int64(step + 3) {
						means := sc.before
						if iv >= step {
							means = sc.after
						}
						for i := range states {
							e.Observe(&states[i], iv, means[i]*(1+jitter*(2*r.Float64()-1)))
							dcs[i].Demand = states[i].Estimate()
						}
					}
					allocate.Allocate(dcs, shares)
					for i := range shares {
						if math.Abs(shares[i]-fair[i]) > 0.05*fair[i] {
							t.Fatalf("trial %d: 3 intervals after the move, shares %v (estimates %v, %v), want within 5%% of %v",
								trial, shares, dcs[0].Demand, dcs[1].Demand, fair)
						}
					}
				}
			})
		}
	}
}

// TestStepThroughTransitionalInterval: demand steps in the middle of an
// interval, so the first observation after it mixes the old level and the
// new. Three intervals after the step (the mixed one and two at the new
// level) the estimate must be close to the new level — not to the mean of
// the mixed and the new, which a plain mean would work off only slowly.
// Without noise: within 5%. With Poisson noise (the new level's counts):
// mean relative error at most 7%, or 0.8 standard deviations of the noise
// at the new level where that is more (a mean of two or three noisy
// observations allows no better), and at most 1% of the trials not past
// halfway (an outlier just before the step can delay it).
func TestStepThroughTransitionalInterval(t *testing.T) {
	e := newEstimator(t)
	for _, tc := range []struct {
		name      string
		old, next float64
	}{
		{"down ×0.1", 400, 40},
		{"down ×0.3", 300, 90},
		{"up ×3", 60, 180},
		{"up ×10", 40, 400},
	} {
		for _, mix := range []float64{0.2, 0.5, 0.8} {
			for _, noisy := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/old part %v/noise %v", tc.name, mix, noisy), func(t *testing.T) {
					r := rand.New(rand.NewPCG(uint64(tc.old), uint64(mix*10)))
					draw := func(m float64) float64 {
						if !noisy {
							return m
						}
						return float64(poisson(r, m))
					}
					trials := 1
					if noisy {
						trials = 500
					}
					errSum, missed := 0.0, 0
					for trial := range trials {
						var s demand.State
						iv := int64(0)
						for ; iv < 40; iv++ {
							e.Observe(&s, iv, draw(tc.old))
						}
						e.Observe(&s, iv, draw(mix*tc.old+(1-mix)*tc.next))
						e.Observe(&s, iv+1, draw(tc.next))
						e.Observe(&s, iv+2, draw(tc.next))
						got := s.Estimate()
						rel := math.Abs(got-tc.next) / tc.next
						if !noisy && rel > 0.05 {
							t.Fatalf("estimate %v three intervals after %v → %v, want within 5%%", got, tc.old, tc.next)
						}
						if math.Abs(got-tc.next) > math.Abs(tc.old-tc.next)/2 {
							missed++
							t.Logf("trial %d: estimate %v three intervals after %v → %v: not past halfway", trial, got, tc.old, tc.next)
							continue
						}
						errSum += rel
					}
					if missed > trials/100 {
						t.Errorf("%d of %d trials not past halfway three intervals after the step, want at most 1%%", missed, trials)
					}
					if mean, want := errSum/float64(trials-missed), max(0.07, 0.8/math.Sqrt(tc.next)); mean > want {
						t.Errorf("mean relative error %.4f three intervals after the step, want at most %.4f", mean, want)
					}
				})
			}
		}
	}
}

// TestStepAfterOutlierAndTransitional: an outlier of the old level is held
// back just before a step, and the step's first interval is transitional,
// so the step restarts from observations not all at the new level. The
// next observation must correct that restart, not a plain mean work it off
// as 1/n (which took 8 intervals in a simulated takeover: 0.54, 0.39,
// 0.33, 0.31, 0.28… toward 0.21). The first case is that run's
// observations: three after the transitional one, the estimate must be
// within 10% of the new level. The others draw Poisson noise, the outlier
// 4 deviations out; four observations after the transitional one (a
// residual shift below the step threshold takes 2 × Confirm of them): at
// most 1% of the trials not past halfway, and a mean relative error of at
// most 7%, or 0.8 deviations of the noise at the new level where that is
// more, as for TestStepThroughTransitionalInterval.
func TestStepAfterOutlierAndTransitional(t *testing.T) {
	e := newEstimator(t)
	t.Run("simulated takeover", func(t *testing.T) {
		xs := []float64{1.103, 1.053, 1.097, 1.040, 1.040, 1.053, 1.000, 1.010, 1.020, 0.943, 0.540, 0.243, 0.203, 0.237}
		var s demand.State
		for i, x := range xs {
			e.Observe(&s, int64(i), x)
		}
		if got, want := s.Estimate(), 0.221; math.Abs(got-want) > 0.1*want {
			t.Fatalf("estimate %v three observations after the transitional one, want within 10%% of %v", got, want)
		}
	})
	for _, tc := range []struct {
		name           string
		old, mix, next float64
	}{
		{"down ×0.2", 300, 160, 60},
		{"down ×0.5", 300, 220, 150},
		{"up ×3", 60, 120, 180},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(tc.old), uint64(tc.next)))
			const trials = 500
			errSum, missed := 0.0, 0
			for trial := range trials {
				var s demand.State
				iv := int64(0)
				for ; iv < 20; iv++ {
					e.Observe(&s, iv, float64(poisson(r, tc.old)))
				}
				outlier := tc.old - 4*math.Sqrt(tc.old)
				if tc.next > tc.old {
					outlier = tc.old + 4*math.Sqrt(tc.old)
				}
				xs := []float64{outlier, float64(poisson(r, tc.mix))}
				for range 4 {
					xs = append(xs, float64(poisson(r, tc.next)))
				}
				for _, x := range xs {
					e.Observe(&s, iv, x)
					iv++
				}
				got := s.Estimate()
				if math.Abs(got-tc.next) > math.Abs(tc.old-tc.next)/2 {
					missed++
					t.Logf("trial %d: observations …%v: estimate %v, not past halfway to %v", trial, xs, got, tc.next)
					continue
				}
				errSum += math.Abs(got-tc.next) / tc.next
			}
			if missed > trials/100 {
				t.Errorf("%d of %d trials not past halfway four observations after the transitional one, want at most 1%%", missed, trials)
			}
			if mean, want := errSum/float64(trials-missed), max(0.07, 0.8/math.Sqrt(tc.next)); mean > want {
				t.Errorf("mean relative error %.4f four observations after the transitional one, want at most %.4f", mean, want)
			}
		})
	}
}
