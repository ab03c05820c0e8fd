package scenario

import (
	"errors"
	"math"
	"strings"

	"github.com/weirhq/weir/pkg/document"
	"github.com/weirhq/weir/pkg/document/yamldoc"
	"github.com/weirhq/weir/pkg/fielderr"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/rulefile"
)

// Parse reads a scenario, in YAML or JSON, fills in the defaults of absent
// fields and validates it.
//
// Errors wrap ErrSyntax (not well-formed YAML or JSON, or more than one
// YAML document) or ErrTooLarge (over MaxDocumentSize), or are a
// *ValidationError listing every problem with its field path: unknown or
// repeated fields, values of the wrong type, missing fields and everything
// Validate checks. The rules are read by rulefile.Decode, so their
// problems are exactly a rule file's, under the path "rules".
func Parse(data []byte) (*Scenario, error) {
	tree, err := yamldoc.Parse(data, document.Limits{MaxSize: MaxDocumentSize})
	if err != nil {
		return nil, document.Wrap(err, ErrSyntax, ErrTooLarge)
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

func decodeScenario(r *report, tree *document.Node) *Scenario {
	s := &Scenario{}
	o := document.Open(r, "", tree)
	if o == nil {
		r.MarkFailed("")
		return s
	}
	s.Name, _ = o.String("name")
	s.Description, _ = o.String("description")
	s.Duration, _ = o.Duration("duration")
	s.Interval, _ = o.Duration("interval")
	s.TTL, _ = o.Duration("ttl")
	if n, ok := o.Int("seed"); ok {
		if n < 0 {
			r.Fail("seed", "must not be negative, got %d", n)
		} else {
			s.Seed = uint64(n)
		}
	}
	s.DCs = o.Strings("dcs")
	if v, ok := o.Get("rules"); ok {
		s.Rules = decodeRules(r, "rules", v)
	}
	if l, path, ok := o.List("traffic"); ok {
		s.Traffic = make([]Flow, len(l))
		for i, v := range l {
			s.Traffic[i] = decodeFlow(r, fielderr.Index(path, i), v)
		}
	}
	if l, path, ok := o.List("faults"); ok {
		s.Faults = make([]Fault, len(l))
		for i, v := range l {
			s.Faults[i] = decodeFault(r, fielderr.Index(path, i), v)
		}
	}
	interval := s.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	s.Goals = DefaultGoals(interval)
	if v, ok := o.Get("goals"); ok {
		decodeGoals(r, "goals", v, &s.Goals)
	}
	o.Done()
	return s
}

// decodeRules reads the inline rule file at path with rulefile.Decode and
// moves its problems under path.
func decodeRules(r *report, path string, v *document.Node) rule.Set {
	if v.Kind != document.Object {
		document.Mismatch(r, path, "an object with a domain and rules, as a rule file", v)
		return rule.Set{}
	}
	set, err := rulefile.Decode(v)
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

func decodeFlow(r *report, p string, v *document.Node) Flow {
	var f Flow
	o := document.Open(r, p, v)
	if o == nil {
		return f
	}
	f.DC, _ = o.String("dc")
	f.Rule, _ = o.String("rule")
	var ok bool
	if f.Attributes, ok = o.StringMap("attributes"); !ok && o.Has("attributes") {
		r.MarkFailed(o.FieldPath("attributes")) // a map missing an entry says nothing more
	}
	var bases []string
	if o.Has("rate") {
		bases = append(bases, "rate")
		c, _ := o.Float("rate")
		f.Base = Constant(c)
	}
	if l, path, ok := o.List("steps"); ok {
		bases = append(bases, "steps")
		steps := make(Steps, len(l))
		for i, sv := range l {
			if so := document.Open(r, fielderr.Index(path, i), sv); so != nil {
				so.Required("at", "rate")
				steps[i].At, _ = so.Duration("at")
				steps[i].Rate, _ = so.Float("rate")
				so.Done()
			}
		}
		f.Base = steps
	} else if o.Has("steps") {
		bases = append(bases, "steps")
		f.Base = Steps(nil)
	}
	if rv, ok := o.Get("ramp"); ok {
		bases = append(bases, "ramp")
		var ramp Ramp
		if ro := document.Open(r, o.FieldPath("ramp"), rv); ro != nil {
			ro.Required("from", "to", "start", "end")
			ramp.From, _ = ro.Float("from")
			ramp.To, _ = ro.Float("to")
			ramp.Start, _ = ro.Duration("start")
			ramp.End, _ = ro.Duration("end")
			ro.Done()
		}
		f.Base = ramp
	}
	if dv, ok := o.Get("diurnal"); ok {
		bases = append(bases, "diurnal")
		var d Diurnal
		if do := document.Open(r, o.FieldPath("diurnal"), dv); do != nil {
			do.Required("mean", "amplitude", "period")
			d.Mean, _ = do.Float("mean")
			d.Amplitude, _ = do.Float("amplitude")
			d.Period, _ = do.Duration("period")
			d.Phase, _ = do.Duration("phase")
			do.Done()
		}
		f.Base = d
	}
	if len(bases) > 1 {
		r.Fail(p, "%s are all set: a flow has at most one base curve (rate, steps, ramp or diurnal), plus a flash", strings.Join(bases, ", "))
	}
	if fv, ok := o.Get("flash"); ok {
		fl := &Flash{}
		if fo := document.Open(r, o.FieldPath("flash"), fv); fo != nil {
			fo.Required("at", "peak")
			fl.At, _ = fo.Duration("at")
			fl.Peak, _ = fo.Float("peak")
			fl.Rise, _ = fo.Duration("rise")
			fl.Decay, _ = fo.Duration("decay")
			fo.Done()
		}
		f.Flash = fl
	}
	f.Noise = Noise(o.Enum("noise", "", string(NoiseEven), string(NoisePoisson)))
	o.Done()
	return f
}

func decodeFault(r *report, p string, v *document.Node) Fault {
	var f Fault
	o := document.Open(r, p, v)
	if o == nil {
		return f
	}
	o.Required("at", "kind")
	f.At, _ = o.Duration("at")
	kind, _ := o.String("kind")
	f.Kind = FaultKind(kind)
	f.DC, _ = o.String("dc")
	f.For, _ = o.Duration("for")
	f.Fraction, _ = o.Float("fraction")
	f.By, _ = o.Duration("by")
	o.Done()
	return f
}

func decodeGoals(r *report, p string, v *document.Node, g *Goals) {
	o := document.Open(r, p, v)
	if o == nil {
		return
	}
	if x, ok := o.Float("max_overshoot"); ok {
		g.MaxOvershoot = x
	}
	if x, ok := o.Float("min_utilisation"); ok {
		g.MinUtilisation = x
	}
	if x, ok := o.Float("convergence_intervals"); ok {
		g.ConvergenceIntervals = x
	}
	if x, ok := o.Duration("convergence_slack"); ok {
		g.ConvergenceSlack = x
	}
	if x, ok := o.Int("max_oscillation"); ok {
		g.MaxOscillation = clampInt(x)
	}
	if x, ok := o.Float("min_fairness"); ok {
		g.MinFairness = x
	}
	if x, ok := o.Int("max_starvation"); ok {
		g.MaxStarvation = clampInt(x)
	}
	if x, ok := o.Duration("warm_up"); ok {
		g.WarmUp = x
	}
	o.Done()
}

func clampInt(x int64) int {
	return int(max(min(x, math.MaxInt32), math.MinInt32))
}
