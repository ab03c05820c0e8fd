package simreport

import (
	"math"
	"sort"
	"time"

	"github.com/weirhq/weir/internal/sim/scenario"
)

// Analyze judges a run: for every rule of tr, it finds the changes of
// demand and the time to judge as steady, computes Weir's figures and the
// static-split and centralized baselines' on the same offered traffic, and
// compares Weir's with goals. It is pure and does not change tr.
func Analyze(tr *Trace, goals scenario.Goals) Report {
	interval := tr.Interval
	if interval <= 0 {
		interval = time.Second
	}
	n := 0
	for _, rt := range tr.Rules {
		n = max(n, len(rt.Seconds))
	}
	rep := Report{
		Scenario:  tr.Scenario,
		DCs:       append([]string(nil), tr.DCs...),
		Interval:  interval,
		Start:     tr.Start,
		WAN:       tr.WAN,
		Duration:  time.Duration(n) * time.Second,
		Goals:     goals,
		Allowance: goals.ConvergenceAllowance(interval),
	}
	rep.Faults = faultWindows(tr.Faults, rep.Duration, rep.Allowance)
	for _, rt := range tr.Rules {
		rep.Rules = append(rep.Rules, analyzeRule(&rep, rt))
	}
	return rep
}

// faultWindows returns the faults in order of At with their windows.
func faultWindows(marks []FaultMark, end, allowance time.Duration) []FaultWindow {
	sorted := append([]FaultMark(nil), marks...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].At < sorted[j].At })
	out := make([]FaultWindow, len(sorted))
	for i, m := range sorted {
		w := FaultWindow{FaultMark: m, Excluded: true}
		until := func(def time.Duration) time.Duration {
			if m.For > 0 {
				return m.At + m.For
			}
			return def
		}
		switch scenario.FaultKind(m.Kind) {
		case scenario.KillLeader:
			w.End = until(m.At + LeaderFailover)
		case scenario.StopBroker:
			w.End = until(end)
			if m.For <= 0 {
				for _, s := range sorted[i+1:] {
					if scenario.FaultKind(s.Kind) == scenario.StartBroker {
						w.End = s.At
						break
					}
				}
			}
		case scenario.StartBroker:
			w.End, w.Excluded = m.At, false
		case scenario.LoseReports, scenario.DuplicateReports, scenario.DelayReports:
			w.End, w.Excluded = until(end), false
		default:
			w.End = until(end)
		}
		if w.Excluded {
			w.Until = w.End + allowance
		}
		out[i] = w
	}
	return out
}

// The reasons of excluded spans that are not faults.
const (
	whyWarmUp = "warm-up"
	whyChange = "demand change"
)

// judge holds what the figures of one rule share.
type judge struct {
	rep       *Report
	dcs       []string
	n         int     // whole seconds
	limit     float64 // L
	w         int     // window, whole seconds
	lps       float64 // L per second
	changes   []Change
	excluded  []Span
	steady    []bool // per second
	periods   []Span // steady periods
	warmUpEnd time.Duration
}

func analyzeRule(rep *Report, rt RuleTrace) RuleReport {
	r := newRule(rep, rt)
	static := StaticSplit(rt, rep.DCs)
	central := Centralized(rt, rep.DCs)
	rr := RuleReport{
		RuleID:           rt.RuleID,
		Limit:            rt.Limit,
		Window:           window(rt),
		Changes:          r.changes,
		Excluded:         r.excluded,
		Weir:             r.figures(rt, true),
		Static:           r.figures(static, true),
		Centralized:      r.figures(central, false),
		Trace:            rt,
		StaticTrace:      static,
		CentralizedTrace: central,
	}
	for _, s := range r.steady {
		if s {
			rr.SteadySeconds++
		}
	}
	rr.Results = results(rep, rr.Weir)
	return rr
}

// window returns rt's window, 1 s when zero.
func window(rt RuleTrace) time.Duration {
	if rt.Window <= 0 {
		return time.Second
	}
	return rt.Window
}

func newRule(rep *Report, rt RuleTrace) *judge {
	w := windowSeconds(rt)
	r := &judge{
		rep:   rep,
		dcs:   rep.DCs,
		n:     len(rt.Seconds),
		limit: float64(rt.Limit),
		w:     w,
		lps:   float64(rt.Limit) / float64(w),
	}
	r.warmUpEnd = min(rep.Goals.WarmUp, time.Duration(r.n)*time.Second)
	r.changes = detectChanges(rt, r.dcs, r.lps)
	if rep.Goals.WarmUp > 0 {
		r.excluded = append(r.excluded, Span{From: 0, To: rep.Goals.WarmUp, Why: whyWarmUp})
	}
	for _, f := range rep.Faults {
		if f.Excluded {
			why := f.Kind
			if f.DC != "" {
				why += " " + f.DC
			}
			r.excluded = append(r.excluded, Span{From: f.At, To: f.Until, Why: why})
		}
	}
	for _, c := range r.changes {
		r.excluded = append(r.excluded, Span{From: c.At, To: c.At + rep.Allowance, Why: whyChange})
	}
	sort.SliceStable(r.excluded, func(i, j int) bool { return r.excluded[i].From < r.excluded[j].From })
	r.steady = make([]bool, r.n)
	for i := range r.steady {
		from, to := time.Duration(i)*time.Second, time.Duration(i+1)*time.Second
		r.steady[i] = true
		for _, s := range r.excluded {
			if s.From < to && s.To > from {
				r.steady[i] = false
				break
			}
		}
	}
	// The steady periods: [0, end) less the union of the excluded spans.
	end := time.Duration(r.n) * time.Second
	at := time.Duration(0)
	for _, s := range r.excluded {
		if s.From > at {
			r.periods = append(r.periods, Span{From: at, To: min(s.From, end), Why: "steady"})
		}
		at = max(at, s.To)
		if at >= end {
			break
		}
	}
	if at < end {
		r.periods = append(r.periods, Span{From: at, To: end, Why: "steady"})
	}
	return r
}

// detectChanges finds the step changes of demand in rt's offered series.
//
// The start of the run is always a change, at 0 s, of the DCs that offered
// anything in its first StepPersistence. Each DC's reference level starts
// as its mean offered count over those seconds; a step is at second i ≥ 1
// when the offered counts of seconds i, i+1 and i+2 (StepPersistence) all
// differ from the level by more than StepThreshold × L per second, in the
// same direction; the level becomes their mean, and the search goes on
// after them. Steps of several DCs less than StepPersistence apart are one
// change, at the first.
func detectChanges(rt RuleTrace, dcs []string, lps float64) []Change {
	p := int(StepPersistence / time.Second)
	n := len(rt.Seconds)
	if n == 0 {
		return nil
	}
	threshold := StepThreshold * lps
	type hit struct {
		i, dc int
	}
	var hits []hit
	for di, d := range dcs {
		offered := func(i int) float64 { return float64(rt.Seconds[i].Offered[d]) }
		level := 0.0
		for i := 0; i < min(p, n); i++ {
			level += offered(i) / float64(min(p, n))
		}
		if level > 0 {
			hits = append(hits, hit{0, di})
		}
		for i := 1; i+p <= n; {
			up, down := true, true
			sum := 0.0
			for j := i; j < i+p; j++ {
				diff := offered(j) - level
				up = up && diff > threshold
				down = down && diff < -threshold
				sum += offered(j)
			}
			if up || down {
				hits = append(hits, hit{i, di})
				level = sum / float64(p)
				i += p
				continue
			}
			i++
		}
	}
	hits = append(hits, hit{0, -1}) // the start, whoever offered
	sort.Slice(hits, func(a, b int) bool {
		if hits[a].i != hits[b].i {
			return hits[a].i < hits[b].i
		}
		return hits[a].dc < hits[b].dc
	})
	var starts []int
	var members [][]int
	for _, h := range hits {
		if k := len(starts); k > 0 && h.i < starts[k-1]+p {
			members[k-1] = append(members[k-1], h.dc)
			continue
		}
		starts = append(starts, h.i)
		members = append(members, []int{h.dc})
	}
	changes := make([]Change, len(starts))
	for k, i := range starts {
		next := n
		if k+1 < len(starts) {
			next = starts[k+1]
		}
		c := Change{At: time.Duration(i) * time.Second, Offered: map[string]float64{}}
		sort.Ints(members[k])
		for _, di := range members[k] {
			if di >= 0 && (len(c.DCs) == 0 || c.DCs[len(c.DCs)-1] != dcs[di]) {
				c.DCs = append(c.DCs, dcs[di])
			}
		}
		demand := map[string]float64{}
		total := 0.0
		for _, d := range dcs {
			sum := 0
			for j := i; j < next; j++ {
				sum += rt.Seconds[j].Offered[d]
			}
			c.Offered[d] = float64(sum) / float64(next-i)
			total += c.Offered[d]
			demand[d] = c.Offered[d] / lps
		}
		c.Fair = MaxMinFair(demand, 1)
		c.Congested = total >= lps
		changes[k] = c
	}
	return changes
}

// figures computes the figures of rt, which has shares if withShares.
func (r *judge) figures(rt RuleTrace, withShares bool) Figures {
	if r.w > 1 {
		return Figures{Overshoot: r.overshoot(rt), Utilisation: r.windowUtilisation(rt), PerWindow: true}
	}
	f := Figures{
		Overshoot:   r.overshoot(rt),
		Utilisation: r.utilisation(rt),
		Fairness:    r.fairness(rt),
		Starvation:  r.starvation(rt),
	}
	if withShares {
		f.Convergence = r.convergence(rt)
		f.Oscillation = r.oscillation(rt)
	}
	return f
}

// totals returns the admitted and offered requests of second i, over all
// DCs.
func (r *judge) totals(rt RuleTrace, i int) (admitted, offered int) {
	s := rt.Seconds[i]
	for _, d := range r.dcs {
		admitted += s.Admitted[d]
		offered += s.Offered[d]
	}
	return admitted, offered
}

// windowAdmitted returns the requests admitted in the window of whole
// seconds ending with second i.
func (r *judge) windowAdmitted(rt RuleTrace, i int) int {
	sum := 0
	for j := max(0, i-r.w+1); j <= i; j++ {
		a, _ := r.totals(rt, j)
		sum += a
	}
	return sum
}

func (r *judge) overshoot(rt RuleTrace) Overshoot {
	var o Overshoot
	o.Seconds = r.n
	if r.limit <= 0 {
		return o
	}
	for i := 0; i < r.n; i++ {
		v := math.Max(0, float64(r.windowAdmitted(rt, i))-r.limit) / r.limit
		if v > o.Worst {
			o.Worst, o.WorstAt = v, time.Duration(i)*time.Second
		}
		if v > r.rep.Goals.MaxOvershoot {
			o.Above++
		}
	}
	return o
}

// congested returns the steady seconds whose offered total reaches L per
// second.
func (r *judge) congested(rt RuleTrace) []int {
	var out []int
	for i := 0; i < r.n; i++ {
		if _, offered := r.totals(rt, i); r.steady[i] && r.lps > 0 && float64(offered) >= r.lps {
			out = append(out, i)
		}
	}
	return out
}

// windowUtilisation is utilisation over whole windows (see Utilisation).
func (r *judge) windowUtilisation(rt RuleTrace) Utilisation {
	u := Utilisation{Window: r.w}
	var admitted, admissible float64
	first := int((r.warmUpEnd + time.Second - 1) / time.Second)
windows:
	for start := first; start+r.w <= r.n; start++ {
		from, to := time.Duration(start)*time.Second, time.Duration(start+r.w)*time.Second
		for _, s := range r.excluded {
			if s.Why != whyWarmUp && s.Why != whyChange && s.From < to && s.To > from {
				continue windows // a fault
			}
		}
		a, o := 0, 0
		for i := start; i < start+r.w; i++ {
			ai, oi := r.totals(rt, i)
			a, o = a+ai, o+oi
		}
		if float64(o) < r.limit {
			continue
		}
		can := math.Min(float64(o), r.limit)
		admitted += float64(a)
		admissible += can
		if v := float64(a) / can; u.Seconds == 0 || v < u.Worst {
			u.Worst, u.WorstAt = v, from
		}
		u.Seconds++
	}
	if admissible > 0 {
		u.Ratio = admitted / admissible
	}
	return u
}

func (r *judge) utilisation(rt RuleTrace) Utilisation {
	u := Utilisation{Window: 1}
	var admitted, admissible float64
	for _, i := range r.congested(rt) {
		a, o := r.totals(rt, i)
		can := math.Min(float64(o), r.lps)
		admitted += float64(a)
		admissible += can
		if v := float64(a) / can; u.Seconds == 0 || v < u.Worst {
			u.Worst, u.WorstAt = v, time.Duration(i)*time.Second
		}
		u.Seconds++
	}
	if admissible > 0 {
		u.Ratio = admitted / admissible
	}
	return u
}

func (r *judge) fairness(rt RuleTrace) Fairness {
	var f Fairness
	sum := 0.0
	for _, i := range r.congested(rt) {
		s := rt.Seconds[i]
		demand := make(map[string]float64, len(r.dcs))
		for _, d := range r.dcs {
			demand[d] = float64(s.Offered[d]) / r.lps
		}
		fair := MaxMinFair(demand, 1)
		var xs []float64
		for _, d := range r.dcs {
			o := float64(s.Offered[d])
			if o <= 0 {
				continue
			}
			xs = append(xs, float64(s.Admitted[d])/math.Min(o, fair[d]*r.lps))
		}
		j := Jain(xs)
		if f.Seconds == 0 || j < f.Worst {
			f.Worst, f.WorstAt = j, time.Duration(i)*time.Second
		}
		sum += j
		f.Seconds++
	}
	if f.Seconds > 0 {
		f.Mean = sum / float64(f.Seconds)
	}
	return f
}

func (r *judge) starvation(rt RuleTrace) Starvation {
	s := Starvation{ByDC: map[string]int{}}
	for i := 0; i < r.n; i++ {
		if !r.steady[i] {
			continue
		}
		s.Judged++
		if float64(r.windowAdmitted(rt, i)) >= ExhaustedFraction*r.limit {
			continue
		}
		sec := rt.Seconds[i]
		starved := false
		for _, d := range r.dcs {
			if sec.Offered[d] > 0 && sec.Admitted[d] == 0 {
				s.ByDC[d]++
				starved = true
			}
		}
		if starved {
			if s.Seconds == 0 {
				s.FirstAt = time.Duration(i) * time.Second
			}
			s.Seconds++
		}
	}
	return s
}

// converged reports whether every DC's share in s is within
// ConvergenceBand of its fair share: not below it by more, and, when
// demand is congested, not above it by more either (below congestion a
// DC may hold headroom above its demand).
func (r *judge) converged(s ShareSample, c Change) bool {
	const eps = 1e-9
	for _, d := range r.dcs {
		v, f := s.Share[d], c.Fair[d]
		if v < f-ConvergenceBand-eps || c.Congested && v > f+ConvergenceBand+eps {
			return false
		}
	}
	return true
}

func (r *judge) convergence(rt RuleTrace) Convergence {
	cv := Convergence{Applicable: true}
	end := time.Duration(r.n) * time.Second
	allowance := r.rep.Allowance
	haveWorst := false
	for k, c := range r.changes {
		st := Settling{At: c.At, Allowed: allowance}
		if c.At < r.warmUpEnd {
			st.Allowed = max(allowance, r.warmUpEnd-c.At)
		}
		segEnd := end
		if k+1 < len(r.changes) {
			segEnd = r.changes[k+1].At
		}
		during := false
		for _, f := range r.rep.Faults {
			if !f.Excluded {
				continue
			}
			if c.At >= f.At && c.At < f.Until {
				during = true
			}
			if f.At > c.At {
				segEnd = min(segEnd, f.At)
			}
		}
		if during {
			st.Status = DuringFault
			cv.Changes = append(cv.Changes, st)
			continue
		}
		settledAt, settled := time.Duration(0), false
		for _, s := range rt.Shares {
			if s.At < c.At || s.At >= segEnd {
				continue
			}
			ok := r.converged(s, c)
			switch {
			case ok && !settled:
				settledAt, settled = s.At, true
			case !ok:
				settled = false
			}
		}
		switch {
		case settled:
			st.Time = settledAt - c.At
			st.Status = Settled
			if st.Time > st.Allowed {
				st.Status = Late
			}
		case segEnd-c.At >= st.Allowed:
			st.Status = Unsettled
		default:
			st.Status = Interrupted
		}
		if st.Status.Judged() {
			cv.Judged++
			if st.Status != Settled {
				cv.Late++
			}
			if st.Status != Unsettled && (!haveWorst || st.Time > cv.Worst) {
				cv.Worst, cv.WorstAt, haveWorst = st.Time, st.At, true
			}
		}
		cv.Changes = append(cv.Changes, st)
	}
	return cv
}

func (r *judge) oscillation(rt RuleTrace) Oscillation {
	o := Oscillation{Applicable: true, ByDC: map[string]int{}}
	for _, p := range r.periods {
		o.Steady += p.To - p.From
		var samples []ShareSample
		for _, s := range rt.Shares {
			if s.At >= p.From && s.At < p.To {
				samples = append(samples, s)
			}
		}
		for _, d := range r.dcs {
			vals := make([]float64, len(samples))
			for i, s := range samples {
				vals[i] = s.Share[d]
			}
			o.ByDC[d] += reversals(vals, OscillationBand)
		}
	}
	for _, d := range r.dcs {
		if o.ByDC[d] > o.Worst {
			o.Worst, o.WorstDC = o.ByDC[d], d
		}
	}
	return o
}

// reversals counts the direction changes of vals beyond band: the series
// has a direction once it has moved more than band from its start; it
// changes direction when it moves more than band back from the extreme
// reached in its current direction.
func reversals(vals []float64, band float64) int {
	if len(vals) == 0 {
		return 0
	}
	const eps = 1e-12
	ext, dir, n := vals[0], 0, 0
	for _, v := range vals[1:] {
		switch {
		case dir == 0 && v > ext+band+eps:
			dir, ext = 1, v
		case dir == 0 && v < ext-band-eps:
			dir, ext = -1, v
		case dir == 1 && v > ext:
			ext = v
		case dir == 1 && v < ext-band-eps:
			dir, ext, n = -1, v, n+1
		case dir == -1 && v < ext:
			ext = v
		case dir == -1 && v > ext+band+eps:
			dir, ext, n = 1, v, n+1
		}
	}
	return n
}
