package rule

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
)

// Rule is one rate-limiting rule: which requests it applies to, how they are
// grouped into keys, and the limit each key gets.
//
// Rules are plain values and are not safe for concurrent mutation; a rule
// that is only read may be shared freely. ParseRule and ParseSet return
// rules whose defaults are filled in and which passed Validate; a Rule built
// in Go should be given its defaults with SetDefaults and checked with
// Validate before use. Marshalling a Rule with encoding/json gives the same
// document shape ParseRule accepts (with defaults written out).
type Rule struct {
	// ID names the rule, unique within its domain: 1 to 128 characters of
	// A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or digit.
	// Required.
	ID string `json:"rule_id"`
	// Domain is the namespace of the rule (as in envoyproxy/ratelimit).
	// Optional on a single rule; in a Set, a rule without one takes the
	// set's domain, and a rule with one must agree with it.
	Domain string `json:"domain,omitempty"`
	// Description is free text for operators, at most 4,096 bytes of UTF-8.
	Description string `json:"description,omitempty"`

	// PathPattern is a glob over the request path (see CompilePath). Empty
	// matches every path.
	PathPattern string `json:"path_pattern,omitempty"`
	// Methods are the upper-case HTTP methods the rule applies to. Empty
	// matches every method.
	Methods []string `json:"methods,omitempty"`
	// Conditions maps attribute (descriptor) names to the value the request
	// must carry: an exact value, or "*" for "present, any value". All
	// must hold. Empty means no condition.
	Conditions map[string]string `json:"conditions,omitempty"`
	// KeyType lists the key dimensions: the attributes whose values, taken
	// together, name the counter a request is charged to. Empty means one
	// counter shared by every request the rule matches.
	KeyType Dimensions `json:"key_type,omitempty"`

	// Limit is the number of requests (units of cost) each key may make per
	// window: 1 to algorithm.MaxLimit, at most algorithm.MaxLogLimit for
	// SlidingWindowLog. Required unless Unlimited, and then zero.
	Limit int64 `json:"limit,omitempty"`
	// Unlimited marks a rule that matches and counts but never limits, as in
	// envoyproxy/ratelimit. It takes no limit, burst or limiting override.
	Unlimited bool `json:"unlimited,omitempty"`
	// WindowSeconds is the length of the window Limit applies to, from 1 s
	// to algorithm.MaxWindow. Required unless Unlimited or Calendar is set.
	WindowSeconds int64 `json:"window_seconds,omitempty"`
	// Calendar "month" makes a FixedWindow's windows the calendar months
	// in UTC: a monthly quota resets at midnight UTC on the 1st, whatever
	// the month's length. WindowSeconds is then 31 days (the longest
	// month; SetDefaults fills it in). Empty: windows of WindowSeconds
	// back to back from the Unix epoch — a day's start at midnight UTC.
	Calendar string `json:"calendar,omitempty"`
	// Algorithm is the rate-limiting algorithm; SetDefaults makes it
	// algorithm.Default when zero.
	Algorithm algorithm.Algorithm `json:"algorithm"`
	// Burst is the bucket capacity of TokenBucket or LeakyBucket; zero
	// means the algorithm's default (Limit for TokenBucket, 1 for
	// LeakyBucket). Other algorithms take none.
	Burst int64 `json:"burst,omitempty"`

	// Scope says whether Limit is shared by all DCs (ScopeGlobal, the
	// default) or applies in each DC on its own (ScopeLocal).
	Scope Scope `json:"scope"`
	// Shares are static shares of a global rule's limit, by DC name: each
	// in [0, 1], summing to at most 1. They are the safe shares a DC falls
	// back to without word from the coordinator. DCs not listed split what
	// the listed ones leave equally; empty means 1/N for each of N DCs.
	// Only for ScopeGlobal.
	Shares map[string]float64 `json:"shares,omitempty"`
	// Overrides give particular keys their own limit, or let them bypass
	// (allow) or always fail (deny) the rule. At most MaxOverrides.
	Overrides []Override `json:"overrides,omitempty"`

	// Shadow makes the rule decide and count but never reject.
	Shadow bool `json:"shadow,omitempty"`
	// FailureMode says what to do while the DC's Redis is unavailable;
	// SetDefaults makes it FailLocal when empty.
	FailureMode FailureMode `json:"failure_mode"`
	// Enabled switches the rule on. Documents that omit "enabled" give
	// true; the zero Rule is disabled.
	Enabled bool `json:"enabled"`
	// RejectionMessage is the message of a rejected request's answer, at
	// most 1,024 bytes of UTF-8. Empty means a generic message.
	RejectionMessage string `json:"rejection_message,omitempty"`
	// RetryAdvice tells rejected clients how to retry; SetDefaults makes it
	// RetryAfter when empty.
	RetryAdvice RetryAdvice `json:"retry_advice"`

	// CreatedAt and UpdatedAt are kept by the control plane. Documents may
	// carry them (RFC 3339) so that a rule read from the admin API can be
	// written back unchanged; they are stored in UTC.
	CreatedAt time.Time `json:"created_at,omitzero"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// Window returns the rule's window as a duration.
func (r *Rule) Window() time.Duration { return time.Duration(r.WindowSeconds) * time.Second }

// Params returns the algorithm parameters for a key of r that is allowed
// limit per window with the given burst: r.Params(r.Limit, r.Burst) for the
// rule as written, a DC's share of it, or an override's limit and burst.
// The caller scales limit and burst; Params does not validate them.
func (r *Rule) Params(limit, burst int64) algorithm.Params {
	p := algorithm.Params{Algorithm: r.Algorithm, Limit: limit, Window: r.Window(), Burst: burst}
	p.Calendar, _ = algorithm.ParseCalendar(r.Calendar) // Validate refuses an unknown one
	return p
}

// CalendarMonth is the Calendar of monthly windows: algorithm.Month's
// name (TestCalendarMonth checks that they agree).
const CalendarMonth = "month"

// monthSeconds is the WindowSeconds of a rule whose Calendar is "month".
const monthSeconds = int64(algorithm.MonthWindow / time.Second)

// defaultWindow gives a calendar-month rule without a window the longest
// month's.
func (r *Rule) defaultWindow() {
	if r.Calendar == CalendarMonth && r.WindowSeconds == 0 {
		r.WindowSeconds = monthSeconds
	}
}

// SetDefaults fills in the defaults of the fields whose zero value is not
// a valid setting: Algorithm (algorithm.Default), Scope (ScopeGlobal),
// FailureMode (FailLocal) and RetryAdvice (RetryAfter), and the Action of
// overrides (ActionLimit when they carry a limit). It leaves Enabled alone.
func (r *Rule) SetDefaults() {
	if r.Algorithm == 0 {
		r.Algorithm = algorithm.Default
	}
	if r.Scope == "" {
		r.Scope = ScopeGlobal
	}
	if r.FailureMode == "" {
		r.FailureMode = FailLocal
	}
	if r.RetryAdvice == "" {
		r.RetryAdvice = RetryAfter
	}
	r.defaultWindow()
	for i := range r.Overrides {
		if o := &r.Overrides[i]; o.Action == "" && o.Limit != 0 {
			o.Action = ActionLimit
		}
	}
}

// Override singles out keys of a rule. Exactly one of Key, Match and CIDR
// selects the keys.
//
// When several overrides select a key, the most specific wins: an exact
// Key or Match before a CIDR, a Match naming more dimensions before one
// naming fewer, a longer CIDR prefix before a shorter one, and otherwise
// the one listed first.
type Override struct {
	// Key is the exact value of the key of a rule with a single key
	// dimension. For the dimension "ip" it is an IP address in its
	// canonical form (192.0.2.1, 2001:db8::1).
	Key string `json:"key,omitempty"`
	// Match selects keys of a composite key by the values of some or all
	// of its dimensions; every listed dimension must be one of the rule's
	// KeyType and must equal the given value.
	Match map[string]string `json:"match,omitempty"`
	// CIDR selects the keys whose "ip" dimension lies in the prefix, IPv4
	// or IPv6, written without host bits (10.0.0.0/8). Only for rules whose
	// KeyType includes "ip".
	CIDR string `json:"cidr,omitempty"`
	// Action is what happens to the selected keys. SetDefaults makes it
	// ActionLimit when Limit is set.
	Action Action `json:"action"`
	// Limit replaces the rule's limit for each selected key: required for
	// ActionLimit, and only for it. Same bounds as Rule.Limit.
	Limit int64 `json:"limit,omitempty"`
	// Burst replaces the rule's burst for ActionLimit on a bucket
	// algorithm; zero means the algorithm's default for Limit.
	Burst int64 `json:"burst,omitempty"`
}

// Set is the content of a rule file: the rules of one domain.
// Like Rule, it is a plain value.
type Set struct {
	// Domain names the set, as Rule.ID names a rule. Required.
	Domain string `json:"domain"`
	// Rules are the set's rules, at most MaxRules, with distinct IDs.
	Rules []Rule `json:"rules"`
}

// Scope is where a rule's limit applies.
type Scope string

// The scopes.
const (
	// ScopeGlobal shares one limit between all DCs, each enforcing its
	// share. The default.
	ScopeGlobal Scope = "global"
	// ScopeLocal gives each DC the whole limit on its own.
	ScopeLocal Scope = "local"
)

// FailureMode is what a limiter does for a rule while its Redis is slow
// or down (SPEC §6).
type FailureMode string

// The failure modes.
const (
	// FailOpen allows every request.
	FailOpen FailureMode = "open"
	// FailClosed rejects every request.
	FailClosed FailureMode = "closed"
	// FailLocal enforces the DC's share in memory, divided by the number of
	// live limiter instances in the DC. The default.
	FailLocal FailureMode = "local"
)

// RetryAdvice is the retry behaviour a rejection recommends to clients.
type RetryAdvice string

// The retry advices.
const (
	// RetryAfter: retry after the Retry-After delay. The default.
	RetryAfter RetryAdvice = "retry_after"
	// ExponentialBackoff: retry with exponential back-off.
	ExponentialBackoff RetryAdvice = "exponential_backoff"
	// DailyLimitReached: the quota is spent for the day; do not retry
	// before it resets.
	DailyLimitReached RetryAdvice = "daily_limit_reached"
)

// Action is what an override does to the keys it selects.
type Action string

// The override actions.
const (
	// ActionLimit applies the override's own limit (and burst).
	ActionLimit Action = "limit"
	// ActionAllow lets the keys through without counting them against the
	// rule.
	ActionAllow Action = "allow"
	// ActionDeny rejects every request of the keys.
	ActionDeny Action = "deny"
)

// DimensionIP is the key dimension that holds the client's IP address; the
// only one overrides may select by CIDR.
const DimensionIP = "ip"

// Bounds on documents, rules and sets.
const (
	// MaxDocumentSize is the largest document ParseRule and ParseSet read,
	// in bytes.
	MaxDocumentSize = 4 << 20
	// MaxRules is the most rules a Set may hold.
	MaxRules = 10_000
	// MaxOverrides is the most overrides a Rule may hold.
	MaxOverrides = 1_000
)

// Dimensions are the key dimensions of a rule: attribute names, in order.
// In JSON a single dimension is written as a string ("username") and
// several as a list (["tenant", "user_id"]); both forms are accepted.
type Dimensions []string

// Contains reports whether name is one of d.
func (d Dimensions) Contains(name string) bool { return slices.Contains(d, name) }

// MarshalJSON writes one dimension as a string and any other number as a
// list.
func (d Dimensions) MarshalJSON() ([]byte, error) {
	if len(d) == 1 {
		return json.Marshal(d[0])
	}
	return json.Marshal([]string(d))
}

// UnmarshalJSON accepts a string, a list of strings or null (no
// dimensions). It checks only the JSON types; Rule.Validate checks the
// names.
func (d *Dimensions) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*d = nil
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*d = Dimensions{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("rule: key_type must be a string or a list of strings, got %s", b)
	}
	*d = many
	return nil
}
