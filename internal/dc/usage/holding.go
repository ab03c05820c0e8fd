package usage

import (
	"time"

	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// Usage-aware limits move quota between DCs only as the readings say it
// was not consumed (docs/architecture.md, "Usage-aware limits"). A DC
// whose traffic moved elsewhere still holds what it consumed, and that
// ages out of the window while the DC is quiet: unless the DC goes on
// reporting it, the coordinator keeps counting its last reading until the
// rule's memory has passed, and the DC where the demand went grows into it
// only then. So the Reporter remembers the entries it read as holding
// quota, and reads them again every interval, traffic or not, until they
// hold nothing.

// An entry whose limit the DC's documents changed — a rule's share, a key
// newly given a share of its own — is read in the next reports too,
// traffic or not, for ChangedReads: the coordinator carries what the DC may
// have consumed under a limit it replaced (or, for a new key, under the
// rule's limits) until a reading taken after the change, and more than
// its tolerated skew after the DC acknowledged it, says how much that was.
// A DC that read the entry empty once and then went quiet would otherwise
// leave that carry to age out for a whole memory, and the DC where the
// demand went waits for it.

// ChangedReads is how long after its limit changed an entry is read,
// traffic or not: the coordinator's default tolerated skew (1 s), and two
// more seconds of report intervals and delivery.
const ChangedReads = 3 * time.Second

// Changed hands over the entries whose limits the DC's documents changed
// (quota.Table implements it).
type Changed interface {
	// TakeChanged calls f for at most n of the entries changed since the
	// last call — a rule (key "") or one of its keys — oldest first, and
	// forgets them.
	TakeChanged(n int, f func(domain, ruleID, key string))
}

// heldRef names an entry the Reporter read as holding quota: a rule, or
// one key of it.
type heldRef struct{ domain, ruleID, key string }

// held is what the Reporter knows of an entry it reads while quiet.
type held struct {
	misses int  // reports in a row without a reading
	owed   int  // reports it is still read in, empty or not (changed entries)
	unread bool // added by a change and never read: dropped at its first miss
	holds  bool // its last reading found quota
	quiet  bool // it was last read with no traffic (quiet): read between intervals too
}

// maxMisses is how many reports in a row an entry may go without a reading
// (the store did not answer, the rule went away) before it is forgotten.
const maxMisses = 300

// holding is the set of entries read as holding quota, or recently
// changed. It is owned by the Reporter's Run goroutine.
type holding struct {
	max     int // the most entries remembered
	entries map[heldRef]held
}

// note records the reading v of an entry, if it was read — quiet: with no
// traffic in the interval — remembered while it holds quota or is owed
// reads, forgotten otherwise.
func (h *holding) note(ref heldRef, v *int64, read, quiet bool) {
	if !read {
		return // past the readings' budget: as it was
	}
	if v == nil {
		h.miss(ref)
		return
	}
	e, ok := h.entries[ref]
	if *v <= 0 && e.owed <= 0 {
		delete(h.entries, ref)
		return
	}
	if !ok && len(h.entries) >= h.max && !h.evictChanged() {
		return // full: this entry goes unread while quiet (the coordinator counts its last reading until the rule's memory has passed)
	}
	if h.entries == nil {
		h.entries = map[heldRef]held{}
	}
	h.entries[ref] = held{owed: max(0, e.owed-1), holds: *v > 0, quiet: quiet}
}

// evictChanged forgets one entry kept only for the reads a change owes it
// (its last reading found nothing), to make room for one that holds quota:
// a carry left by a change ages out in a memory at worst, while an entry
// that holds quota and goes unread keeps its last reading counted. It
// reports whether it found one.
func (h *holding) evictChanged() bool {
	for ref, e := range h.entries {
		if !e.holds && e.owed > 0 {
			delete(h.entries, ref)
			return true
		}
	}
	return false
}

// room returns how many more entries may be remembered.
func (h *holding) room() int { return max(0, h.max-len(h.entries)) }

// change owes an entry reads in the next n reports, if there is room or it
// is remembered already.
func (h *holding) change(ref heldRef, n int) {
	e, ok := h.entries[ref]
	if !ok && len(h.entries) >= h.max {
		return
	}
	if h.entries == nil {
		h.entries = map[heldRef]held{}
	}
	if !ok {
		e.unread = true
	}
	e.owed = max(e.owed, n)
	h.entries[ref] = e
}

// miss counts a report without a reading of a remembered entry, and
// forgets it after maxMisses in a row — at once when it was added by a
// change and never read (the rule's readings are off, or it went away).
func (h *holding) miss(ref heldRef) {
	e, ok := h.entries[ref]
	switch {
	case !ok:
	case e.unread || e.misses+1 >= maxMisses:
		delete(h.entries, ref)
	default:
		e.misses++
		h.entries[ref] = e
	}
}

// quiet returns the held entries rules does not carry, as usage of no
// traffic with get's readings: zero counts, and for keys no limit (the
// coordinator keeps the one it has). An entry read empty is reported, and
// forgotten unless a change still owes it reads; one without a reading is
// left out and counted a miss; those past get's budget wait for the next
// report. rules is left
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
	var out readings
	for ref := range h.entries {
		if seen[ref] {
			continue
		}
		v, read := get(ref.domain, ref.ruleID, ref.key)
		h.note(ref, v, read, true)
		if read && v != nil {
			out.add(ref, v)
		}
	}
	return out.rules
}

// between returns get's readings of the entries last read quiet and
// holding quota, for a report between intervals
// (UsageReport.readings_only): the quota a DC the demand left holds,
// which leaves the window as its admissions age. It changes nothing of
// what holding remembers: the interval reports keep the reads owed, the
// misses and the forgetting.
func (h *holding) between(get func(domain, ruleID, key string) (*int64, bool)) []*weirv1.RuleUsage {
	var out readings
	for ref, e := range h.entries {
		if !e.quiet || !e.holds {
			continue
		}
		if v, _ := get(ref.domain, ref.ruleID, ref.key); v != nil {
			out.add(ref, v)
		}
	}
	return out.rules
}

// readings gathers readings of entries as usage of no traffic: zero
// counts, and for keys no limit (the coordinator keeps the one it has).
type readings struct {
	rules  []*weirv1.RuleUsage
	byRule map[heldRef]*weirv1.RuleUsage // a rule's usage holding its keys
}

// add adds reading v of ref.
func (rs *readings) add(ref heldRef, v *int64) {
	if ref.key == "" {
		rs.rules = append(rs.rules, &weirv1.RuleUsage{Domain: ref.domain, RuleId: ref.ruleID, Consumed: v})
		return
	}
	rk := heldRef{domain: ref.domain, ruleID: ref.ruleID}
	ru := rs.byRule[rk]
	if ru == nil {
		if rs.byRule == nil {
			rs.byRule = map[heldRef]*weirv1.RuleUsage{}
		}
		ru = &weirv1.RuleUsage{Domain: ref.domain, RuleId: ref.ruleID}
		rs.byRule[rk] = ru
		rs.rules = append(rs.rules, ru)
	}
	ru.Keys = append(ru.Keys, &weirv1.KeyUsage{Key: ref.key, Consumed: v})
}
