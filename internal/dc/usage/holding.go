package usage

import weirv1 "github.com/weirhq/weir/proto/weir/v1"

// Usage-aware limits move quota between DCs only as the readings say it
// was not consumed (docs/architecture.md, "Usage-aware limits"). A DC
// whose traffic moved elsewhere still holds what it consumed, and that
// ages out of the window while the DC is quiet: unless the DC goes on
// reporting it, the coordinator keeps counting its last reading until the
// rule's memory has passed, and the DC where the demand went grows into it
// only then. So the Reporter remembers the entries it read as holding
// quota, and reads them again every interval, traffic or not, until they
// hold nothing.

// A key the coordinator newly gave a share of its own (NewKeys) is read
// once too, traffic or not: the coordinator carries what the DC may have
// consumed of it under the rule's limits until a reading of the key says
// how much that was, and the DC where the key's demand went waits for it.

// NewKeys hands over the keys the coordinator newly gave a share of their
// own in the DC's documents (quota.Table implements it).
type NewKeys interface {
	// TakeNewKeys calls f for at most n of the keys listed since the last
	// call, oldest first, and forgets them.
	TakeNewKeys(n int, f func(domain, ruleID, key string))
}

// heldRef names an entry the Reporter read as holding quota: a rule, or
// one key of it.
type heldRef struct{ domain, ruleID, key string }

// unread marks an entry added (add) and not read yet.
const unread = -1

// maxMisses is how many reports in a row an entry may go without a reading
// (the store did not answer, the rule went away) before it is forgotten.
const maxMisses = 300

// holding is the set of entries read as holding quota, each with the
// number of reports in a row it went without a reading. It is owned by the
// Reporter's Run goroutine.
type holding struct {
	max     int // the most entries remembered
	entries map[heldRef]int
}

// note records the reading v of an entry, if it was read: remembered
// while it holds quota, forgotten once it holds none.
func (h *holding) note(ref heldRef, v *int64, read bool) {
	if !read {
		return // past the readings' budget: as it was
	}
	if v == nil {
		h.miss(ref)
		return
	}
	if *v <= 0 {
		delete(h.entries, ref)
		return
	}
	if _, ok := h.entries[ref]; !ok && len(h.entries) >= h.max {
		return // full: this entry goes unread while quiet (the coordinator counts its last reading until the rule's memory has passed)
	}
	if h.entries == nil {
		h.entries = map[heldRef]int{}
	}
	h.entries[ref] = 0
}

// room returns how many more entries may be remembered.
func (h *holding) room() int { return max(0, h.max-len(h.entries)) }

// add remembers an entry to read with the next report, if there is room
// and it is not remembered already.
func (h *holding) add(ref heldRef) {
	if _, ok := h.entries[ref]; ok || len(h.entries) >= h.max {
		return
	}
	if h.entries == nil {
		h.entries = map[heldRef]int{}
	}
	h.entries[ref] = unread
}

// miss counts a report without a reading of a remembered entry, and
// forgets it after maxMisses in a row — at once when it was added and
// never read (the rule's readings are off, or it went away).
func (h *holding) miss(ref heldRef) {
	n, ok := h.entries[ref]
	switch {
	case !ok:
	case n == unread:
		delete(h.entries, ref)
	case n+1 >= maxMisses:
		delete(h.entries, ref)
	default:
		h.entries[ref] = n + 1
	}
}

// quiet returns the held entries rules does not carry, as usage of no
// traffic with get's readings: zero counts, and for keys no limit (the
// coordinator keeps the one it has). An entry read empty is reported once
// more and forgotten; one without a reading is left out and counted a
// miss; those past get's budget wait for the next report. rules is left
// unchanged; the caller appends what is returned.
func (h *holding) quiet(rules []*weirv1.RuleUsage, get func(domain, ruleID, key string) (*int64, bool)) []*weirv1.RuleUsage {
	if len(h.entries) == 0 {
		return nil
	}
	seen := make(map[heldRef]bool, len(rules))
	for _, ru := range rules {
		if len(ru.GetKeys()) == 0 {
			seen[heldRef{ru.GetDomain(), ru.GetRuleId(), ""}] = true
		}
		for _, k := range ru.GetKeys() {
			seen[heldRef{ru.GetDomain(), ru.GetRuleId(), k.GetKey()}] = true
		}
	}
	var out []*weirv1.RuleUsage
	byRule := map[heldRef]*weirv1.RuleUsage{}
	for ref := range h.entries {
		if seen[ref] {
			continue
		}
		v, read := get(ref.domain, ref.ruleID, ref.key)
		if !read {
			continue
		}
		if v == nil {
			h.miss(ref)
			continue
		}
		if *v <= 0 {
			delete(h.entries, ref)
		} else {
			h.entries[ref] = 0
		}
		if ref.key == "" {
			out = append(out, &weirv1.RuleUsage{Domain: ref.domain, RuleId: ref.ruleID, Consumed: v})
			continue
		}
		rk := heldRef{domain: ref.domain, ruleID: ref.ruleID}
		ru := byRule[rk]
		if ru == nil {
			ru = &weirv1.RuleUsage{Domain: ref.domain, RuleId: ref.ruleID}
			byRule[rk] = ru
			out = append(out, ru)
		}
		ru.Keys = append(ru.Keys, &weirv1.KeyUsage{Key: ref.key, Consumed: v})
	}
	return out
}
