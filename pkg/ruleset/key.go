package ruleset

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/weirhq/weir/pkg/algorithm"
)

// Composite keys: the values joined by keySep, with keySep and keyEsc in a
// value preceded by keyEsc.
const (
	keySep = '|'
	keyEsc = '\\'
)

// encodedLen returns the length of the composite key of vals.
func encodedLen(vals []string) int {
	n := len(vals) - 1
	for _, v := range vals {
		n += len(v)
		for i := 0; i < len(v); i++ {
			if v[i] == keySep || v[i] == keyEsc {
				n++
			}
		}
	}
	return n
}

// writeKey writes the composite key of vals to b.
func writeKey(b *strings.Builder, vals []string) {
	for i, v := range vals {
		if i > 0 {
			b.WriteByte(keySep)
		}
		for {
			j := strings.IndexAny(v, "|\\")
			if j < 0 {
				b.WriteString(v)
				break
			}
			b.WriteString(v[:j])
			b.WriteByte(keyEsc)
			b.WriteByte(v[j])
			v = v[j+1:]
		}
	}
}

// appendKey appends the key of vals to b: the value itself for one value,
// the composite key for several.
func appendKey(b []byte, vals []string) []byte {
	if len(vals) == 1 {
		return append(b, vals[0]...)
	}
	for i, v := range vals {
		if i > 0 {
			b = append(b, keySep)
		}
		for j := 0; j < len(v); j++ {
			if v[j] == keySep || v[j] == keyEsc {
				b = append(b, keyEsc)
			}
			b = append(b, v[j])
		}
	}
	return b
}

// splitKey splits the composite key of n values into them. It reports
// false if key is not the composite key of n values.
func splitKey(key string, n int) ([]string, bool) {
	vals := make([]string, 0, n)
	var cur strings.Builder
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case keyEsc:
			if i+1 == len(key) || (key[i+1] != keySep && key[i+1] != keyEsc) {
				return nil, false
			}
			i++
			cur.WriteByte(key[i])
		case keySep:
			vals = append(vals, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	vals = append(vals, cur.String())
	return vals, len(vals) == n
}

// parsedIP is the "ip" attribute of a request.
type parsedIP struct {
	canon string     // the canonical form if it parses, else the value as given
	addr  netip.Addr // valid if it parses
}

// parseIP parses the value of an "ip" attribute: an address is unmapped
// from IPv4-in-IPv6 and loses its zone, and canon is its canonical form.
// It allocates only if that differs from v.
func parseIP(v string) parsedIP {
	a, err := netip.ParseAddr(v)
	if err != nil {
		return parsedIP{canon: v}
	}
	a = a.Unmap().WithZone("")
	var buf [64]byte
	if b := a.AppendTo(buf[:0]); string(b) != v {
		return parsedIP{canon: string(b), addr: a}
	}
	return parsedIP{canon: v, addr: a}
}

// KeyFor returns the Match of r for an explicit key, as a status or admin
// API receives it: the value of the single key dimension, the composite
// key of several (escaped as Match.Key is), or "" for a rule without key
// dimensions. An "ip" value is canonicalised as in Match, and overrides
// apply; whether r is enabled and its path, methods and conditions are not
// considered. Errors wrap ErrInvalidKey: a key with the wrong number of
// values, an empty value, a malformed escape, or a store key longer than
// algorithm.MaxKeyLen.
func (r *Rule) KeyFor(key string) (Match, error) {
	var vals []string
	switch len(r.dims) {
	case 0:
		if key != "" {
			return Match{}, fmt.Errorf("%w: rule %q has no key dimensions, so its only key is \"\"; got %q", ErrInvalidKey, r.Spec.ID, key)
		}
	case 1:
		vals = []string{key}
	default:
		var ok bool
		if vals, ok = splitKey(key, len(r.dims)); !ok {
			return Match{}, fmt.Errorf(`%w: rule %q takes %d values (%s) joined by "|", with "|" and "\" in a value escaped by "\"; got %q`,
				ErrInvalidKey, r.Spec.ID, len(r.dims), strings.Join(r.dims, ", "), key)
		}
	}
	for i, v := range vals {
		if v == "" {
			return Match{}, fmt.Errorf("%w: rule %q: empty value of %q", ErrInvalidKey, r.Spec.ID, r.dims[i])
		}
	}
	var ip *parsedIP
	if r.ipDim >= 0 {
		p := parseIP(vals[r.ipDim])
		ip = &p
		vals[r.ipDim] = p.canon
	}
	m, _ := r.decide(vals, ip)
	if m.Oversized {
		return Match{}, fmt.Errorf("%w: rule %q: key of %d bytes makes a store key longer than %d bytes", ErrInvalidKey, r.Spec.ID, len(key), algorithm.MaxKeyLen)
	}
	return m, nil
}

const (
	numMethods  = 9          // the methods rule.Rule takes, numbered by methodIndex
	otherMethod = numMethods // any other method, or none
)

// methodIndex numbers the methods a rule may name from 0, and returns
// otherMethod for any other.
func methodIndex(m string) int {
	switch m {
	case "GET":
		return 0
	case "HEAD":
		return 1
	case "POST":
		return 2
	case "PUT":
		return 3
	case "PATCH":
		return 4
	case "DELETE":
		return 5
	case "OPTIONS":
		return 6
	case "CONNECT":
		return 7
	case "TRACE":
		return 8
	}
	return otherMethod
}
