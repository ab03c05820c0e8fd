package quota

// maxChanged bounds the entries kept for TakeChanged; the ones past it are
// not handed over (the DC's consumption of them then goes unread while
// quiet, and the coordinator counts what it carried for them until it
// ages out).
const maxChanged = 10_000

// changedRef names an entry whose limits a document changed: a rule (Key
// "") or one of its keys.
type changedRef struct{ domain, ruleID, key string }

// noteChanged remembers, for a rule's valid document, the rule if its
// limits differ from its previous version's (prev; nil when the Table had
// none) and the keys whose limits differ or that the previous version did
// not list. The Table's mutex is held.
func (t *Table) noteChanged(prev *entry, domain, ruleID string, rl limits, keys map[string]limits) {
	if !t.trackChanges || len(t.changed) >= maxChanged {
		return
	}
	if prev != nil && prev.state != valid {
		// After a corrupt or deleted document, the coordinator may have
		// written other limits in between: every entry counts as changed.
		prev = nil
	}
	if prev == nil || prev.rule != rl {
		t.changed = append(t.changed, changedRef{domain, ruleID, ""})
	}
	for k, l := range keys {
		if len(t.changed) >= maxChanged {
			return
		}
		if prev != nil {
			if old, ok := prev.keys[k]; ok && old == l {
				continue
			}
		}
		t.changed = append(t.changed, changedRef{domain, ruleID, k})
	}
}

// TakeChanged calls f, when Config.TrackChanges is set, for at most n of
// the entries whose limits the DC's
// documents changed since the last call — every entry of the first
// listing, a key newly given a share of its own, a rule's or a key's new
// limit — oldest first, and forgets them. The usage reporter reads them
// for a while, traffic or not: the coordinator carries what the DC may
// have consumed under a limit it replaced until a reading taken after the
// change says how much that was. Safe for concurrent use.
func (t *Table) TakeChanged(n int, f func(domain, ruleID, key string)) {
	t.mu.Lock()
	n = min(n, len(t.changed))
	taken := t.changed[:n:n]
	t.changed = t.changed[n:]
	if len(t.changed) == 0 {
		t.changed = nil
	}
	t.mu.Unlock()
	for _, c := range taken {
		f(c.domain, c.ruleID, c.key)
	}
}
