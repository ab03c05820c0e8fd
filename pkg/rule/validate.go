package rule

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/fielderr"
)

// Bounds that are not part of the API.
const (
	maxIDLen          = 128
	maxNameLen        = 64 // attribute, dimension and DC names
	maxDescription    = 4096
	maxMessage        = 1024
	maxValueLen       = 1024 // condition and override values
	maxConditions     = 64
	maxDimensions     = 16
	maxShares         = 64
	maxWindowSeconds  = int64(algorithm.MaxWindow / 1e9)
	shareSumTolerance = 1e-9
)

// methods are the HTTP methods a rule may name.
var methods = [...]string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"}

// Validate checks r on its own (not its domain against a set's). It returns
// nil or a *ValidationError listing every problem, with paths relative to
// the rule ("limit", "overrides[0].cidr").
func (r *Rule) Validate() error {
	var rep Report
	r.validate(&rep, "")
	return rep.Err()
}

// Validate checks s and every rule in it. It returns nil or a
// *ValidationError listing every problem, with paths such as
// "rules[2].limit".
func (s *Set) Validate() error {
	var rep Report
	s.validate(&rep)
	return rep.Err()
}

func (s *Set) validate(rep *Report) {
	s.checkDomain(rep)
	if len(s.Rules) > MaxRules {
		rep.Add("rules", "%d rules; a set holds at most %d", len(s.Rules), MaxRules)
		return
	}
	for i := range s.Rules {
		s.checkRule(rep, i)
	}
	s.checkIDs(rep)
}

// checkDomain checks the set's domain.
func (s *Set) checkDomain(rep *Report) { checkName(rep, "domain", s.Domain, maxIDLen, true) }

// checkRule checks the i'th rule, and that its domain is the set's.
func (s *Set) checkRule(rep *Report, i int) {
	r := &s.Rules[i]
	p := fielderr.Index("rules", i)
	r.validate(rep, p)
	if r.Domain != "" && s.Domain != "" && r.Domain != s.Domain && !rep.IsFailed("domain") {
		rep.Add(fielderr.Field(p, "domain"), "%q differs from the set's domain %q", r.Domain, s.Domain)
	}
}

// checkIDs checks that no two rules share an id.
func (s *Set) checkIDs(rep *Report) {
	ids := make(map[string]int, len(s.Rules))
	for i := range s.Rules {
		id := s.Rules[i].ID
		if id == "" {
			continue
		}
		if j, dup := ids[id]; dup {
			rep.Add(fielderr.Field(fielderr.Index("rules", i), "rule_id"), "%q is also the id of rules[%d]", id, j)
			continue
		}
		ids[id] = i
	}
}

func (r *Rule) validate(rep *Report, p string) {
	checkName(rep, fielderr.Field(p, "rule_id"), r.ID, maxIDLen, true)
	if r.Domain != "" {
		checkName(rep, fielderr.Field(p, "domain"), r.Domain, maxIDLen, true)
	}
	checkText(rep, fielderr.Field(p, "description"), r.Description, maxDescription)

	// Matching.
	if _, reason := compilePath(r.PathPattern); reason != "" {
		rep.Add(fielderr.Field(p, "path_pattern"), "%q %s", r.PathPattern, reason)
	}
	for i, m := range r.Methods {
		mp := fielderr.Index(fielderr.Field(p, "methods"), i)
		switch {
		case slices.Contains(methods[:], m):
			if j := slices.Index(r.Methods, m); j < i {
				rep.Add(mp, "%s is also methods[%d]", m, j)
			}
		case slices.Contains(methods[:], strings.ToUpper(m)):
			rep.Add(mp, "%q must be upper case (%s)", m, strings.ToUpper(m))
		default:
			rep.Add(mp, "%q is not an HTTP method (want one of %s)", m, strings.Join(methods[:], ", "))
		}
	}
	cp := fielderr.Field(p, "conditions")
	if len(r.Conditions) > maxConditions {
		rep.Add(cp, "%d conditions; at most %d", len(r.Conditions), maxConditions)
	}
	for _, name := range sortedKeys(r.Conditions) {
		kp := fielderr.Key(cp, name)
		if checkName(rep, kp, name, maxNameLen, false) {
			checkValue(rep, kp, r.Conditions[name], `use "*" to require only that the attribute is present`)
		}
	}
	kp := fielderr.Field(p, "key_type")
	if len(r.KeyType) > maxDimensions {
		rep.Add(kp, "%d dimensions; at most %d", len(r.KeyType), maxDimensions)
	}
	for i, d := range r.KeyType {
		dp := fielderr.Index(kp, i)
		if !checkName(rep, dp, d, maxNameLen, false) {
			continue
		}
		if j := slices.Index(r.KeyType, d); j < i {
			rep.Add(dp, "%q is also key_type[%d]", d, j)
		}
	}

	// The limit.
	algoOK := r.Algorithm.Valid()
	if !algoOK {
		rep.Add(fielderr.Field(p, "algorithm"), "required (want one of %s)", strings.Join(algorithmNames(), ", "))
	}
	unlimitedOK := !rep.IsFailed(fielderr.Field(p, "unlimited"))
	limitOK := false
	if r.Unlimited {
		if r.Limit != 0 {
			rep.Add(fielderr.Field(p, "limit"), "must be absent when unlimited is true")
		}
	} else {
		limitOK = r.checkLimit(rep, fielderr.Field(p, "limit"), r.Limit, unlimitedOK)
	}
	windowOK := true
	wp := fielderr.Field(p, "window_seconds")
	_, calendarErr := algorithm.ParseCalendar(r.Calendar)
	switch {
	case calendarErr != nil:
		rep.Add(fielderr.Field(p, "calendar"), "%q is not one of \"month\" (or none)", r.Calendar)
		windowOK = false
	case r.Calendar == CalendarMonth && r.Algorithm != algorithm.FixedWindow:
		rep.Add(fielderr.Field(p, "calendar"), "month is for FixedWindow, not %v: the other algorithms' windows slide", r.Algorithm)
		windowOK = false
	case r.Calendar == CalendarMonth && r.WindowSeconds != monthSeconds:
		rep.Add(wp, "must be absent (or %d, the longest month) with calendar: month", monthSeconds)
		windowOK = false
	case r.Calendar == CalendarMonth:
	case r.WindowSeconds == 0 && r.Unlimited:
	case r.WindowSeconds == 0:
		if unlimitedOK {
			rep.Add(wp, "required, from 1 to %d", maxWindowSeconds)
		}
		windowOK = false
	case r.WindowSeconds < 0 || r.WindowSeconds > maxWindowSeconds:
		rep.Add(wp, "%d is out of range [1, %d]", r.WindowSeconds, maxWindowSeconds)
		windowOK = false
	}
	if r.Burst != 0 {
		r.checkBurst(rep, fielderr.Field(p, "burst"), r.Burst, algoOK)
	}
	if algoOK && limitOK && windowOK {
		r.checkParams(rep, fielderr.Field(p, "limit"), fielderr.Field(p, "burst"), r.Limit, r.Burst)
	}

	// Scope and shares.
	switch r.Scope {
	case ScopeGlobal, ScopeLocal:
	case "":
		rep.Add(fielderr.Field(p, "scope"), `required (want "global" or "local")`)
	default:
		rep.Add(fielderr.Field(p, "scope"), `%q is not a scope (want "global" or "local")`, r.Scope)
	}
	sp := fielderr.Field(p, "shares")
	if len(r.Shares) > 0 && r.Scope == ScopeLocal {
		rep.Add(sp, "only a global rule has shares; this rule's scope is local")
	} else if len(r.Shares) > maxShares {
		rep.Add(sp, "%d shares; at most %d", len(r.Shares), maxShares)
	} else if len(r.Shares) > 0 {
		sum, sumOK := 0.0, true
		for _, dc := range sortedKeys(r.Shares) {
			dp := fielderr.Key(sp, dc)
			checkDC(rep, dp, dc)
			switch v := r.Shares[dc]; {
			case math.IsNaN(v) || v < 0 || v > 1:
				rep.Add(dp, "%v is out of range [0, 1]", v)
				sumOK = false
			case rep.IsFailed(dp):
				sumOK = false
			default:
				sum += v
			}
		}
		if sumOK && sum > 1+shareSumTolerance {
			rep.Add(sp, "sum to %v; at most 1", sum)
		}
	}

	// Overrides.
	op := fielderr.Field(p, "overrides")
	switch {
	case len(r.Overrides) > MaxOverrides:
		rep.Add(op, "%d overrides; a rule holds at most %d", len(r.Overrides), MaxOverrides)
	case len(r.Overrides) > 0 && len(r.KeyType) == 0 && !rep.IsFailed(kp):
		rep.Add(op, "overrides select keys, but this rule has no key_type (one counter for all)")
	case len(r.Overrides) > 0 && !rep.IsFailed(kp):
		seen := make(map[string]int, len(r.Overrides))
		for i := range r.Overrides {
			r.validateOverride(rep, fielderr.Index(op, i), i, seen, algoOK, windowOK)
		}
	}

	// Behaviour.
	switch r.FailureMode {
	case FailOpen, FailClosed, FailLocal:
	case "":
		rep.Add(fielderr.Field(p, "failure_mode"), `required (want "open", "closed" or "local")`)
	default:
		rep.Add(fielderr.Field(p, "failure_mode"), `%q is not a failure mode (want "open", "closed" or "local")`, r.FailureMode)
	}
	checkText(rep, fielderr.Field(p, "rejection_message"), r.RejectionMessage, maxMessage)
	switch r.RetryAdvice {
	case RetryAfter, ExponentialBackoff, DailyLimitReached:
	case "":
		rep.Add(fielderr.Field(p, "retry_advice"), `required (want "retry_after", "exponential_backoff" or "daily_limit_reached")`)
	default:
		rep.Add(fielderr.Field(p, "retry_advice"), `%q is not a retry advice (want "retry_after", "exponential_backoff" or "daily_limit_reached")`, r.RetryAdvice)
	}
}

// checkLimit checks a limit (the rule's or an override's) of a limited
// rule at path lp and reports whether it is usable. required is false when
// a missing limit must not be reported (decoding "unlimited" failed).
func (r *Rule) checkLimit(rep *Report, lp string, limit int64, required bool) bool {
	switch {
	case limit == 0:
		if required {
			rep.Add(lp, "required, from 1 to %d", int64(algorithm.MaxLimit))
		}
		return false
	case limit < 0 || limit > algorithm.MaxLimit:
		rep.Add(lp, "%d is out of range [1, %d]", limit, int64(algorithm.MaxLimit))
		return false
	case r.Algorithm == algorithm.SlidingWindowLog && limit > algorithm.MaxLogLimit:
		rep.Add(lp, "%d is too large for SlidingWindowLog, which stores every request: at most %d (or choose SlidingWindowCounter)", limit, algorithm.MaxLogLimit)
		return false
	}
	return true
}

// checkBurst checks a non-zero burst at path bp, on its own.
func (r *Rule) checkBurst(rep *Report, bp string, burst int64, algoOK bool) {
	switch {
	case r.Unlimited:
		rep.Add(bp, "must be absent when unlimited is true")
	case algoOK && !r.Algorithm.IsBucket():
		rep.Add(bp, "only TokenBucket and LeakyBucket take a burst; algorithm is %v", r.Algorithm)
	case burst < 0 || burst > algorithm.MaxLimit:
		rep.Add(bp, "%d is out of range [1, %d]", burst, int64(algorithm.MaxLimit))
	}
}

// checkParams checks what only the combination of a usable algorithm,
// limit and window with the burst can break: that the bucket arithmetic
// stays exact. The bound itself is algorithm.Params.Validate's. lp and bp
// are the paths of the limit and the burst.
func (r *Rule) checkParams(rep *Report, lp, bp string, limit, burst int64) {
	if burst < 0 || burst > algorithm.MaxLimit || (burst != 0 && !r.Algorithm.IsBucket()) {
		return // reported by checkBurst
	}
	err := r.Params(limit, burst).Validate()
	switch {
	case err == nil:
	case !r.Algorithm.IsBucket():
		rep.Add(lp, "%s", strings.TrimPrefix(err.Error(), algorithm.ErrInvalidParams.Error()+": "))
	case burst != 0:
		rep.Add(bp, "%d is too large for a window of %d s: (burst+1) × window in milliseconds must stay below 2^53", burst, r.WindowSeconds)
	default:
		rep.Add(lp, "%d is too large for a window of %d s with %v, whose burst defaults to the limit: (limit+1) × window in milliseconds must stay below 2^53; shorten the window or set a smaller burst", limit, r.WindowSeconds, r.Algorithm)
	}
}

// validateOverride checks the i'th override, at path op. seen maps the
// canonical form of each selector checked so far to its index.
func (r *Rule) validateOverride(rep *Report, op string, i int, seen map[string]int, algoOK, windowOK bool) {
	o := &r.Overrides[i]
	var kinds []string
	if o.Key != "" {
		kinds = append(kinds, "key")
	}
	if len(o.Match) > 0 {
		kinds = append(kinds, "match")
	}
	if o.CIDR != "" {
		kinds = append(kinds, "cidr")
	}
	canon := ""
	switch {
	case len(kinds) == 0:
		if !rep.IsFailed(fielderr.Field(op, "key")) && !rep.IsFailed(fielderr.Field(op, "match")) && !rep.IsFailed(fielderr.Field(op, "cidr")) {
			rep.Add(op, "want one of key, match or cidr to select keys")
		}
	case len(kinds) > 1:
		rep.Add(op, "%s are exclusive; want exactly one", strings.Join(kinds, ", "))
	case o.Key != "":
		kp := fielderr.Field(op, "key")
		if len(r.KeyType) != 1 {
			rep.Add(kp, "key is for rules with a single key dimension; this rule has %d, so use match", len(r.KeyType))
		} else if checkKeyValue(rep, kp, r.KeyType[0], o.Key) {
			canon = canonicalMatch(map[string]string{r.KeyType[0]: o.Key})
		}
	case len(o.Match) > 0:
		mp := fielderr.Field(op, "match")
		ok := true
		for _, d := range sortedKeys(o.Match) {
			dp := fielderr.Key(mp, d)
			if !r.KeyType.Contains(d) {
				rep.Add(dp, "%q is not one of the rule's key dimensions (%s)", d, strings.Join(r.KeyType, ", "))
				ok = false
				continue
			}
			ok = checkKeyValue(rep, dp, d, o.Match[d]) && ok
		}
		if ok {
			canon = canonicalMatch(o.Match)
		}
	default:
		cp := fielderr.Field(op, "cidr")
		if !r.KeyType.Contains(DimensionIP) {
			rep.Add(cp, "cidr selects by the %q dimension, which is not in this rule's key_type", DimensionIP)
			break
		}
		prefix, err := netip.ParsePrefix(o.CIDR)
		switch {
		case err != nil:
			rep.Add(cp, "%q is not a CIDR prefix (want e.g. 10.0.0.0/8 or 2001:db8::/32)", o.CIDR)
		case prefix.Masked() != prefix:
			rep.Add(cp, "%q has bits set after the prefix (want %v)", o.CIDR, prefix.Masked())
		case prefix.String() != o.CIDR:
			rep.Add(cp, "%q is not in canonical form (want %v)", o.CIDR, prefix)
		default:
			canon = "cidr " + o.CIDR
		}
	}
	if canon != "" {
		if j, dup := seen[canon]; dup {
			rep.Add(op, "selects the same keys as overrides[%d]", j)
		} else {
			seen[canon] = i
		}
	}

	ap := fielderr.Field(op, "action")
	lp := fielderr.Field(op, "limit")
	bp := fielderr.Field(op, "burst")
	switch o.Action {
	case ActionLimit:
		if r.Unlimited {
			rep.Add(ap, "an unlimited rule has no window to limit a key in; use allow or deny, or give the rule a limit")
			return
		}
		limitOK := r.checkLimit(rep, lp, o.Limit, true)
		if o.Burst != 0 {
			r.checkBurst(rep, bp, o.Burst, algoOK)
		}
		if limitOK && algoOK && windowOK {
			r.checkParams(rep, lp, bp, o.Limit, o.Burst)
		}
	case ActionAllow, ActionDeny:
		if o.Limit != 0 {
			rep.Add(lp, "only action limit takes a limit; action is %s", o.Action)
		}
		if o.Burst != 0 {
			rep.Add(bp, "only action limit takes a burst; action is %s", o.Action)
		}
	case "":
		rep.Add(ap, `required when there is no limit (want "limit", "allow" or "deny")`)
	default:
		rep.Add(ap, `%q is not an action (want "limit", "allow" or "deny")`, o.Action)
	}
}

// checkKeyValue checks v, a value of the key dimension dim, at path vp.
func checkKeyValue(rep *Report, vp, dim, v string) bool {
	if !checkValue(rep, vp, v, "") {
		return false
	}
	if dim != DimensionIP {
		return true
	}
	addr, err := netip.ParseAddr(v)
	switch {
	case err != nil:
		rep.Add(vp, "%q is not an IP address (for a range, use cidr)", v)
		return false
	case addr.String() != v:
		rep.Add(vp, "%q is not in canonical form (want %v)", v, addr)
		return false
	}
	return true
}

// canonicalMatch returns a string equal for equal maps.
func canonicalMatch(m map[string]string) string {
	var b strings.Builder
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(&b, "%d:%s=%d:%s;", len(k), k, len(m[k]), m[k])
	}
	return b.String()
}

// ValidID reports whether s is a valid rule id or domain name: 1 to 128
// characters of letters, digits, '_', '-' and '.', starting with a letter
// or digit. The admin API addresses only rules whose id and domain are
// valid; a document stored under another key (written into etcd by
// other means) can be read but not fixed or deleted through it.
func ValidID(s string) bool {
	if s == "" || len(s) > maxIDLen || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// checkName checks an identifier at path np: 1 to max characters of
// letters, digits, '_', '-' and '.', starting with a letter or digit. It
// reports whether the name is good.
func checkName(rep *Report, np, name string, max int, required bool) bool {
	switch {
	case name == "" && required:
		rep.Add(np, "required")
		return false
	case name == "":
		rep.Add(np, "empty")
		return false
	case len(name) > max:
		rep.Add(np, "%q is longer than %d characters", name, max)
		return false
	case !isAlnum(name[0]):
		rep.Add(np, "%q must start with a letter or digit", name)
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '_' && c != '-' && c != '.' {
			rep.Add(np, "%q holds %q; use letters, digits, '_', '-' and '.'", name, rune(c))
			return false
		}
	}
	return true
}

// checkDC checks a DC name at path dp: 1 to 64 characters of lower-case
// letters, digits and '-', starting with a letter or digit.
func checkDC(rep *Report, dp, name string) {
	switch {
	case name == "":
		rep.Add(dp, "empty DC name")
		return
	case len(name) > maxNameLen:
		rep.Add(dp, "DC name %q is longer than %d characters", name, maxNameLen)
		return
	case !isLowerAlnum(name[0]):
		rep.Add(dp, "DC name %q must start with a lower-case letter or digit", name)
		return
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isLowerAlnum(c) && c != '-' {
			rep.Add(dp, "DC name %q holds %q; use lower-case letters, digits and '-'", name, rune(c))
			return
		}
	}
}

// checkValue checks a condition or key value at path vp: not empty, at
// most maxValueLen bytes. hint is added to the complaint about an empty
// value.
func checkValue(rep *Report, vp, v, hint string) bool {
	switch {
	case v == "" && hint != "":
		rep.Add(vp, "empty; %s", hint)
	case v == "":
		rep.Add(vp, "empty")
	case len(v) > maxValueLen:
		rep.Add(vp, "longer than %d bytes", maxValueLen)
	case !utf8.ValidString(v):
		rep.Add(vp, "not valid UTF-8")
	default:
		return true
	}
	return false
}

// checkText checks free text at path tp.
func checkText(rep *Report, tp, s string, max int) {
	switch {
	case len(s) > max:
		rep.Add(tp, "%d bytes; at most %d", len(s), max)
	case !utf8.ValidString(s):
		rep.Add(tp, "not valid UTF-8")
	}
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

func algorithmNames() []string {
	names := make([]string, len(algorithm.All))
	for i, a := range algorithm.All {
		names[i] = a.String()
	}
	return names
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
