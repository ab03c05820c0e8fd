package planner

import (
	"math"
	"slices"
	"sort"
	"time"

	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// Statistics kept for operators (the admin API's /stats): per global rule
// and DC, the counts of the last StatsIntervals intervals, exactly; and the
// rule's hottest keys, with counts that decay by half every
// StatsIntervals/2 intervals, so they describe about the same period.
const (
	StatsIntervals = 60
	maxStatsKeys   = 1000
)

type usageStats struct {
	rules map[ruleRef]*ruleUsage
}

type ruleUsage struct {
	dcs     map[string]*[StatsIntervals]bucket
	keys    map[string]*keyUsage
	decayed int64 // interval the key counts were last decayed to
	last    time.Time
}

type bucket struct {
	idx                         int64
	offered, admitted, rejected uint64
}

type keyUsage struct {
	requests, rejections float64
}

func newUsageStats() *usageStats { return &usageStats{rules: map[ruleRef]*ruleUsage{}} }

// add counts one rule's part of a report of DC dc for interval idx.
func (u *usageStats) add(ref ruleRef, dc string, idx int64, ru *weirv1.RuleUsage, now time.Time) {
	r := u.rules[ref]
	if r == nil {
		r = &ruleUsage{dcs: map[string]*[StatsIntervals]bucket{}, keys: map[string]*keyUsage{}, decayed: idx}
		u.rules[ref] = r
	}
	r.last = now
	ring := r.dcs[dc]
	if ring == nil {
		ring = new([StatsIntervals]bucket)
		r.dcs[dc] = ring
	}
	b := &ring[int(idx%StatsIntervals+StatsIntervals)%StatsIntervals]
	if b.idx != idx {
		*b = bucket{idx: idx}
	}
	b.offered += ru.GetOffered()
	b.admitted += ru.GetAdmitted()
	b.rejected += ru.GetRejected()
	r.decay(idx)
	for _, k := range ru.GetKeys() {
		if k.GetKey() == "" || len(k.GetKey()) > MaxKeyLen || !countsOK(k.GetOffered(), k.GetAdmitted(), k.GetRejected()) {
			continue
		}
		ku := r.keys[k.GetKey()]
		if ku == nil {
			if len(r.keys) >= maxStatsKeys {
				r.evict()
			}
			ku = &keyUsage{}
			r.keys[k.GetKey()] = ku
		}
		ku.requests += float64(k.GetOffered())
		ku.rejections += float64(k.GetRejected())
	}
}

// decay ages the key counts up to interval idx.
func (r *ruleUsage) decay(idx int64) {
	if idx <= r.decayed {
		return
	}
	f := math.Pow(0.5, float64(idx-r.decayed)/(StatsIntervals/2))
	r.decayed = idx
	for k, ku := range r.keys {
		ku.requests *= f
		ku.rejections *= f
		if ku.requests < 0.5 {
			delete(r.keys, k)
		}
	}
}

// evict drops the coldest tenth of the keys.
func (r *ruleUsage) evict() {
	counts := make([]float64, 0, len(r.keys))
	for _, ku := range r.keys {
		counts = append(counts, ku.requests)
	}
	slices.Sort(counts)
	cut := counts[len(counts)/10]
	for k, ku := range r.keys {
		if ku.requests <= cut {
			delete(r.keys, k)
		}
	}
}

// RuleStats is a rule's recent usage.
type RuleStats struct {
	// DCs holds each DC's counts over the last StatsIntervals intervals.
	DCs map[string]DCStats
	// HotKeys are the keys with the most requests, most first.
	HotKeys []HotKey
	// LastUpdated is when a report last counted.
	LastUpdated time.Time
	// Period is the time the counts cover.
	Period time.Duration
}

// DCStats counts one DC's decisions of a rule.
type DCStats struct {
	Offered, Admitted, Rejected uint64
}

// HotKey is one key's recent usage.
type HotKey struct {
	Key                  string
	Requests, Rejections uint64
}

// Stats returns a rule's recent usage and false when no report mentioned
// it since this planner started.
func (p *Planner) RuleStats(domain, ruleID string, top int) (RuleStats, bool) {
	r := p.usage.rules[ruleRef{domain, ruleID}]
	if r == nil {
		return RuleStats{}, false
	}
	st := RuleStats{DCs: map[string]DCStats{}, LastUpdated: r.last, Period: StatsIntervals * p.cfg.Interval}
	newest := p.closed + 1
	for dc, ring := range r.dcs {
		var s DCStats
		for _, b := range ring {
			if b.idx > newest-StatsIntervals && b.idx <= newest+1 {
				s.Offered += b.offered
				s.Admitted += b.admitted
				s.Rejected += b.rejected
			}
		}
		st.DCs[dc] = s
	}
	for k, ku := range r.keys {
		st.HotKeys = append(st.HotKeys, HotKey{Key: k, Requests: uint64(math.Round(ku.requests)), Rejections: uint64(math.Round(ku.rejections))})
	}
	sort.Slice(st.HotKeys, func(i, j int) bool {
		a, b := st.HotKeys[i], st.HotKeys[j]
		return a.Requests > b.Requests || a.Requests == b.Requests && a.Key < b.Key
	})
	if top > 0 && len(st.HotKeys) > top {
		st.HotKeys = st.HotKeys[:top]
	}
	return st, true
}
