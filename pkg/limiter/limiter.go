package limiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/breaker"
	"github.com/weirhq/weir/pkg/logthrottle"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
	"github.com/weirhq/weir/pkg/store/memstore"
)

// Store keeps rate-limit states: memstore.Store and redisstore.Store.
type Store interface {
	// Decide decides every request at now; a non-nil error means none was.
	Decide(ctx context.Context, now time.Time, reqs []algorithm.Request) ([]algorithm.Result, error)
	// Refund gives back the cost of requests admitted at time at.
	Refund(ctx context.Context, at, now time.Time, reqs []algorithm.Request) error
}

// Pinger is implemented by stores that can be probed cheaply; the breaker
// then probes with Ping in the background instead of risking a request.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Bounded is implemented by stores that bound their own calls: each Decide
// returns within CallBound (0 for no bound), whatever its context, as
// coalesce.Coalescer does with a Bound. When that is within StoreTimeout,
// the limiter passes its callers' contexts to Decide as they are, rather
// than each with a deadline of its own: a timer per decision saved.
type Bounded interface {
	CallBound() time.Duration
}

// BoundedDecider is implemented by stores that can bound one Decide by a
// given duration without a context deadline of its own, as
// coalesce.Coalescer does with one timer for every call in flight. The
// limiter then passes each call the adaptive store timeout in force
// (Config.StoreTimeout) this way: a timer per decision saved. A call not
// answered within must fail with an error that wraps
// context.DeadlineExceeded.
type BoundedDecider interface {
	DecideWithin(ctx context.Context, within time.Duration, now time.Time, reqs []algorithm.Request) ([]algorithm.Result, error)
}

// NodeDecider is implemented by stores that queue and send the calls of
// each node apart (coalesce.Coalescer over a store that is a
// NodeLocator): DecideOn is DecideWithin for requests that node decides
// all of. The limiter then sends each node's requests of a check in a
// call of their own, the nodes' calls at once, so that a node that does
// not answer delays only the checks that have requests on it.
type NodeDecider interface {
	DecideOn(ctx context.Context, node string, within time.Duration, now time.Time, reqs []algorithm.Request) ([]algorithm.Result, error)
}

// Quotas gives the part of a global rule's limit this DC enforces. The
// coordinator's assignments implement it; without one, every rule is
// enforced whole (as local).
type Quotas interface {
	// Limits returns the limit and burst this DC enforces for key of r,
	// whose key is allowed limit per window with the given burst across
	// all DCs (the rule's, or an override's): each at most the one given,
	// and the DCs' summing to at most it.
	Limits(domain string, r *ruleset.Rule, key string, limit, burst int64) (int64, int64)
}

// Instances tells how many limiter instances the DC runs, for failure_mode
// local. Without one, the limiter assumes it is alone.
type Instances interface {
	Live() int
}

// Limits on a request, so that no caller can make the limiter do unbounded
// work.
const (
	MaxItems      = 256
	MaxAttributes = 64
	MaxNameLen    = 128
	MaxValueLen   = 1024
	// MaxHits is the largest cost of an item: the largest hits_addend
	// Envoy's request can carry (a uint32), so that a cost Envoy sends is
	// counted whole. The algorithms bound their arithmetic by the rule's
	// capacity (algorithm.Params.ClampCost), not by this.
	MaxHits = math.MaxUint32
)

// Errors returned by Check and Status; test with errors.Is.
var (
	// ErrInvalid marks a malformed request.
	ErrInvalid = errors.New("limiter: invalid request")
	// ErrUnknownDomain marks a domain with no rules loaded.
	ErrUnknownDomain = errors.New("limiter: unknown domain")
	// ErrUnknownRule marks a status request for a rule that does not exist.
	ErrUnknownRule = errors.New("limiter: unknown rule")
	// ErrNoRules is returned until rules are first loaded (SetRules). A
	// limiter whose rules were loaded and hold no rule is not in this
	// state: it allows every request, no rule matching.
	ErrNoRules = errors.New("limiter: no rules loaded")
)

// Config configures a Limiter. Store is required; the rest have defaults.
type Config struct {
	// DC names this limiter's datacenter.
	DC string
	// Store keeps the DC's states. Required.
	Store Store
	// StoreTimeout is the least bound on each store call. Default 20ms.
	// The bound in force adapts to the latencies the store answers with
	// (twice the slowest call of the last 5–10 seconds plus StorePause, a
	// call that timed out counting as one that took its bound), between
	// StoreTimeout and StoreTimeoutMax: a store that is slow because it is
	// busy is waited for, one that stopped answering is not. See
	// docs/operations.md, "Overload".
	StoreTimeout time.Duration
	// StoreTimeoutMax is the most the bound may adapt to. Default 10 ×
	// StoreTimeout; at most StoreTimeout disables the adaptation.
	StoreTimeoutMax time.Duration
	// StorePause is how long a healthy store node may stop answering of
	// its own accord: Redis deleting many expired keys at once runs up to
	// a quarter of each 1/hz tick, 25ms at its default hz of 10. The
	// adaptive bound adds it to twice the slowest recent call, so that a
	// call queued behind such a pause is waited for. One value for every
	// node (limiterd takes the lowest hz of a cluster's nodes). Default 0.
	StorePause time.Duration
	// MaxInFlight bounds the store requests (one per rule decision) in
	// flight at once. A call that finds no room waits up to AdmitWait for
	// it; if it still finds none, its decisions are shed to their rules'
	// failure modes without asking the store, reported as shed
	// (FallbackShed), and not held against the store. Default 4096;
	// negative: no bound.
	MaxInFlight int
	// AdmitWait is how long a call waits for room under MaxInFlight.
	// Default StoreTimeout.
	AdmitWait time.Duration
	// Breaker configures the store's circuit breaker (default: open after 3
	// consecutive failure events, probe every 500ms). Calls that fail
	// together, in one stall, count as one event (breaker.FailureOf).
	Breaker breaker.Config
	// CacheKeys is how many hot keys the cache may hold; negative disables
	// the cache. Default 100,000.
	CacheKeys int64
	// LocalKeys caps the in-memory store used by failure_mode local.
	// Default 100,000.
	LocalKeys int
	// Quotas gives global rules' shares; nil enforces every rule whole.
	Quotas Quotas
	// Instances counts the DC's live limiters; nil means 1.
	Instances Instances
	// Observer, if not nil, is told every decision (metrics, usage reports).
	Observer Observer
	// AnyDomain makes a domain with no rule set loaded an empty domain —
	// every check allowed, no rule matching — rather than
	// ErrUnknownDomain. Set it for rule sources in which any domain may
	// hold rules and a domain exists only while it does (etcd, where
	// deleting a domain's last rule empties it); leave it off for a rule
	// file, which names its one domain, so that a check naming another is
	// an error.
	AnyDomain bool
	// DefaultDomain, if set, is the domain of a check or status request
	// that names none, whatever domains are loaded. Default "": such a
	// request is the only loaded domain's, and is refused (ErrInvalid)
	// while several are loaded.
	DefaultDomain string
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	switch {
	case c.Store == nil:
		return errors.New("limiter: Config.Store is required")
	case c.StoreTimeout < 0 || c.StoreTimeoutMax < 0 || c.StorePause < 0 || c.AdmitWait < 0:
		return fmt.Errorf("limiter: negative StoreTimeout %v, StoreTimeoutMax %v, StorePause %v or AdmitWait %v", c.StoreTimeout, c.StoreTimeoutMax, c.StorePause, c.AdmitWait)
	case c.LocalKeys < 0:
		return fmt.Errorf("limiter: negative LocalKeys %d", c.LocalKeys)
	}
	return c.Breaker.Validate()
}

// Limiter decides requests. Safe for concurrent use; create it with New and
// release it with Close.
type Limiter struct {
	cfg     Config
	now     func() time.Time
	log     *slog.Logger
	store   Store
	local   *memstore.Store
	cache   *ristretto.Cache[string, blocked]
	obs     Observer
	bounded bool // the store bounds its Decide calls within StoreTimeout
	within  BoundedDecider
	onNode  NodeDecider // with locator: the store queues each node apart
	gate    *gate       // nil: no bound on the requests in flight
	// nodes holds a circuit breaker and an adaptive store timeout per
	// node of the store; without a locator, the store is one node, single.
	locator NodeLocator
	nodes   *nodes
	single  *node
	pinger  Pinger // probes the node "" when not nil
	nodeObs NodeObserver
	fell    fallbacks
	// shadow: the store can fail (it is not in memory), so what it admits
	// for rules of failure_mode local is counted in admitted (see decide).
	shadow   bool
	admitted *admissions
	// outage holds the keys decided in local while the store was away.
	outage *outageKeys

	rules atomic.Pointer[domains]
	// stale counts cache lookups that found an entry made under other
	// parameters, and skipped those not made because no entry of the rule
	// could be live: CacheStats reports both as misses, as if each entry
	// had its own key and every lookup were made.
	stale, skipped atomic.Uint64

	probes sync.WaitGroup
	closed atomic.Bool
}

// domains is the rule sets in force, by domain.
type domains struct {
	byName map[string]*ruleset.Set
	only   *ruleset.Set // the single domain, when there is exactly one
	// hot holds, by rule revision, the latest until (Unix ms) of the cache
	// entries made for the rule's keys. Once the clock reaches it no entry
	// of the rule can answer, and Check does not look the cache up: most
	// rules are never over their limit, and their requests skip the
	// cache. It is carried over to a rule of the same revision by SetRules.
	hot map[uint64]*atomic.Int64
}

// blocked is what the cache knows of a key out of quota. The cache is keyed
// by store key; revision, plimit and pburst are the rule revision and the
// parameters the entry was made under, and an entry answers only a request
// under the same.
type blocked struct {
	until     int64 // Unix ms from which a request of cost 1 could pass
	limit     int64
	resetAt   int64
	remaining int64

	revision       uint64
	plimit, pburst int64
}

// New returns a limiter with no rules loaded; call SetRules.
func New(cfg Config) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.StoreTimeout == 0 {
		cfg.StoreTimeout = 20 * time.Millisecond
	}
	if cfg.StoreTimeoutMax == 0 {
		cfg.StoreTimeoutMax = 10 * cfg.StoreTimeout
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = 4096
	}
	if cfg.AdmitWait == 0 {
		cfg.AdmitWait = cfg.StoreTimeout
	}
	if cfg.CacheKeys == 0 {
		cfg.CacheKeys = 100_000
	}
	if cfg.LocalKeys == 0 {
		cfg.LocalKeys = 100_000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Limiter{cfg: cfg, now: cfg.Now, log: cfg.Logger, store: cfg.Store, obs: cfg.Observer}
	if l.obs == nil {
		l.obs = nopObserver{}
	}
	if b, ok := cfg.Store.(Bounded); ok {
		l.bounded = b.CallBound() > 0 && b.CallBound() <= cfg.StoreTimeout
	}
	l.within, _ = cfg.Store.(BoundedDecider)
	l.onNode, _ = cfg.Store.(NodeDecider)
	if cfg.MaxInFlight > 0 {
		l.gate = newGate(int64(cfg.MaxInFlight))
	}
	l.fell.observer, _ = l.obs.(FallbackObserver)
	l.fell.lines = logthrottle.New(fallbackLogEvery, l.now)
	var err error
	if l.local, err = memstore.New(memstore.Config{MaxKeys: cfg.LocalKeys}); err != nil {
		return nil, fmt.Errorf("limiter: %w", err)
	}
	_, inMemory := cfg.Store.(*memstore.Store)
	l.shadow = !inMemory
	l.outage = newOutageKeys(cfg.LocalKeys)
	l.admitted = newAdmissions(cfg.LocalKeys)
	l.nodeObs, _ = l.obs.(NodeObserver)
	l.pinger, _ = cfg.Store.(Pinger)
	l.nodes = newNodes(l.newNode, l.nodeCreated, l.forgetNode)
	if l.locator, _ = cfg.Store.(NodeLocator); l.locator == nil {
		l.single = l.nodes.add("", cfg.Now().UnixNano())
	}
	if cfg.CacheKeys > 0 {
		l.cache, err = ristretto.NewCache(&ristretto.Config[string, blocked]{
			NumCounters: cfg.CacheKeys * 10,
			MaxCost:     cfg.CacheKeys,
			BufferItems: 64,
			Metrics:     true,
		})
		if err != nil {
			return nil, fmt.Errorf("limiter: hot-key cache: %w", err)
		}
	}
	return l, nil
}

// Close waits for background probes and releases the cache.
func (l *Limiter) Close() {
	if l.closed.Swap(true) {
		return
	}
	l.probes.Wait()
	if l.cache != nil {
		l.cache.Close()
	}
}

// SetRules replaces the rule sets in force, all domains at once. Cached
// knowledge about rules that changed is dropped with them: cache entries
// answer only requests under the rule revision they were made under.
func (l *Limiter) SetRules(sets ...*ruleset.Set) error {
	d := &domains{byName: make(map[string]*ruleset.Set, len(sets)), hot: map[uint64]*atomic.Int64{}}
	for _, s := range sets {
		if _, dup := d.byName[s.Domain()]; dup {
			return fmt.Errorf("limiter: domain %q loaded twice", s.Domain())
		}
		d.byName[s.Domain()] = s
	}
	if len(sets) == 1 {
		d.only = sets[0]
	}
	old := l.rules.Load()
	for _, s := range sets {
		for _, r := range s.Rules() {
			if old != nil && old.hot[r.Revision] != nil {
				d.hot[r.Revision] = old.hot[r.Revision]
			} else if d.hot[r.Revision] == nil {
				d.hot[r.Revision] = new(atomic.Int64)
			}
		}
	}
	l.rules.Store(d)
	return nil
}

// Rules returns the rule set in force for domain ("" for
// Config.DefaultDomain, or without it the only one):
// nil, with no error, for a domain that holds no rule (see
// Config.AnyDomain), or for "" when no domain is loaded.
func (l *Limiter) Rules(domain string) (*ruleset.Set, error) {
	s, _, err := l.domain(domain)
	return s, err
}

// domain returns the rule set in force for domain (Config.DefaultDomain's
// for "", or without it the only one's), and the domains it is one of.
// Once rules are loaded, a request that names no domain when none is
// loaded, or a domain without rules under Config.AnyDomain, gets a nil
// set: no rule applies to it.
func (l *Limiter) domain(domain string) (*ruleset.Set, *domains, error) {
	d := l.rules.Load()
	if d == nil {
		return nil, nil, ErrNoRules
	}
	if domain == "" {
		switch {
		case len(d.byName) == 0:
			return nil, d, nil
		case l.cfg.DefaultDomain != "":
			domain = l.cfg.DefaultDomain
		case d.only != nil:
			return d.only, d, nil
		default:
			return nil, nil, fmt.Errorf("%w: name a domain, %d are loaded", ErrInvalid, len(d.byName))
		}
	}
	s, ok := d.byName[domain]
	if !ok {
		if l.cfg.AnyDomain {
			return nil, d, nil
		}
		// A copy in the error keeps domain, and the Request it comes
		// from, from escaping: Check's callers may keep them on the stack.
		return nil, nil, fmt.Errorf("%w %q", ErrUnknownDomain, strings.Clone(domain))
	}
	return s, d, nil
}

// RuleState says what rules a limiter has in force.
type RuleState struct {
	// Loaded is false until rules are first loaded; the limiter answers
	// ErrNoRules until then.
	Loaded bool
	// Domains and Rules count the domains and enabled and disabled rules
	// in force. Loaded with no rule, every check is allowed with no rule
	// matching.
	Domains, Rules int
}

// RuleState returns what rules are in force.
func (l *Limiter) RuleState() RuleState {
	d := l.rules.Load()
	if d == nil {
		return RuleState{}
	}
	st := RuleState{Loaded: true, Domains: len(d.byName)}
	for _, s := range d.byName {
		st.Rules += len(s.Rules())
	}
	return st
}

// Ready reports whether rules are loaded (an empty rule set is) and the
// store answers.
func (l *Limiter) Ready(ctx context.Context) error {
	if l.rules.Load() == nil {
		return ErrNoRules
	}
	if p, ok := l.store.(Pinger); ok {
		ctx, cancel := context.WithTimeout(ctx, 10*l.cfg.StoreTimeout)
		defer cancel()
		if err := p.Ping(ctx); err != nil {
			return fmt.Errorf("limiter: store: %w", err)
		}
	}
	return nil
}

// CacheStats returns the hot-key cache's hits and misses so far.
func (l *Limiter) CacheStats() (hits, misses uint64) {
	if l.cache == nil {
		return 0, 0
	}
	m := l.cache.Metrics
	stale := l.stale.Load()
	return m.Hits() - min(stale, m.Hits()), m.Misses() + stale + l.skipped.Load()
}

// Evictions returns how many keys the limiter's in-memory stores dropped
// before they expired, to make room for others: store counts those of
// Config.Store when it is a memstore.Store (0 otherwise), local those of
// the store failure_mode local decides in (Config.LocalKeys).
func (l *Limiter) Evictions() (store, local uint64) {
	if m, ok := l.store.(*memstore.Store); ok {
		store = m.Evictions()
	}
	return store, l.local.Evictions()
}

// Request is one Check call: items decided together.
type Request struct {
	// Domain names the rule set; "" when exactly one is loaded.
	Domain string
	Items  []Item
	// RefundOnReject gives back what every item took when any item is
	// rejected, as the rules that allowed a rejected item give it back:
	// a rejected request spends nothing of the limits it was under. The
	// items keep their own answers (an item under its limit is allowed,
	// its remaining as before the request), and the rules that rejected
	// spend what they spend without it (Item.CountRejected). Default
	// false: items are decided and spent on their own.
	// envoyproxy/ratelimit's STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT.
	RefundOnReject bool
}

// Item is one request to decide.
type Item struct {
	// Attributes describe the request; "path" and "method" are the HTTP
	// path and method.
	Attributes map[string]string
	// Hits is the cost; 0 means 1.
	Hits int64
	// Exact applies only the rules that read exactly the item's attribute
	// keys (ruleset.Rule.NamesExactly): Envoy's descriptor semantics,
	// where a descriptor takes the limit at its exact path of keys and not
	// those of its prefixes. Otherwise every rule that applies does.
	Exact bool
	// Match, when its Rule is set, is the one rule and key the item is
	// decided against: rule matching (Attributes, Exact) is skipped. The
	// rule need not be in the domain's set; Match.StoreKey must be a valid
	// store key and Match.Limit the limit to enforce. For a caller that
	// selects limits by its own semantics (envoyrls, which follows
	// envoyproxy/ratelimit's descriptor tree).
	Match ruleset.Match
	// ZeroHits makes a Hits of 0 a check that spends nothing, rather
	// than a request of cost 1.
	ZeroHits bool
	// CountRejected counts the cost of a request a FixedWindow rule
	// rejects too (algorithm.Params.CountRejected), as
	// envoyproxy/ratelimit counts.
	CountRejected bool
}

// Response answers a Check.
type Response struct {
	// Allowed is true when every item is.
	Allowed bool
	Items   []ItemResult
}

// ItemResult answers one item.
type ItemResult struct {
	Allowed bool
	// Decisive indexes Results: the most constraining rule, or -1 when no
	// rule matched.
	Decisive int
	Results  []RuleResult
}

// Source says how a decision was reached.
type Source uint8

// The sources.
const (
	SourceStore Source = iota + 1
	SourceCache
	SourceOverrideAllow
	SourceOverrideDeny
	SourceUnlimited
	SourceFailureOpen
	SourceFailureClosed
	SourceFailureLocal
	// SourceDisabled answers Status for a disabled rule, which applies to
	// no request: Check never gives it.
	SourceDisabled
)

var sourceNames = [...]string{
	SourceStore: "store", SourceCache: "cache", SourceOverrideAllow: "override_allow",
	SourceOverrideDeny: "override_deny", SourceUnlimited: "unlimited", SourceFailureOpen: "failure_open",
	SourceFailureClosed: "failure_closed", SourceFailureLocal: "failure_local", SourceDisabled: "disabled",
}

func (s Source) String() string {
	if int(s) < len(sourceNames) && sourceNames[s] != "" {
		return sourceNames[s]
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// RuleResult is one matching rule's decision.
type RuleResult struct {
	// Match is the rule and key the decision is about.
	Match ruleset.Match
	algorithm.Decision
	Source Source
	// Hits is the cost the rule was asked for.
	Hits int64
	// Refunded is true when the rule admitted the request but another
	// rule rejected it (or, with Request.RefundOnReject, another item of
	// the request was rejected), so that the admission was given back
	// (Remaining counts it as given back).
	Refunded bool
	// req is what the store was asked, for a refund.
	req algorithm.Request
	// lreq is what the local store was charged beside the store, for a
	// refund; nil when nothing was (most results: a pointer keeps the
	// results of a call, allocated together, smaller).
	lreq *algorithm.Request
}

// Params returns the parameters the store was asked to decide with: the
// local limit and burst in force for the key. Zero for a result the store
// did not decide.
func (r *RuleResult) Params() algorithm.Params { return r.req.Params }

// Shadow reports whether the rule only observes.
func (r *RuleResult) Shadow() bool { return r.Match.Rule.Spec.Shadow }

// Limited reports whether the result comes from a limit, so that its
// Limit, Remaining, ResetAt and RetryAfter mean something. An allow or
// deny override, an unlimited rule and a disabled rule bound nothing:
// their Limit and Remaining are 0 and must not be reported as a limit.
func (r *RuleResult) Limited() bool {
	switch r.Source {
	case SourceOverrideAllow, SourceOverrideDeny, SourceUnlimited, SourceDisabled:
		return false
	}
	return true
}

// Spent reports whether the rule admitted the request by counting it, in
// the store or, by failure_mode local, in memory: an admission a refund
// gives back (see Refunded). Overrides, unlimited and disabled rules, and
// failure_mode open, admit without counting.
func (r *RuleResult) Spent() bool {
	return r.Allowed && (r.Source == SourceStore || r.Source == SourceFailureLocal)
}

// Validate checks an item against the limits on requests.
func (it *Item) validate() error {
	if len(it.Attributes) > MaxAttributes {
		return fmt.Errorf("%w: %d attributes, at most %d", ErrInvalid, len(it.Attributes), MaxAttributes)
	}
	for k, v := range it.Attributes {
		if k == "" || len(k) > MaxNameLen {
			return fmt.Errorf("%w: attribute name of %d bytes (1 to %d)", ErrInvalid, len(k), MaxNameLen)
		}
		if len(v) > MaxValueLen {
			return fmt.Errorf("%w: attribute %q has a value of %d bytes, at most %d", ErrInvalid, k, len(v), MaxValueLen)
		}
	}
	if it.Hits < 0 || it.Hits > MaxHits {
		return fmt.Errorf("%w: hits %d outside [0, %d]", ErrInvalid, it.Hits, MaxHits)
	}
	return nil
}

// pending is a rule result waiting for the store.
type pending struct {
	item, res int
	hot       *atomic.Int64 // the rule's, in domains.hot
}

// Check decides every item of req. It fails only for a malformed request,
// an unknown domain, or a caller that gave up (ctx done) before the store
// answered — an answer nobody waits for is not made up from a failure
// mode; store trouble is handled by each rule's failure_mode and shows in
// the results' Source.
func (l *Limiter) Check(ctx context.Context, req Request) (Response, error) {
	if len(req.Items) == 0 || len(req.Items) > MaxItems {
		return Response{}, fmt.Errorf("%w: %d items, want 1 to %d", ErrInvalid, len(req.Items), MaxItems)
	}
	set, doms, err := l.domain(req.Domain)
	if err != nil {
		return Response{}, err
	}
	for i := range req.Items {
		if err := req.Items[i].validate(); err != nil {
			return Response{}, fmt.Errorf("item %d: %w", i, err)
		}
	}
	if set == nil {
		return l.noRules(req), nil
	}
	start := l.now()
	now := start
	t := now.UnixMilli()
	n := len(req.Items)
	// The items' results are cut from one array, sized for a rule per
	// item, and the scratch slices start on the stack: a Check costs a
	// few allocations whatever its number of items. A single item's
	// response, answer, result and store request take one (the response
	// is on the heap anyway: the observer is handed it).
	var resp *Response
	var all []RuleResult
	var one *singleItem
	if n == 1 {
		one = new(singleItem)
		resp, all = &one.resp, one.result[:0]
		*resp = Response{Allowed: true, Items: one.item[:]}
	} else {
		resp, all = &Response{Allowed: true, Items: make([]ItemResult, n)}, make([]RuleResult, 0, n)
	}
	var waitBuf [8]pending
	var matchBuf [4]ruleset.Match
	waiting, matches := waitBuf[:0], matchBuf[:0]
	var storeReqs []algorithm.Request
	for i, it := range req.Items {
		hits := it.Hits
		if hits == 0 && !it.ZeroHits {
			hits = 1
		}
		if it.Match.Rule != nil {
			matches = append(matches[:0], it.Match)
		} else {
			matches = set.Match(it.Attributes, matches[:0])
		}
		if it.Exact && it.Match.Rule == nil {
			matches = slices.DeleteFunc(matches, func(m ruleset.Match) bool { return !m.Rule.NamesExactly(it.Attributes) })
		}
		for _, m := range matches {
			if m.Oversized {
				return Response{}, fmt.Errorf("item %d: %w: the key values for rule %q make a key longer than %d bytes", i, ErrInvalid, m.Rule.Spec.ID, algorithm.MaxKeyLen)
			}
		}
		if len(all)+len(matches) > cap(all) {
			all = make([]RuleResult, 0, max(len(matches), n-i))
		}
		results := all[len(all) : len(all)+len(matches) : len(all)+len(matches)]
		all = all[:len(all)+len(matches)]
		for j, m := range matches {
			r := &results[j]
			r.Match, r.Hits = m, hits
			switch {
			case m.Action == rule.ActionDeny:
				// A deny is for good: no retry-after to promise.
				r.Source, r.Decision = SourceOverrideDeny, algorithm.Decision{ResetAt: now}
			case m.Action == rule.ActionAllow:
				r.Source, r.Decision = SourceOverrideAllow, algorithm.Decision{Allowed: true, ResetAt: now}
			case m.Unlimited:
				r.Source, r.Decision = SourceUnlimited, algorithm.Decision{Allowed: true, ResetAt: now}
			default:
				p := l.params(set.Domain(), m)
				p.CountRejected = it.CountRejected
				r.Decision.Limit = p.Capacity()
				hot := doms.hot[m.Rule.Revision]
				if b, ok := l.cached(&r.Match, p, hot, t); ok && hits >= 1 {
					r.Source = SourceCache
					r.Decision = algorithm.Decision{Limit: b.limit, Remaining: b.remaining, ResetAt: time.UnixMilli(b.resetAt), RetryAfter: time.Duration(b.until-t) * time.Millisecond}
					continue
				}
				r.req = algorithm.Request{Key: m.StoreKey, Params: p, Cost: hits}
				waiting = append(waiting, pending{i, j, hot})
				switch {
				case storeReqs != nil:
				case one != nil:
					storeReqs = one.req[:0]
				default:
					storeReqs = make([]algorithm.Request, 0, n-i)
				}
				storeReqs = append(storeReqs, r.req)
			}
		}
		resp.Items[i].Results = results
	}
	var storeRefunds []algorithm.Request
	if len(storeReqs) > 0 {
		if storeRefunds, err = l.decide(ctx, now, resp, waiting, storeReqs); err != nil {
			return Response{}, err
		}
	}
	l.finish(ctx, now, &req, resp, storeRefunds)
	l.obs.Checked(set.Domain(), resp, l.now().Sub(start))
	return *resp, nil
}

// singleItem holds what a Check of one item matching one rule allocates,
// in one allocation.
type singleItem struct {
	resp   Response
	item   [1]ItemResult
	result [1]RuleResult
	req    [1]algorithm.Request
}

// noRules answers req in a domain that holds no rule: every item allowed,
// none matched.
func (l *Limiter) noRules(req Request) Response {
	start := l.now()
	resp := Response{Allowed: true, Items: make([]ItemResult, len(req.Items))}
	for i := range resp.Items {
		resp.Items[i] = ItemResult{Allowed: true, Decisive: -1}
	}
	l.obs.Checked(strings.Clone(req.Domain), &resp, l.now().Sub(start))
	return resp
}

// params returns the algorithm parameters in force for a match: the rule's
// (or override's) limit, times this DC's share for a global rule.
func (l *Limiter) params(domain string, m ruleset.Match) algorithm.Params {
	spec := &m.Rule.Spec
	limit, burst := m.Limit, m.Burst
	if spec.Scope == rule.ScopeGlobal && l.cfg.Quotas != nil {
		limit, burst = l.cfg.Quotas.Limits(domain, m.Rule, m.Key, limit, burst)
	}
	return m.Rule.Spec.Params(limit, burst)
}

// cached returns what the cache knows of m's key under p at now, if it
// knows that the key is blocked. hot is the rule's entry of domains.hot.
func (l *Limiter) cached(m *ruleset.Match, p algorithm.Params, hot *atomic.Int64, now int64) (blocked, bool) {
	if l.cache == nil {
		return blocked{}, false
	}
	if hot == nil || now >= hot.Load() {
		l.skipped.Add(1)
		return blocked{}, false
	}
	b, ok := l.cache.Get(m.StoreKey)
	if ok && (b.revision != m.Rule.Revision || b.plimit != p.Limit || b.pburst != p.Burst) {
		l.stale.Add(1)
		return blocked{}, false
	}
	if !ok || b.until <= now {
		return blocked{}, false
	}
	return b, true
}

// remember caches a key that cannot pass a request of cost 1 until
// d.RetryAfter has passed. hot is the rule's entry of domains.hot.
func (l *Limiter) remember(m *ruleset.Match, p algorithm.Params, d algorithm.Decision, hot *atomic.Int64, now int64) {
	if l.cache == nil || d.Allowed || d.Remaining > 0 || d.RetryAfter <= 0 {
		return
	}
	until := now + d.RetryAfter.Milliseconds()
	if hot != nil {
		for h := hot.Load(); h < until && !hot.CompareAndSwap(h, until); h = hot.Load() {
		}
	}
	l.cache.SetWithTTL(m.StoreKey, blocked{
		until: until, limit: d.Limit, resetAt: d.ResetAt.UnixMilli(), remaining: d.Remaining,
		revision: m.Rule.Revision, plimit: p.Limit, pburst: p.Burst,
	}, 1, d.RetryAfter)
}

// decide asks the store (or the failure modes) about the waiting results,
// and returns the store's admissions to give back: those the local count
// rejected while the store was recovering (see shadowCount). It fails
// only when the caller gave up (ctx done) before the store answered.
func (l *Limiter) decide(ctx context.Context, now time.Time, resp *Response, waiting []pending, reqs []algorithm.Request) ([]algorithm.Request, error) {
	results, err := l.storeCall(ctx, now, reqs)
	if errors.Is(err, errGaveUp) {
		return nil, err
	}
	if results == nil {
		results = failAll(len(reqs), err)
	}
	var local, shadow []int
	for k, w := range waiting {
		r := &resp.Items[w.item].Results[w.res]
		res := results[k]
		mode := r.Match.Rule.Spec.FailureMode
		isLocal := mode != rule.FailOpen && mode != rule.FailClosed
		if res.Err == nil {
			r.Source, r.Decision = SourceStore, res.Decision
			if reqs[k].Cost == 1 {
				// Only a rejection of cost 1 says when any request could
				// pass again; a larger cost's RetryAfter is too long.
				l.remember(&r.Match, reqs[k].Params, res.Decision, w.hot, now.UnixMilli())
			}
			if isLocal && l.shadow && res.Decision.Allowed && reqs[k].Cost > 0 {
				shadow = append(shadow, k)
			}
			continue
		}
		switch {
		case mode == rule.FailOpen:
			r.Source = SourceFailureOpen
			r.Decision = algorithm.Decision{Allowed: true, Limit: reqs[k].Params.Capacity(), Remaining: reqs[k].Params.Capacity(), ResetAt: now}
		case mode == rule.FailClosed:
			r.Source = SourceFailureClosed
			r.Decision = algorithm.Decision{Limit: reqs[k].Params.Capacity(), ResetAt: now, RetryAfter: time.Second}
		default:
			local = append(local, k)
		}
	}
	if len(local) == 0 && len(shadow) == 0 {
		return nil, nil
	}
	n := int64(1)
	if l.cfg.Instances != nil {
		n = int64(max(1, l.cfg.Instances.Live()))
	}
	if len(local) > 0 {
		l.decideLocal(ctx, now, resp, waiting, reqs, local, n)
	}
	if len(shadow) > 0 {
		return l.shadowCount(ctx, now, resp, waiting, reqs, shadow, n), nil
	}
	return nil, nil
}

// decideLocal decides the requests of failure_mode local (the indexes of
// reqs in local) in memory, at this instance's part of the limit. A key
// decided in memory for the first time in an outage starts from what the
// store admitted for it in its window (counted by shadowCount), so that
// the DC does not admit its limit twice over in the window the store
// fails in; what it admits in memory is remembered (outageKeys) for when
// the store is back.
func (l *Limiter) decideLocal(ctx context.Context, now time.Time, resp *Response, waiting []pending, reqs []algorithm.Request, local []int, n int64) {
	lreqs := make([]algorithm.Request, len(local))
	var seeds []algorithm.Request
	t := now.UnixMilli()
	for j, k := range local {
		lreqs[j] = localRequest(reqs[k], n)
		mem := reqs[k].Params.Memory().Milliseconds() // as shadowCount counted
		if !l.outage.hold(lreqs[j].Key, t+mem, t) {
			continue
		}
		if used := l.admitted.used(reqs[k].Key, t, mem); used > 0 {
			seed := lreqs[j]
			seed.Cost = min(used, seed.Params.Capacity())
			seeds = append(seeds, seed)
		}
	}
	if len(seeds) > 0 {
		l.seed(ctx, now, seeds)
	}
	lres, _ := l.local.Decide(ctx, now, lreqs)
	for j, k := range local {
		w := waiting[k]
		r := &resp.Items[w.item].Results[w.res]
		r.Source, r.Decision, r.req = SourceFailureLocal, lres[j].Decision, lreqs[j]
		if lres[j].Err != nil {
			// An invalid request for the store is invalid here too:
			// reject rather than allow silently.
			r.Decision = algorithm.Decision{ResetAt: now, RetryAfter: time.Second}
		}
	}
}

// seed charges the local store with what the store admitted before it
// failed, as if admitted now (the safe side: it is forgotten a little
// later than it would be). A charge that does not fit — the key also
// holds admissions of an earlier outage — fills what room is left.
func (l *Limiter) seed(ctx context.Context, now time.Time, seeds []algorithm.Request) {
	res, _ := l.local.Decide(ctx, now, seeds)
	var rest []algorithm.Request
	for i, r := range res {
		if r.Err == nil && !r.Allowed && r.Remaining > 0 {
			s := seeds[i]
			s.Cost = r.Remaining
			rest = append(rest, s)
		}
	}
	if len(rest) > 0 {
		_, _ = l.local.Decide(ctx, now, rest)
	}
}

// localRequest is req at this instance's part of the DC's limit: failure
// mode local enforces the DC's limit divided among its n live instances.
func localRequest(req algorithm.Request, n int64) algorithm.Request {
	req.Params.Limit /= n
	req.Params.Burst /= n
	return req
}

// shadowCount counts the admissions the store made for rules of
// failure_mode local (the indexes of reqs in shadow) in l.admitted, for
// decideLocal to start from when the store fails.
//
// The other way round, the store never saw what was admitted in memory
// while it was down. So a key decided in memory stays held (outageKeys)
// for as long as that can weigh on its rule's algorithm
// (algorithm.Params.Memory), and while it is, what the store admits for
// it is charged to the local count too; an admission the local count
// cannot take is rejected after all, as failure_local, and returned for
// the caller to refund to the store. Other keys are the store's alone: an
// instance taking more than its part of the DC's traffic is not held to
// it.
func (l *Limiter) shadowCount(ctx context.Context, now time.Time, resp *Response, waiting []pending, reqs []algorithm.Request, shadow []int, n int64) []algorithm.Request {
	t := now.UnixMilli()
	var held []int
	for _, k := range shadow {
		l.admitted.add(reqs[k].Key, t, reqs[k].Params.Memory().Milliseconds(), reqs[k].Cost)
		if l.outage.held(reqs[k].Key, t) {
			held = append(held, k)
		}
	}
	if len(held) == 0 {
		return nil
	}
	sreqs := make([]algorithm.Request, len(held))
	for j, k := range held {
		sreqs[j] = localRequest(reqs[k], n)
	}
	sres, _ := l.local.Decide(ctx, now, sreqs)
	var refunds []algorithm.Request
	for j, k := range held {
		w := waiting[k]
		r := &resp.Items[w.item].Results[w.res]
		switch {
		case sres[j].Err != nil:
		case sres[j].Allowed:
			r.lreq = &sreqs[j]
		default:
			refunds = append(refunds, reqs[k])
			r.Source, r.Decision = SourceFailureLocal, sres[j].Decision
			l.admitted.add(reqs[k].Key, t, reqs[k].Params.Memory().Milliseconds(), -reqs[k].Cost)
		}
	}
	return refunds
}

var (
	errBreakerOpen = errors.New("limiter: store circuit breaker is open")
	errShed        = errors.New("limiter: store requests in flight at their bound (MaxInFlight): shed")
	// errGaveUp is wrapped, with the context's error, by the error of a
	// call whose caller gave up before the store answered.
	errGaveUp = errors.New("limiter: the caller gave up before the store answered")
)

// storeCall asks the store to decide reqs: through the circuit breakers
// of their nodes, through the gate on requests in flight, and within the
// adaptive store timeout. The requests whose node's breaker is open are
// not sent: their results fail with errBreakerOpen, and when none is
// sent, storeCall returns nil results and errBreakerOpen; it returns
// errShed when the gate refuses the call. A caller that gives up (ctx
// done) says nothing about the store: its failure is not held against
// any breaker, and the call fails with an error wrapping errGaveUp.
// Otherwise each node's requests feed its breaker: a failure when any of
// them failed (every node of the call when the whole call did), a success
// when all were decided. Decisions that fall to the failure modes are
// reported by node and reason (l.fell).
func (l *Limiter) storeCall(ctx context.Context, now time.Time, reqs []algorithm.Request) ([]algorithm.Result, error) {
	var hopBuf [4]hop
	var rt route
	rt.hops, rt.at = l.route(ctx, now, reqs, hopBuf[:0])
	allowed := 0
	for i := range rt.hops {
		h := &rt.hops[i]
		var probe bool
		h.ok, probe = h.n.breaker.Allow()
		if probe {
			// Probe in the background; these requests do not wait on it.
			// A closed limiter starts no goroutine: it gives the probe back.
			if l.closed.Load() {
				h.n.breaker.Release()
			} else {
				l.probe(ctx, now, h.n, reqs, &rt, i)
			}
			h.ok = false
		}
		if h.ok {
			allowed += h.reqs
		} else {
			l.fell.add(l, h.n.name, FallbackBreakerOpen, h.reqs, nil)
		}
	}
	if allowed == 0 {
		return nil, errBreakerOpen
	}
	sub := reqs
	if allowed < len(reqs) {
		sub = make([]algorithm.Request, 0, allowed)
		for i, r := range reqs {
			if rt.hopOf(i).ok {
				sub = append(sub, r)
			}
		}
	}
	n := int64(len(sub))
	if l.gate != nil {
		if !l.gate.enter(ctx.Done(), n, l.cfg.AdmitWait) {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%w: %w", errGaveUp, ctx.Err())
			}
			for i := range rt.hops {
				if h := &rt.hops[i]; h.ok {
					l.fell.add(l, h.n.name, FallbackShed, h.reqs, nil)
				}
			}
			return nil, errShed
		}
		defer l.gate.leave(n)
	}
	var results []algorithm.Result
	var err error
	byNode := l.onNode != nil && okHops(&rt) > 1
	if byNode {
		results = l.decideByNode(ctx, now, reqs, len(sub), &rt)
	} else {
		results, err = l.decideTogether(ctx, now, sub, &rt)
	}
	var callErr error
	if err == nil {
		j := 0
		for i := range reqs {
			h := rt.hopOf(i)
			if !h.ok {
				continue
			}
			if e := results[j].Err; e != nil {
				h.failed++
				if h.firstErr == nil {
					h.firstErr = e
				}
				if callErr == nil {
					callErr = e
				}
			}
			j++
		}
	} else {
		callErr = err
		for i := range rt.hops {
			if h := &rt.hops[i]; h.ok {
				h.failed, h.firstErr = h.reqs, err
			}
		}
	}
	if callErr != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("%w: %w", errGaveUp, ctx.Err())
	}
	observed := false // one observation per store call: per hop byNode, else one
	for i := range rt.hops {
		h := &rt.hops[i]
		switch {
		case !h.ok || observed:
		case byNode:
			l.obs.StoreCall(h.callEnd.Sub(h.callStart), h.firstErr)
		default:
			l.obs.StoreCall(h.callEnd.Sub(h.callStart), callErr)
			observed = true
		}
		switch {
		case !h.ok:
		case h.failed == 0:
			h.n.timeout.observe(h.callEnd.Sub(h.callStart), h.callEnd)
			h.n.breaker.Success()
		case isTimeout(h.firstErr):
			h.n.timeout.timedOut(h.bound, h.callEnd)
			h.n.breaker.FailureOf(h.callStart)
			l.fell.add(l, h.n.name, FallbackTimeout, h.failed, h.firstErr)
		default:
			h.n.breaker.FailureOf(h.callStart)
			l.fell.add(l, h.n.name, FallbackError, h.failed, h.firstErr)
		}
	}
	if err != nil || len(sub) == len(reqs) {
		return results, err
	}
	full := make([]algorithm.Result, len(reqs))
	j := 0
	for i := range reqs {
		if rt.hopOf(i).ok {
			full[i] = results[j]
			j++
		} else {
			full[i].Err = errBreakerOpen
		}
	}
	return full, nil
}

// okHops returns how many of rt's hops their breakers let through.
func okHops(rt *route) int {
	n := 0
	for i := range rt.hops {
		if rt.hops[i].ok {
			n++
		}
	}
	return n
}

// decideTogether sends sub, the requests of rt's hops that their breakers
// let through, in one call, bounded by the longest of those nodes' bounds
// (a node's bound rises only with the calls it was in), and records the
// call's timing in each of them.
func (l *Limiter) decideTogether(ctx context.Context, now time.Time, sub []algorithm.Request, rt *route) ([]algorithm.Result, error) {
	var bound time.Duration
	node := ""
	for i := range rt.hops {
		if h := &rt.hops[i]; h.ok {
			bound = max(bound, h.n.timeout.bound())
			node = h.n.name
		}
	}
	start := l.now()
	var results []algorithm.Result
	var err error
	switch {
	case l.onNode != nil:
		// One node only (decideByNode takes several).
		results, err = l.onNode.DecideOn(ctx, node, bound, now, sub)
	case l.within != nil:
		results, err = l.within.DecideWithin(ctx, bound, now, sub)
	case l.bounded && bound <= l.cfg.StoreTimeout:
		results, err = l.store.Decide(ctx, now, sub)
	default:
		sctx, cancel := context.WithTimeout(ctx, bound)
		results, err = l.store.Decide(sctx, now, sub)
		cancel()
	}
	end := l.now()
	for i := range rt.hops {
		if h := &rt.hops[i]; h.ok {
			h.callStart, h.callEnd, h.bound = start, end, bound
		}
	}
	return results, err
}

// decideByNode sends the requests of reqs on each of rt's hops that its
// breaker lets through in a call of its own, bounded by that node's
// bound, all at once, and returns the results of the n requests let
// through in reqs' order. A call that fails gives its error to each of
// its requests.
func (l *Limiter) decideByNode(ctx context.Context, now time.Time, reqs []algorithm.Request, n int, rt *route) []algorithm.Result {
	parts := make([][]algorithm.Request, len(rt.hops))
	for i, r := range reqs {
		if h := rt.at[i]; rt.hops[h].ok {
			parts[h] = append(parts[h], r)
		}
	}
	got := make([][]algorithm.Result, len(rt.hops))
	// The goroutines work on a copy of the hops, copied back once they have
	// ended, so that rt stays on storeCall's stack: only the copy, on this
	// path alone, is on the heap.
	hops := slices.Clone(rt.hops)
	call := func(i int) {
		h := &hops[i]
		h.bound = h.n.timeout.bound()
		h.callStart = l.now()
		res, err := l.onNode.DecideOn(ctx, h.n.name, h.bound, now, parts[i])
		h.callEnd = l.now()
		if err != nil {
			res = failAll(len(parts[i]), err)
		}
		got[i] = res
	}
	var wg sync.WaitGroup
	first := -1
	for i := range rt.hops {
		switch {
		case !rt.hops[i].ok:
		case first < 0:
			first = i // this goroutine's
		default:
			wg.Go(func() { call(i) })
		}
	}
	call(first)
	wg.Wait()
	copy(rt.hops, hops)
	results := make([]algorithm.Result, 0, n)
	next := make([]int, len(rt.hops))
	for i := range reqs {
		if h := rt.at[i]; rt.hops[h].ok {
			results = append(results, got[h][next[h]])
			next[h]++
		}
	}
	return results
}

// isTimeout reports whether err is a timeout: a deadline that passed, or
// a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// StoreTimeout returns the bound on store calls in force (see
// Config.StoreTimeout): the longest of the nodes' bounds.
func (l *Limiter) StoreTimeout() time.Duration {
	bound := l.cfg.StoreTimeout
	l.nodes.each(func(n *node) { bound = max(bound, n.timeout.bound()) })
	return bound
}

func failAll(n int, err error) []algorithm.Result {
	out := make([]algorithm.Result, n)
	for i := range out {
		out[i].Err = err
	}
	return out
}

// finish combines each item's rule results, gives back what the rules
// that allowed a rejected item took (and, with req.RefundOnReject, what
// every item took when any is rejected), and storeRefunds.
func (l *Limiter) finish(ctx context.Context, now time.Time, req *Request, resp *Response, storeRefunds []algorithm.Request) {
	var localRefunds []algorithm.Request
	for i := range resp.Items {
		it := &resp.Items[i]
		it.Allowed = true
		for j := range it.Results {
			if r := &it.Results[j]; !r.Allowed && !r.Shadow() {
				it.Allowed = false
			}
		}
		it.Decisive = decisive(it)
		if !it.Allowed {
			resp.Allowed = false
			storeRefunds, localRefunds = l.giveBack(now, it, storeRefunds, localRefunds)
		}
	}
	if req.RefundOnReject && !resp.Allowed {
		for i := range resp.Items {
			if it := &resp.Items[i]; it.Allowed {
				storeRefunds, localRefunds = l.giveBack(now, it, storeRefunds, localRefunds)
			}
		}
	}
	if len(storeRefunds) > 0 {
		// A client hang-up must not leave the refund half done.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.StoreTimeout())
		callStart := l.now()
		err := l.store.Refund(rctx, now, l.now(), storeRefunds)
		cancel()
		l.obs.StoreCall(l.now().Sub(callStart), err)
	}
	if len(localRefunds) > 0 {
		_ = l.local.Refund(ctx, now, l.now(), localRefunds)
	}
}

// giveBack marks what the rules that allowed it took of item it as given
// back, and appends it to the refunds of the store and of the local
// store.
func (l *Limiter) giveBack(now time.Time, it *ItemResult, store, local []algorithm.Request) ([]algorithm.Request, []algorithm.Request) {
	for j := range it.Results {
		r := &it.Results[j]
		if !r.Spent() {
			continue
		}
		if r.Source == SourceFailureLocal {
			local = append(local, r.req)
		} else {
			store = append(store, r.req)
			if r.lreq != nil {
				local = append(local, *r.lreq)
			}
			if l.shadow && r.req.Cost > 0 {
				// A no-op for keys shadowCount did not count.
				l.admitted.add(r.req.Key, now.UnixMilli(), r.req.Params.Memory().Milliseconds(), -r.req.Cost)
			}
		}
		r.Refunded = true
		r.Remaining = min(r.Limit, r.Remaining+r.Hits)
	}
	return store, local
}

// decisive returns the index of an item's most constraining enforcing
// result: for a rejected item a deny override if any (it is for good),
// else the rejection with the longest retry-after; for an allowed one the
// limited rule with the least remaining, else the first enforcing rule.
// Shadow rules only observe: they are never decisive. -1 when no
// enforcing rule matched.
func decisive(it *ItemResult) int {
	best := -1
	for j := range it.Results {
		r := &it.Results[j]
		if r.Shadow() || r.Allowed != it.Allowed {
			continue
		}
		if best < 0 || constrains(r, &it.Results[best]) {
			best = j
		}
	}
	return best
}

// constrains reports whether a constrains more than b; both are enforcing
// results of the same outcome.
func constrains(a, b *RuleResult) bool {
	if !a.Allowed {
		if aDeny, bDeny := a.Source == SourceOverrideDeny, b.Source == SourceOverrideDeny; aDeny != bDeny {
			return aDeny
		}
		return a.RetryAfter > b.RetryAfter
	}
	if a.Limited() != b.Limited() {
		return a.Limited()
	}
	return a.Limited() && a.Remaining < b.Remaining
}
