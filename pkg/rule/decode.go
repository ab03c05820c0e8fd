package rule

import (
	"slices"
	"strings"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/document"
	"github.com/weirhq/weir/pkg/fielderr"
)

// Limits are the limits of a rule document: at most MaxDocumentSize
// bytes, nested at most document.DefaultMaxDepth deep.
var Limits = document.Limits{MaxSize: MaxDocumentSize}

// ParseRule reads one rule from a JSON document such as
//
//	{"rule_id": "user-login-attempt", "path_pattern": "/auth/login",
//	 "key_type": "username", "limit": 5, "window_seconds": 300,
//	 "algorithm": "SlidingWindowLog", "enabled": true}
//
// fills in the defaults of absent fields and validates the rule. A document
// that is not well-formed JSON gives an error wrapping ErrSyntax; one
// larger than MaxDocumentSize or nested too deeply, ErrTooLarge. Any other
// problem gives a *ValidationError that lists every problem: unknown or
// repeated fields, values of the wrong type or out of range, missing
// fields, and everything Rule.Validate checks. On error the returned rule
// is the zero Rule.
func ParseRule(data []byte) (Rule, error) {
	tree, err := document.ParseJSON(data, Limits)
	if err != nil {
		return Rule{}, document.Wrap(err, ErrSyntax, ErrTooLarge)
	}
	return DecodeRule(tree)
}

// DecodeRule reads one rule from a parsed document (package yamldoc
// parses YAML into one), as ParseRule reads it from JSON.
func DecodeRule(tree *document.Node) (Rule, error) {
	var rep Report
	r := decodeRule(&rep, "", tree)
	r.validate(&rep, "")
	sortRuleErrors(&rep, 0, "")
	if err := rep.Err(); err != nil {
		return Rule{}, err
	}
	return r, nil
}

// ParseSet reads a rule file from a JSON document: an object with a
// "domain" and a list of "rules", each as ParseRule reads it. Rules without
// a domain take the set's. Errors are as ParseRule's, with paths from the
// top of the document ("rules[3].limit"), and include everything
// Set.Validate checks.
func ParseSet(data []byte) (Set, error) {
	tree, err := document.ParseJSON(data, Limits)
	if err != nil {
		return Set{}, document.Wrap(err, ErrSyntax, ErrTooLarge)
	}
	return DecodeSet(tree)
}

// DecodeSet reads a rule file from a parsed document, as ParseSet reads
// it from JSON.
func DecodeSet(tree *document.Node) (Set, error) {
	var rep Report
	s := decodeSet(&rep, tree)
	if err := rep.Err(); err != nil {
		return Set{}, err
	}
	return s, nil
}

// decodeSet decodes and validates a rule file. Each rule is validated as
// soon as it is decoded, so that its problems are listed together.
func decodeSet(rep *Report, v *document.Node) Set {
	var s Set
	f := document.Open(rep, "", v)
	if f == nil {
		return s
	}
	s.Domain, _ = f.String("domain")
	s.checkDomain(rep)
	rules, path, ok := f.List("rules")
	switch {
	case ok && len(rules) > MaxRules:
		rep.Fail(path, "%d rules; a set holds at most %d", len(rules), MaxRules)
	case ok:
		s.Rules = make([]Rule, len(rules))
		for i, rv := range rules {
			start := rep.Len()
			s.Rules[i] = decodeRule(rep, fielderr.Index(path, i), rv)
			s.checkRule(rep, i)
			sortRuleErrors(rep, start, fielderr.Index(path, i))
			if s.Rules[i].Domain == "" {
				s.Rules[i].Domain = s.Domain
			}
		}
		s.checkIDs(rep)
	case !rep.IsFailed(path):
		rep.Fail(path, "required (a list of rules, possibly empty)")
	}
	f.Done()
	return s
}

// decodeRule decodes one rule and fills in the defaults of absent fields.
// A field present but unreadable is left zero.
func decodeRule(rep *Report, path string, v *document.Node) Rule {
	r := Rule{Enabled: true}
	f := document.Open(rep, path, v)
	if f == nil {
		return r
	}
	r.ID, _ = f.String("rule_id")
	r.Domain, _ = f.String("domain")
	r.Description, _ = f.String("description")
	r.PathPattern, _ = f.String("path_pattern")
	r.Methods = f.Strings("methods")
	r.Conditions, _ = f.StringMap("conditions")
	r.KeyType = dimensions(rep, f, "key_type")
	r.Limit, _ = f.Int("limit")
	r.Unlimited, _ = f.Bool("unlimited")
	r.WindowSeconds, _ = f.Int("window_seconds")
	r.Calendar = f.Enum("calendar", "", CalendarMonth)
	if !rep.IsFailed(f.FieldPath("window_seconds")) {
		r.defaultWindow()
	}
	if name, ok := f.String("algorithm"); ok {
		a, err := algorithm.Parse(name)
		if err != nil {
			document.NotOneOf(rep, f.FieldPath("algorithm"), name, algorithmNames()...)
		}
		r.Algorithm = a
	} else if !rep.IsFailed(f.FieldPath("algorithm")) {
		r.Algorithm = algorithm.Default
	}
	r.Burst, _ = f.Int("burst")
	r.Scope = Scope(f.Enum("scope", string(ScopeGlobal), string(ScopeGlobal), string(ScopeLocal)))
	r.Shares, _ = f.FloatMap("shares")
	r.Overrides = overrides(rep, f, "overrides")
	r.Shadow, _ = f.Bool("shadow")
	r.FailureMode = FailureMode(f.Enum("failure_mode", string(FailLocal), string(FailOpen), string(FailClosed), string(FailLocal)))
	if b, ok := f.Bool("enabled"); ok {
		r.Enabled = b
	}
	r.RejectionMessage, _ = f.String("rejection_message")
	r.RetryAdvice = RetryAdvice(f.Enum("retry_advice", string(RetryAfter), string(RetryAfter), string(ExponentialBackoff), string(DailyLimitReached)))
	r.CreatedAt = f.Time("created_at")
	r.UpdatedAt = f.Time("updated_at")
	// The seed's MongoDB documents carry their store's "_id"; it means
	// nothing to Weir.
	f.Ignore("_id")
	f.Done()
	return r
}

// ruleFields lists a rule's fields in the order its errors are reported.
var ruleFields = [...]string{
	"rule_id", "domain", "description", "path_pattern", "methods", "conditions",
	"key_type", "limit", "unlimited", "window_seconds", "algorithm", "burst",
	"scope", "shares", "overrides", "shadow", "failure_mode", "enabled",
	"rejection_message", "retry_advice", "created_at", "updated_at",
}

// sortRuleErrors orders the errors of the rule at path p, those of rep from
// the from'th on (found partly while decoding, partly while validating), by
// the field they concern, in the order of ruleFields, then unknown fields;
// errors about the same field keep their order.
func sortRuleErrors(rep *Report, from int, p string) {
	rank := func(path string) int {
		path = strings.TrimPrefix(path[len(p):], ".")
		if path == "" {
			return -1
		}
		if i := strings.IndexAny(path, ".["); i >= 0 {
			path = path[:i]
		}
		if i := slices.Index(ruleFields[:], path); i >= 0 {
			return i
		}
		return len(ruleFields)
	}
	rep.Sort(from, func(a, b FieldError) int { return rank(a.Path) - rank(b.Path) })
}

// dimensions reads key_type: a string or a list of strings.
func dimensions(rep *Report, f *document.Obj, name string) Dimensions {
	v, ok := f.Get(name)
	if !ok {
		return nil
	}
	switch v.Kind {
	case document.String:
		if v.Text == "" {
			return nil // as in the seed's schema: no key, one shared counter
		}
		return Dimensions{v.Text}
	case document.List:
		if len(v.Items) == 0 {
			return nil
		}
		d := make(Dimensions, len(v.Items))
		for i, e := range v.Items {
			d[i], _ = document.AsString(rep, fielderr.Index(f.FieldPath(name), i), e)
		}
		return d
	}
	document.Mismatch(rep, f.FieldPath(name), "a dimension name or a list of them", v)
	return nil
}

// overrides reads the overrides list.
func overrides(rep *Report, f *document.Obj, name string) []Override {
	l, path, ok := f.List(name)
	if !ok || len(l) == 0 {
		return nil
	}
	if len(l) > MaxOverrides {
		rep.Fail(path, "%d overrides; a rule holds at most %d", len(l), MaxOverrides)
		return nil
	}
	out := make([]Override, len(l))
	for i, v := range l {
		of := document.Open(rep, fielderr.Index(path, i), v)
		if of == nil {
			continue
		}
		o := &out[i]
		o.Key, _ = of.String("key")
		if of.Has("key") && o.Key == "" && !rep.IsFailed(of.FieldPath("key")) {
			rep.Fail(of.FieldPath("key"), "empty")
		}
		o.Match, _ = of.StringMap("match")
		if mv, present := of.Get("match"); present && mv.Kind == document.Object && len(mv.Fields) == 0 {
			rep.Fail(of.FieldPath("match"), "empty")
		}
		o.CIDR, _ = of.String("cidr")
		if of.Has("cidr") && o.CIDR == "" && !rep.IsFailed(of.FieldPath("cidr")) {
			rep.Fail(of.FieldPath("cidr"), "empty")
		}
		o.Limit, _ = of.Int("limit")
		o.Burst, _ = of.Int("burst")
		def := ""
		if of.Has("limit") {
			def = string(ActionLimit)
		}
		o.Action = Action(of.Enum("action", def, string(ActionLimit), string(ActionAllow), string(ActionDeny)))
		of.Done()
	}
	return out
}
