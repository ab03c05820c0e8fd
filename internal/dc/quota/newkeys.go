package quota

// maxNewKeys bounds the keys kept for TakeNewKeys; the ones past it are
// not handed over (their DC's consumption of them then goes unread, and
// the coordinator counts what it carried for them until it ages out).
const maxNewKeys = 10_000

// NewKey names a key a document newly gave a share of its own.
type NewKey struct{ Domain, RuleID, Key string }

// noteNewKeys remembers the keys of a rule's valid document that its
// previous version (prev; nil when the Table had none) did not list. The
// Table's mutex is held.
func (t *Table) noteNewKeys(prev *entry, domain, ruleID string, keys map[string]limits) {
	for k := range keys {
		if len(t.newKeys) >= maxNewKeys {
			return
		}
		if prev != nil {
			if _, ok := prev.keys[k]; ok {
				continue
			}
		}
		t.newKeys = append(t.newKeys, NewKey{domain, ruleID, k})
	}
}

// TakeNewKeys calls f for at most n of the keys the DC's documents newly
// gave a share of their own (since the last call; every key of the first
// listing), oldest first, and forgets them. The usage reporter reads each
// once: the coordinator carries, for a key it just gave a share of its
// own, what the DC may have consumed of it under the rule's limits, until
// a reading of the key says how much that was. Safe for concurrent use.
func (t *Table) TakeNewKeys(n int, f func(domain, ruleID, key string)) {
	t.mu.Lock()
	n = min(n, len(t.newKeys))
	taken := t.newKeys[:n:n]
	t.newKeys = t.newKeys[n:]
	if len(t.newKeys) == 0 {
		t.newKeys = nil
	}
	t.mu.Unlock()
	for _, k := range taken {
		f(k.Domain, k.RuleID, k.Key)
	}
}
