// Package sharepolicy is the operator's say over a global rule's shares:
// per DC, a pin, a floor, a ceiling, or a drain. Policies are kept as JSON in
// etcd (etcdlayout.Layout.Policy), written through the admin API and read by
// the coordinator, which hands them to package allocate.
package sharepolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/weirhq/weir/pkg/allocate"
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

// Decode reads a policy document strictly: unknown fields, trailing
// data and documents over MaxBytes are refused. It does not check DC
// names; Settings does, against the DCs it is given.
func Decode(data []byte) (Policy, error) {
	if len(data) > MaxBytes {
		return Policy{}, fmt.Errorf("%w: %d bytes; at most %d", ErrPolicy, len(data), MaxBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Policy
	if err := dec.Decode(&p); err != nil {
		return Policy{}, fmt.Errorf("%w: %v", ErrPolicy, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Policy{}, fmt.Errorf("%w: data after the document", ErrPolicy)
	}
	return p, nil
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
