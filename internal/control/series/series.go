package series

import (
	"errors"
	"sort"
	"sync"
	"time"
)

// DefaultSpan is the history kept when Config.Span is zero.
const DefaultSpan = 15 * time.Minute

// MaxPoints bounds the points of one ring, whatever the span and interval.
const MaxPoints = 10_000

// Config configures a Store.
type Config struct {
	// Interval is the planning interval: one point per interval. Required.
	Interval time.Duration
	// Span is how far back the history goes; default DefaultSpan. The
	// rings hold Span/Interval points (at least 1, at most MaxPoints).
	Span time.Duration
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	switch {
	case c.Interval <= 0:
		return errors.New("series: Interval must be positive")
	case c.Span < 0:
		return errors.New("series: negative Span")
	}
	return nil
}

// Point is one DC's state of a rule at the end of one planning interval.
// Demand, Target and Share are fractions of the rule's limit; Offered,
// Admitted and Rejected count the requests the DC reported during the
// interval.
type Point struct {
	At                          time.Time
	Demand, Target, Share       float64
	Offered, Admitted, Rejected uint64
}

// DCSample is one DC's point in a round.
type DCSample struct {
	DC    string
	Point Point
}

// Sample is one rule's part of a round.
type Sample struct {
	Domain, RuleID string
	Limit          int64
	WindowSeconds  int64
	DCs            []DCSample
}

// Rule is a rule's history: its DCs in the order last recorded, each with
// its points, oldest first.
type Rule struct {
	Domain, RuleID string
	Limit          int64
	WindowSeconds  int64
	DCs            []DC
}

// DC is one DC's history of a rule.
type DC struct {
	DC     string
	Points []Point
}

// Store holds the rings. It is safe for concurrent use; the zero value is
// not usable (New).
type Store struct {
	interval time.Duration
	size     int

	mu    sync.Mutex
	rules map[ref]*ruleRings
}

type ref struct{ domain, id string }

type ruleRings struct {
	limit, window int64
	order         []string
	dcs           map[string]*ring
}

// ring is a fixed-size circular buffer of points.
type ring struct {
	pts  []Point
	next int // where the next point goes
	n    int
}

func (r *ring) add(p Point) {
	r.pts[r.next] = p
	r.next = (r.next + 1) % len(r.pts)
	r.n = min(r.n+1, len(r.pts))
}

func (r *ring) points() []Point {
	out := make([]Point, 0, r.n)
	start := (r.next - r.n + len(r.pts)) % len(r.pts)
	for i := range r.n {
		out = append(out, r.pts[(start+i)%len(r.pts)])
	}
	return out
}

// New returns an empty Store for cfg.
func New(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Span == 0 {
		cfg.Span = DefaultSpan
	}
	size := int(min(max(cfg.Span/cfg.Interval, 1), MaxPoints))
	return &Store{interval: cfg.Interval, size: size, rules: map[ref]*ruleRings{}}, nil
}

// Interval returns the interval between points.
func (s *Store) Interval() time.Duration { return s.interval }

// Size returns the most points a ring holds.
func (s *Store) Size() int { return s.size }

// Record adds one round: a point per rule and DC. A rule the round does not
// mention is forgotten (it is no longer a global rule the leader plans).
func (s *Store) Record(round []Sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[ref]bool, len(round))
	for _, smp := range round {
		k := ref{smp.Domain, smp.RuleID}
		seen[k] = true
		rr := s.rules[k]
		if rr == nil {
			rr = &ruleRings{dcs: map[string]*ring{}}
			s.rules[k] = rr
		}
		rr.limit, rr.window = smp.Limit, smp.WindowSeconds
		rr.order = rr.order[:0]
		for _, d := range smp.DCs {
			rg := rr.dcs[d.DC]
			if rg == nil {
				rg = &ring{pts: make([]Point, s.size)}
				rr.dcs[d.DC] = rg
			}
			rg.add(d.Point)
			rr.order = append(rr.order, d.DC)
		}
	}
	for k := range s.rules {
		if !seen[k] {
			delete(s.rules, k)
		}
	}
}

// Reset forgets everything (a new term begins).
func (s *Store) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.rules)
}

// Rule returns a copy of one rule's history, and false when there is none.
func (s *Store) Rule(domain, ruleID string) (Rule, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rr := s.rules[ref{domain, ruleID}]
	if rr == nil {
		return Rule{}, false
	}
	return rr.copy(domain, ruleID), true
}

// Rules returns a copy of every rule's history, sorted by domain and id.
func (s *Store) Rules() []Rule {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Rule, 0, len(s.rules))
	for k, rr := range s.rules {
		out = append(out, rr.copy(k.domain, k.id))
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Domain < out[j].Domain || out[i].Domain == out[j].Domain && out[i].RuleID < out[j].RuleID
	})
	return out
}

func (rr *ruleRings) copy(domain, id string) Rule {
	r := Rule{Domain: domain, RuleID: id, Limit: rr.limit, WindowSeconds: rr.window, DCs: make([]DC, 0, len(rr.order))}
	for _, dc := range rr.order {
		r.DCs = append(r.DCs, DC{DC: dc, Points: rr.dcs[dc].points()})
	}
	return r
}
