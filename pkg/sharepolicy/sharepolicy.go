// Package sharepolicy is the operator's say over a global rule's shares:
// per DC, a pin, a floor, a ceiling, or a drain. Policies are kept as JSON in
// etcd (etcdlayout.Layout.Policy), written through the admin API and read by
// the coordinator, which hands them to package allocate.
package sharepolicy

import (
	"errors"
	"fmt"
	"slices"

	"github.com/weirhq/weir/pkg/allocate"
	"github.com/weirhq/weir/pkg/document"
	"github.com/weirhq/weir/pkg/fielderr"
)

// MaxBytes bounds a policy document.
const MaxBytes = 64 << 10

// ErrPolicy marks an invalid policy document.
var ErrPolicy = errors.New("sharepolicy: invalid share policy")

// Policy is the operator's settings of one global rule's shares, kept as
// JSON at etcdlayout.Layout.Policy(domain, rule_id):
//
//	{"dcs": {"eu": {"pin": 0.5}, "us": {"floor": 0.1, "ceiling": 0.8}, "ap": {"drained": true}}}
//
// Shares are fractions of the rule's limit. Precedence (package allocate):
// drained, then pinned, then floors, then ceilings, then demand.
type Policy struct {
	DCs map[string]DCPolicy `json:"dcs"`
}

// DCPolicy is one DC's settings; the zero value sets nothing.
type DCPolicy struct {
	// Pin, when set, is the DC's share whatever its demand.
	Pin *float64 `json:"pin,omitempty"`
	// Floor is the share the DC keeps whatever its demand.
	Floor float64 `json:"floor,omitempty"`
	// Ceiling caps the DC's share; 0 means none.
	Ceiling float64 `json:"ceiling,omitempty"`
	// Drained gives the DC a share of 0.
	Drained bool `json:"drained,omitempty"`
}

// ValidationError lists every problem of a policy document that Decode
// found, each at its field path ("dcs.eu.pin: appears more than once");
// it matches ErrPolicy with errors.Is.
type ValidationError = fielderr.List[invalid]

type invalid struct{}

func (invalid) Sentinel() error { return ErrPolicy }

// Decode reads a policy document strictly with package document. A
// document that is not well-formed JSON, or is over MaxBytes, gives an
// error wrapping ErrPolicy; any other problem (a key repeated at any
// level, an unknown field, a value of the wrong type) a *ValidationError
// that lists them all. It does not check DC names or values; Settings
// does, against the DCs it is given.
func Decode(data []byte) (Policy, error) {
	tree, err := document.ParseJSON(data, document.Limits{MaxSize: MaxBytes})
	if err != nil {
		return Policy{}, document.Wrap(err, ErrPolicy, ErrPolicy)
	}
	var rep fielderr.Report[invalid]
	p := decode(&rep, tree)
	if err := rep.Err(); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// decode reads a policy from its tree; a field present but unreadable is
// reported and left zero.
func decode(rep *fielderr.Report[invalid], tree *document.Node) Policy {
	var p Policy
	o := document.Open(rep, "", tree)
	if o == nil {
		return p
	}
	if v, ok := o.Get("dcs"); ok {
		if dcs := document.OpenAs(rep, o.FieldPath("dcs"), v, "an object of DC settings"); dcs != nil {
			p.DCs = make(map[string]DCPolicy, len(v.Fields))
			for _, f := range v.Fields {
				p.DCs[f.Key] = decodeDC(rep, dcs.FieldPath(f.Key), f.Value)
			}
		}
	}
	o.Done()
	return p
}

func decodeDC(rep *fielderr.Report[invalid], path string, v *document.Node) DCPolicy {
	var d DCPolicy
	o := document.OpenAs(rep, path, v, "a DC's settings (an object)")
	if o == nil {
		return d
	}
	if pin, ok := o.Float("pin"); ok {
		d.Pin = &pin
	}
	d.Floor, _ = o.Float("floor")
	d.Ceiling, _ = o.Float("ceiling")
	d.Drained, _ = o.Bool("drained")
	o.Done()
	return d
}

// Settings returns the policy as allocate settings over dcs, in their
// order. A DC the policy names that is not among dcs, or an invalid
// setting, is an error wrapping ErrPolicy.
func (p Policy) Settings(dcs []string) ([]allocate.DC, error) {
	out := make([]allocate.DC, len(dcs))
	for name, s := range p.DCs {
		i := slices.Index(dcs, name)
		if i < 0 {
			return nil, fmt.Errorf("%w: unknown DC %q (known: %v)", ErrPolicy, name, dcs)
		}
		out[i] = allocate.DC{Name: name, Floor: s.Floor, Ceiling: s.Ceiling, Drained: s.Drained}
		if s.Pin != nil {
			out[i].Pin, out[i].Pinned = *s.Pin, true
		}
	}
	if err := allocate.Validate(out); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPolicy, err)
	}
	return out, nil
}

// Contradictions reports the settings of p that no share can satisfy
// together with the others of their DC, each at its field path, as a
// *ValidationError; nil when there are none: a pinned DC (whose share is
// exactly its pin) with a floor above the pin — the floor's promise would
// be broken — or a ceiling below it — the ceiling's safety bound would be
// exceeded. Under package allocate's precedence the lower setting would be
// silently ignored.
//
// A drain contradicts nothing: it is the operator's override of the DC's
// other settings ("no traffic here", package allocate), which stay stored
// for when the drain is lifted. Settings that agree are not reported
// either: a pin between the floor and the ceiling. A floor above the
// ceiling is Settings' error. Settings does not report contradictions, so
// that a policy stored before they were refused still applies, by
// precedence; the admin API refuses them on write.
func (p Policy) Contradictions() error {
	var rep fielderr.Report[invalid]
	names := make([]string, 0, len(p.DCs))
	for name := range p.DCs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s := p.DCs[name]
		if s.Pin == nil {
			continue
		}
		path := fielderr.Key("dcs", name)
		if s.Floor > *s.Pin {
			rep.Add(fielderr.Field(path, "floor"), "floor %v is above the pin %v: a pinned DC's share is its pin", s.Floor, *s.Pin)
		}
		if s.Ceiling > 0 && s.Ceiling < *s.Pin {
			rep.Add(fielderr.Field(path, "ceiling"), "ceiling %v is below the pin %v: a pinned DC's share is its pin", s.Ceiling, *s.Pin)
		}
	}
	return rep.Err()
}
