package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/weirhq/weir/pkg/fielderr"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/rulefile"
)

// Parse reads a scenario, in YAML or JSON, fills in the defaults of absent
// fields and validates it.
//
// Errors wrap ErrSyntax (not well-formed YAML or JSON, duplicate keys, or
// more than one YAML document) or ErrTooLarge (over MaxDocumentSize), or
// are a *ValidationError listing every problem with its field path:
// unknown fields, values of the wrong type, missing fields and everything
// Validate checks. The rules are read by rulefile.Parse, so their problems
// are exactly a rule file's, under the path "rules".
func Parse(data []byte) (*Scenario, error) {
	tree, err := parseTree(data)
	if err != nil {
		return nil, err
	}
	var r report
	s := decodeScenario(&r, tree)
	s.SetDefaults()
	s.validate(&r)
	if err := reportErr(&r); err != nil {
		return nil, err
	}
	return s, nil
}

// parseTree converts data to JSON and decodes it into maps, lists,
// strings, booleans, json.Numbers and nils.
func parseTree(data []byte) (any, error) {
	if len(data) > MaxDocumentSize {
		return nil, fmt.Errorf("%w: %d bytes; at most %d", ErrTooLarge, len(data), MaxDocumentSize)
	}
	// JSON is read as YAML too: that way duplicate keys are errors in both.
	j, err := rulefile.StrictYAMLToJSON(data, "a scenario")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	if tree == nil {
		return nil, fmt.Errorf("%w: empty document", ErrSyntax)
	}
	return tree, nil
}

func decodeScenario(r *report, tree any) *Scenario {
	s := &Scenario{}
	o := newObject(r, "", tree)
	if o == nil {
		r.MarkFailed("")
		return s
	}
	s.Name = o.str("name")
	s.Description = o.str("description")
	s.Duration, _ = o.duration("duration")
	s.Interval, _ = o.duration("interval")
	s.TTL, _ = o.duration("ttl")
	if n, ok := o.int("seed"); ok {
		if n < 0 {
			r.Fail("seed", "must not be negative, got %d", n)
		} else {
			s.Seed = uint64(n)
		}
	}
	s.DCs = o.strings("dcs")
	if v, ok := o.get("rules"); ok {
		s.Rules = decodeRules(r, "rules", v)
	}
	if l, ok := o.list("traffic"); ok {
		s.Traffic = make([]Flow, len(l))
		for i, v := range l {
			s.Traffic[i] = decodeFlow(r, fielderr.Index("traffic", i), v)
		}
	}
	if l, ok := o.list("faults"); ok {
		s.Faults = make([]Fault, len(l))
		for i, v := range l {
			s.Faults[i] = decodeFault(r, fielderr.Index("faults", i), v)
		}
	}
	interval := s.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	s.Goals = DefaultGoals(interval)
	if v, ok := o.get("goals"); ok {
		decodeGoals(r, "goals", v, &s.Goals)
	}
	o.done()
	return s
}

// decodeRules reads the inline rule file at path with rulefile.Parse, on
// the value re-marshalled as JSON, and moves its problems under path.
func decodeRules(r *report, path string, v any) rule.Set {
	if _, ok := v.(map[string]any); !ok {
		r.Fail(path, "want an object with a domain and rules, as a rule file, got %s", describe(v))
		return rule.Set{}
	}
	j, err := json.Marshal(v)
	if err != nil {
		r.Fail(path, "%v", err)
		return rule.Set{}
	}
	set, err := rulefile.Parse(j)
	if err == nil {
		return set
	}
	r.MarkFailed(path)
	if ve, ok := errors.AsType[*rule.ValidationError](err); ok {
		for _, fe := range ve.Errors {
			r.Fail(joinPath(path, fe.Path), "%s", fe.Reason)
		}
		r.Omit(ve.Omitted)
		return rule.Set{}
	}
	r.Fail(path, "%v", err)
	return rule.Set{}
}

// joinPath returns the path of sub, a path inside the value at path.
func joinPath(path, sub string) string {
	switch {
	case sub == "":
		return path
	case strings.HasPrefix(sub, "["):
		return path + sub
	}
	return path + "." + sub
}

func decodeFlow(r *report, p string, v any) Flow {
	var f Flow
	o := newObject(r, p, v)
	if o == nil {
		return f
	}
	f.DC = o.str("dc")
	f.Rule = o.str("rule")
	f.Attributes = o.stringMap("attributes")
	var bases []string
	if o.has("rate") {
		bases = append(bases, "rate")
		c, _ := o.float("rate")
		f.Base = Constant(c)
	}
	if l, ok := o.list("steps"); ok {
		bases = append(bases, "steps")
		steps := make(Steps, len(l))
		for i, sv := range l {
			sp := fielderr.Index(fielderr.Field(p, "steps"), i)
			if so := newObject(r, sp, sv); so != nil {
				so.required("at", "rate")
				steps[i].At, _ = so.duration("at")
				steps[i].Rate, _ = so.float("rate")
				so.done()
			}
		}
		f.Base = steps
	} else if o.has("steps") {
		bases = append(bases, "steps")
		f.Base = Steps(nil)
	}
	if o.has("ramp") {
		bases = append(bases, "ramp")
		var ramp Ramp
		if ro := newObject(r, fielderr.Field(p, "ramp"), o.value("ramp")); ro != nil {
			ro.required("from", "to", "start", "end")
			ramp.From, _ = ro.float("from")
			ramp.To, _ = ro.float("to")
			ramp.Start, _ = ro.duration("start")
			ramp.End, _ = ro.duration("end")
			ro.done()
		}
		f.Base = ramp
	}
	if o.has("diurnal") {
		bases = append(bases, "diurnal")
		var d Diurnal
		if do := newObject(r, fielderr.Field(p, "diurnal"), o.value("diurnal")); do != nil {
			do.required("mean", "amplitude", "period")
			d.Mean, _ = do.float("mean")
			d.Amplitude, _ = do.float("amplitude")
			d.Period, _ = do.duration("period")
			d.Phase, _ = do.duration("phase")
			do.done()
		}
		f.Base = d
	}
	if len(bases) > 1 {
		r.Fail(p, "%s are all set: a flow has at most one base curve (rate, steps, ramp or diurnal), plus a flash", strings.Join(bases, ", "))
	}
	if o.has("flash") {
		fl := &Flash{}
		if fo := newObject(r, fielderr.Field(p, "flash"), o.value("flash")); fo != nil {
			fo.required("at", "peak")
			fl.At, _ = fo.duration("at")
			fl.Peak, _ = fo.float("peak")
			fl.Rise, _ = fo.duration("rise")
			fl.Decay, _ = fo.duration("decay")
			fo.done()
		}
		f.Flash = fl
	}
	if o.has("noise") {
		np := fielderr.Field(p, "noise")
		switch n := Noise(o.str("noise")); n {
		case NoiseEven, NoisePoisson:
			f.Noise = n
		default:
			if !r.IsFailed(np) {
				r.Fail(np, "want %q or %q, got %q", NoiseEven, NoisePoisson, string(n))
			}
		}
	}
	o.done()
	return f
}

func decodeFault(r *report, p string, v any) Fault {
	var f Fault
	o := newObject(r, p, v)
	if o == nil {
		return f
	}
	o.required("at", "kind")
	f.At, _ = o.duration("at")
	f.Kind = FaultKind(o.str("kind"))
	f.DC = o.str("dc")
	f.For, _ = o.duration("for")
	f.Fraction, _ = o.float("fraction")
	f.By, _ = o.duration("by")
	o.done()
	return f
}

func decodeGoals(r *report, p string, v any, g *Goals) {
	o := newObject(r, p, v)
	if o == nil {
		return
	}
	if x, ok := o.float("max_overshoot"); ok {
		g.MaxOvershoot = x
	}
	if x, ok := o.float("min_utilisation"); ok {
		g.MinUtilisation = x
	}
	if x, ok := o.float("convergence_intervals"); ok {
		g.ConvergenceIntervals = x
	}
	if x, ok := o.duration("convergence_slack"); ok {
		g.ConvergenceSlack = x
	}
	if x, ok := o.int("max_oscillation"); ok {
		g.MaxOscillation = clampInt(x)
	}
	if x, ok := o.float("min_fairness"); ok {
		g.MinFairness = x
	}
	if x, ok := o.int("max_starvation"); ok {
		g.MaxStarvation = clampInt(x)
	}
	if x, ok := o.duration("warm_up"); ok {
		g.WarmUp = x
	}
	o.done()
}

func clampInt(x int64) int {
	return int(max(min(x, math.MaxInt32), math.MinInt32))
}

// object reads the fields of one JSON object, recording problems with
// their paths; done reports the fields nobody asked for.
type object struct {
	r    *report
	path string
	m    map[string]any
	used map[string]bool
}

// newObject returns a reader for v, the value at path, or nil (after
// reporting it to r) if v is not an object.
func newObject(r *report, path string, v any) *object {
	m, ok := v.(map[string]any)
	if !ok {
		r.Fail(path, "want an object, got %s", describe(v))
		return nil
	}
	return &object{r: r, path: path, m: m, used: make(map[string]bool, len(m))}
}

// get returns the value of the named field, or ok false if it is absent or
// null.
func (o *object) get(name string) (any, bool) {
	v, ok := o.m[name]
	o.used[name] = true
	return v, ok && v != nil
}

// has reports whether the named field is present and not null.
func (o *object) has(name string) bool {
	_, ok := o.get(name)
	return ok
}

// value returns the named field's value.
func (o *object) value(name string) any {
	v, _ := o.get(name)
	return v
}

// required reports each of the named fields that is absent or null.
func (o *object) required(names ...string) {
	for _, n := range names {
		if v, ok := o.m[n]; !ok || v == nil {
			o.r.Fail(fielderr.Field(o.path, n), "required")
		}
	}
}

// done reports every field that was not read as unknown, in sorted order.
func (o *object) done() {
	var unknown []string
	for k := range o.m {
		if !o.used[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		o.r.Fail(fielderr.Key(o.path, k), "unknown field")
	}
}

// str reads a string field; absent gives "".
func (o *object) str(name string) string {
	v, ok := o.get(name)
	if !ok {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		o.r.Fail(fielderr.Field(o.path, name), "want a string, got %s", describe(v))
	}
	return s
}

// float reads a number field.
func (o *object) float(name string) (float64, bool) {
	v, ok := o.get(name)
	if !ok {
		return 0, false
	}
	p := fielderr.Field(o.path, name)
	n, ok := v.(json.Number)
	if !ok {
		o.r.Fail(p, "want a number, got %s", describe(v))
		return 0, false
	}
	x, err := n.Float64()
	if err != nil {
		o.r.Fail(p, "number %s out of range", n)
		return 0, false
	}
	return x, true
}

// int reads a whole-number field.
func (o *object) int(name string) (int64, bool) {
	x, ok := o.float(name)
	if !ok {
		return 0, false
	}
	if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
		o.r.Fail(fielderr.Field(o.path, name), "want a whole number, got %v", x)
		return 0, false
	}
	return int64(x), true
}

// duration reads a duration field, written as Go writes durations ("90s",
// "1m30s", "500ms").
func (o *object) duration(name string) (time.Duration, bool) {
	v, ok := o.get(name)
	if !ok {
		return 0, false
	}
	p := fielderr.Field(o.path, name)
	s, ok := v.(string)
	if !ok {
		o.r.Fail(p, "want a duration such as \"30s\", got %s", describe(v))
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		o.r.Fail(p, "want a duration such as \"30s\" or \"1m30s\", got %q", s)
		return 0, false
	}
	return d, true
}

// list reads a list field.
func (o *object) list(name string) ([]any, bool) {
	v, ok := o.get(name)
	if !ok {
		return nil, false
	}
	l, ok := v.([]any)
	if !ok {
		o.r.Fail(fielderr.Field(o.path, name), "want a list, got %s", describe(v))
		return nil, false
	}
	return l, true
}

// strings reads a list of strings.
func (o *object) strings(name string) []string {
	l, ok := o.list(name)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(l))
	for i, v := range l {
		s, ok := v.(string)
		if !ok {
			o.r.Fail(fielderr.Index(fielderr.Field(o.path, name), i), "want a string, got %s", describe(v))
			continue
		}
		out = append(out, s)
	}
	return out
}

// stringMap reads an object of strings.
func (o *object) stringMap(name string) map[string]string {
	v, ok := o.get(name)
	if !ok {
		return nil
	}
	p := fielderr.Field(o.path, name)
	m, ok := v.(map[string]any)
	if !ok {
		o.r.Fail(p, "want an object of strings, got %s", describe(v))
		return nil
	}
	out := make(map[string]string, len(m))
	for _, k := range sortedKeys(m) {
		s, ok := m[k].(string)
		if !ok {
			o.r.Fail(fielderr.Key(p, k), "want a string (quote it), got %s", describe(m[k]))
			o.r.MarkFailed(p) // a map missing an entry says nothing more
			continue
		}
		out[k] = s
	}
	return out
}

// describe names a decoded value's type (and short value) for messages.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("boolean %t", v)
	case json.Number:
		return "number " + v.String()
	case string:
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		return fmt.Sprintf("string %q", v)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
