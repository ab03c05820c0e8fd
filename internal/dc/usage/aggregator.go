package usage

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/weirhq/weir/internal/dc/usage/topk"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/breaker"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// Shares gives the share of a global rule's limit this DC enforces; the
// limiter's Quotas implementation fits. The Aggregator calls it once per
// rule and Flush, with the last *ruleset.Rule it saw for the rule and key "".
type Shares interface {
	// Share returns this DC's share in [0, 1] of the rule's limit for key.
	Share(domain string, r *ruleset.Rule, key string) float64
}

// KeyShares tells which keys have a share of their own in this DC's
// assignment; such keys are under pressure. HasKeyShare is called on the
// decision path, under the rule's lock, for every decision on a key of a
// global rule that is not tracked yet, and by Flush for the tracked ones:
// it must be fast, safe for concurrent use, and must not call the
// Aggregator.
type KeyShares interface {
	HasKeyShare(domain, ruleID, key string) bool
}

// Defaults for the zero fields of AggregatorConfig.
const (
	DefaultTopK        = 64
	DefaultMaxKeys     = 1024
	DefaultMaxKeyBytes = 16 << 20
)

// AggregatorConfig configures an Aggregator. The zero value is usable.
type AggregatorConfig struct {
	// Shares gives the share in force of each rule, reported as
	// RuleUsage.share. Nil reports 1: a limiter without quotas enforces
	// every rule whole.
	Shares Shares
	// KeyShares tells which keys have shares of their own. Nil: none.
	KeyShares KeyShares
	// TopK is the number of counters of each rule's heavy-hitter sketch.
	// Default DefaultTopK (64); negative disables heavy-hitter detection.
	TopK int
	// MaxKeys bounds the keys with exact counts, per rule. Default
	// DefaultMaxKeys (1024); negative disables exact per-key counts (heavy
	// hitters are still reported, from the sketch).
	MaxKeys int
	// MaxKeyBytes bounds the memory of the exact per-key counts over all
	// rules: each key costs its length plus about 160 bytes. Default
	// DefaultMaxKeyBytes (16 MiB).
	MaxKeyBytes int64
}

// Validate reports whether c is usable.
func (c AggregatorConfig) Validate() error {
	switch {
	case c.TopK > topk.MaxK:
		return fmt.Errorf("usage: TopK %d exceeds %d", c.TopK, topk.MaxK)
	case c.MaxKeyBytes < 0:
		return fmt.Errorf("usage: negative MaxKeyBytes %d", c.MaxKeyBytes)
	}
	return nil
}

// Tuning that follows from the design rather than from the deployment.
const (
	// lingerIntervals is how many intervals a key stays tracked after the
	// last one in which it was under pressure.
	lingerIntervals = 3
	// keyIdleIntervals is how many intervals without keyed traffic a
	// rule's key state survives.
	keyIdleIntervals = 3
	// keyOverhead approximates the bytes a tracked key costs beyond its
	// own: its map slot and counters.
	keyOverhead = 160
	// dropBits sizes the bitmap counting distinct dropped keys.
	dropBits = 8192
)

// Aggregator counts the decisions of global rules for usage reports; see
// the package documentation for what it counts. It implements
// limiter.Observer: give it to the limiter (limiter.Config.Observer,
// alongside other observers with limiter.Observers) and hand it to a
// Reporter, which calls Flush.
//
// Checked is safe for concurrent use and cheap: per rule result, a lookup
// in an immutable map and an atomic add; for rules with key dimensions,
// also a per-rule mutex around a sketch update and a map lookup. It
// allocates nothing once the rules and keys it meets are known. Flush may
// be called concurrently with Checked; Flush calls are serialised.
type Aggregator struct {
	shares      Shares
	keyShares   KeyShares
	topK        int
	maxKeys     int
	maxKeyBytes int64
	seed        maphash.Seed

	index    atomic.Pointer[ruleIndex] // immutable; replaced under mu
	mu       sync.Mutex                // guards byKey and index replacement
	byKey    map[ruleKey]*ruleStats    // never shrinks; see ruleStats
	keyBytes atomic.Int64              // charged by tracked keys, at most maxKeyBytes

	flushMu sync.Mutex // serialises Flush; guards the fields below
	snaps   []keySnap
	top     []topk.Entry
}

var (
	_ limiter.Observer = (*Aggregator)(nil)
	_ Flusher          = (*Aggregator)(nil)
)

// ruleIndex finds a rule's counters by the compiled rule; several compiled
// rules (one per rule-set reload) may share them.
type ruleIndex struct {
	byRule map[*ruleset.Rule]*ruleStats
}

type ruleKey struct{ domain, id string }

// ruleStats counts one rule's decisions. A rule's ruleStats lives as long
// as the Aggregator: a decision may have found it in an index just before
// any removal, and would then be lost, so only its key state is freed when
// idle. That costs a few hundred bytes per rule ever counted, a number the
// rule configuration bounds, not the traffic.
type ruleStats struct {
	domain, id string
	// Cumulative hits by class; Flush reports their increase.
	admitted, rejected, passed atomic.Uint64
	// rule is the last compiled rule seen for (domain, id).
	rule atomic.Pointer[ruleset.Rule]

	mu   sync.Mutex
	keys *keyState // nil until the rule's first keyed decision

	// Owned by Flush.
	last [3]uint64 // admitted, rejected, passed at the last Flush
}

// keyState is a rule's per-key state, guarded by ruleStats.mu.
type keyState struct {
	sketch  *topk.Sketch // nil when heavy hitters are disabled
	tracked map[string]*keyCount
	dropped *[dropBits / 64]uint64 // distinct dropped keys, by hash bit; nil until a drop
	bytes   int64                  // charged to Aggregator.keyBytes
	idle    int                    // consecutive Flushes without keyed traffic
}

// keyCount is a tracked key's counts in the current interval.
type keyCount struct {
	admitted, rejected, passed uint64
	limit                      int64
	partial                    bool // tracked since during the interval
	pressured                  bool // under pressure in the interval
	quiet                      int  // intervals since it last was
}

// class is what a decision's hits count as.
type class uint8

const (
	classAdmitted class = iota
	classRejected
	classPassed // allowed by the rule, rejected by another
)

// keySnap is a key's counts taken by Flush.
type keySnap struct {
	key                         string
	offered, admitted, rejected uint64
	limit                       int64
	needLimit                   bool // limit unknown: a heavy hitter from the sketch
}

// NewAggregator returns an Aggregator with nothing counted.
func NewAggregator(cfg AggregatorConfig) (*Aggregator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.TopK == 0 {
		cfg.TopK = DefaultTopK
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	if cfg.MaxKeyBytes == 0 {
		cfg.MaxKeyBytes = DefaultMaxKeyBytes
	}
	a := &Aggregator{
		shares:      cfg.Shares,
		keyShares:   cfg.KeyShares,
		topK:        cfg.TopK,
		maxKeys:     cfg.MaxKeys,
		maxKeyBytes: cfg.MaxKeyBytes,
		seed:        maphash.MakeSeed(),
		byKey:       map[ruleKey]*ruleStats{},
	}
	a.index.Store(&ruleIndex{byRule: map[*ruleset.Rule]*ruleStats{}})
	return a, nil
}

// Checked implements limiter.Observer: it counts resp's results of global
// rules.
func (a *Aggregator) Checked(domain string, resp *limiter.Response, _ time.Duration) {
	if resp == nil {
		return
	}
	var idx *ruleIndex
	for i := range resp.Items {
		it := &resp.Items[i]
		for j := range it.Results {
			r := &it.Results[j]
			if r.Match.Rule == nil || r.Hits <= 0 || r.Match.Rule.Spec.Scope != rule.ScopeGlobal || !counted(r.Source) {
				continue
			}
			if idx == nil {
				idx = a.index.Load()
			}
			st := idx.byRule[r.Match.Rule]
			if st == nil {
				st = a.register(domain, r.Match.Rule)
			} else if st.rule.Load() != r.Match.Rule {
				st.rule.Store(r.Match.Rule)
			}
			a.count(st, r, it.Allowed)
		}
	}
}

// StoreCall implements limiter.Observer; it does nothing.
func (a *Aggregator) StoreCall(time.Duration, error) {}

// BreakerState implements limiter.Observer; it does nothing.
func (a *Aggregator) BreakerState(breaker.State) {}

// counted reports whether a source is a decision of the rule.
func counted(s limiter.Source) bool {
	switch s {
	case limiter.SourceStore, limiter.SourceCache, limiter.SourceFailureLocal,
		limiter.SourceFailureOpen, limiter.SourceFailureClosed, limiter.SourceOverrideDeny:
		return true
	}
	return false
}

// signals reports whether a source's decisions say how close a key is to
// its limit.
func signals(s limiter.Source) bool {
	return s == limiter.SourceStore || s == limiter.SourceCache || s == limiter.SourceFailureLocal
}

// register finds or creates the counters of r's rule and indexes them by r.
func (a *Aggregator) register(domain string, r *ruleset.Rule) *ruleStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.index.Load()
	if st := old.byRule[r]; st != nil {
		return st
	}
	k := ruleKey{r.Spec.Domain, r.Spec.ID}
	if k.domain == "" {
		k.domain = domain
	}
	st := a.byKey[k]
	if st == nil {
		st = &ruleStats{domain: k.domain, id: k.id}
		a.byKey[k] = st
	}
	st.rule.Store(r)
	idx := &ruleIndex{byRule: make(map[*ruleset.Rule]*ruleStats, len(old.byRule)+1)}
	for p, s := range old.byRule {
		idx.byRule[p] = s
	}
	idx.byRule[r] = st
	a.index.Store(idx)
	return st
}

// count counts one rule result.
func (a *Aggregator) count(st *ruleStats, r *limiter.RuleResult, itemAllowed bool) {
	hits := uint64(r.Hits)
	var c class
	switch {
	case !r.Allowed:
		c = classRejected
		st.rejected.Add(hits)
	case itemAllowed && !r.Refunded:
		c = classAdmitted
		st.admitted.Add(hits)
	default:
		// Allowed, and given back: its item was rejected, or another item
		// of its request (limiter.Request.RefundOnReject).
		c = classPassed
		st.passed.Add(hits)
	}
	if len(r.Match.Rule.Spec.KeyType) == 0 || (a.maxKeys < 0 && a.topK < 0) {
		return
	}
	pressure := signals(r.Source) && (!r.Allowed || nearLimit(r.Remaining, r.Limit))
	st.mu.Lock()
	ks := st.keys
	if ks == nil {
		ks = a.newKeyState()
		st.keys = ks
	}
	key := r.Match.Key
	if len(key) > algorithm.MaxKeyLen {
		// Not from a limiter, which refuses such keys; not kept, to keep
		// memory bounded.
		a.drop(ks, key)
		st.mu.Unlock()
		return
	}
	if ks.sketch != nil {
		ks.sketch.Add(key, hits)
	}
	if e := ks.tracked[key]; e != nil {
		e.add(c, hits)
		e.limit = r.Match.Limit
		e.pressured = e.pressured || pressure
	} else if ks.tracked != nil && (pressure || (a.keyShares != nil && a.keyShares.HasKeyShare(st.domain, st.id, key))) {
		if e := a.track(ks, key, true); e != nil {
			e.add(c, hits)
			e.limit = r.Match.Limit
			e.pressured = true
		}
	}
	st.mu.Unlock()
}

// nearLimit reports whether remaining is under a quarter of limit.
func nearLimit(remaining, limit int64) bool {
	if remaining > math.MaxInt64/4 {
		return false
	}
	return remaining*4 < limit
}

func (e *keyCount) add(c class, hits uint64) {
	switch c {
	case classAdmitted:
		e.admitted += hits
	case classRejected:
		e.rejected += hits
	default:
		e.passed += hits
	}
}

func (a *Aggregator) newKeyState() *keyState {
	ks := &keyState{}
	if a.topK > 0 {
		ks.sketch, _ = topk.New(a.topK) // Validate bounded TopK
	}
	if a.maxKeys > 0 {
		ks.tracked = map[string]*keyCount{}
	}
	return ks
}

// track starts exact counts for key, copying it, and returns them; it
// returns nil, and counts key as dropped, if the bounds leave no room.
// The caller holds the rule's lock.
func (a *Aggregator) track(ks *keyState, key string, partial bool) *keyCount {
	if len(ks.tracked) >= a.maxKeys || len(key) > algorithm.MaxKeyLen || !utf8.ValidString(key) {
		a.drop(ks, key)
		return nil
	}
	cost := int64(len(key)) + keyOverhead
	if a.keyBytes.Add(cost) > a.maxKeyBytes {
		a.keyBytes.Add(-cost)
		a.drop(ks, key)
		return nil
	}
	ks.bytes += cost
	e := &keyCount{partial: partial}
	ks.tracked[strings.Clone(key)] = e
	return e
}

// untrack stops exact counts for key. The caller holds the rule's lock.
func (a *Aggregator) untrack(ks *keyState, key string) {
	delete(ks.tracked, key)
	cost := int64(len(key)) + keyOverhead
	ks.bytes -= cost
	a.keyBytes.Add(-cost)
}

// drop notes a key under pressure left out. The caller holds the rule's
// lock.
func (a *Aggregator) drop(ks *keyState, key string) {
	if ks.dropped == nil {
		ks.dropped = new([dropBits / 64]uint64)
	}
	h := maphash.String(a.seed, key) % dropBits
	ks.dropped[h/64] |= 1 << (h % 64)
}

// distinct estimates the number of distinct keys dropped, by linear
// counting: n ≈ -m ln(zero bits / m).
func distinct(b *[dropBits / 64]uint64) uint64 {
	if b == nil {
		return 0
	}
	set := 0
	for _, w := range b {
		set += bits.OnesCount64(w)
	}
	zeros := float64(dropBits - set)
	if zeros == 0 {
		zeros = 0.5 // saturated: a lower bound
	}
	return uint64(math.Round(-dropBits * math.Log(zeros/dropBits)))
}

// Flush returns the usage counted since the last Flush (or since
// NewAggregator), one entry per global rule that decided anything, sorted
// by domain and rule id, and starts the next interval. The entries are
// new; the caller may keep and modify them.
func (a *Aggregator) Flush() []*weirv1.RuleUsage {
	a.flushMu.Lock()
	defer a.flushMu.Unlock()
	a.mu.Lock()
	stats := make([]*ruleStats, 0, len(a.byKey))
	for _, st := range a.byKey {
		stats = append(stats, st)
	}
	a.mu.Unlock()

	var out []*weirv1.RuleUsage
	for _, st := range stats {
		if ru := a.flushRule(st); ru != nil {
			out = append(out, ru)
		}
	}
	a.pruneIndex()
	slices.SortFunc(out, func(x, y *weirv1.RuleUsage) int {
		return cmp.Or(cmp.Compare(x.Domain, y.Domain), cmp.Compare(x.RuleId, y.RuleId))
	})
	return out
}

// delta returns the counters' increase since the last call.
func (st *ruleStats) delta() [3]uint64 {
	now := [3]uint64{st.admitted.Load(), st.rejected.Load(), st.passed.Load()}
	d := [3]uint64{now[0] - st.last[0], now[1] - st.last[1], now[2] - st.last[2]}
	st.last = now
	return d
}

func (a *Aggregator) share(st *ruleStats) float64 {
	r := st.rule.Load()
	if a.shares == nil || r == nil {
		return 1
	}
	return a.shares.Share(st.domain, r, "")
}

// flushRule returns a rule's usage in the interval, nil if it had none.
func (a *Aggregator) flushRule(st *ruleStats) *weirv1.RuleUsage {
	d := st.delta()
	keys, dropped := a.flushKeys(st)
	if d == [3]uint64{} && len(keys) == 0 && dropped == 0 {
		return nil
	}
	return &weirv1.RuleUsage{
		Domain:      st.domain,
		RuleId:      st.id,
		Offered:     d[0] + d[1] + d[2],
		Admitted:    d[0],
		Rejected:    d[1],
		Share:       a.share(st),
		Keys:        keys,
		KeysDropped: dropped,
	}
}

// flushKeys returns a rule's keys under pressure in the interval and the
// estimated number left out, and starts the next interval.
func (a *Aggregator) flushKeys(st *ruleStats) ([]*weirv1.KeyUsage, uint64) {
	st.mu.Lock()
	ks := st.keys
	if ks == nil {
		st.mu.Unlock()
		return nil, 0
	}
	snaps := a.snaps[:0]
	active := false
	var total, threshold uint64
	if ks.sketch != nil {
		total = ks.sketch.Total()
		threshold = total / uint64(ks.sketch.K())
		active = total > 0
	}
	for key, e := range ks.tracked {
		offered, admitted := e.admitted+e.rejected+e.passed, e.admitted
		heavy := false
		if ks.sketch != nil {
			if se, ok := ks.sketch.Count(key); ok {
				heavy = se.Count > threshold
				// The hits before the key was tracked were admitted
				// comfortably; the sketch's guaranteed count bounds them
				// from below.
				if g := se.Guaranteed(); e.partial && g > offered {
					admitted += g - offered
					offered = g
				}
			}
		}
		if offered > 0 {
			active = true
			snaps = append(snaps, keySnap{key: key, offered: offered, admitted: admitted, rejected: e.rejected, limit: e.limit})
			if e.pressured || heavy || (a.keyShares != nil && a.keyShares.HasKeyShare(st.domain, st.id, key)) {
				e.quiet = 0
			} else {
				e.quiet++
			}
		} else {
			e.quiet++
		}
		if e.quiet >= lingerIntervals {
			a.untrack(ks, key)
			continue
		}
		*e = keyCount{limit: e.limit, quiet: e.quiet}
	}
	if ks.sketch != nil && total > 0 {
		a.top = ks.sketch.Top(a.top[:0])
		for _, te := range a.top {
			if te.Count <= threshold {
				break
			}
			if _, ok := ks.tracked[te.Key]; ok {
				continue
			}
			if len(te.Key) > algorithm.MaxKeyLen || !utf8.ValidString(te.Key) {
				a.drop(ks, te.Key)
				continue
			}
			snaps = append(snaps, keySnap{key: te.Key, offered: te.Count, admitted: te.Count, needLimit: true})
			if a.maxKeys > 0 && len(ks.tracked) < a.maxKeys {
				// Tracked exactly from the next interval on; not
				// dropped if there is no room, since reported.
				cost := int64(len(te.Key)) + keyOverhead
				if a.keyBytes.Add(cost) <= a.maxKeyBytes {
					ks.bytes += cost
					ks.tracked[te.Key] = &keyCount{}
				} else {
					a.keyBytes.Add(-cost)
				}
			}
		}
		ks.sketch.Reset()
		clear(a.top)
	}
	dropped := distinct(ks.dropped)
	ks.dropped = nil
	if active || dropped > 0 {
		ks.idle = 0
	} else if ks.idle++; ks.idle >= keyIdleIntervals && len(ks.tracked) == 0 {
		a.keyBytes.Add(-ks.bytes)
		st.keys = nil
	}
	st.mu.Unlock()
	defer func() { clear(snaps); a.snaps = snaps[:0] }()
	if len(snaps) == 0 {
		return nil, dropped
	}

	slices.SortFunc(snaps, func(x, y keySnap) int {
		return cmp.Or(cmp.Compare(y.offered, x.offered), cmp.Compare(x.key, y.key))
	})
	r := st.rule.Load()
	keys := make([]*weirv1.KeyUsage, len(snaps))
	for i, s := range snaps {
		if s.needLimit {
			s.limit = keyLimit(r, s.key)
		}
		keys[i] = &weirv1.KeyUsage{Key: s.key, Offered: s.offered, Admitted: s.admitted, Rejected: s.rejected, Limit: s.limit}
	}
	return keys, dropped
}

// keyLimit returns key's limit under r before shares.
func keyLimit(r *ruleset.Rule, key string) int64 {
	if r == nil {
		return 0
	}
	m, err := r.KeyFor(key)
	if err != nil {
		return r.Spec.Limit
	}
	return m.Limit
}

// pruneIndex drops from the index the compiled rules other than the last
// one seen of each rule: rules from before a reload. A decision still
// using one finds the rule's counters again through register.
func (a *Aggregator) pruneIndex() {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.index.Load()
	if len(old.byRule) <= len(a.byKey) {
		return
	}
	idx := &ruleIndex{byRule: make(map[*ruleset.Rule]*ruleStats, len(a.byKey))}
	for p, st := range old.byRule {
		if st.rule.Load() == p {
			idx.byRule[p] = st
		}
	}
	a.index.Store(idx)
}
