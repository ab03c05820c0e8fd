package planner

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/rule"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// world plays requests around a sim: every DC decides them with the rule's
// algorithm (package algorithm, as its store does) against the local limit
// in force, reports what it offered, admitted and consumed, and the world
// checks after every step the safety invariant in the algorithm's own
// measure: the admissions of the DCs together in every window of length W
// (sliding window log), in every aligned window (fixed window), their
// weighted counts summed (sliding window counter), and for the buckets
// their contract — every admission of every DC poured into one bucket of
// the rule's, in units of the limit — never above the limit.
type world struct {
	*sim
	key   string // the entry the demand hits: "" the rule, else one key
	st    map[string]algorithm.State
	carry map[string]float64 // fractional demand not yet offered
	ivl   map[string]*weirv1.RuleUsage
	adm   []int64         // Unix ms of every admission, oldest first (log)
	fixed map[int64]int64 // admissions per aligned window (fixed)
	peak  int64           // the most the invariant's measure reached
	total int64           // admissions
	// offered and rejected count the requests of each DC.
	offered, rejected map[string]int64
	// unread DCs report their counts without readings, as a limiter that
	// restarted (and forgot its quiet entries) or whose store did not
	// answer its readings.
	unread map[string]bool
	// cold: the rule is keyed and the demand's key has no share of its
	// own — the DCs report the rule's counts only, as for a key that
	// never comes under pressure, and enforce the rule-wide limits.
	cold bool
	// between is how many times between interval reports a DC sends its
	// reading alone (UsageReport.readings_only) while it holds quota
	// quietly — no traffic in its last interval report — as limiters do
	// (usage.ReporterConfig.ReadsBetween); quiet marks those DCs.
	between int
	quiet   map[string]bool
	// turn counts each DC's requests, which alternate between its two
	// instances when it has a second (sim.lagging).
	turn map[string]int
	// level and last are a bucket rule's contract as one bucket: every
	// admission of every DC poured into a bucket of the rule's capacity
	// that drains at its limit, never rejecting (algorithm's units).
	level, last int64
}

func newWorld(t *testing.T, r rule.Rule, key string, watchLag time.Duration, opts ...func(*Config)) *world {
	// Every window follows the readings, so that short windows exercise
	// the usage-aware path too (by default they keep the quarantine).
	every := func(c *Config) { c.UsageAwareAbove = -1 }
	w := &world{sim: newSimRule(t, watchLag, r, append([]func(*Config){every}, opts...)...), key: key, st: map[string]algorithm.State{},
		carry: map[string]float64{}, ivl: map[string]*weirv1.RuleUsage{}, fixed: map[int64]int64{}, unread: map[string]bool{},
		offered: map[string]int64{}, rejected: map[string]int64{}, quiet: map[string]bool{}, turn: map[string]int{}}
	for _, d := range simDCs {
		w.ivl[d] = &weirv1.RuleUsage{}
	}
	return w
}

// params is what DC d enforces now for the world's key.
func (w *world) params(d string) algorithm.Params {
	return w.paramsOf(d, 0)
}

// paramsOf is params for instance i of DC d (sim.lagging).
func (w *world) paramsOf(d string, i int) algorithm.Params {
	p := algorithm.Params{Algorithm: w.r.Algorithm, Limit: w.localOf(d, w.key, i), Window: w.r.Window()}
	if w.r.Algorithm.IsBucket() && w.r.Burst > 0 {
		p.Burst = rule.LocalLimit(p.Limit, w.r.Limit, 0, w.r.Burst)
	}
	return p
}

// offer decides n requests of cost 1 in DC d at now.
func (w *world) offer(d string, n int) {
	now := w.now
	for range n {
		// With a second instance, the DC's requests alternate between
		// the two, each deciding under the limits it has applied.
		w.turn[d]++
		p := w.paramsOf(d, w.turn[d]%2*boolInt(w.lagging > 0))
		dec, next := algorithm.Decide(p, w.st[d], now, 1)
		w.st[d] = next
		u := w.ivl[d]
		u.Offered++
		w.offered[d]++
		if !dec.Allowed {
			u.Rejected++
			w.rejected[d]++
			continue
		}
		u.Admitted++
		w.total++
		w.pour(now.UnixMilli())
		w.adm = append(w.adm, now.UnixMilli())
		w.fixed[now.UnixMilli()/w.r.Window().Milliseconds()]++
	}
}

// pour adds one admission at ms to the world's bucket.
func (w *world) pour(ms int64) {
	if !w.r.Algorithm.IsBucket() {
		return
	}
	if ms > w.last {
		w.level = max(0, w.level-(ms-w.last)*w.r.Limit)
		w.last = ms
	}
	w.level += w.r.Window().Milliseconds()
}

// globalParams are the rule's own parameters, as one limiter would
// enforce them.
func (w *world) globalParams() algorithm.Params {
	return algorithm.Params{Algorithm: w.r.Algorithm, Limit: w.r.Limit, Burst: w.r.Burst, Window: w.r.Window()}
}

// measure returns the invariant's measure now.
func (w *world) measure() int64 {
	now := w.now.UnixMilli()
	win := w.r.Window().Milliseconds()
	switch w.r.Algorithm {
	case algorithm.SlidingWindowLog:
		i := 0
		for i < len(w.adm) && w.adm[i] <= now-win {
			i++
		}
		w.adm = w.adm[i:]
		return int64(len(w.adm))
	case algorithm.FixedWindow:
		return w.fixed[now/win]
	case algorithm.SlidingWindowCounter:
		sum := int64(0)
		for _, d := range simDCs {
			p := algorithm.Params{Algorithm: w.r.Algorithm, Limit: algorithm.MaxLimit, Window: w.r.Window()}
			dec, _ := algorithm.Decide(p, w.st[d], w.now, 0)
			sum += dec.Limit - dec.Remaining
		}
		return sum
	default:
		// Buckets: the contract, what the DCs admitted together poured
		// into the rule's own bucket, in units of the limit, rounded up
		// (above the limit exactly when the bucket overflowed). Not the
		// DCs' fills summed: a DC whose limit fell to 0 keeps its fill
		// undrained, and may hold it above its capacity for good while it
		// admits nothing.
		g := w.globalParams()
		unit := g.Capacity() * g.Window.Milliseconds()
		return (w.level*w.r.Limit + unit - 1) / unit
	}
}

func (w *world) checkWindow() {
	w.check([]string{w.key})
	m := w.measure()
	w.peak = max(w.peak, m)
	if m > w.r.Limit {
		for _, d := range simDCs {
			p := w.params(d)
			dec, _ := algorithm.Decide(p, w.st[d], w.now, 0)
			w.t.Logf("%s: params %+v decision limit %d remaining %d state %+v", d, p, dec.Limit, dec.Remaining, w.st[d])
		}
		w.t.Fatalf("at %v: %v measure %d > limit %d (force %v)", w.now, w.r.Algorithm, m, w.r.Limit, w.force)
	}
}

// report sends every DC's counts of the interval that just ended, and what
// it has consumed, read after the documents it acknowledged.
func (w *world) report() {
	start := w.now.Add(-time.Second).UnixMilli() / 1000 * 1000
	for _, d := range simDCs {
		u := w.ivl[d]
		w.ivl[d] = &weirv1.RuleUsage{}
		if w.cut[d] || w.rng.Float64() < w.lost {
			continue
		}
		w.seq[d]++
		ru := &weirv1.RuleUsage{Domain: w.r.Domain, RuleId: w.r.ID}
		// With a second instance, the two report in turn, each reading
		// the store at the revision it has applied.
		inst := int(w.seq[d]%2) * boolInt(w.lagging > 0)
		p := w.paramsOf(d, inst)
		// The observation takes its next state, as a store does: it settles
		// a bucket at the rate in force (a bucket left alone drains, when
		// next touched, at the rate then in force — after a shrink, slower
		// than it did before it), and the sliding window log's Decide
		// compacts the log in place.
		dec, next := algorithm.Decide(p, w.st[d], w.now, 0)
		w.st[d] = next
		c, ok := algorithm.Consumed(p, dec)
		ok = ok && !w.unread[d]
		w.quiet[d] = ok && c > 0 && u.Offered == 0 && !w.cold
		if w.key == "" || w.cold {
			ru.Offered, ru.Admitted, ru.Rejected = u.Offered, u.Admitted, u.Rejected
			if ok && !w.cold {
				ru.Consumed = &c
			}
		} else {
			k := &weirv1.KeyUsage{Key: w.key, Offered: u.Offered, Admitted: u.Admitted, Rejected: u.Rejected, Limit: w.r.Limit}
			if ok {
				k.Consumed = &c
			}
			ru.Keys = []*weirv1.KeyUsage{k}
		}
		r := &weirv1.UsageReport{Dc: d, Instance: fmt.Sprintf("%s-%d", d, inst+1), Sequence: w.seq[d], IntervalStartMs: start, IntervalMs: 1000,
			AppliedRevision: w.appliedBy(d, inst), Rules: []*weirv1.RuleUsage{ru}}
		w.lagged = append(w.lagged, laggedReport{at: w.now.Add(w.reportLag), r: r})
	}
	w.deliverReports()
}

// readBetween sends the reading of every DC that holds quota quietly,
// alone, as a limiter does between its interval reports.
func (w *world) readBetween() {
	start := w.now.UnixMilli() / 1000 * 1000
	for _, d := range simDCs {
		if !w.quiet[d] || w.cut[d] || w.unread[d] || w.rng.Float64() < w.lost {
			continue
		}
		inst := int((w.seq[d]+1)%2) * boolInt(w.lagging > 0)
		p := w.paramsOf(d, inst)
		dec, next := algorithm.Decide(p, w.st[d], w.now, 0)
		w.st[d] = next
		c, ok := algorithm.Consumed(p, dec)
		if !ok {
			continue
		}
		ru := &weirv1.RuleUsage{Domain: w.r.Domain, RuleId: w.r.ID, Consumed: &c}
		if w.key != "" {
			ru = &weirv1.RuleUsage{Domain: w.r.Domain, RuleId: w.r.ID, Keys: []*weirv1.KeyUsage{{Key: w.key, Consumed: &c}}}
		}
		w.seq[d]++
		r := &weirv1.UsageReport{Dc: d, Instance: fmt.Sprintf("%s-%d", d, inst+1), Sequence: w.seq[d], IntervalStartMs: start,
			IntervalMs: max(1, w.now.UnixMilli()-start), AppliedRevision: w.appliedBy(d, inst), ReadingsOnly: true, Rules: []*weirv1.RuleUsage{ru}}
		w.lagged = append(w.lagged, laggedReport{at: w.now.Add(w.reportLag), r: r})
	}
	w.deliverReports()
}

// run plays rates(sec) — requests per second by DC — for secs seconds in
// steps of 1/steps s; the planner's interval is 1 s.
func (w *world) run(secs, steps int, rates func(sec int) map[string]float64) {
	dt := time.Second / time.Duration(steps)
	for sec := range secs {
		rs := rates(sec)
		for step := range steps {
			w.now = w.now.Add(dt)
			w.deliverReports()
			w.deliver([]string{w.key})
			for _, d := range simDCs {
				if w.cut[d] {
					continue
				}
				w.carry[d] += rs[d] / float64(steps)
				n := int(w.carry[d])
				w.carry[d] -= float64(n)
				w.offer(d, n)
			}
			w.checkWindow()
			for k := range w.between {
				if step == ((4*steps)/10+(k+1)*steps/(w.between+1))%steps {
					w.readBetween()
				}
			}
			if step == (4*steps)/10 {
				w.report()
				w.p.Tick(w.now)
				w.writeLeases(w.p.Leases(w.now, w.now.Add(-3*time.Second), "test"))
			}
			w.deliver([]string{w.key})
			w.checkWindow()
			w.plan()
		}
	}
}

func logRule(limit, window int64) rule.Rule {
	return rule.Rule{Domain: "api", ID: "r", Limit: limit, WindowSeconds: window, Algorithm: algorithm.SlidingWindowLog,
		Scope: rule.ScopeGlobal, Enabled: true}
}

// moving returns demand of rate/s from each DC in turn, for each seconds.
func moving(rate float64, each int, dcs ...string) func(int) map[string]float64 {
	return func(sec int) map[string]float64 {
		return map[string]float64{dcs[(sec/each)%len(dcs)]: rate}
	}
}

// TestLongWindowMove is issue 19's measured case: a global sliding window
// log of 600 per 60 s, demand of 40/s from DC a for 25 s and then from DC
// b, inside one window. Before usage-aware limits the DCs admitted 1,127
// in 60 s; now no window of 60 s holds more than 600. The same with a
// one-hour window, demand moving every 25 minutes.
func TestLongWindowMove(t *testing.T) {
	for _, tc := range []struct {
		name        string
		r           rule.Rule
		key         string
		rate        float64
		each, secs  int
		wantAtLeast int64 // admissions: the DCs still use the quota
	}{
		{"60s rule", logRule(600, 60), "", 40, 25, 180, 1500},
		{"60s key", logRule(600, 60), "k", 40, 25, 180, 1500},
		{"1h key", logRule(3600, 3600), "k", 2, 1500, 9000, 7000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.r, tc.key, 300*time.Millisecond)
			w.reportLag = 500 * time.Millisecond
			w.run(tc.secs, 10, moving(tc.rate, tc.each, "a", "b", "c"))
			t.Logf("most admitted in one window %d of %d; admitted %d in %d s", w.peak, tc.r.Limit, w.total, tc.secs)
			if w.peak > tc.r.Limit {
				t.Errorf("most in one window %d, want ≤ %d", w.peak, tc.r.Limit)
			}
			if w.total < tc.wantAtLeast {
				t.Errorf("admitted %d in %d s, want ≥ %d (the quota follows the demand)", w.total, tc.secs, tc.wantAtLeast)
			}
		})
	}
}

// TestLongWindowColdKey moves the demand of a key that has no share of its
// own (the DCs never report it under pressure) between DCs of a keyed
// rule: it takes the rule-wide limits, which follow the rule's traffic,
// and whose pruned writes stay held until they age out. Inside a window
// (moves every 25 s) the shares cannot move and the key keeps the static
// split — with the capped quarantine it went above its limit in one
// window (604 of 600 at the first excess, where the world stops); with demand staying longer than the rule's memory (150 s;
// the sliding window counter's is two windows) the shares follow it, a
// memory after each move.
func TestLongWindowColdKey(t *testing.T) {
	for _, alg := range algorithm.All {
		for _, each := range []int{25, 150} {
			t.Run(fmt.Sprintf("%v/moves every %d s", alg, each), func(t *testing.T) {
				r := minuteRule(alg)
				r.KeyType = rule.Dimensions{"user"}
				w := newWorld(t, r, "cold", 300*time.Millisecond)
				w.cold = true
				playMoves(t, w, "cold", each)
			})
		}
	}
}

// TestNoReadingsCarries: DCs that send no readings (limiters of a version
// without them, or whose stores do not answer them) of an entry whose
// limits follow readings have their pruned writes carried until they age
// out, as an unread entry's: with the quarantine alone, capped at 10
// intervals, demand moving a → b → c every 25 s inside 60 s windows went
// to 604 of 600 (603 for the token bucket) where the world stops at the
// first excess. With demand staying longer than the memory the quota
// follows it.
func TestNoReadingsCarries(t *testing.T) {
	for _, alg := range algorithm.All {
		for _, key := range []string{"", "k"} {
			for _, each := range []int{25, 150} {
				t.Run(fmt.Sprintf("%v/key%q/moves every %d s", alg, key, each), func(t *testing.T) {
					w := newWorld(t, minuteRule(alg), key, 300*time.Millisecond, func(c *Config) { c.UsageAwareAbove = 0 })
					for _, d := range simDCs {
						w.unread[d] = true
					}
					playMoves(t, w, key, each)
				})
			}
		}
	}
}

// minuteRule is issue 19's rule, 600 per 60 s, with algorithm alg (a
// leaky bucket's burst the limit: a minute's drain, as the token
// bucket's).
func minuteRule(alg algorithm.Algorithm) rule.Rule {
	r := logRule(600, 60)
	r.Algorithm = alg
	if alg == algorithm.LeakyBucket {
		r.Burst = r.Limit
	}
	return r
}

// playMoves plays 450 s of 40/s moving a → b → c every each seconds on
// entry key, with reports half a second late, and checks that no window
// holds more than the limit and, when the demand stays in a DC longer
// than the memory (two windows at most), that the key's local limit
// somewhere reached twice its static one: the quota follows it.
func playMoves(t *testing.T, w *world, key string, each int) {
	t.Helper()
	w.reportLag = 500 * time.Millisecond
	most := int64(0)
	for sec := range 450 {
		w.run(1, 10, func(int) map[string]float64 { return moving(40, each, "a", "b", "c")(sec) })
		for _, d := range simDCs {
			most = max(most, w.local(d, key))
		}
	}
	t.Logf("most admitted in one window %d of %d; admitted %d in 450 s; largest local limit %d", w.peak, w.r.Limit, w.total, most)
	if w.peak > w.r.Limit {
		t.Errorf("most in one window %d, want ≤ %d", w.peak, w.r.Limit)
	}
	static := w.r.StaticLimit("a", simDCs, w.r.Limit)
	if time.Duration(each)*time.Second > 2*w.r.Window() && most < 2*static {
		t.Errorf("largest local limit %d with demand staying %d s in a DC, want the quota to follow it (≥ %d)", most, each, 2*static)
	}
}

// TestPromotedKeyKeepsCarries: a key without a share of its own consumes
// most of a's rule-wide limit, then moves to b, where it comes under
// pressure and is given a share of its own. Its new entry starts from the
// rule entry's writes and carries: what a may have consumed of it stays
// held until it ages out (before, the carries were dropped and b was
// granted it at once: 1,168 admitted in one window of 600).
func TestPromotedKeyKeepsCarries(t *testing.T) {
	for _, alg := range algorithm.All {
		t.Run(alg.String(), func(t *testing.T) {
			r := minuteRule(alg)
			r.KeyType = rule.Dimensions{"user"}
			w := newWorld(t, r, "k", 300*time.Millisecond, func(c *Config) { c.UsageAwareAbove = 0 })
			w.cold = true
			w.reportLag = 500 * time.Millisecond
			var before int64
			for sec := range 240 {
				if sec == 95 {
					// b reports the key (rejected: under pressure), and
					// every DC reads it once it has a share of its own.
					w.cold = false
				}
				rate := map[string]float64{"a": 40}
				if sec >= 90 {
					rate = map[string]float64{"b": 1000}
				}
				if sec == 180 {
					before = w.total
				}
				w.run(1, 10, func(int) map[string]float64 { return rate })
			}
			if w.p.rules[ruleRef{"api", "r"}].keys["k"] == nil {
				t.Fatal("the key never got a share of its own")
			}
			t.Logf("most admitted in one window %d of %d; admitted %d, %d in the last minute", w.peak, r.Limit, w.total, w.total-before)
			if w.peak > r.Limit {
				t.Errorf("most in one window %d, want ≤ %d", w.peak, r.Limit)
			}
			// a's readings of the key release what it carried: a window
			// after the move, b has the key's whole limit.
			if got := w.total - before; got < r.Limit*9/10 {
				t.Errorf("admitted %d in the minute from 180 s, want ≥ %d", got, r.Limit*9/10)
			}
		})
	}
}

// TestLongWindowFollowTheSun runs a day window through 24 virtual hours
// of demand that follows the sun (8 hours in each DC) and then a second
// day, checking the invariant after every event.
func TestLongWindowFollowTheSun(t *testing.T) {
	if testing.Short() {
		t.Skip("48 virtual hours")
	}
	for _, alg := range []algorithm.Algorithm{algorithm.SlidingWindowLog, algorithm.FixedWindow, algorithm.SlidingWindowCounter} {
		t.Run(alg.String(), func(t *testing.T) {
			r := logRule(2000, 86400)
			r.Algorithm = alg
			w := newWorld(t, r, "k", time.Second)
			w.reportLag = 2 * time.Second
			w.run(2*86400, 1, moving(0.05, 8*3600, "a", "b", "c"))
			t.Logf("most in one window %d of %d; admitted %d in two days", w.peak, r.Limit, w.total)
			if w.total < 3*r.Limit/2 {
				t.Errorf("admitted %d in two days, want ≥ %d", w.total, 3*r.Limit/2)
			}
		})
	}
}

// TestLongWindowProperty moves demand at random between DCs, with random
// algorithms, windows, keys (the rule's, one with a share of its own, one
// without), watch and report delays, lost reports, a DC cut off
// for a while and one whose reports go without readings for a while, and
// checks the invariant after every event. Each case draws from its own
// seed, so that one fails alone when run alone
// (-run 'TestLongWindowProperty/seed=N/'). WEIR_LONGWIN_CASES sets how
// many cases to play (24 by default); WEIR_LONGWIN_SEED, the first seed
// (random when "random", logged).
func TestLongWindowProperty(t *testing.T) {
	cases, first := 24, uint64(0)
	if v := os.Getenv("WEIR_LONGWIN_CASES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("WEIR_LONGWIN_CASES=%q: %v", v, err)
		}
		cases = n
	}
	switch v := os.Getenv("WEIR_LONGWIN_SEED"); v {
	case "":
	case "random":
		first = rand.Uint64() % 1_000_000
	default:
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("WEIR_LONGWIN_SEED=%q: %v", v, err)
		}
		first = n
	}
	t.Logf("seeds %d to %d", first, first+uint64(cases)-1)
	for seed := first; seed < first+uint64(cases); seed++ {
		propertyCase(t, seed)
	}
}

// TestLongWindowPropertyReplays plays the seeds of TestLongWindowProperty
// that once broke the invariant, beyond the few it plays by default: 1457,
// a sliding window counter of 473 per 30 s whose DC a, past its lease a
// memory ago, applied a limit of 0 and was then counted as holding 0 while
// what it admitted under its static limit was still in the window (476 of
// 473; forget dropped the carried writes). 91 and 171, fixed windows
// with two instances in each DC, break it when a reading of the revision
// pruned to releases a carry, however old it is: it may come from the
// instance that applied that revision first, before the other did (1,785
// of 1,784; 1,136 of 1,135). 419, a keyed leaky bucket whose DC c was
// past its lease a memory ago with a fill of 337 above its static limit of
// 231, broke it when such a bucket was counted at its static limit: it
// drains at no more than that rate (697 of 695). 209, a keyed leaky
// bucket of 175 per 60 s whose key has no share of its own, when such
// keys kept the capped quarantine (176 of 175). 472, a sliding window
// counter of 601 per 5 s with the planner's default quarantine, when the
// quarantine was the window and not its memory of two (602 of 601).
func TestLongWindowPropertyReplays(t *testing.T) {
	for _, seed := range []uint64{1457, 91, 171, 419, 209, 472} {
		propertyCase(t, seed)
	}
}

func propertyCase(t *testing.T, seed uint64) {
	algs := []algorithm.Algorithm{algorithm.SlidingWindowLog, algorithm.FixedWindow, algorithm.SlidingWindowCounter,
		algorithm.TokenBucket, algorithm.LeakyBucket}
	windows := []int64{1, 5, 30, 60, 300, 3600}
	rng := rand.New(rand.NewPCG(19, seed))
	alg, win := algs[seed%uint64(len(algs))], windows[rng.IntN(len(windows))]
	limit := 50 + rng.Int64N(2000)
	key := ""
	if rng.IntN(2) == 0 {
		key = "k"
	}
	watch := time.Duration(rng.Int64N(int64(2 * time.Second)))
	lag := time.Duration(rng.Int64N(int64(3 * time.Second)))
	// A key without a share of its own, in a quarter of the keyed cases.
	cold := key != "" && seed/5%4 == 1
	if cold {
		key = "cold"
	}
	// In a third of the cases, the planner's default: memories up to
	// MaxQuarantine keep the quarantine (drawn from no generator).
	quarantined := seed/20%3 == 2
	name := fmt.Sprintf("seed=%d/%v/%ds/L%d/key%q", seed, alg, win, limit, key)
	if quarantined {
		name += "/quarantine"
	}
	t.Run(name, func(t *testing.T) {
		r := logRule(limit, win)
		r.Algorithm = alg
		if alg == algorithm.LeakyBucket {
			r.Burst = limit
		}
		if cold {
			r.KeyType = rule.Dimensions{"user"}
		}
		var opts []func(*Config)
		if quarantined {
			opts = append(opts, func(c *Config) { c.UsageAwareAbove = 0 })
		}
		w := newWorld(t, r, key, watch, opts...)
		w.cold = cold
		w.rng = rand.New(rand.NewPCG(seed, 7))
		w.reportLag, w.lost = lag, 0.1
		// Readings between interval reports, 0 to 3, as the seed says
		// (drawn from no generator: the draws stay those of every seed).
		w.between = int(seed % 4)
		// In half the cases of the window algorithms, each DC has a second
		// instance sharing its store that applies every write 0.1 to 1.5 s
		// after the first: a reading of the first may come before the
		// second has applied what the first read after, which only a
		// reading surely younger than the release (a skew later, or at a
		// witness's revision) may release carries on (also drawn from no
		// generator).
		if !alg.IsBucket() && seed/2%2 == 1 {
			w.setLagging(time.Duration(100+seed*137%1400) * time.Millisecond)
		}
		rate := float64(limit) / float64(win) * (1 + 2*rng.Float64())
		cutAt, cutFor := 20+rng.IntN(100), 5+rng.IntN(20)
		cutDC := simDCs[rng.IntN(len(simDCs))]
		unreadAt, unreadFor := 10+rng.IntN(150), 1+rng.IntN(60)
		unreadDC := simDCs[rng.IntN(len(simDCs))]
		var at string
		for sec := range 200 {
			if sec%(5+rng.IntN(30)) == 0 || at == "" {
				at = simDCs[rng.IntN(len(simDCs))]
			}
			w.cut[cutDC] = sec >= cutAt && sec < cutAt+cutFor
			w.unread[unreadDC] = sec >= unreadAt && sec < unreadAt+unreadFor
			rates := map[string]float64{at: rate}
			if w.lagging > 0 {
				// Two DCs ask at once, so that a DC whose share shrinks
				// still admits (through its lagging instance) meanwhile.
				rates[simDCs[(slices.Index(simDCs, at)+1)%len(simDCs)]] = rate / 2
			}
			w.run(1, 10, func(int) map[string]float64 { return rates })
		}
		t.Logf("peak %d of %d, admitted %d", w.peak, limit, w.total)
	})
}

// TestLongWindowCase9 replays the property case that once broke the
// invariant (local limits 962 + 641 of 962; the draws of the first
// version of TestLongWindowProperty, seed 19/600, case 9): a leaky bucket
// of 962 per 5 s, DC a cut off until its lease ran out and the rule's
// memory had passed, a pruned write of 642 carried as consumed while a
// was past its lease, the quota moved to b, and a's lease renewed. Its
// readings from before must stay forgotten, and its carries at most its
// static limit, when its lease is renewed, or a is granted back what b
// now holds.
func TestLongWindowCase9(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 600))
	type draw struct {
		win, limit    int64
		key           string
		watch, lag    time.Duration
		rate          float64
		cutAt, cutFor int
		cutDC         string
		at            []string
	}
	var c draw
	for range 10 {
		windows := []int64{1, 5, 30, 60, 300, 3600}
		c = draw{win: windows[rng.IntN(len(windows))], limit: 50 + rng.Int64N(2000)}
		if rng.IntN(2) == 0 {
			c.key = "k"
		}
		c.watch = time.Duration(rng.Int64N(int64(2 * time.Second)))
		c.lag = time.Duration(rng.Int64N(int64(3 * time.Second)))
		c.rate = float64(c.limit) / float64(c.win) * (1 + 2*rng.Float64())
		c.cutAt, c.cutFor = 20+rng.IntN(100), 5+rng.IntN(20)
		c.cutDC = simDCs[rng.IntN(len(simDCs))]
		at := ""
		for sec := range 200 {
			if sec%(5+rng.IntN(30)) == 0 || at == "" {
				at = simDCs[rng.IntN(len(simDCs))]
			}
			c.at = append(c.at, at)
		}
	}
	if c.win != 5 || c.limit != 962 || c.key != "" {
		t.Fatalf("replayed case 9: window %d limit %d key %q, want 5, 962, \"\"", c.win, c.limit, c.key)
	}
	r := logRule(c.limit, c.win)
	r.Algorithm, r.Burst = algorithm.LeakyBucket, c.limit
	w := newWorld(t, r, c.key, c.watch)
	w.reportLag, w.lost = c.lag, 0.1
	for sec := range 200 {
		w.cut[c.cutDC] = sec >= c.cutAt && sec < c.cutAt+c.cutFor
		w.run(1, 10, func(int) map[string]float64 { return map[string]float64{c.at[sec]: c.rate} })
	}
	t.Logf("most in one window %d of %d; local limits at most %d; admitted %d", w.peak, r.Limit, w.worst, w.total)
}

// TestCarryReleasedByYoungerReading checks that a DC's pruned write stays
// counted as consumed until a reading surely taken after every instance of
// the DC applied its successor: one instance may report the new revision
// while another, sharing the store, still admits under the older limit.
// Surely: read a skew after the release, or at the revision of a write to
// the DC handed out after it (a witness) or later.
func TestCarryReleasedByYoungerReading(t *testing.T) {
	const skew = 500 * time.Millisecond
	// The release comes after hand-out 3, whose write to the DC was at
	// revision 10 (the one pruned to); hand-out 4 wrote at 12, 5 at 15.
	witnesses := []witness{{2, 8}, {3, 10}, {4, 12}, {5, 15}}
	for _, tc := range []struct {
		name      string
		rev       int64 // the reading's applied revision
		readAt    int64 // Unix ms
		ws        []witness
		wantCarry int64
	}{
		{"older revision", 9, 5000, nil, 700},
		{"before the release", 10, 900, nil, 700},
		{"within the skew", 10, 1400, nil, 700},
		{"after the release", 10, 1600, nil, 0},
		{"older revision than a witness", 9, 5000, witnesses, 700},
		{"at a write handed out before the release", 10, 1400, witnesses, 700},
		{"between the writes", 11, 1400, witnesses, 700},
		{"at the first witness", 12, 1400, witnesses, 0},
		{"past it", 16, 1100, witnesses, 0},
		{"witnesses all older", 16, 1400, witnesses[:2], 700},
		// The first witnesses were forgotten (maxWitnesses): a later one
		// stands for them.
		{"only a later witness", 12, 1400, witnesses[3:], 700},
		{"at the later witness", 15, 1400, witnesses[3:], 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &entry{limit: 1000, used: make([]reading, 1), carry: make([][]carried, 1), floor: []int64{-1}}
			e.observe(0, 200, 8, 500, skew, nil)
			e.release(0, 700, 10, 1000, math.MinInt64, 4, 3, false)
			e.observe(0, 300, tc.rev, tc.readAt, skew, tc.ws)
			if got := e.carriedMax(0, math.MinInt64); got != tc.wantCarry {
				t.Errorf("carry %d, want %d", got, tc.wantCarry)
			}
			if got, want := e.consumed(0, 0), max(300, tc.wantCarry); got != want {
				t.Errorf("consumed %d, want %d", got, want)
			}
		})
	}
}

// TestUsageAwareAboveQuarantine checks that by default only rules whose
// window the quarantine does not cover follow the readings.
func TestUsageAwareAboveQuarantine(t *testing.T) {
	for _, tc := range []struct {
		window    int64
		wantAware bool
	}{{1, false}, {10, false}, {11, true}, {3600, true}} {
		t.Run(fmt.Sprintf("%ds", tc.window), func(t *testing.T) {
			p, err := New(Config{DCs: simDCs, Interval: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			r := logRule(600, tc.window)
			p.SetRules([]rule.Rule{r})
			now := time.UnixMilli(1_700_000_000_000)
			p.Load(now, nil, nil, nil)
			c := int64(42)
			rep := &weirv1.UsageReport{Dc: "a", Instance: "a-1", Sequence: 1, IntervalStartMs: now.UnixMilli() - 1000, IntervalMs: 1000,
				Rules: []*weirv1.RuleUsage{{Domain: r.Domain, RuleId: r.ID, Offered: 50, Admitted: 42, Rejected: 8, Consumed: &c}}}
			if err := p.Ingest(rep, now); err != nil {
				t.Fatal(err)
			}
			e := p.rules[ruleRef{r.Domain, r.ID}].entry
			if got := e.usageAware(); got != tc.wantAware {
				t.Errorf("usage-aware %v, want %v", got, tc.wantAware)
			}
		})
	}
}

// TestCarryReleasedOneByOne checks that a later release does not hold back
// an earlier one: a reading younger than the first release but not the
// second releases the first pruned write only.
func TestCarryReleasedOneByOne(t *testing.T) {
	const skew = 500 * time.Millisecond
	e := &entry{limit: 1000, used: make([]reading, 1), carry: make([][]carried, 1), floor: []int64{-1}}
	e.observe(0, 100, 8, 500, skew, nil)
	e.release(0, 900, 10, 1000, math.MinInt64, 4, 0, false)
	e.observe(0, 100, 10, 1200, skew, nil) // too young for the first release
	e.release(0, 300, 12, 3000, math.MinInt64, 4, 0, false)
	if got := e.carriedMax(0, math.MinInt64); got != 900 {
		t.Fatalf("after two releases carry %d, want 900", got)
	}
	e.observe(0, 100, 12, 2000, skew, nil) // after the first release, before the second
	if got := e.carriedMax(0, math.MinInt64); got != 300 {
		t.Errorf("after a reading between the releases carry %d, want 300 (the second only)", got)
	}
	e.observe(0, 100, 12, 4000, skew, nil)
	if got := e.carriedMax(0, math.MinInt64); got != 0 {
		t.Errorf("after a reading younger than both carry %d, want 0", got)
	}
}

// TestLongWindowQuotaFollowsBack measures utilisation under demand above
// the limit that moves between two DCs three times a window, a third DC
// asking a little all along: the quota a DC consumed ages out of the
// window and must flow to whichever DC asks then.
func TestLongWindowQuotaFollowsBack(t *testing.T) {
	for _, tc := range []struct {
		name      string
		skew      time.Duration
		wantMean  float64
		wantWorst int64 // of 600
		between   int
	}{
		// 95.7% and 503: a DC the demand left keeps nothing of its own
		// (90.5% and 436 when it kept its reading, awareTargets), and
		// one given more since its reading keeps what its demand uses of
		// that in an interval (95.2% and 489 when a tick cut it to its
		// reading, older than the grants it was using). The
		// worst windows follow the quota's timing: 95.1% and 506 when no
		// write witnessed releases (witness.go), whose mean over 12 seeds
		// is 0.1 point lower and whose worst window 1.4 points higher.
		{"skew of one interval", time.Second, 0.955, 495, 0},
		// Every pruned write waits for a reading three intervals younger
		// — or one at a witness's revision: the coordinator writes the
		// DC's lease at once (WitnessLeases), so the skew no longer counts:
		// 95.7% and 503 (95.2% and 489 before DCs kept the grants their
		// readings had not seen), against 94.6% and 512 without
		// witnesses. The carried writes must span the skew (carriedFor),
		// or the oldest merge into one whose release keeps moving on.
		{"skew of three intervals", 3 * time.Second, 0.955, 495, 0},
		// 95.7% and 503; 88.8% and 478 without witnesses.
		{"skew of ten intervals", 10 * time.Second, 0.955, 495, 0},
		// Each DC holding quota quietly also reads three times between
		// interval reports, and what they free goes to the others at once
		// (reread.go): 97.7% and 542 (96.1% and 509 while a tick cut the
		// DC the demand went to back to its last reading, taken before the
		// quota those grew it by). Fresher readings alone, with the
		// targets left to the ticks, gave 96.5% and 524 here (its reports
		// arrive half an interval late, after the tick), but in the
		// simulator, whose reports arrive within the tick's grace,
		// nothing (97.3% in long-window-60; 98.5% retargeted at once).
		{"three readings between intervals", time.Second, 0.97, 530, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := logRule(600, 60)
			w := newWorld(t, r, "", 300*time.Millisecond, func(c *Config) { c.Skew = tc.skew })
			w.reportLag, w.between = 500*time.Millisecond, tc.between
			const secs = 300
			var perSec []int64
			last := int64(0)
			for sec := range secs {
				at := []string{"a", "b"}[(sec/20)%2]
				w.run(1, 10, func(int) map[string]float64 { return map[string]float64{at: 40, "c": 1} })
				perSec = append(perSec, w.total-last)
				last = w.total
			}
			// Admissions in every 60 s window after the first.
			worst, sum, n := int64(r.Limit), int64(0), int64(0)
			for end := 120; end <= secs; end++ {
				in := int64(0)
				for _, a := range perSec[end-60 : end] {
					in += a
				}
				worst = min(worst, in)
				sum += in
				n++
			}
			mean := float64(sum) / float64(n) / float64(r.Limit)
			t.Logf("peak %d of %d; admitted per window: mean %.1f%%, worst %.1f%% of the limit",
				w.peak, r.Limit, 100*mean, 100*float64(worst)/float64(r.Limit))
			// Virtual time, seeded: the figures are the same on every
			// machine. At each move (three a window) the DC the demand left
			// is seen to have moved a report or two later and gives up what
			// it consumed a round trip (acknowledgement, a reading a skew
			// after it) after that; then quota follows what it frees a
			// reading later: taken at the interval's end, planned on 0.4
			// interval after, watched.
			if mean < tc.wantMean || worst < tc.wantWorst {
				t.Errorf("admitted per window: mean %.1f%%, worst %d; want ≥ %.1f%% and ≥ %d", 100*mean, worst, 100*tc.wantMean, tc.wantWorst)
			}
		})
	}
}

// TestQuietKeyReading checks that a quiet key's reading alone — no counts
// and no limit, as a limiter sends it while the key is quiet in its DC —
// is taken as a reading, changes neither the key's limit nor its demand,
// and is not refused.
func TestQuietKeyReading(t *testing.T) {
	p, err := New(Config{DCs: simDCs, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := logRule(600, 60)
	r.KeyType = rule.Dimensions{"user"}
	p.SetRules([]rule.Rule{r})
	now := time.UnixMilli(1_700_000_000_000)
	p.Load(now, nil, nil, nil)
	c := int64(300)
	busy := &weirv1.UsageReport{Dc: "a", Instance: "a-1", Sequence: 1, IntervalStartMs: now.UnixMilli() - 1000, IntervalMs: 1000,
		Rules: []*weirv1.RuleUsage{{Domain: r.Domain, RuleId: r.ID, Offered: 400, Admitted: 300, Rejected: 100,
			Keys: []*weirv1.KeyUsage{{Key: "u", Offered: 400, Admitted: 300, Rejected: 100, Limit: 600, Consumed: &c}}}}}
	if err := p.Ingest(busy, now); err != nil {
		t.Fatal(err)
	}
	e := p.rules[ruleRef{r.Domain, r.ID}].keys["u"]
	if e == nil || e.used[0].v != 300 {
		t.Fatalf("key entry %+v, want one read at 300", e)
	}
	refused := p.stats.Refused
	now = now.Add(time.Second)
	q := int64(120)
	quiet := &weirv1.UsageReport{Dc: "a", Instance: "a-1", Sequence: 2, IntervalStartMs: now.UnixMilli() - 1000, IntervalMs: 1000,
		Rules: []*weirv1.RuleUsage{{Domain: r.Domain, RuleId: r.ID, Keys: []*weirv1.KeyUsage{{Key: "u", Consumed: &q}}}}}
	if err := p.Ingest(quiet, now); err != nil {
		t.Fatal(err)
	}
	if e.used[0].v != 120 || e.limit != 600 || p.stats.Refused != refused {
		t.Errorf("after the quiet reading: read %d, limit %d, refused %d; want 120, 600, %d", e.used[0].v, e.limit, p.stats.Refused, refused)
	}
}

// TestReadingAgesOut checks that a reading taken a whole memory ago counts
// nothing — its DC stopped reading the entry, and what it consumed then
// has aged out — and so does a pruned write released a memory ago.
func TestReadingAgesOut(t *testing.T) {
	e := &entry{limit: 1000, used: make([]reading, 1), carry: make([][]carried, 1), floor: []int64{-1}}
	e.observe(0, 300, 8, 5000, 0, nil)
	for _, tc := range []struct {
		since, want int64
	}{{4999, 300}, {5000, 0}} {
		if got := e.consumed(0, tc.since); got != tc.want {
			t.Errorf("since %d: consumed %d, want %d", tc.since, got, tc.want)
		}
	}
	e.release(0, 500, 9, 6000, math.MinInt64, 4, 0, false)
	if got := e.consumed(0, 5999); got != 500 {
		t.Errorf("aged reading with a carry of 500 released at 6000: consumed %d, want 500", got)
	}
	if got := e.consumed(0, 6000); got != 0 {
		t.Errorf("aged reading and carry: consumed %d, want 0", got)
	}
}

// TestUnreadDCQuotaComesBack checks that the quota a DC consumed comes back
// to the others once it has aged out, even when the DC no longer reads it
// (a limiter that restarted and forgot its quiet entries): its reading and
// carried writes age out, and no new carry brings them back (a still asks
// a little, so its share moves and its writes are pruned: with the raw
// reading copied into each new carry, 113 were admitted in that minute).
func TestUnreadDCQuotaComesBack(t *testing.T) {
	r := logRule(600, 60)
	w := newWorld(t, r, "", 300*time.Millisecond)
	w.reportLag = 500 * time.Millisecond
	w.run(15, 10, func(int) map[string]float64 { return map[string]float64{"a": 40} })
	w.unread["a"] = true
	w.run(85, 10, func(int) map[string]float64 { return map[string]float64{"a": 1, "b": 40} })
	before := w.total
	w.run(60, 10, func(int) map[string]float64 { return map[string]float64{"a": 1, "b": 40} })
	got := w.total - before
	t.Logf("admitted %d in the minute from 100 s (a consumed %d by 15 s, then sent no reading and asked 1/s)", got, before)
	if got < r.Limit/2 {
		t.Errorf("admitted %d in the minute from 100 s, want ≥ %d: a's aged-out quota is still held", got, r.Limit/2)
	}
}

// TestUnreadEntryAfterTakeover: a new leader does not know the carries of
// a keyed rule's own entry, so once the DCs acknowledge its documents it
// holds each at the whole limit until a memory has passed: no rule-wide
// share grows in the first window, and all may grow after it.
func TestUnreadEntryAfterTakeover(t *testing.T) {
	r := logRule(600, 60)
	r.KeyType = rule.Dimensions{"user"}
	w := newTakeover(t, r, []int64{200, 200, 200})
	e := w.rs.entry
	if !e.unread {
		t.Fatal("the keyed rule's own entry is not unread")
	}
	// Demand only in a: the estimates want a's share to grow.
	for sec := range 70 {
		w.second("a", 900, 900)
		switch {
		case sec == 30:
			if h := w.held(); h[0] != 600 || h[1] != 600 || h[2] != 600 {
				t.Errorf("30 s after the takeover: held %v, want every DC at the whole limit", h)
			}
			if e.grant[0] > 200 {
				t.Errorf("30 s after the takeover: a's grant %d, want no growth above 200", e.grant[0])
			}
		case sec == 69 && e.grant[0] <= 200:
			t.Errorf("a memory after the takeover: a's grant %d, want it grown with its demand", e.grant[0])
		}
	}
}

// TestBucketAfterTakeoverWithoutReadings: a new leader holds every DC
// that has not acknowledged its documents at the whole limit; once they
// do, the write of L is pruned and carried. A bucket rule whose DCs send
// no readings (a limiter of a version without them, or a DC at a limit of
// 0 with some fill left) must see that carry age out: while a bucket's
// carries waited for a reading, no DC could grow again, ever.
func TestBucketAfterTakeoverWithoutReadings(t *testing.T) {
	r := logRule(600, 60)
	r.Algorithm = algorithm.TokenBucket
	w := newTakeover(t, r, []int64{0, 300, 300}) // a drained
	e := w.rs.entry
	for sec := range 100 {
		w.second("b", 900, 300)
		if sum := e.grant[0] + e.grant[1] + e.grant[2]; sum > 600 {
			t.Fatalf("%d s after the takeover: grants %v sum to %d, want ≤ 600", sec, e.grant, sum)
		}
		if sec == 30 && e.grant[1] > 300 {
			t.Errorf("30 s after the takeover: b's grant %d, want no growth above 300 within the memory", e.grant[1])
		}
	}
	t.Logf("100 s after the takeover: grants %v, held %v", e.grant, w.held())
	if e.grant[1] <= 300 {
		t.Errorf("100 s after the takeover: b's grant %d (held %v), want it grown with its demand", e.grant[1], w.held())
	}
}

// takeover is a leader that has just loaded rule r's documents (the DCs'
// local limits, in simDCs' order, acknowledged at revision 5), driven a
// second at a time by reports without readings from DCs that apply every
// write at once.
type takeover struct {
	t   *testing.T
	p   *Planner
	rs  *ruleState
	now time.Time
	seq uint64
	ack int64
}

func newTakeover(t *testing.T, r rule.Rule, limits []int64) *takeover {
	p, err := New(Config{DCs: simDCs, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p.SetRules([]rule.Rule{r})
	now := time.UnixMilli(1_700_000_000_000)
	var docs []*weirv1.RuleAssignment
	for d, limit := range limits {
		docs = append(docs, &weirv1.RuleAssignment{Dc: simDCs[d], Domain: r.Domain, RuleId: r.ID, Limit: limit, GlobalLimit: r.Limit,
			Share: float64(limit) / float64(r.Limit)})
	}
	p.Load(now, docs, []int64{5, 5, 5}, nil)
	return &takeover{t: t, p: p, rs: p.rules[ruleRef{r.Domain, r.ID}], now: now, ack: 5}
}

// second reports a second in which DC hot was offered offered requests
// and admitted admitted (the others nothing), then plans, writes and has
// every DC acknowledge.
func (w *takeover) second(hot string, offered, admitted uint64) {
	w.now = w.now.Add(time.Second)
	for _, d := range simDCs {
		w.p.SetAck(d, w.ack, w.now)
		w.seq++
		ru := &weirv1.RuleUsage{Domain: w.rs.ref.domain, RuleId: w.rs.ref.id}
		if d == hot {
			ru.Offered, ru.Admitted = offered, admitted
		}
		rep := &weirv1.UsageReport{Dc: d, Instance: d + "-1", Sequence: w.seq, IntervalStartMs: w.now.Add(-time.Second).UnixMilli() / 1000 * 1000,
			IntervalMs: 1000, AppliedRevision: w.ack, Rules: []*weirv1.RuleUsage{ru}}
		if err := w.p.Ingest(rep, w.now); err != nil {
			w.t.Fatal(err)
		}
	}
	w.p.Tick(w.now)
	if ws := w.p.Plan(w.now); len(ws) > 0 {
		w.ack++
		w.p.Written(ws, w.ack, true)
		for _, d := range simDCs {
			w.p.SetAck(d, w.ack, w.now)
		}
	}
	w.p.Settle()
}

// held is what every DC may hold of the rule's own entry.
func (w *takeover) held() []int64 {
	out := make([]int64, len(simDCs))
	for d := range simDCs {
		out[d] = w.p.held(w.rs, w.rs.entry, d)
	}
	return out
}

// TestUnreadCarriesFollowARamp shifts a keyed rule's traffic from a to b
// over ten minutes (thirty for a 5-minute window), so that a's rule-wide
// limit shrinks a little every few intervals. Only aging releases an
// unread entry's carries, so what a holds must come down about a memory
// after its limit did: when the list kept four writes and merged its two
// oldest, a's held stuck at 302 for four minutes while its grant fell from
// 232 to 8. The list now spans the memory (TestUnreadSlots covers what
// happens past it).
func TestUnreadCarriesFollowARamp(t *testing.T) {
	for _, tc := range []struct {
		window, ramp int64
	}{{60, 600}, {300, 1800}} {
		t.Run(fmt.Sprintf("%ds", tc.window), func(t *testing.T) {
			r := logRule(600, tc.window)
			r.KeyType = rule.Dimensions{"user"}
			w := newWorld(t, r, "cold", 300*time.Millisecond, func(c *Config) { c.UsageAwareAbove = 0 })
			w.cold = true
			w.reportLag = 500 * time.Millisecond
			rs := w.p.rules[ruleRef{"api", "r"}]
			e := rs.entry
			// held may trail the grants by the memory, the skew, a few
			// intervals of acknowledgement and, when the list merges,
			// twice its step.
			lag := int(tc.window) + 6 + 2*int(tc.window)/maxUnreadCarried
			var grants []int64 // a's grant at the end of every second
			worst := int64(0)
			for sec := range int(tc.ramp) + 300 + 2*int(tc.window) {
				f := min(1, max(0, float64(sec-100)/float64(tc.ramp)))
				w.run(1, 10, func(int) map[string]float64 { return map[string]float64{"a": 30 * (1 - f), "b": 30 * f, "c": 1} })
				grants = append(grants, e.grant[0])
				if sec < lag+10 {
					continue
				}
				recent := slices.Max(grants[sec-lag:])
				worst = max(worst, w.p.held(rs, e, 0)-recent)
			}
			t.Logf("a held at most %d above its largest grant of the last %d s", worst, lag)
			if worst > 0 {
				t.Errorf("a held %d above its largest grant of the last %d s, want 0", worst, lag)
			}
		})
	}
}

// TestUnreadSlots: an unread entry's carries, released only by aging out,
// fold into aligned slots, so that however many writes a memory holds a
// write stays held no longer than a slot past its own aging out — and
// never less (that is the safety). Merging pairs instead held a shrinking
// DC's old limits alive: the two oldest, for as long as it shrank; the two
// released closest in time, up to 1.87 memories with 1,000 writes a memory.
func TestUnreadSlots(t *testing.T) {
	for _, tc := range []struct {
		name     string
		memory   int64 // ms, the skew included
		grow     int64 // ms the memory grows by at each release (the rule's window grew)
		every    int64 // ms between releases
		keep     int
		releases int
		value    func(rng *rand.Rand, i int) int64
	}{
		{"shrinking, list short of the memory", 5_000, 0, 1_000, 4, 10, func(_ *rand.Rand, i int) int64 { return int64(100 - 10*i) }},
		{"shrinking, 1,000 writes a memory", 1_000_000, 0, 1_000, maxUnreadCarried, 4_000, func(_ *rand.Rand, i int) int64 { return int64(10_000 - 2*i) }},
		{"random, 1,000 writes a memory", 1_000_000, 0, 1_000, maxUnreadCarried, 4_000, func(rng *rand.Rand, _ int) int64 { return rng.Int64N(1000) }},
		{"random, a write an interval of the memory", 61_000, 0, 1_000, 65, 400, func(rng *rand.Rand, _ int) int64 { return rng.Int64N(1000) }},
		{"random, uneven", 30_000, 0, 0, 20, 2_000, func(rng *rand.Rand, _ int) int64 { return rng.Int64N(1000) }},
		{"random, memory a ms past a multiple of the step", 5_001, 0, 1_000, 4, 400, func(rng *rand.Rand, _ int) int64 { return rng.Int64N(1000) }},
		// Slotted for a shorter memory, the list overflows: the two oldest
		// merge, safe, and past the one-slot bound (not judged).
		{"random, memory growing", 5_000, 100, 1_000, 8, 400, func(rng *rand.Rand, _ int) int64 { return rng.Int64N(1000) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(tc.releases)))
			e := &entry{unread: true, used: make([]reading, 1), carry: make([][]carried, 1)}
			slot := unreadSlot(tc.memory, tc.keep)
			if ceil := (tc.memory + int64(tc.keep) - 2) / int64(tc.keep-1); slot > ceil {
				t.Fatalf("slot %d ms, want at most %d: keep − 1 slots span the memory", slot, ceil)
			}
			type write struct{ at, v int64 }
			var writes []write
			// most returns the largest write released after since.
			most := func(since int64) int64 {
				m := int64(0)
				for _, w := range writes {
					if w.at > since {
						m = max(m, w.v)
					}
				}
				return m
			}
			now, worstAge := int64(1_700_000_000_000), int64(0)
			for i := range tc.releases {
				step := tc.every
				if step == 0 {
					step = rng.Int64N(3_000)
				}
				now += step
				memory := tc.memory + int64(i)*tc.grow
				w := write{at: now, v: tc.value(rng, i)}
				writes = append(writes, w)
				e.release(0, w.v, int64(i+1), now, now-memory, tc.keep, 0, e.unread)
				if len(e.carry[0]) > tc.keep {
					t.Fatalf("release %d: %d carries, want at most %d", i, len(e.carry[0]), tc.keep)
				}
				// Each write a ms before it ages out, until the next release.
				next := now + max(tc.every, 3_000)
				for _, w := range writes {
					if since := w.at - 1; since >= now-memory && since < next-memory {
						if got := e.carriedMax(0, since); got < w.v {
							t.Fatalf("release %d: carried %d a ms before a write of %d ages out", i, got, w.v)
						}
					}
				}
				for _, at := range []int64{now, now + step/2} {
					since := at - memory
					got := e.carriedMax(0, since)
					if want := most(since); got < want {
						t.Fatalf("release %d, %d ms later: carried %d, want at least %d (a write not aged out)", i, at-now, got, want)
					}
					if bound := most(since - slot); tc.grow == 0 && got > bound {
						t.Fatalf("release %d, %d ms later: carried %d, more than %d, the most released within a memory and a slot (%d ms)", i, at-now, got, bound, slot)
					}
					// How long past its release the newest write of the
					// amount carried, if that is aged out, was.
					if got > most(since) {
						for j := len(writes) - 1; j >= 0; j-- {
							if writes[j].v == got {
								worstAge = max(worstAge, at-writes[j].at)
								break
							}
						}
					}
				}
			}
			t.Logf("slot %d ms; a write held at most %d ms after its release (memory %d ms at the end)", slot, worstAge, tc.memory+int64(tc.releases-1)*tc.grow)
		})
	}
}

// TestForgetBoundsCarries: a DC past its lease a whole memory ago is
// counted at no more than its static limit, and so are the writes it
// carries, which stay until they age out: a write of 500 pruned just
// before the cap (static 200) must not count again once the lease is
// renewed (it did, until it aged out, when forget kept carries as they
// were), nor may the carries go (seed 1457 of TestLongWindowProperty,
// TestLongWindowPropertyReplays).
func TestForgetBoundsCarries(t *testing.T) {
	// Acknowledged 50 s into the expiry, before the cap: 500 is carried.
	p, rs, e, t0 := expiredShrink(t, 0)
	if got := p.held(rs, e, 0); got != 500 {
		t.Fatalf("held %d before the cap, want the carried 500", got)
	}
	static := e.static[0]
	for _, s := range []int{61, 62, 80} {
		p.now = t0.Add(time.Duration(s) * time.Second)
		if got := p.held(rs, e, 0); got != static {
			t.Errorf("t+%d s, capped: held %d, want the static %d (carries %v)", s, got, static, e.carry[0])
		}
	}
	p.dc[0].expired = false // the lease renewed
	for _, s := range []int{81, 100, 111} {
		p.now = t0.Add(time.Duration(s) * time.Second)
		if got := p.held(rs, e, 0); got > static || got < 100 {
			t.Errorf("t+%d s, renewed: held %d, want at most the static %d and at least the last reading, 100", s, got, static)
		}
	}
}

// TestForgetKeepsReading: a DC past its lease reads 190 after a shrink to
// 50 (the reading releases the carry of the write it left); once the
// memory has passed since the lease ran out, the leader forgets the
// reading, but the 190 is still in the window until it ages out, so it
// stays counted, capped and after the lease is renewed.
func TestForgetKeepsReading(t *testing.T) {
	p, rs, e, t0 := expiredShrink(t, 50)
	p.held(rs, e, 0)
	read := t0.Add(52 * time.Second)
	e.observe(0, 190, 3, read.UnixMilli(), p.cfg.Skew, nil)
	for _, tc := range []struct {
		at      time.Duration
		renewed bool
		want    int64
	}{
		{53 * time.Second, false, 190},
		{60 * time.Second, false, 190}, // capped: the reading is forgotten
		{61 * time.Second, false, 190},
		{70 * time.Second, true, 190},
		{112 * time.Second, true, 190},
		// What forget last counted (at t+61 s) ages out a memory and the
		// skew later; the 190 read at t+52 s has by then.
		{61*time.Second + 61*time.Second + time.Millisecond, true, 50},
	} {
		p.now = t0.Add(tc.at)
		p.dc[0].expired = !tc.renewed
		if got := p.held(rs, e, 0); got != tc.want {
			t.Errorf("t+%v (renewed %v): held %d, want %d (carries %v)", tc.at, tc.renewed, got, tc.want, e.carry[0])
		}
	}
	// Past its lease throughout, counted every second: what forget counts
	// is not carried in its turn (it would keep itself alive), so the 190
	// ages out when the reading does.
	p, rs, e, t0 = expiredShrink(t, 50)
	p.held(rs, e, 0)
	e.observe(0, 190, 3, read.UnixMilli(), p.cfg.Skew, nil)
	for s := 53; s <= 150; s++ {
		p.now = t0.Add(time.Duration(s) * time.Second)
		want := int64(190)
		if s >= 113 {
			want = 50
		}
		if got := p.held(rs, e, 0); got != want {
			t.Fatalf("t+%d s, past its lease: held %d, want %d (carries %v)", s, got, want, e.carry[0])
		}
	}
}

// expiredShrink returns a planner whose DC a, past its lease since t0 (a
// memory of 60 s, static limit 200), acknowledged a shrink from 500 to
// shrunk 50 s later, having read 100 at t0.
func expiredShrink(t *testing.T, shrunk int64) (*Planner, *ruleState, *entry, time.Time) {
	t.Helper()
	p, rs, e, t0 := expired(t, time.Second, []write{{2, 500}, {3, shrunk}})
	p.lastRev = 3
	p.now = t0.Add(50 * time.Second)
	p.SetAck("a", 3, p.now)
	return p, rs, e, t0
}

// expired returns a planner of one rule (600 per 60 s) whose DC a, with
// writes hist, read 100 at t0 and is past its lease since then.
func expired(t *testing.T, interval time.Duration, hist []write) (*Planner, *ruleState, *entry, time.Time) {
	t.Helper()
	p, err := New(Config{DCs: simDCs, Interval: interval})
	if err != nil {
		t.Fatal(err)
	}
	p.SetRules([]rule.Rule{logRule(600, 60)})
	rs := p.rules[ruleRef{"api", "r"}]
	e := rs.entry
	t0 := time.UnixMilli(1_700_000_000_000)
	p.now, p.lastRev = t0, 2
	e.used[0] = reading{v: 100, rev: 2, at: t0.UnixMilli(), ok: true}
	e.hist[0] = hist
	p.dc[0].expired, p.dc[0].expiredAt = true, t0
	return p, rs, e, t0
}

// TestForgetWhileWrittenAndRead: a DC past its lease a memory ago that
// still applies a new limit and sends a reading every interval (200 ms,
// skew 1 s) is counted at no more than it read or was allowed within a
// memory, the skew and an interval: when every reading was carried beside
// every write, the list outgrew its size, and the merges at its front
// kept a carry of 150 alive for as long as the writes went on.
func TestForgetWhileWrittenAndRead(t *testing.T) {
	p, rs, e, t0 := expired(t, 200*time.Millisecond, []write{{2, 150}})
	rev, limit := int64(2), int64(150)
	var seen []int64      // per interval: the most it read or was allowed
	for k := range 1500 { // 300 s from the cap, an interval at a time
		p.now = t0.Add(61*time.Second + time.Duration(k)*200*time.Millisecond)
		read := max(150-int64(k)/4, 1)
		if k > 0 {
			p.SetAck("a", rev, p.now)
			e.observe(0, read, rev, p.now.Add(-100*time.Millisecond).UnixMilli(), p.cfg.Skew, nil)
		}
		seen = append(seen, max(read, limit))
		held := p.held(rs, e, 0)
		if recent := slices.Max(seen[max(0, len(seen)-311):]); held > recent {
			t.Fatalf("t+%v: held %d, more than the %d it read or was allowed within 62 s (carries %v)", p.now.Sub(t0), held, recent, e.carry[0])
		}
		if len(e.carry[0]) > p.carried {
			t.Fatalf("t+%v: %d carries, want at most %d", p.now.Sub(t0), len(e.carry[0]), p.carried)
		}
		rev++
		limit = max(1, limit-1+int64(k%2))
		e.hist[0] = append(e.hist[0], write{rev, limit})
		p.lastRev = rev
	}
}

// TestTwoDCsAskingShareTheLimit: a asks alone, then b asks as much beside
// it. a has consumed the whole limit and re-admits what its own
// admissions free; held to its share while b is underserved
// (awareTargets), it lets b in: over the last two minutes b admits about
// half of what is admitted, for every algorithm, on the rule and on a key
// of its own (before, 0 for the sliding window log and counter, about 410
// for the buckets). A fixed window, whose DCs read 0 as each window turns
// while their grants stay as they were, checks that grants a reading has
// seen are not kept: kept, b admitted 0 there too.
func TestTwoDCsAskingShareTheLimit(t *testing.T) {
	for _, tc := range []struct{ name, key string }{{"rule", ""}, {"key", "k"}} {
		for _, alg := range algorithm.All {
			t.Run(tc.name+"/"+alg.String(), func(t *testing.T) {
				testTwoDCsAsking(t, alg, tc.key)
			})
		}
	}
}

// testTwoDCsAsking plays TestTwoDCsAskingShareTheLimit for alg, on the
// rule or (key not "") on a key of it.
func testTwoDCsAsking(t *testing.T, alg algorithm.Algorithm, key string) {
	r := minuteRule(alg)
	if key != "" {
		r.KeyType = rule.Dimensions{"user"}
	}
	w := newWorld(t, r, key, 300*time.Millisecond)
	w.reportLag, w.between = 500*time.Millisecond, 3
	w.run(60, 10, func(int) map[string]float64 { return map[string]float64{"a": 40} })
	both := func(int) map[string]float64 { return map[string]float64{"a": 40, "b": 40} }
	w.run(120, 10, both)
	admitted := func(d string) int64 { return w.offered[d] - w.rejected[d] }
	a0, b0 := admitted("a"), admitted("b")
	w.run(120, 10, both)
	a, b := admitted("a")-a0, admitted("b")-b0
	t.Logf("last two minutes: a admitted %d, b %d", a, b)
	if b*10 < (a+b)*4 {
		t.Errorf("last two minutes: b admitted %d of %d, want about half", b, a+b)
	}
}
