package quota

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/ruleset"
)

// Config configures a Table.
type Config struct {
	// DC names this limiter's datacenter; documents of another DC are
	// corrupt. Required.
	DC string
	// DCs are the DCs static shares are computed among
	// (rule.Rule.StaticShare); they must list DC. Required.
	DCs []string
	// Now is the clock lease validity is measured on. Default time.Now,
	// whose monotonic reading then times the leases: Share reads only that,
	// which costs half as much as a whole time.Now.
	Now func() time.Time
	// Logger logs skipped documents. Default slog.Default().
	Logger *slog.Logger
	// TrackChanges makes the Table remember the entries whose limits its
	// documents change, for TakeChanged (the usage reporter's). Off, they
	// are not kept: nothing would take them.
	TrackChanges bool
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	if err := rule.CheckDC(c.DC); err != nil {
		return fmt.Errorf("quota: Config.DC: %w", err)
	}
	for _, dc := range c.DCs {
		if err := rule.CheckDC(dc); err != nil {
			return fmt.Errorf("quota: Config.DCs: %w", err)
		}
	}
	if !slices.Contains(c.DCs, c.DC) {
		return fmt.Errorf("quota: Config.DCs %q does not list DC %q", c.DCs, c.DC)
	}
	return nil
}

// maxLogged is how many skipped documents one Reset or Apply logs one by
// one; the others are summed up in one line.
const maxLogged = 10

// Table holds the DC's assignments and lease and answers Share (see the
// package documentation for the rules). Create it with New; it starts
// empty, with every global rule at its static share. Reset and Apply
// change it (package etcdquota calls them); every other method is
// lock-free and safe for concurrent use, also with Reset and Apply.
type Table struct {
	dc  string
	dcs []string
	now func() time.Time
	// since returns the time elapsed since t0 on the Table's clock.
	since func(t0 time.Time) time.Duration
	log   *slog.Logger

	snap      atomic.Pointer[snapshot]
	synced    chan struct{} // closed by the first Reset
	corrupted atomic.Uint64

	mu sync.Mutex // serialises Reset and Apply, and guards what follows
	// rev is the highest revision Reset or Apply was given.
	rev int64
	// holds maps each rule whose latest document is corrupt to the
	// revision of the first of its corrupt documents since its last valid
	// one: the acknowledgement stays below it.
	holds        map[ruleKey]int64
	skipped      int // corrupt documents skipped in the current batch
	trackChanges bool
	// changed are the entries whose limits valid documents changed,
	// oldest first, at most maxChanged, until TakeChanged.
	changed []changedRef
}

// snapshot is the Table's state at one instant. It is immutable once
// published: a change publishes a new one.
type snapshot struct {
	rules   map[ruleKey]*entry
	lease   lease
	epoch   uint64 // highest epoch of the documents applied
	applied int64  // the acknowledged revision
	synced  bool
}

type ruleKey struct{ domain, id string }

// entry is what the Table knows of one rule's assignment. share and keys
// are those of the last valid document (0 and nil when none was ever
// applied). Immutable.
type entry struct {
	rule  limits
	keys  map[string]limits
	state state
	rev   int64 // revision of the latest put or delete
	since int64 // state corrupt: revision of the first corrupt document
}

type state uint8

const (
	valid    state = iota // the latest document is in force (if the lease is)
	corrupt               // the latest document was skipped: capped
	deleted               // the document was deleted: capped
	restored              // saved by an earlier process (Restore): capped, until a listing
)

// lease is the DC's lease as applied. Immutable.
type lease struct {
	present  bool
	rev      int64
	received time.Time // on the Table's clock
	// window is how long after received the lease is in force:
	// min(TTL, ValidUntil − received on the wall clock).
	window time.Duration
}

// inForce reports whether the lease is in force, given the time elapsed
// since it was received.
func (l *lease) inForce(since func(time.Time) time.Duration) bool {
	return l.present && since(l.received) < l.window
}

func (l *lease) until() time.Time {
	if !l.present {
		return time.Time{}
	}
	return l.received.Add(l.window)
}

// New returns an empty Table.
func New(cfg Config) (*Table, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	since := time.Since
	if now := cfg.Now; now != nil {
		since = func(t0 time.Time) time.Duration { return now().Sub(t0) }
	} else {
		cfg.Now = time.Now
	}
	t := &Table{
		dc:           cfg.DC,
		dcs:          slices.Clone(cfg.DCs),
		now:          cfg.Now,
		since:        since,
		log:          cfg.Logger,
		synced:       make(chan struct{}),
		trackChanges: cfg.TrackChanges,
		holds:        make(map[ruleKey]int64),
	}
	t.snap.Store(&snapshot{})
	return t, nil
}

// DC returns the Table's datacenter.
func (t *Table) DC() string { return t.dc }

// Share returns the share of r's limit this DC enforces now for key, in
// [0, 1]: 1 for a local rule; for a global rule, the key's or the rule's
// assigned share while the DC's lease and the rule's document are in
// force, min(static share, assigned share) when either is not, and the
// static share when no document of the rule is known. domain is the
// rule's domain. Share takes no lock and does not allocate.
func (t *Table) Share(domain string, r *ruleset.Rule, key string) float64 {
	spec := &r.Spec
	if spec.Scope == rule.ScopeLocal {
		return 1
	}
	s := t.snap.Load()
	e := s.rules[ruleKey{domain, spec.ID}]
	if e == nil {
		return spec.StaticShare(t.dc, t.dcs)
	}
	share := e.rule.share
	if len(e.keys) > 0 {
		if v, ok := e.keys[key]; ok {
			share = v.share
		}
	}
	if e.state == valid && s.lease.inForce(t.since) {
		return share
	}
	return min(share, spec.StaticShare(t.dc, t.dcs))
}

// Limits returns the limit and burst this DC enforces now for key of r,
// whose key is allowed limit per window with the given burst globally
// (the rule's, or an override's): limit and burst for a local rule; for a
// global rule, the key's or the rule's local limit while the DC's lease
// and the rule's document are in force, the lesser of it and the static
// limit when either is not, and the static limit (rule.Rule.StaticLimit)
// when no document of the rule is known. The local limit is the document's
// integer, scaled to limit when limit is not the one the coordinator
// apportioned (rule.LocalLimit); burst is scaled like limit, rounded down,
// so that the DCs' bursts sum to at most burst too. Lock-free and
// allocation-free.
func (t *Table) Limits(domain string, r *ruleset.Rule, key string, limit, burst int64) (int64, int64) {
	spec := &r.Spec
	if spec.Scope == rule.ScopeLocal {
		return limit, burst
	}
	local := t.local(domain, spec, key, limit)
	switch {
	case local >= limit:
		return limit, burst
	case burst <= 0:
		return local, burst
	}
	return local, rule.LocalLimit(local, limit, 0, burst)
}

func (t *Table) local(domain string, spec *rule.Rule, key string, limit int64) int64 {
	s := t.snap.Load()
	e := s.rules[ruleKey{domain, spec.ID}]
	if e == nil {
		return spec.StaticLimit(t.dc, t.dcs, limit)
	}
	l := e.rule
	if len(e.keys) > 0 {
		if v, ok := e.keys[key]; ok {
			l = v
		}
	}
	local := rule.LocalLimit(l.local, l.global, l.share, limit)
	if e.state == valid && s.lease.inForce(t.since) {
		return local
	}
	return min(local, spec.StaticLimit(t.dc, t.dcs, limit))
}

// HasKeyShare reports whether the DC's assignment of rule (domain, ruleID)
// gives key a share of its own: the key is listed in the rule's last valid
// document (whether or not that document is still in force). Lock-free and
// allocation-free, like Share.
func (t *Table) HasKeyShare(domain, ruleID, key string) bool {
	e := t.snap.Load().rules[ruleKey{domain, ruleID}]
	if e == nil || len(e.keys) == 0 {
		return false
	}
	_, ok := e.keys[key]
	return ok
}

// Applied returns the acknowledgement: the highest epoch of the documents
// applied, and the revision up to which every change of the DC's documents
// is in force — the revision given to the last Reset or Apply, or just
// below the first corrupt document of a rule whose latest document is
// corrupt, whichever is lower. Both are 0 before the first Reset.
func (t *Table) Applied() (epoch uint64, revision int64) {
	s := t.snap.Load()
	return s.epoch, s.applied
}

// Synced reports whether a first Reset has been applied.
func (t *Table) Synced() bool { return t.snap.Load().synced }

// WaitSynced waits for the first Reset. It returns nil once it has been
// applied, or an error wrapping ErrNotSynced and ctx's error when ctx ends
// first.
func (t *Table) WaitSynced(ctx context.Context) error {
	if t.Synced() {
		return nil
	}
	select {
	case <-t.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNotSynced, ctx.Err())
	}
}

// Stats is a snapshot of a Table's state and counters.
type Stats struct {
	// Corrupt counts the documents skipped as corrupt since the Table was
	// created, assignments and leases.
	Corrupt uint64
	// Rules counts the rules with a document known; Capped is how many of
	// them are capped because their latest document was corrupt or deleted.
	Rules, Capped int
	// LeaseInForce tells whether the DC's lease is in force, and LeaseUntil
	// when it ends (zero without a lease).
	LeaseInForce bool
	LeaseUntil   time.Time
	// Epoch and Revision are what Applied returns.
	Epoch    uint64
	Revision int64
	// Synced is what Synced returns.
	Synced bool
}

// Stats returns the Table's state and counters. It takes time linear in
// the number of rules: call it for metrics, not per decision.
func (t *Table) Stats() Stats {
	s := t.snap.Load()
	st := Stats{
		Corrupt:      t.corrupted.Load(),
		Rules:        len(s.rules),
		LeaseInForce: s.lease.inForce(t.since),
		LeaseUntil:   s.lease.until(),
		Epoch:        s.epoch,
		Revision:     s.applied,
		Synced:       s.synced,
	}
	for _, e := range s.rules {
		if e.state != valid {
			st.Capped++
		}
	}
	return st
}

// Reset replaces the Table's documents with a full listing of the DC's
// documents at revision rev (puts only). Rules known to the Table but not
// listed are taken as deleted, and the lease as gone when not listed. A
// document listed with the revision the Table already has for it is kept
// as it is: a lease keeps its reception time. The first Reset makes the
// Table synced. Reset does not retain docs.
func (t *Table) Reset(rev int64, docs []Change) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.snap.Load()
	next := &snapshot{rules: make(map[ruleKey]*entry, len(docs)), epoch: old.epoch, synced: true}
	for i := range docs {
		c := &docs[i]
		if c.Delete {
			continue
		}
		if c.IsLease() {
			next.lease = t.putLease(old.lease, next, c)
			continue
		}
		k := ruleKey{c.Domain, c.RuleID}
		prev := old.rules[k]
		if prev != nil && prev.state == restored {
			// Saved by an earlier process: what this one applied is
			// what the listing says, a corrupt document's last valid
			// version included.
			prev = nil
		}
		if prev != nil && prev.rev == c.Revision && prev.state != deleted {
			next.rules[k] = prev
			continue
		}
		if e := t.putRule(prev, next, c); e != nil {
			next.rules[k] = e
		}
	}
	for k, e := range old.rules {
		if _, ok := next.rules[k]; !ok && e.state != restored {
			next.rules[k] = deleteRule(e, rev)
		}
	}
	clear(t.holds)
	for k, e := range next.rules {
		if e.state == corrupt {
			t.holds[k] = e.since
		}
	}
	t.rev = max(t.rev, rev)
	t.publish(next)
	if !old.synced {
		close(t.synced)
	}
}

// Apply applies changes, in order, then takes every change of the DC's
// documents up to revision rev as applied (rev is raised to the highest
// Revision among changes). An Apply with no change only moves the
// revision, as a watch's progress notification does. Apply does not
// retain changes.
func (t *Table) Apply(rev int64, changes []Change) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.snap.Load()
	next := *old
	cloned := false
	for i := range changes {
		c := &changes[i]
		rev = max(rev, c.Revision)
		if c.IsLease() {
			if c.Delete {
				next.lease = lease{}
			} else {
				next.lease = t.putLease(next.lease, &next, c)
			}
			continue
		}
		if !cloned {
			next.rules = maps.Clone(old.rules)
			if next.rules == nil {
				next.rules = make(map[ruleKey]*entry)
			}
			cloned = true
		}
		k := ruleKey{c.Domain, c.RuleID}
		var e *entry
		if c.Delete {
			e = deleteRule(next.rules[k], c.Revision)
		} else {
			e = t.putRule(next.rules[k], &next, c)
		}
		if e == nil {
			continue
		}
		next.rules[k] = e
		if e.state == corrupt {
			t.holds[k] = e.since
		} else {
			delete(t.holds, k)
		}
	}
	t.rev = max(t.rev, rev)
	t.publish(&next)
}

// publish completes next with the acknowledged revision and makes it the
// Table's state.
func (t *Table) publish(next *snapshot) {
	next.applied = t.rev
	for _, since := range t.holds {
		next.applied = min(next.applied, since-1)
	}
	t.snap.Store(next)
	// Counted once their effect is visible.
	t.corrupted.Add(uint64(t.skipped))
	if n := t.skipped - maxLogged; n > 0 {
		t.log.Warn("quota: more corrupt documents skipped", "dc", t.dc, "count", n)
	}
	t.skipped = 0
}

// putRule returns the entry of a rule after the put c, given its entry
// before (nil if none), and raises next's epoch when c is applied.
func (t *Table) putRule(prev *entry, next *snapshot, c *Change) *entry {
	rl, keys, err := c.assignment(t.dc)
	if err == nil {
		next.epoch = max(next.epoch, c.Assignment.Epoch)
		t.noteChanged(prev, c.Domain, c.RuleID, rl, keys)
		return &entry{rule: rl, keys: keys, state: valid, rev: c.Revision}
	}
	t.skip(c, err)
	e := &entry{state: corrupt, rev: c.Revision, since: c.Revision}
	if prev != nil {
		e.rule, e.keys = prev.rule, prev.keys
		if prev.state == corrupt {
			e.since = prev.since
		}
	}
	return e
}

// deleteRule returns the entry of a rule after its document was deleted
// at revision rev: nil when none was known, else capped at the last valid
// document's shares.
func deleteRule(prev *entry, rev int64) *entry {
	if prev == nil || prev.state == deleted {
		return prev
	}
	return &entry{rule: prev.rule, keys: prev.keys, state: deleted, rev: rev}
}

// putLease returns the lease after the put c, received now: cur, the
// lease before, when c has its revision; none when c is corrupt. It raises
// next's epoch when c is applied.
func (t *Table) putLease(cur lease, next *snapshot, c *Change) lease {
	if cur.present && cur.rev == c.Revision {
		return cur
	}
	l, err := c.lease(t.dc)
	if err != nil {
		t.skip(c, err)
		return lease{}
	}
	next.epoch = max(next.epoch, l.Epoch)
	now := t.now()
	// ValidUntil becomes a time left from now, on the wall clock (Round(0)
	// strips the monotonic readings), then counts down like TTL.
	left := l.ValidUntil.Round(0).Sub(now.Round(0))
	return lease{present: true, rev: c.Revision, received: now, window: min(l.TTL, left)}
}

// skip counts and logs the corrupt document c.
func (t *Table) skip(c *Change, err error) {
	t.skipped++
	if t.skipped > maxLogged {
		return
	}
	what := "assignment"
	if c.IsLease() {
		what = "lease"
	}
	t.log.Warn("quota: skipping corrupt document", "dc", t.dc, "document", what,
		"domain", c.Domain, "rule", c.RuleID, "revision", c.Revision, "err", err)
}
