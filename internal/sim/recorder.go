package sim

import (
	"sync"
	"time"

	"github.com/weirhq/weir/internal/sim/simreport"
	"github.com/weirhq/weir/pkg/rule"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// recorder accumulates what the flows saw, per rule and second, and the
// shares sampled.
type recorder struct {
	mu      sync.Mutex
	start   time.Time
	dcs     []string
	rules   map[string]*ruleRec
	ordered []string
}

type ruleRec struct {
	limit   int64
	window  time.Duration
	key     string // a key of the rule seen in answers, for Status
	seconds []simreport.Second
	shares  []simreport.ShareSample
}

func newRecorder(cfg Config, rules []rule.Rule) *recorder {
	r := &recorder{dcs: cfg.DCs, rules: map[string]*ruleRec{}}
	for _, x := range rules {
		if x.Scope != rule.ScopeGlobal || x.Unlimited {
			continue
		}
		r.rules[x.ID] = &ruleRec{limit: x.Limit, window: x.Window()}
		r.ordered = append(r.ordered, x.ID)
	}
	return r
}

func (r *recorder) secondAt(rr *ruleRec, i int) *simreport.Second {
	for len(rr.seconds) <= i {
		n := len(rr.seconds)
		rr.seconds = append(rr.seconds, simreport.Second{At: time.Duration(n) * time.Second, Offered: map[string]int{}, Admitted: map[string]int{}})
	}
	return &rr.seconds[i]
}

// request counts one request of a flow aimed at ruleID, sent at offset at.
func (r *recorder) request(ruleID, dc string, at time.Duration, admitted bool, resp *weirv1.CheckResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rr := r.rules[ruleID]
	if rr == nil {
		return
	}
	s := r.secondAt(rr, int(at/time.Second))
	s.Offered[dc]++
	if admitted {
		s.Admitted[dc]++
	}
	if rr.key == "" {
		for _, it := range resp.GetItems() {
			for _, res := range it.GetResults() {
				if res.GetRuleId() == ruleID && res.GetKey() != "" {
					rr.key = res.GetKey()
				}
			}
		}
	}
}

func (r *recorder) key(ruleID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rr := r.rules[ruleID]; rr != nil {
		return rr.key
	}
	return ""
}

func (r *recorder) share(ruleID string, at time.Duration, shares map[string]float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rr := r.rules[ruleID]; rr != nil && len(shares) > 0 {
		rr.shares = append(rr.shares, simreport.ShareSample{At: at, Share: shares})
	}
}

// second returns a copy of second i of a rule and the latest shares.
func (r *recorder) second(ruleID string, i int) (simreport.Second, map[string]float64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rr := r.rules[ruleID]
	if rr == nil || i < 0 || i >= len(rr.seconds) {
		return simreport.Second{}, nil, false
	}
	s := rr.seconds[i]
	out := simreport.Second{At: s.At, Offered: map[string]int{}, Admitted: map[string]int{}}
	for k, v := range s.Offered {
		out.Offered[k] = v
	}
	for k, v := range s.Admitted {
		out.Admitted[k] = v
	}
	var shares map[string]float64
	if n := len(rr.shares); n > 0 {
		shares = rr.shares[n-1].Share
	}
	return out, shares, true
}

// trace returns the run's trace: whole seconds only.
func (r *recorder) trace(cfg Config, start time.Time) *simreport.Trace {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := &simreport.Trace{Scenario: cfg.Name, DCs: cfg.DCs, Interval: cfg.Interval, Start: start}
	whole := int(cfg.Duration / time.Second)
	for _, id := range r.ordered {
		rr := r.rules[id]
		r.secondAt(rr, whole-1)
		t.Rules = append(t.Rules, simreport.RuleTrace{RuleID: id, Limit: rr.limit, Window: rr.window, Seconds: rr.seconds[:whole], Shares: rr.shares})
	}
	for _, f := range cfg.Faults {
		t.Faults = append(t.Faults, simreport.FaultMark{At: f.At, Kind: f.Kind, DC: f.DC, For: f.For})
	}
	return t
}
