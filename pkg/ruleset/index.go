package ruleset

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/weirhq/weir/pkg/rule"
)

// The index narrows the rules Match looks at. Each enabled rule is filed
// under one anchor — something a request must have for the rule to apply —
// or, lacking one, in the list looked at for every request. The anchors
// are the first segment of the path pattern when it is a literal ("/api/**"
// needs a path whose first segment is "api"), and exact-valued conditions
// ({plan: free} needs the attribute plan to be "free"). A rule with several
// is filed under the most selective: the one the fewest rules share. Each
// list is split by method, so that a GET never looks at POST-only rules.
//
// A request looks up its first path segment and the values of at most
// maxAnchors attributes, and merges the lists it finds (each in file
// order) into file order.

// pathAnchor is the anchor name of the first path segment; attribute
// names are never empty.
const pathAnchor = ""

// maxAnchors bounds the anchor names, path included: the lookups and the
// lists to merge for each request.
const maxAnchors = 8

// maxLists is the most candidate lists of one request: one per anchor
// name, and the list of rules without an anchor.
const maxLists = maxAnchors + 1

// bucket holds the positions of rules, ascending, for each method.
type bucket struct {
	byMethod [numMethods + 1][]int32 // by methodIndex
}

// anchorIndex files rules by the value of one anchor.
type anchorIndex struct {
	name    string // an attribute, or pathAnchor
	byValue map[string]*bucket
}

type index struct {
	anchors []anchorIndex
	rest    *bucket // rules without an anchor
}

// candidates stores in lists the lists of the rules that may apply to req,
// and returns how many it stored.
func (ix *index) candidates(req *request, lists *[maxLists][]int32) int {
	n := 0
	if ix.rest != nil {
		if l := ix.rest.byMethod[req.method]; len(l) > 0 {
			lists[n] = l
			n++
		}
	}
	for i := range ix.anchors {
		a := &ix.anchors[i]
		var v string
		if a.name == pathAnchor {
			var ok bool
			if v, ok = firstSegment(req.path); !ok {
				continue
			}
		} else if v = req.attrs[a.name]; v == "" {
			continue
		} else if a.name == rule.DimensionIP {
			v = req.parsedIP(v).canon
		}
		if b := a.byValue[v]; b != nil {
			if l := b.byMethod[req.method]; len(l) > 0 {
				lists[n] = l
				n++
			}
		}
	}
	return n
}

// anchor is a place a rule may be filed.
type anchor struct{ name, value string }

// anchorsOf returns the anchors of r.
func anchorsOf(r *Rule) []anchor {
	var as []anchor
	if seg, ok := patternSegment(r.Spec.PathPattern); ok {
		as = append(as, anchor{pathAnchor, seg})
	}
	for _, c := range r.conds {
		if c.value != "" {
			as = append(as, anchor{c.name, c.value})
		}
	}
	return as
}

// buildIndex indexes the enabled rules of a set.
func buildIndex(rules []*Rule) index {
	shared := map[anchor]int{} // how many rules have each anchor
	for _, r := range rules {
		if r.Spec.Enabled {
			for _, a := range anchorsOf(r) {
				shared[a]++
			}
		}
	}
	// Choose among all names, then keep the maxAnchors names chosen most
	// and choose again among those.
	choose := func(r *Rule, names map[string]bool) (anchor, bool) {
		var best anchor
		found := false
		for _, a := range anchorsOf(r) {
			if names != nil && !names[a.name] {
				continue
			}
			if !found || shared[a] < shared[best] {
				best, found = a, true
			}
		}
		return best, found
	}
	used := map[string]int{}
	for _, r := range rules {
		if !r.Spec.Enabled {
			continue
		}
		if a, ok := choose(r, nil); ok {
			used[a.name]++
		}
	}
	names := slices.SortedFunc(maps.Keys(used), func(a, b string) int {
		if c := cmp.Compare(used[b], used[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	if len(names) > maxAnchors {
		names = names[:maxAnchors]
	}
	kept := map[string]bool{}
	for _, n := range names {
		kept[n] = true
	}

	filed := map[string]map[string][]int32{}
	var rest []int32
	for i, r := range rules {
		if !r.Spec.Enabled {
			continue
		}
		a, ok := choose(r, kept)
		if !ok {
			rest = append(rest, int32(i))
			continue
		}
		if filed[a.name] == nil {
			filed[a.name] = map[string][]int32{}
		}
		filed[a.name][a.value] = append(filed[a.name][a.value], int32(i))
	}

	var ix index
	if len(rest) > 0 {
		ix.rest = newBucket(rules, rest)
	}
	for _, name := range slices.Sorted(maps.Keys(filed)) {
		ai := anchorIndex{name: name, byValue: make(map[string]*bucket, len(filed[name]))}
		for v, l := range filed[name] {
			ai.byValue[v] = newBucket(rules, l)
		}
		ix.anchors = append(ix.anchors, ai)
	}
	return ix
}

// newBucket splits the rules at the positions l by method.
func newBucket(rules []*Rule, l []int32) *bucket {
	b := &bucket{}
	for m := range b.byMethod {
		var ml []int32
		for _, i := range l {
			if ms := rules[i].methods; ms == 0 || ms&(1<<m) != 0 {
				ml = append(ml, i)
			}
		}
		if len(ml) == len(l) {
			ml = l // share the list when every rule takes the method
		}
		b.byMethod[m] = ml
	}
	return b
}

// patternSegment returns the first segment of a valid path pattern if it
// is a literal: a path matches the pattern only if its first non-empty
// segment is that literal.
func patternSegment(pattern string) (string, bool) {
	if len(pattern) < 2 {
		return "", false // every path, or only "/"
	}
	seg, _, _ := strings.Cut(pattern[1:], "/")
	if strings.Contains(seg, "*") {
		return "", false
	}
	return seg, true
}

// firstSegment returns the first non-empty segment of path, as
// rule.PathMatcher sees it ("" for "/"); ok is false for a path that no
// non-empty pattern matches.
func firstSegment(path string) (seg string, ok bool) {
	if path == "" || path[0] != '/' {
		return "", false
	}
	i := 1
	for i < len(path) && path[i] == '/' {
		i++
	}
	path = path[i:]
	if j := strings.IndexByte(path, '/'); j >= 0 {
		return path[:j], true
	}
	return path, true
}
