package envoyrls

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weirhq/weir/internal/dc/grpcapi"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/envoyconf"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
)

// storePrefixes are the store keys' prefixes of each unit's counters,
// "envoy/<window seconds>/".
func storePrefixes() map[envoyconf.Unit]string {
	out := map[envoyconf.Unit]string{}
	for u := envoyconf.Second; u <= envoyconf.Week; u++ {
		out[u] = "envoy/" + strconv.FormatInt(u.Seconds(), 10) + "/"
	}
	return out
}

// unitRules are rules of one FixedWindow per Envoy unit, for limits that
// have no Weir rule of their own: a descriptor's own limit, a
// requests_per_unit of 0, a limit in shadow_mode. A Match carries the
// limit itself.
type unitRules map[envoyconf.Unit]*ruleset.Rule

func newUnitRules() unitRules {
	s := rule.Set{Domain: "envoy"}
	for u := envoyconf.Second; u <= envoyconf.Week; u++ {
		r := rule.Rule{
			ID: "envoy-" + strconv.Itoa(int(u)), Domain: "envoy", Limit: 1, WindowSeconds: u.Seconds(),
			Algorithm: algorithm.FixedWindow, Scope: rule.ScopeLocal, Enabled: true,
		}
		r.SetDefaults()
		s.Rules = append(s.Rules, r)
	}
	set, err := ruleset.Compile(s)
	if err != nil {
		panic(fmt.Sprintf("envoyrls: the unit rules do not compile: %v", err)) // a bug here, not a caller's
	}
	out := unitRules{}
	for u := envoyconf.Second; u <= envoyconf.Week; u++ {
		out[u], _ = set.Rule("envoy-" + strconv.Itoa(int(u)))
	}
	return out
}

// peerLimit is the limit one descriptor takes, as envoyproxy/ratelimit
// selects it.
type peerLimit struct {
	limit     *envoyconf.Limit
	found     envoyconf.Found
	entries   []envoyconf.Entry
	unlimited bool
}

// peerRequest is what the peer path reads of a request: from the decoded
// message (peerRequestOf), or from its wire form (decode.go).
type peerRequest struct {
	domain string
	hits   uint32 // the request's hits_addend
	descs  []peerDescriptor

	// What answering it needs besides, kept with a pooled request (see
	// fastRequest) for the next.
	limits []peerLimit
	items  []limiter.Item
	itemOf []int
}

// reset empties r for reuse, keeping its arrays (see maxPooled) but
// nothing they referred to.
func (r *peerRequest) reset() {
	r.domain, r.hits = "", 0
	r.descs = emptied(r.descs, maxPooled)
	r.limits = emptied(r.limits, maxPooled)
	r.items = emptied(r.items, maxPooled)
	r.itemOf = emptied(r.itemOf, maxPooled)
}

// peerDescriptor is what the peer path reads of a descriptor.
type peerDescriptor struct {
	entries []envoyconf.Entry
	limit   *rlcommonv3.RateLimitDescriptor_RateLimitOverride // its own limit, if any
	hits    *uint64                                           // its own hits_addend, if any
}

// peerRequestOf reads req; the entries of every descriptor share one
// array.
func peerRequestOf(req *rlsv3.RateLimitRequest) *peerRequest {
	ds := req.GetDescriptors()
	pr := &peerRequest{domain: req.GetDomain(), hits: req.GetHitsAddend(), descs: make([]peerDescriptor, len(ds))}
	n := 0
	for _, d := range ds {
		n += len(d.GetEntries())
	}
	all := make([]envoyconf.Entry, 0, n)
	for i, d := range ds {
		start := len(all)
		for _, e := range d.GetEntries() {
			all = append(all, envoyconf.Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		pd := &pr.descs[i]
		pd.entries, pd.limit = all[start:len(all):len(all)], d.GetLimit()
		if h := d.GetHitsAddend(); h != nil {
			v := h.GetValue()
			pd.hits = &v
		}
	}
	return pr
}

// shouldRateLimitPeer answers req, whose domain has the configuration
// tree, as envoyproxy/ratelimit answers (see the package documentation).
func (s *Service) shouldRateLimitPeer(ctx context.Context, req *peerRequest, tree *envoyconf.Domain) (*rlsv3.RateLimitResponse, error) {
	ds := req.descs
	req.limits = resized(req.limits, len(ds))
	limits := req.limits
	var replacing map[string]bool // made when a limit replaces another
	for i := range ds {
		d := &ds[i]
		if d.hits != nil && *d.hits > limiter.MaxHits {
			return nil, fmt.Errorf("descriptors[%d].hits_addend: %d, at most %d", i, *d.hits, uint64(limiter.MaxHits))
		}
		p := &limits[i]
		p.entries = d.entries
		if o := d.limit; o != nil {
			// The descriptor's own limit, never in shadow mode.
			p.limit = &envoyconf.Limit{RequestsPerUnit: o.GetRequestsPerUnit(), Unit: envoyconf.Unit(o.GetUnit())}
			if p.limit.Unit.Seconds() == 0 {
				return nil, fmt.Errorf("descriptors[%d].limit.unit: %v is not a unit", i, o.GetUnit())
			}
		} else {
			p.found = tree.Lookup(p.entries)
			p.limit = p.found.Limit
		}
		if p.limit == nil {
			continue
		}
		for _, r := range p.limit.Replaces {
			if replacing == nil {
				replacing = map[string]bool{}
			}
			replacing[r] = true
		}
		if p.limit.Unlimited {
			p.unlimited, p.limit = true, nil
		}
	}
	for i := range limits {
		if l := limits[i].limit; l != nil && l.Name != "" && replacing[l.Name] {
			limits[i].limit = nil
		}
	}
	set, _ := s.lim.Rules(req.domain)
	req.items, req.itemOf = resized(req.items, len(ds)), resized(req.itemOf, len(ds))
	items, itemOf := req.items[:0], req.itemOf[:0]
	for i := range ds {
		l := limits[i].limit
		if l == nil {
			continue
		}
		hits := uint64(max(1, req.hits))
		if h := ds[i].hits; h != nil {
			hits = *h
		}
		items = append(items, limiter.Item{
			Match:    s.match(set, req.domain, &limits[i]),
			Hits:     int64(hits),
			ZeroHits: true, CountRejected: true,
		})
		itemOf = append(itemOf, i)
	}
	var resp limiter.Response
	if len(items) > 0 {
		var err error
		resp, err = s.lim.Check(ctx, limiter.Request{Domain: req.domain, Items: items, RefundOnReject: s.cfg.StopIncrementWhenOverLimit})
		if err != nil {
			return nil, grpcapi.Status(err)
		}
	}
	now := s.cfg.Now().Unix()
	out, statuses, current, resets := newPeerAnswer(len(ds), len(itemOf))
	for i := range ds {
		out.Statuses[i] = &statuses[i]
		statuses[i].Code = rlsv3.RateLimitResponse_OK
		if limits[i].unlimited {
			out.Statuses[i].LimitRemaining = math.MaxUint32
		}
	}
	failed, quotas, quotasFailed := 0, 0, 0
	if s.cfg.QuotaMode {
		// Every descriptor not unlimited is in quota_mode, those without
		// a limit too (OK, so never all over), as the peer counts them.
		for i := range limits {
			if !limits[i].unlimited && limits[i].limit == nil {
				quotas++
			}
		}
	}
	for k, i := range itemOf {
		l := limits[i].limit
		r := &resp.Items[k].Results[0]
		over := !r.Allowed
		st := out.Statuses[i]
		cl := &current[k]
		cl.Name, cl.RequestsPerUnit, cl.Unit = l.Name, l.RequestsPerUnit, rlsv3.RateLimitResponse_RateLimit_Unit(l.Unit)
		st.CurrentLimit = cl
		if !over {
			st.LimitRemaining = uint32(min(max(r.Remaining, 0), math.MaxUint32))
		}
		sec := l.Unit.Seconds()
		resets[k].Seconds = sec - now%sec
		st.DurationUntilReset = &resets[k]
		if over && !l.ShadowMode {
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if l.QuotaMode || s.cfg.QuotaMode {
			quotas++
			if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
				quotasFailed++
			}
		} else if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			failed++
		}
	}
	out.OverallCode = rlsv3.RateLimitResponse_OK
	if failed > 0 || quotas > 0 && quotas == quotasFailed {
		out.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	s.addHeaders(out, func(i int) bool { return s.cfg.QuotaMode || limits[i].limit != nil && limits[i].limit.QuotaMode }, now)
	if s.cfg.DynamicMetadata {
		out.DynamicMetadata = dynamicMetadata(req, limits, out.Statuses)
	}
	return out, nil
}

// newPeerAnswer returns an answer of statuses descriptors, and the
// messages its statuses and the current limits and resets of limited of
// them are to be: each kind of message in one array, five allocations a
// request and not three a descriptor; one for an answer of one
// descriptor.
func newPeerAnswer(statuses, limited int) (*rlsv3.RateLimitResponse, []rlsv3.RateLimitResponse_DescriptorStatus, []rlsv3.RateLimitResponse_RateLimit, []durationpb.Duration) {
	if statuses == 1 {
		a := new(singleAnswer)
		a.out.Statuses = a.ptr[:]
		return &a.out, a.status[:], a.current[:limited], a.reset[:limited]
	}
	out := &rlsv3.RateLimitResponse{Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, statuses)}
	return out, make([]rlsv3.RateLimitResponse_DescriptorStatus, statuses), make([]rlsv3.RateLimitResponse_RateLimit, limited), make([]durationpb.Duration, limited)
}

// singleAnswer is an answer of one descriptor, in one allocation.
type singleAnswer struct {
	out     rlsv3.RateLimitResponse
	ptr     [1]*rlsv3.RateLimitResponse_DescriptorStatus
	status  [1]rlsv3.RateLimitResponse_DescriptorStatus
	current [1]rlsv3.RateLimitResponse_RateLimit
	reset   [1]durationpb.Duration
}

// match returns what the limiter decides p's descriptor against: the Weir
// rule converted from its limit when there is one (so that making that
// rule global makes the limit global), else the rule of its unit, with
// the limit of the configuration and the counter envoyproxy/ratelimit
// would use.
func (s *Service) match(set *ruleset.Set, domain string, p *peerLimit) ruleset.Match {
	l := p.limit
	r := s.units[l.Unit]
	if set != nil && l.RuleID != "" && !l.ShadowMode {
		if own, ok := set.Rule(l.RuleID); ok && own.Spec.WindowSeconds == l.Unit.Seconds() && !own.Spec.Unlimited && !own.Spec.Shadow {
			r = own
		}
	}
	// The store key is "envoy/<window seconds>/" and the counter key, built
	// once: the counter key is its tail.
	prefix := s.prefixes[l.Unit]
	var b strings.Builder
	envoyconf.WriteCounterKey(&b, prefix, domain, p.entries, p.found)
	store := b.String()
	key := store[len(prefix):]
	if len(store) > algorithm.MaxKeyLen {
		sum := sha256.Sum256([]byte(key))
		store = prefix + "sha256:" + hex.EncodeToString(sum[:])
	}
	return ruleset.Match{Rule: r, Key: key, StoreKey: store, Action: rule.ActionLimit, Limit: int64(l.RequestsPerUnit)}
}

// addHeaders adds the rate limit headers, when configured, that describe
// the limit of headerStatus(out.Statuses, quotaMode).
func (s *Service) addHeaders(out *rlsv3.RateLimitResponse, quotaMode func(i int) bool, now int64) {
	h := s.cfg.Headers
	if h.Limit == "" && h.Remaining == "" && h.Reset == "" {
		return
	}
	m := headerStatus(out.Statuses, quotaMode)
	if m == nil {
		return
	}
	sec := envoyconf.Unit(m.CurrentLimit.Unit).Seconds()
	out.ResponseHeadersToAdd = []*corev3.HeaderValue{
		{Key: h.Limit, Value: strconv.FormatUint(uint64(m.CurrentLimit.RequestsPerUnit), 10)},
		{Key: h.Remaining, Value: strconv.FormatUint(uint64(m.LimitRemaining), 10)},
		{Key: h.Reset, Value: strconv.FormatInt(sec-now%sec, 10)},
	}
}

// headerStatus returns the status whose limit the rate limit headers
// describe, picked as envoyproxy/ratelimit picks it (shouldRateLimitWorker
// in its src/service/ratelimit.go): in the order of the statuses, the last
// one OVER_LIMIT whose limit is not in quota_mode; else the first with the
// least limit_remaining, below 4294967295, of those with a limit. An
// OVER_LIMIT status in quota_mode is not preferred for being over: it
// competes on its remaining (0) with the others, so the first status at 0
// wins. quotaMode(i) reports whether statuses[i]'s limit is in quota_mode;
// nil means none is. A status without a limit (a Weir rule's deny
// override) is never picked: there is no limit to describe. nil when no
// status has a limit.
func headerStatus(statuses []*rlsv3.RateLimitResponse_DescriptorStatus, quotaMode func(i int) bool) *rlsv3.RateLimitResponse_DescriptorStatus {
	var picked *rlsv3.RateLimitResponse_DescriptorStatus
	least := uint32(math.MaxUint32)
	for i, st := range statuses {
		if st.CurrentLimit == nil {
			continue
		}
		if st.LimitRemaining < least {
			picked, least = st, st.LimitRemaining
		}
		if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT && (quotaMode == nil || !quotaMode(i)) {
			picked, least = st, 0
		}
	}
	return picked
}
