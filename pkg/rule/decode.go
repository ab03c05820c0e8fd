package rule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/fielderr"
)

// maxDepth bounds the nesting of a document. Rule files nest six deep;
// anything far deeper is hostile.
const maxDepth = 64

// ParseRule reads one rule from a JSON document such as
//
//	{"rule_id": "user-login-attempt", "path_pattern": "/auth/login",
//	 "key_type": "username", "limit": 5, "window_seconds": 300,
//	 "algorithm": "SlidingWindowLog", "enabled": true}
//
// fills in the defaults of absent fields and validates the rule. A document
// that is not well-formed JSON gives an error wrapping ErrSyntax; one
// larger than MaxDocumentSize, ErrTooLarge. Any other problem gives a
// *ValidationError that lists every problem: unknown or duplicate fields,
// values of the wrong type or out of range, missing fields, and everything
// Rule.Validate checks. On error the returned rule is the zero Rule.
func ParseRule(data []byte) (Rule, error) {
	tree, err := parseJSON(data)
	if err != nil {
		return Rule{}, err
	}
	var rep report
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
	tree, err := parseJSON(data)
	if err != nil {
		return Set{}, err
	}
	var rep report
	s := decodeSet(&rep, tree)
	if err := rep.Err(); err != nil {
		return Set{}, err
	}
	return s, nil
}

// object is a JSON object that remembers the order of its fields and the
// names that appeared more than once.
type object struct {
	keys  []string
	vals  []any
	index map[string]int
	dups  []string
}

// parseJSON reads data into a tree of *object, []any, string, json.Number,
// bool and nil.
func parseJSON(data []byte) (any, error) {
	if len(data) > MaxDocumentSize {
		return nil, fmt.Errorf("%w: %d bytes; at most %d", ErrTooLarge, len(data), MaxDocumentSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := readValue(dec, 0)
	if err == nil {
		if _, err = dec.Token(); err == io.EOF {
			return v, nil
		} else if err == nil {
			return nil, fmt.Errorf("%w: %s: data after the end of the document", ErrSyntax, position(data, dec.InputOffset()))
		}
	}
	if errors.Is(err, ErrTooLarge) {
		return nil, err
	}
	var se *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		if len(bytes.TrimSpace(data)) == 0 {
			return nil, fmt.Errorf("%w: empty document", ErrSyntax)
		}
		return nil, fmt.Errorf("%w: unexpected end of document", ErrSyntax)
	case errors.As(err, &se):
		// se.Offset is not always relative to the document; the input
		// offset is, and points at the token that could not be read.
		return nil, fmt.Errorf("%w: %s: %s", ErrSyntax, position(data, dec.InputOffset()), se.Error())
	}
	return nil, fmt.Errorf("%w: %v", ErrSyntax, err)
}

// readValue reads one JSON value from dec.
func readValue(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return tok, nil // string, json.Number, bool or nil
	}
	if depth >= maxDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d", ErrTooLarge, maxDepth)
	}
	if delim == '[' {
		list := []any{}
		for dec.More() {
			v, err := readValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := dec.Token() // ']'
		return list, err
	}
	o := &object{index: make(map[string]int)}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k := tok.(string) // the decoder allows only strings here
		v, err := readValue(dec, depth+1)
		if err != nil {
			return nil, err
		}
		if _, dup := o.index[k]; dup {
			o.dups = append(o.dups, k)
			continue
		}
		o.index[k] = len(o.keys)
		o.keys = append(o.keys, k)
		o.vals = append(o.vals, v)
	}
	_, err = dec.Token() // '}'
	return o, err
}

// position returns "line L, column C" for a byte offset into data.
func position(data []byte, off int64) string {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte{'\n'}) + 1
	col := int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return fmt.Sprintf("line %d, column %d", line, col)
}

// fields reads the fields of one JSON object, recording problems with their
// paths; done reports the fields nobody asked for.
type fields struct {
	rep  *report
	path string
	o    *object
	used []bool
}

// newFields returns a reader for v, the value at path, or nil (after
// reporting it) if v is not an object.
func newFields(rep *report, path string, v any) *fields {
	o, ok := v.(*object)
	if !ok {
		rep.Fail(path, "want an object, got %s", describe(v))
		return nil
	}
	reportDups(rep, path, o)
	return &fields{rep: rep, path: path, o: o, used: make([]bool, len(o.keys))}
}

func reportDups(rep *report, path string, o *object) {
	for _, k := range o.dups {
		rep.Fail(fielderr.Key(path, k), "appears more than once")
	}
}

// get returns the value of the named field, or ok false if it is absent or
// null.
func (f *fields) get(name string) (v any, ok bool) {
	i, ok := f.o.index[name]
	if !ok {
		return nil, false
	}
	f.used[i] = true
	return f.o.vals[i], f.o.vals[i] != nil
}

// ignore marks the named field as known without reading it.
func (f *fields) ignore(name string) { f.get(name) }

// done reports every field that was not read as unknown.
func (f *fields) done() {
	for i, k := range f.o.keys {
		if !f.used[i] {
			f.rep.Fail(fielderr.Key(f.path, k), "unknown field")
		}
	}
}

// string reads a string field.
func (f *fields) string(name string) (string, bool) {
	v, ok := f.get(name)
	if !ok {
		return "", false
	}
	return asString(f.rep, fielderr.Key(f.path, name), v)
}

// int reads an integer field.
func (f *fields) int(name string) (int64, bool) {
	v, ok := f.get(name)
	if !ok {
		return 0, false
	}
	return asInt(f.rep, fielderr.Key(f.path, name), v)
}

// bool reads a boolean field.
func (f *fields) bool(name string) (bool, bool) {
	v, ok := f.get(name)
	if !ok {
		return false, false
	}
	b, isBool := v.(bool)
	if !isBool {
		f.rep.Fail(fielderr.Key(f.path, name), "want true or false, got %s", describe(v))
	}
	return b, isBool
}

// time reads an RFC 3339 time field, in UTC.
func (f *fields) time(name string) time.Time {
	s, ok := f.string(name)
	if !ok {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		f.rep.Fail(fielderr.Key(f.path, name), "%q is not an RFC 3339 time (want e.g. 2023-08-25T10:00:00Z)", s)
		return time.Time{}
	}
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		// It could not be written back as RFC 3339.
		f.rep.Fail(fielderr.Key(f.path, name), "%q is out of range in UTC", s)
		return time.Time{}
	}
	return t
}

// list reads a list field; path is the field's path.
func (f *fields) list(name string) (l []any, path string, ok bool) {
	path = fielderr.Key(f.path, name)
	v, ok := f.get(name)
	if !ok {
		return nil, path, false
	}
	l, ok = v.([]any)
	if !ok {
		f.rep.Fail(path, "want a list, got %s", describe(v))
	}
	return l, path, ok
}

// strings reads a list of strings; nil if it is absent or empty.
func (f *fields) strings(name string) []string {
	l, path, ok := f.list(name)
	if !ok || len(l) == 0 {
		return nil
	}
	out := make([]string, len(l))
	for i, v := range l {
		out[i], _ = asString(f.rep, fielderr.Index(path, i), v)
	}
	return out
}

// stringMap reads an object of strings; nil if it is absent or empty.
func (f *fields) stringMap(name string) map[string]string {
	return objectOf(f, name, "strings", func(path string, v any) (string, bool) { return asString(f.rep, path, v) })
}

// floatMap reads an object of numbers; nil if it is absent or empty.
func (f *fields) floatMap(name string) map[string]float64 {
	return objectOf(f, name, "numbers", func(path string, v any) (float64, bool) {
		n, ok := v.(json.Number)
		if !ok {
			f.rep.Fail(path, "want a number, got %s", describe(v))
			return 0, false
		}
		x, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			f.rep.Fail(path, "%s is out of range", n)
			return 0, false
		}
		return x, true
	})
}

// objectOf reads the object field name of f whose values conv converts
// (reporting its own errors); nil if it is absent or empty. Values conv
// refuses are left out.
func objectOf[T any](f *fields, name, what string, conv func(path string, v any) (T, bool)) map[string]T {
	path := fielderr.Key(f.path, name)
	v, ok := f.get(name)
	if !ok {
		return nil
	}
	o, ok := v.(*object)
	if !ok {
		f.rep.Fail(path, "want an object of %s, got %s", what, describe(v))
		return nil
	}
	reportDups(f.rep, path, o)
	if len(o.keys) == 0 {
		return nil
	}
	m := make(map[string]T, len(o.keys))
	for i, k := range o.keys {
		if x, ok := conv(fielderr.Key(path, k), o.vals[i]); ok {
			m[k] = x
		}
	}
	return m
}

func asString(rep *report, path string, v any) (string, bool) {
	s, ok := v.(string)
	if ok {
		return s, true
	}
	switch v.(type) {
	case json.Number, bool:
		rep.Fail(path, "want a string, got %s (quote it)", describe(v))
	default:
		rep.Fail(path, "want a string, got %s", describe(v))
	}
	return "", false
}

// asInt reads an integer. Numbers written with a fraction or an exponent
// are accepted when their value is a whole number (5.0, 1e3), since YAML
// and some JSON encoders write whole numbers that way.
func asInt(rep *report, path string, v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		rep.Fail(path, "want an integer, got %s", describe(v))
		return 0, false
	}
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i, true
	}
	x, err := strconv.ParseFloat(string(n), 64)
	switch {
	case err == nil && x == math.Trunc(x) && math.Abs(x) <= 1<<53:
		return int64(x), true
	case err == nil && x != math.Trunc(x):
		rep.Fail(path, "want an integer, got %s", n)
	default:
		rep.Fail(path, "%s is out of range", n)
	}
	return 0, false
}

// describe names a JSON value for an error message.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		if len(v) > 40 {
			return strconv.Quote(v[:37] + "...")
		}
		return strconv.Quote(v)
	case json.Number:
		return string(v)
	case bool:
		return strconv.FormatBool(v)
	case []any:
		return "a list"
	case *object:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// decodeSet decodes and validates a rule file. Each rule is validated as
// soon as it is decoded, so that its problems are listed together.
func decodeSet(rep *report, v any) Set {
	var s Set
	f := newFields(rep, "", v)
	if f == nil {
		return s
	}
	s.Domain, _ = f.string("domain")
	s.checkDomain(rep)
	rules, path, ok := f.list("rules")
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
	f.done()
	return s
}

// decodeRule decodes one rule and fills in the defaults of absent fields.
// A field present but unreadable is left zero.
func decodeRule(rep *report, path string, v any) Rule {
	r := Rule{Enabled: true}
	f := newFields(rep, path, v)
	if f == nil {
		return r
	}
	r.ID, _ = f.string("rule_id")
	r.Domain, _ = f.string("domain")
	r.Description, _ = f.string("description")
	r.PathPattern, _ = f.string("path_pattern")
	r.Methods = f.strings("methods")
	r.Conditions = f.stringMap("conditions")
	r.KeyType = f.dimensions("key_type")
	r.Limit, _ = f.int("limit")
	r.Unlimited, _ = f.bool("unlimited")
	r.WindowSeconds, _ = f.int("window_seconds")
	if name, ok := f.string("algorithm"); ok {
		a, err := algorithm.Parse(name)
		if err != nil {
			rep.Fail(fielderr.Key(path, "algorithm"), "%q is not an algorithm (want one of %s)", name, algorithmNames())
		}
		r.Algorithm = a
	} else if !rep.IsFailed(fielderr.Key(path, "algorithm")) {
		r.Algorithm = algorithm.Default
	}
	r.Burst, _ = f.int("burst")
	r.Scope = Scope(f.enum("scope", string(ScopeGlobal), string(ScopeGlobal), string(ScopeLocal)))
	r.Shares = f.floatMap("shares")
	r.Overrides = f.overrides("overrides")
	r.Shadow, _ = f.bool("shadow")
	r.FailureMode = FailureMode(f.enum("failure_mode", string(FailLocal), string(FailOpen), string(FailClosed), string(FailLocal)))
	if b, ok := f.bool("enabled"); ok {
		r.Enabled = b
	}
	r.RejectionMessage, _ = f.string("rejection_message")
	r.RetryAdvice = RetryAdvice(f.enum("retry_advice", string(RetryAfter), string(RetryAfter), string(ExponentialBackoff), string(DailyLimitReached)))
	r.CreatedAt = f.time("created_at")
	r.UpdatedAt = f.time("updated_at")
	// The seed's MongoDB documents carry their store's "_id"; it means
	// nothing to Weir.
	f.ignore("_id")
	f.done()
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
func sortRuleErrors(rep *report, from int, p string) {
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

// enum reads a string field that must be one of values, or def if absent.
// A bad value reads as "".
func (f *fields) enum(name, def string, values ...string) string {
	s, ok := f.string(name)
	if !ok {
		if f.rep.IsFailed(fielderr.Key(f.path, name)) {
			return ""
		}
		return def
	}
	for _, v := range values {
		if s == v {
			return s
		}
	}
	want := ""
	for i, v := range values {
		switch {
		case i == 0:
		case i == len(values)-1:
			want += " or "
		default:
			want += ", "
		}
		want += strconv.Quote(v)
	}
	f.rep.Fail(fielderr.Key(f.path, name), "%q is not valid (want %s)", s, want)
	return ""
}

// dimensions reads key_type: a string or a list of strings.
func (f *fields) dimensions(name string) Dimensions {
	path := fielderr.Key(f.path, name)
	v, ok := f.get(name)
	if !ok {
		return nil
	}
	switch v := v.(type) {
	case string:
		if v == "" {
			return nil // as in the seed's schema: no key, one shared counter
		}
		return Dimensions{v}
	case []any:
		if len(v) == 0 {
			return nil
		}
		d := make(Dimensions, len(v))
		for i, e := range v {
			d[i], _ = asString(f.rep, fielderr.Index(path, i), e)
		}
		return d
	}
	f.rep.Fail(path, "want a dimension name or a list of them, got %s", describe(v))
	return nil
}

// overrides reads the overrides list.
func (f *fields) overrides(name string) []Override {
	l, path, ok := f.list(name)
	if !ok || len(l) == 0 {
		return nil
	}
	if len(l) > MaxOverrides {
		f.rep.Fail(path, "%d overrides; a rule holds at most %d", len(l), MaxOverrides)
		return nil
	}
	out := make([]Override, len(l))
	for i, v := range l {
		op := fielderr.Index(path, i)
		of := newFields(f.rep, op, v)
		if of == nil {
			continue
		}
		o := &out[i]
		o.Key, _ = of.string("key")
		if _, present := of.get("key"); present && o.Key == "" && !f.rep.IsFailed(fielderr.Key(op, "key")) {
			f.rep.Fail(fielderr.Key(op, "key"), "empty")
		}
		o.Match = of.stringMap("match")
		if mv, present := of.get("match"); present && o.Match == nil && !f.rep.IsFailed(fielderr.Key(op, "match")) {
			if mo, isObject := mv.(*object); isObject && len(mo.keys) == 0 {
				f.rep.Fail(fielderr.Key(op, "match"), "empty")
			}
		}
		o.CIDR, _ = of.string("cidr")
		if _, present := of.get("cidr"); present && o.CIDR == "" && !f.rep.IsFailed(fielderr.Key(op, "cidr")) {
			f.rep.Fail(fielderr.Key(op, "cidr"), "empty")
		}
		o.Limit, _ = of.int("limit")
		o.Burst, _ = of.int("burst")
		def := ""
		if _, present := of.get("limit"); present {
			def = string(ActionLimit)
		}
		o.Action = Action(of.enum("action", def, string(ActionLimit), string(ActionAllow), string(ActionDeny)))
		of.done()
	}
	return out
}
