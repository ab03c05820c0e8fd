package ruleset

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/rule"
)

// ErrInvalidKey is wrapped by the errors of Rule.KeyFor for a key that no
// request could have.
var ErrInvalidKey = errors.New("ruleset: invalid key")

// Set is one domain's rules compiled for matching.
//
// A Set is immutable and safe for concurrent use. The zero Set has no
// domain and no rules, and matches nothing.
type Set struct {
	domain string
	rules  []*Rule
	byID   map[string]*Rule
	idx    index
}

// Rule is one compiled rule of a Set.
//
// A Rule is immutable and safe for concurrent use; its exported fields
// must not be modified.
type Rule struct {
	// Spec is the rule as written, with its defaults filled in
	// (rule.Rule.SetDefaults) and its domain set to the Set's.
	Spec rule.Rule
	// Revision identifies the rule's content: FNV-1a (64 bits) of Spec as
	// JSON, without created_at and updated_at. Rules with equal content
	// have equal revisions; any change to the content, enabled included,
	// changes it (up to hash collisions).
	Revision uint64

	prefix  string           // domain + "/" + id + "/"
	path    rule.PathMatcher // the zero PathMatcher matches every path
	methods uint16           // bit methodIndex(m) for each method m; 0: any
	conds   []condition
	dims    []string
	ipDim   int // index of rule.DimensionIP in dims, or -1
	ov      overrides
}

// condition is one compiled entry of rule.Rule.Conditions.
type condition struct {
	name  string
	value string // "" for "*": present with any value; canonical for ip
	ip    bool   // name is rule.DimensionIP: compare canonical forms
}

// Match is a rule that applies to a request, and what it does to it.
type Match struct {
	// Rule is the rule.
	Rule *Rule
	// Key names the request's counter within the rule: "" for a rule
	// without key dimensions, the value of the single dimension, or the
	// values of a composite key in key_type order, each "|" and "\"
	// escaped by "\" and joined by "|". An "ip" value that parses is
	// canonical. See the package documentation.
	Key string
	// StoreKey names the counter across domains and rules:
	// domain + "/" + rule_id + "/" + Key; at most algorithm.MaxKeyLen
	// bytes.
	StoreKey string
	// Action is the action of the override that selected Key, or
	// rule.ActionLimit when none did.
	Action rule.Action
	// Limit is the limit of the ActionLimit override that selected Key,
	// or else the rule's limit; 0 for an unlimited rule.
	Limit int64
	// Burst is the burst of the ActionLimit override that selected Key
	// (zero: the algorithm's default for its limit), or else the rule's.
	Burst int64
	// Unlimited is the rule's Unlimited: count the request, never limit
	// it. Limit and Burst are zero.
	Unlimited bool
	// Oversized reports a request that the rule applies to but whose key
	// values would make a store key longer than algorithm.MaxKeyLen. Only
	// Rule is set; the caller must refuse the request (counting it under a
	// truncated key would merge keys, ignoring it would let it bypass the
	// rule).
	Oversized bool
}

// Params returns the algorithm parameters of m's counter: the rule's
// algorithm and window with m's limit and burst. They are not meaningful
// for an unlimited rule or an allow or deny action.
func (m *Match) Params() algorithm.Params { return m.Rule.Spec.Params(m.Limit, m.Burst) }

// maxDims is the most key dimensions a valid rule has.
const maxDims = 16

// Compile checks s and compiles it. The rules are copied, so s may be
// changed afterwards; each gets its defaults (rule.Rule.SetDefaults) and,
// if it has none, the set's domain. A set that fails rule.Set.Validate
// gives its *rule.ValidationError, wrapped.
func Compile(s rule.Set) (*Set, error) {
	set, err := compile(s)
	if err != nil {
		return nil, fmt.Errorf("compile rules of domain %q: %w", s.Domain, err)
	}
	return set, nil
}

func compile(in rule.Set) (*Set, error) {
	s := rule.Set{Domain: in.Domain, Rules: make([]rule.Rule, len(in.Rules))}
	for i := range in.Rules {
		r := cloneRule(in.Rules[i])
		r.SetDefaults()
		if r.Domain == "" {
			r.Domain = s.Domain
		}
		s.Rules[i] = r
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	set := &Set{domain: s.Domain, rules: make([]*Rule, len(s.Rules)), byID: make(map[string]*Rule, len(s.Rules))}
	for i := range s.Rules {
		r, err := compileRule(s.Rules[i])
		if err != nil {
			return nil, fmt.Errorf("rules[%d]: %w", i, err)
		}
		set.rules[i] = r
		set.byID[r.Spec.ID] = r
	}
	set.idx = buildIndex(set.rules)
	return set, nil
}

// cloneRule returns a copy of r that shares no memory with it.
func cloneRule(r rule.Rule) rule.Rule {
	r.Methods = slices.Clone(r.Methods)
	r.Conditions = maps.Clone(r.Conditions)
	r.KeyType = slices.Clone(r.KeyType)
	r.Shares = maps.Clone(r.Shares)
	r.Overrides = slices.Clone(r.Overrides)
	for i := range r.Overrides {
		r.Overrides[i].Match = maps.Clone(r.Overrides[i].Match)
	}
	return r
}

// compileRule compiles spec, which is valid.
func compileRule(spec rule.Rule) (*Rule, error) {
	rev, err := revision(spec)
	if err != nil {
		return nil, err
	}
	r := &Rule{
		Spec:     spec,
		Revision: rev,
		prefix:   spec.Domain + "/" + spec.ID + "/",
		dims:     spec.KeyType,
		ipDim:    slices.Index(spec.KeyType, rule.DimensionIP),
	}
	if len(r.dims) > maxDims {
		return nil, fmt.Errorf("%d key dimensions; at most %d", len(r.dims), maxDims)
	}
	if r.path, err = rule.CompilePath(spec.PathPattern); err != nil {
		return nil, err
	}
	for _, m := range spec.Methods {
		i := methodIndex(m)
		if i == otherMethod {
			return nil, fmt.Errorf("method %q is not supported", m)
		}
		r.methods |= 1 << i
	}
	for _, name := range slices.Sorted(maps.Keys(spec.Conditions)) {
		v := spec.Conditions[name]
		if v == "*" {
			v = ""
		}
		isIP := name == rule.DimensionIP
		if isIP {
			v = parseIP(v).canon
		}
		r.conds = append(r.conds, condition{name: name, value: v, ip: isIP})
	}
	if r.ov, err = compileOverrides(&r.Spec, r.ipDim); err != nil {
		return nil, err
	}
	return r, nil
}

// revision hashes the content of spec.
func revision(spec rule.Rule) (uint64, error) {
	spec.CreatedAt, spec.UpdatedAt = time.Time{}, time.Time{}
	b, err := json.Marshal(&spec)
	if err != nil {
		return 0, fmt.Errorf("revision: %w", err)
	}
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64(), nil
}

// Domain returns the domain of the set's rules.
func (s *Set) Domain() string { return s.domain }

// Rules returns the set's rules in file order, disabled ones included. The
// slice is the caller's; the rules are shared.
func (s *Set) Rules() []*Rule { return slices.Clone(s.rules) }

// Rule returns the rule with the given id.
func (s *Set) Rule(id string) (*Rule, bool) {
	r, ok := s.byID[id]
	return r, ok
}

// Match appends to dst a Match for every enabled rule that applies to the
// request described by attrs, in file order, and returns dst. attrs holds
// the request's attributes: "path" and "method" are its path and HTTP
// method. The package documentation says when a rule applies. Match
// allocates only the keys of the matches.
func (s *Set) Match(attrs map[string]string, dst []Match) []Match {
	req := request{attrs: attrs, path: attrs["path"], method: methodIndex(attrs["method"])}
	var lists [maxLists][]int32
	n := s.idx.candidates(&req, &lists)
	// Merge the candidate lists, each in file order, into file order.
	for {
		best, bi := -1, int32(0)
		for j := 0; j < n; j++ {
			if l := lists[j]; len(l) > 0 && (best < 0 || l[0] < bi) {
				best, bi = j, l[0]
			}
		}
		if best < 0 {
			return dst
		}
		lists[best] = lists[best][1:]
		if m, ok := s.rules[bi].match(&req); ok {
			dst = append(dst, m)
		}
	}
}

// NamesExactly reports whether the attributes r reads — its conditions'
// and its key dimensions' names — are exactly the keys of attrs, neither
// fewer nor more. It is how envoyproxy/ratelimit matches: a descriptor
// takes the one limit configured at its exact path of keys, not those of
// its prefixes. A rule with a path or method match never names exactly.
func (r *Rule) NamesExactly(attrs map[string]string) bool {
	if r.methods != 0 || r.Spec.PathPattern != "" && r.Spec.PathPattern != "/**" {
		return false
	}
	n := 0
	for i := range r.conds {
		if _, ok := attrs[r.conds[i].name]; !ok {
			return false
		}
		n++
	}
	for _, d := range r.dims {
		if _, ok := attrs[d]; !ok {
			return false
		}
		if !slices.ContainsFunc(r.conds, func(c condition) bool { return c.name == d }) {
			n++
		}
	}
	return n == len(attrs)
}

// request is one request being matched, with what is worked out once for
// all rules.
type request struct {
	attrs  map[string]string
	path   string
	method int
	ip     parsedIP // valid if ipDone
	ipDone bool     // ip is parsed once, when a rule first needs it
}

// parsedIP returns the request's "ip" attribute, whose value is v,
// parsed.
func (req *request) parsedIP(v string) *parsedIP {
	if !req.ipDone {
		req.ip, req.ipDone = parseIP(v), true
	}
	return &req.ip
}

// match reports the Match of r for req, if r applies to it. r is enabled
// (the index holds no other); everything else is checked here.
func (r *Rule) match(req *request) (Match, bool) {
	if r.methods != 0 && r.methods&(1<<req.method) == 0 {
		return Match{}, false
	}
	if !r.path.Match(req.path) {
		return Match{}, false
	}
	for i := range r.conds {
		c := &r.conds[i]
		v := req.attrs[c.name]
		if v != "" && c.ip {
			v = req.parsedIP(v).canon
		}
		if v == "" || (c.value != "" && v != c.value) {
			return Match{}, false
		}
	}
	var vals [maxDims]string
	for i, d := range r.dims {
		v := req.attrs[d]
		if v == "" {
			return Match{}, false
		}
		vals[i] = v
	}
	var ip *parsedIP
	if r.ipDim >= 0 {
		ip = req.parsedIP(vals[r.ipDim])
		vals[r.ipDim] = ip.canon
	}
	return r.decide(vals[:len(r.dims)], ip)
}

// decide builds the Match of r for the key whose dimension values are
// vals (non-empty, the "ip" one canonical) and whose "ip" dimension, if r
// has one, is ip. A store key that would be too long gives a Match marked
// Oversized.
func (r *Rule) decide(vals []string, ip *parsedIP) (Match, bool) {
	m := Match{Rule: r, Action: rule.ActionLimit, Limit: r.Spec.Limit, Burst: r.Spec.Burst, Unlimited: r.Spec.Unlimited}
	switch len(vals) {
	case 0:
		m.StoreKey = r.prefix
	case 1:
		if len(r.prefix)+len(vals[0]) > algorithm.MaxKeyLen {
			return Match{Rule: r, Oversized: true}, true
		}
		m.Key = vals[0]
		m.StoreKey = r.prefix + vals[0]
	default:
		n := encodedLen(vals)
		if len(r.prefix)+n > algorithm.MaxKeyLen {
			return Match{Rule: r, Oversized: true}, true
		}
		// One allocation: the Builder's buffer becomes the string.
		var b strings.Builder
		b.Grow(len(r.prefix) + n)
		b.WriteString(r.prefix)
		writeKey(&b, vals)
		m.StoreKey = b.String()
		m.Key = m.StoreKey[len(r.prefix):]
	}
	if o := r.ov.find(vals, m.Key, ip); o != nil {
		m.Action = o.action
		if o.action == rule.ActionLimit {
			m.Limit, m.Burst = o.limit, o.burst
		}
	}
	return m, true
}
