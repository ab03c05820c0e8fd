package document

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirhq/weir/pkg/fielderr"
)

// Reporter takes the mistakes a decoder finds. *fielderr.Report of any
// Kind is one: Fail records a mistake at a path and marks the path
// failed; IsFailed tells whether a path, or one containing it, has
// failed.
type Reporter interface {
	Fail(path, format string, args ...any)
	IsFailed(path string) bool
}

// The one wording of each mistake. Every message about a value names it
// with Describe.
const (
	msgRepeat   = "appears more than once"
	msgUnknown  = "unknown field"
	msgRequired = "required"
	msgWant     = "want %s, got %s"
	msgRange    = "%s is out of range"
	msgQuote    = " (quote it)"
	msgQuoteYes = " (quote it: YAML reads yes, no, on, off, true and false unquoted as booleans)"
)

// maxListedFields is the most known fields an unknown-field message
// lists; objects with more known fields say only "unknown field".
const maxListedFields = 6

// Mismatch reports that the value n at path is not what the decoder
// wants, as "want <want>, got <n>"; want is e.g. "a list of descriptors".
func Mismatch(rep Reporter, path, want string, n *Node) {
	rep.Fail(path, msgWant, want, Describe(n))
}

// NotOneOf reports that s, the value at path, is none of values, as
// `"x" is not valid (want "a", "b" or "c")`.
func NotOneOf(rep Reporter, path, s string, values ...string) {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = strconv.Quote(v)
	}
	rep.Fail(path, "%q is not valid (want %s)", s, OrList(q))
}

// OrList joins words as "a, b or c", as the messages of this package
// list what they want.
func OrList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// AsString returns the string n, the value at path, or reports that it is
// not one; a number or a boolean is told to be quoted.
func AsString(rep Reporter, path string, n *Node) (string, bool) {
	if n != nil && n.Kind == String {
		return n.Text, true
	}
	hint := ""
	switch {
	case n == nil:
	case n.Kind == Number:
		hint = msgQuote
	case n.Kind == Bool:
		hint = msgQuoteYes
	}
	rep.Fail(path, msgWant+"%s", "a string", Describe(n), hint)
	return "", false
}

// AsInt returns the integer n, the value at path, or reports that it is
// not one. A number written with a fraction or an exponent is taken when
// its value is a whole number of at most 2^53 (5.0, 1e3), since YAML and
// some JSON encoders write whole numbers that way.
func AsInt(rep Reporter, path string, n *Node) (int64, bool) {
	if n == nil || n.Kind != Number {
		Mismatch(rep, path, "an integer", n)
		return 0, false
	}
	if i, err := strconv.ParseInt(n.Text, 10, 64); err == nil {
		return i, true
	}
	x, err := strconv.ParseFloat(n.Text, 64)
	switch {
	case err == nil && x == math.Trunc(x) && math.Abs(x) <= 1<<53:
		return int64(x), true
	case err == nil && x == math.Trunc(x), isRange(err):
		rep.Fail(path, msgRange, n.Text)
	default: // a fraction, or YAML's .inf and .nan
		Mismatch(rep, path, "an integer", n)
	}
	return 0, false
}

// AsFloat returns the number n, the value at path, or reports that it is
// not a finite one.
func AsFloat(rep Reporter, path string, n *Node) (float64, bool) {
	if n == nil || n.Kind != Number {
		Mismatch(rep, path, "a number", n)
		return 0, false
	}
	x, err := strconv.ParseFloat(n.Text, 64)
	switch {
	case err == nil && !math.IsInf(x, 0) && !math.IsNaN(x):
		return x, true
	case isRange(err):
		rep.Fail(path, msgRange, n.Text)
	default: // YAML's .inf and .nan
		Mismatch(rep, path, "a finite number", n)
	}
	return 0, false
}

// NumberValue returns the value of n, a Number, whatever it is: YAML's
// .inf, -.inf and .nan as the parser writes them (Node.Text), and one out
// of float64's range as infinite. Use AsFloat to refuse what is not a
// finite number.
func NumberValue(n *Node) float64 {
	switch n.Text {
	case ".inf":
		return math.Inf(1)
	case "-.inf":
		return math.Inf(-1)
	case ".nan":
		return math.NaN()
	}
	x, _ := strconv.ParseFloat(n.Text, 64)
	return x
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// AsBool returns the boolean n, the value at path, or reports that it is
// not one.
func AsBool(rep Reporter, path string, n *Node) (bool, bool) {
	if n == nil || n.Kind != Bool {
		Mismatch(rep, path, "true or false", n)
		return false, false
	}
	return n.Text == "true", true
}

// AsDuration returns the duration n, the value at path, written as Go
// writes durations ("90s", "1m30s", "500ms"), or reports that it is not
// one.
func AsDuration(rep Reporter, path string, n *Node) (time.Duration, bool) {
	if n != nil && n.Kind == String {
		if d, err := time.ParseDuration(n.Text); err == nil {
			return d, true
		}
	}
	Mismatch(rep, path, `a duration such as "30s" or "1m30s"`, n)
	return 0, false
}

// AsTime returns the RFC 3339 time n, the value at path, in UTC, or
// reports that it is not one or that it is out of the range RFC 3339 can
// write.
func AsTime(rep Reporter, path string, n *Node) (time.Time, bool) {
	if n == nil || n.Kind != String {
		Mismatch(rep, path, "an RFC 3339 time such as 2023-08-25T10:00:00Z", n)
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, n.Text)
	if err != nil {
		Mismatch(rep, path, "an RFC 3339 time such as 2023-08-25T10:00:00Z", n)
		return time.Time{}, false
	}
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		rep.Fail(path, "%q is out of range in UTC", n.Text)
		return time.Time{}, false
	}
	return t, true
}

// Obj reads the fields of one object of a document, reporting each
// mistake at its path; Done reports the fields nobody asked for. An Obj
// is not safe for concurrent use.
type Obj struct {
	rep   Reporter
	path  string
	n     *Node
	used  []bool
	asked []string // the names asked for, in order, for Done's message
}

// Open returns a reader of n, the value at path, after reporting each of
// its repeated keys as "appears more than once"; or nil, after reporting
// "want an object, got ...", if n is not an object.
func Open(rep Reporter, path string, n *Node) *Obj {
	return OpenAs(rep, path, n, "an object")
}

// OpenAs is Open with the wording of what is wanted, e.g. "a descriptor
// (an object with a key)".
func OpenAs(rep Reporter, path string, n *Node, want string) *Obj {
	if n == nil || n.Kind != Object {
		Mismatch(rep, path, want, n)
		return nil
	}
	for _, f := range n.Repeats {
		rep.Fail(fielderr.Key(path, f.Key), msgRepeat)
	}
	return &Obj{rep: rep, path: path, n: n, used: make([]bool, len(n.Fields))}
}

// Path returns the path of the object.
func (o *Obj) Path() string { return o.path }

// Node returns the object's node.
func (o *Obj) Node() *Node { return o.n }

// FieldPath returns the path of the named field.
func (o *Obj) FieldPath(name string) string { return fielderr.Key(o.path, name) }

// Lookup returns the value of the named field, and whether it is present
// (a null value is), and marks the field known.
func (o *Obj) Lookup(name string) (*Node, bool) {
	if !slices.Contains(o.asked, name) {
		o.asked = append(o.asked, name)
	}
	i := o.n.index(name)
	if i < 0 {
		return nil, false
	}
	o.used[i] = true
	return o.n.Fields[i].Value, true
}

// Get returns the value of the named field, or false if it is absent or
// null, and marks the field known.
func (o *Obj) Get(name string) (*Node, bool) {
	v, ok := o.Lookup(name)
	return v, ok && v.Kind != Null
}

// Has reports whether the named field is present and not null, and marks
// it known.
func (o *Obj) Has(name string) bool {
	_, ok := o.Get(name)
	return ok
}

// Ignore marks the named field known without reading it, and without
// naming it in Done's message.
func (o *Obj) Ignore(name string) {
	if i := o.n.index(name); i >= 0 {
		o.used[i] = true
	}
}

// Unasked returns the keys of the fields not asked for so far, in
// document order: those Done would report.
func (o *Obj) Unasked() []string {
	var keys []string
	for i, f := range o.n.Fields {
		if !o.used[i] {
			keys = append(keys, f.Key)
		}
	}
	return keys
}

// Required reports "required" at each of the named fields that is absent
// or null, and marks them known.
func (o *Obj) Required(names ...string) {
	for _, name := range names {
		if v, ok := o.Lookup(name); !ok || v.Kind == Null {
			o.rep.Fail(o.FieldPath(name), msgRequired)
		}
	}
}

// Done reports each field that was not asked for as "unknown field", in
// document order, followed by the names asked for when there are at most
// six of them: "unknown field (want domain or descriptors)".
func (o *Obj) Done() {
	hint := ""
	if len(o.asked) > 0 && len(o.asked) <= maxListedFields {
		hint = " (want " + OrList(o.asked) + ")"
	}
	for i, f := range o.n.Fields {
		if !o.used[i] {
			o.rep.Fail(fielderr.Key(o.path, f.Key), msgUnknown+"%s", hint)
		}
	}
}

// String reads a string field; ok is false if it is absent, null or not a
// string (reported).
func (o *Obj) String(name string) (string, bool) {
	if v, ok := o.Get(name); ok {
		return AsString(o.rep, o.FieldPath(name), v)
	}
	return "", false
}

// Int reads an integer field, as AsInt.
func (o *Obj) Int(name string) (int64, bool) {
	if v, ok := o.Get(name); ok {
		return AsInt(o.rep, o.FieldPath(name), v)
	}
	return 0, false
}

// Float reads a number field, as AsFloat.
func (o *Obj) Float(name string) (float64, bool) {
	if v, ok := o.Get(name); ok {
		return AsFloat(o.rep, o.FieldPath(name), v)
	}
	return 0, false
}

// Bool reads a boolean field.
func (o *Obj) Bool(name string) (bool, bool) {
	if v, ok := o.Get(name); ok {
		return AsBool(o.rep, o.FieldPath(name), v)
	}
	return false, false
}

// Duration reads a duration field, as AsDuration.
func (o *Obj) Duration(name string) (time.Duration, bool) {
	if v, ok := o.Get(name); ok {
		return AsDuration(o.rep, o.FieldPath(name), v)
	}
	return 0, false
}

// Time reads an RFC 3339 time field, as AsTime; absent or bad gives the
// zero time.
func (o *Obj) Time(name string) time.Time {
	if v, ok := o.Get(name); ok {
		t, _ := AsTime(o.rep, o.FieldPath(name), v)
		return t
	}
	return time.Time{}
}

// Enum reads a string field that must be one of values: def if it is
// absent or null, "" (after reporting it) if it is anything else.
func (o *Obj) Enum(name, def string, values ...string) string {
	s, ok := o.String(name)
	if !ok {
		if o.rep.IsFailed(o.FieldPath(name)) {
			return ""
		}
		return def
	}
	for _, v := range values {
		if s == v {
			return s
		}
	}
	NotOneOf(o.rep, o.FieldPath(name), s, values...)
	return ""
}

// List reads a list field and returns its items and its path; ok is false
// if it is absent, null or not a list (reported).
func (o *Obj) List(name string) (items []*Node, path string, ok bool) {
	path = o.FieldPath(name)
	v, ok := o.Get(name)
	if !ok {
		return nil, path, false
	}
	if v.Kind != List {
		Mismatch(o.rep, path, "a list", v)
		return nil, path, false
	}
	return v.Items, path, true
}

// Strings reads a list of strings; nil if it is absent or empty. An item
// that is not a string is reported and left "".
func (o *Obj) Strings(name string) []string {
	l, path, ok := o.List(name)
	if !ok || len(l) == 0 {
		return nil
	}
	out := make([]string, len(l))
	for i, v := range l {
		out[i], _ = AsString(o.rep, fielderr.Index(path, i), v)
	}
	return out
}

// StringMap reads an object of strings; nil if it is absent or empty. ok
// is false when it is absent, null, not an object, or has an entry that
// is not a string (each reported and left out).
func (o *Obj) StringMap(name string) (m map[string]string, ok bool) {
	return mapOf(o, name, "strings", AsString)
}

// FloatMap reads an object of numbers, as StringMap reads strings.
func (o *Obj) FloatMap(name string) (m map[string]float64, ok bool) {
	return mapOf(o, name, "numbers", AsFloat)
}

// mapOf reads the object field name of o whose values conv converts.
func mapOf[T any](o *Obj, name, what string, conv func(Reporter, string, *Node) (T, bool)) (map[string]T, bool) {
	v, present := o.Get(name)
	if !present {
		return nil, false
	}
	mo := OpenAs(o.rep, o.FieldPath(name), v, "an object of "+what)
	if mo == nil {
		return nil, false
	}
	ok := len(v.Repeats) == 0
	if len(v.Fields) == 0 {
		return nil, ok
	}
	m := make(map[string]T, len(v.Fields))
	for _, f := range v.Fields {
		if x, good := conv(o.rep, fielderr.Key(mo.path, f.Key), f.Value); good {
			m[f.Key] = x
		} else {
			ok = false
		}
	}
	return m, ok
}
