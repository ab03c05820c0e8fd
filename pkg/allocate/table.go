package allocate

import (
	"errors"
	"fmt"
)

// ErrShape is wrapped by Rebalance's errors: a Table whose slices do not fit
// together.
var ErrShape = errors.New("allocate: table shape")

// Table is a batch of entries — global rules, and keys of rules under
// pressure — over the same DCs, in a flat row-major layout: entry e's
// demands are Demand[e*DCs : (e+1)*DCs], its shares Share[e*DCs : (e+1)*DCs],
// in the same DC order. The DCs' operator settings come from policies, one
// row of DC settings per policy: a rule's floors, ceilings, pins and drains
// are one policy, shared by the rule's entry and its keys' entries. For
// 100,000 entries over 5 DCs the demand and share rows take 8 MB, with no
// pointers for the garbage collector to scan.
//
// A Table holds no hidden state; the zero value is an empty table. Rebalance
// writes only Share and Results, so tables sharing Policies and Policy may be
// rebalanced concurrently.
type Table struct {
	// DCs is the number of DCs: the width of every row.
	DCs int
	// Policies holds one row of DC settings per policy: Policies[p*DCs+i]
	// is DC i's under policy p. Their Demand fields are ignored.
	Policies []DC
	// Policy[e] is entry e's policy. When nil, every entry has policy 0.
	Policy []int32
	// Demand[e*DCs+i] is DC i's demand for entry e, a fraction of the
	// entry's global limit.
	Demand []float64
	// Share receives the shares, laid out as Demand.
	Share []float64
	// Results, when not nil, receives each entry's Result.
	Results []Result
}

// Len returns the number of entries.
func (t *Table) Len() int {
	if t.DCs <= 0 {
		return 0
	}
	return len(t.Demand) / t.DCs
}

// Sub returns the table of entries [lo, hi), sharing t's slices; callers
// rebalance a large table in parallel by giving each goroutine a Sub.
func (t *Table) Sub(lo, hi int) Table {
	s := *t
	n := t.DCs
	s.Demand = t.Demand[lo*n : hi*n]
	s.Share = t.Share[lo*n : hi*n]
	if t.Policy != nil {
		s.Policy = t.Policy[lo:hi]
	}
	if t.Results != nil {
		s.Results = t.Results[lo:hi]
	}
	return s
}

// Summary counts what Rebalance saw.
type Summary struct {
	// Entries is the number of entries rebalanced.
	Entries int
	// Congested counts the entries whose demand exceeded their limit.
	Congested int
	// PinsScaled and FloorsScaled count the entries whose pins, or floors,
	// had to be scaled down (see Result).
	PinsScaled, FloorsScaled int
}

// Rebalance allocates every entry of t, as Allocate does. It checks the
// table's shape first and writes nothing when it is wrong; the errors wrap
// ErrShape. It allocates no memory for up to MaxStackDCs DCs.
func Rebalance(t *Table) (Summary, error) {
	if err := t.check(); err != nil {
		return Summary{}, err
	}
	n := t.DCs
	var dcsBuf [MaxStackDCs]DC
	var normBuf [MaxStackDCs]norm
	var evBuf [2 * MaxStackDCs]event
	dcs, dc, ev := dcsBuf[:], normBuf[:], evBuf[:]
	if n > MaxStackDCs {
		dcs, dc, ev = make([]DC, n), make([]norm, n), make([]event, 2*n)
	}
	dcs, dc = dcs[:n], dc[:n]

	sum := Summary{Entries: t.Len()}
	p := -1
	for e := range sum.Entries {
		q := 0
		if t.Policy != nil {
			q = int(t.Policy[e])
		}
		if q != p {
			copy(dcs, t.Policies[q*n:(q+1)*n])
			p = q
		}
		row := e * n
		for i := range dcs {
			dcs[i].Demand = t.Demand[row+i]
		}
		res := allocate(dcs, t.Share[row:row+n], dc, ev)
		if res.Congested {
			sum.Congested++
		}
		if res.PinsScaled {
			sum.PinsScaled++
		}
		if res.FloorsScaled {
			sum.FloorsScaled++
		}
		if t.Results != nil {
			t.Results[e] = res
		}
	}
	return sum, nil
}

func (t *Table) check() error {
	n := t.DCs
	switch {
	case n <= 0:
		return fmt.Errorf("%w: %d DCs", ErrShape, n)
	case len(t.Demand)%n != 0:
		return fmt.Errorf("%w: %d demands is not a whole number of rows of %d DCs", ErrShape, len(t.Demand), n)
	case len(t.Share) != len(t.Demand):
		return fmt.Errorf("%w: %d shares for %d demands", ErrShape, len(t.Share), len(t.Demand))
	case len(t.Policies) == 0 || len(t.Policies)%n != 0:
		return fmt.Errorf("%w: %d policy settings is not a whole, non-zero number of rows of %d DCs", ErrShape, len(t.Policies), n)
	case t.Policy != nil && len(t.Policy) != t.Len():
		return fmt.Errorf("%w: %d policy indices for %d entries", ErrShape, len(t.Policy), t.Len())
	case t.Results != nil && len(t.Results) != t.Len():
		return fmt.Errorf("%w: %d results for %d entries", ErrShape, len(t.Results), t.Len())
	}
	policies := len(t.Policies) / n
	for e, q := range t.Policy {
		if q < 0 || int(q) >= policies {
			return fmt.Errorf("%w: entry %d has policy %d, want [0, %d)", ErrShape, e, q, policies)
		}
	}
	return nil
}
