package envoyconf

import (
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
)

// Unit is a unit of envoyproxy/ratelimit's limits, numbered as Envoy's
// RateLimitResponse.RateLimit.Unit numbers them.
type Unit int32

// The units.
const (
	Second Unit = 1
	Minute Unit = 2
	Hour   Unit = 3
	Day    Unit = 4
	Month  Unit = 5
	Year   Unit = 6
	Week   Unit = 7
)

// ParseUnit returns the unit named s, in any case, as envoyproxy/ratelimit
// reads it.
func ParseUnit(s string) (Unit, bool) {
	switch strings.ToLower(s) {
	case "second":
		return Second, true
	case "minute":
		return Minute, true
	case "hour":
		return Hour, true
	case "day":
		return Day, true
	case "week":
		return Week, true
	case "month":
		return Month, true
	case "year":
		return Year, true
	}
	return 0, false
}

// Seconds returns the length of u's windows (a month is 30 days, a year
// 365), or 0 for an unknown unit.
func (u Unit) Seconds() int64 {
	switch u {
	case Second:
		return 1
	case Minute:
		return 60
	case Hour:
		return 3600
	case Day:
		return 86400
	case Week:
		return 7 * 86400
	case Month:
		return 30 * 86400
	case Year:
		return 365 * 86400
	}
	return 0
}

// Limit is a descriptor's rate_limit. Immutable once built.
type Limit struct {
	RequestsPerUnit uint32
	Unit            Unit // 0 when Unlimited
	Unlimited       bool
	ShadowMode      bool
	QuotaMode       bool
	// Name is rate_limit.name, reported as current_limit.name and named
	// by other limits' Replaces.
	Name     string
	Replaces []string
	// RuleID is the id of the Weir rule converted from this limit in the
	// domain's rule set, or "" when there is none.
	RuleID string
	// Metadata is the descriptor's metadata, which an answer's dynamic
	// metadata carries when the descriptor is not over its limit
	// (envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA); nil when it has
	// none. Never modified.
	Metadata *structpb.Struct
}

// Entry is one key and value of a request's descriptor.
type Entry struct{ Key, Value string }

// Node is one level of a domain's tree: the descriptors below a
// descriptor, or the domain's top ones. Build it with Add before any
// Lookup; a built tree is safe for concurrent lookups.
type Node struct {
	children  map[string]*Node
	wildcards []wildcard // children whose key_value holds '*', in order
	limit     *Limit
	share     string // the key_value pattern when share_threshold is set
}

type wildcard struct {
	name  string
	parts []string
}

// Add adds a child descriptor of key and value (value "" for none) with
// limit (nil for none), and returns it; ok is false, and nothing is added,
// when a child of the same key and value exists. shareThreshold counts
// every value a wildcard child matches under one counter.
func (n *Node) Add(key, value string, limit *Limit, shareThreshold bool) (child *Node, ok bool) {
	name := key
	if value != "" {
		name += "_" + value
	}
	if _, dup := n.children[name]; dup {
		return nil, false
	}
	if n.children == nil {
		n.children = map[string]*Node{}
	}
	c := &Node{limit: limit}
	if strings.Contains(name, "*") {
		n.wildcards = append(n.wildcards, wildcard{name: name, parts: strings.Split(name, "*")})
		if shareThreshold {
			c.share = name
		}
	}
	n.children[name] = c
	return c, true
}

// Domain is one domain's configuration.
type Domain struct {
	Name string
	Root Node
}

// Found is what Lookup finds for a descriptor.
type Found struct {
	Limit *Limit
	// Shared holds, at the index of each entry matched by a wildcard
	// descriptor with share_threshold, the wildcard value that stands for
	// the entry's value in the counter's key; nil when there is none.
	Shared []string
}

// Lookup returns the limit of the descriptor made of entries, as
// envoyproxy/ratelimit finds it; Limit is nil when none applies.
func (d *Domain) Lookup(entries []Entry) Found {
	var f Found
	level, prev := d.Root.children, &d.Root
	for i, e := range entries {
		name := e.Key + "_" + e.Value
		next := level[name]
		var viaWildcard string
		if next == nil {
			for _, w := range prev.wildcards {
				if wildcardMatch(w.parts, name) {
					next, viaWildcard = level[w.name], w.name
					break
				}
			}
		}
		if next == nil {
			next = level[e.Key]
		}
		if next == nil {
			break
		}
		if viaWildcard != "" && next.share != "" {
			if f.Shared == nil {
				f.Shared = make([]string, len(entries))
			}
			f.Shared[i] = strings.TrimPrefix(next.share, e.Key+"_")
		}
		if next.limit != nil && i == len(entries)-1 {
			f.Limit = next.limit
		}
		if len(next.children) == 0 {
			break
		}
		level, prev = next.children, next
	}
	if f.Limit == nil {
		f.Shared = nil
	}
	return f
}

// wildcardMatch reports whether name matches the pattern split at its
// '*'s into parts: each '*' stands for any run of characters.
func wildcardMatch(parts []string, name string) bool {
	if len(parts) == 1 {
		return parts[0] == name
	}
	first, last := parts[0], parts[len(parts)-1]
	if !strings.HasPrefix(name, first) || !strings.HasSuffix(name, last) {
		return false
	}
	fixed := 0
	for _, p := range parts {
		fixed += len(p)
	}
	if len(name) < fixed {
		return false
	}
	rest := name[len(first) : len(name)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

// CounterKey returns the name of the counter a descriptor of entries
// counts under with f's limit, as envoyproxy/ratelimit names it without
// its window's timestamp: domain, then each entry's key and value (or its
// shared wildcard value), each followed by '_'.
func CounterKey(domain string, entries []Entry, f Found) string {
	var b strings.Builder
	WriteCounterKey(&b, "", domain, entries, f)
	return b.String()
}

// WriteCounterKey writes prefix and then CounterKey(domain, entries, f)
// to b, after what b holds, growing b once for both.
func WriteCounterKey(b *strings.Builder, prefix, domain string, entries []Entry, f Found) {
	n := len(prefix) + len(domain) + 1
	for _, e := range entries {
		n += len(e.Key) + len(e.Value) + 2 // a shared value is no longer than the value
	}
	b.Grow(n)
	b.WriteString(prefix)
	b.WriteString(domain)
	b.WriteByte('_')
	for i, e := range entries {
		b.WriteString(e.Key)
		b.WriteByte('_')
		if i < len(f.Shared) && f.Shared[i] != "" {
			b.WriteString(f.Shared[i])
		} else {
			b.WriteString(e.Value)
		}
		b.WriteByte('_')
	}
}

// String describes u as Envoy names it.
func (u Unit) String() string {
	switch u {
	case Second:
		return "SECOND"
	case Minute:
		return "MINUTE"
	case Hour:
		return "HOUR"
	case Day:
		return "DAY"
	case Week:
		return "WEEK"
	case Month:
		return "MONTH"
	case Year:
		return "YEAR"
	}
	return "Unit(" + strconv.Itoa(int(u)) + ")"
}
