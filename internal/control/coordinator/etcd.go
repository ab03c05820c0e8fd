package coordinator

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/control/planner"
	"github.com/weirhq/weir/internal/etcd/listwatch"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/logthrottle"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/sharepolicy"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// load gives a new leader's planner what etcd holds: the documents, the
// leases and the instances' acknowledgements. The valid documents and
// leases become the leader's own (see repair).
func (c *Coordinator) load(ctx context.Context, p *planner.Planner, acks *ackTracker, own ownDocs) error {
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.cfg.Etcd.Get(gctx, c.cfg.Layout.Quotas(), clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("coordinator: load assignments: %w", err)
	}
	var (
		docs    []*weirv1.RuleAssignment
		revs    []int64
		leases  []*weirv1.AssignmentLease
		skipped int
	)
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		k, err := c.cfg.Layout.ParseQuota(key)
		if err == nil && len(kv.Value) > MaxDocBytes {
			err = fmt.Errorf("%d bytes; at most %d", len(kv.Value), MaxDocBytes)
		}
		if err == nil && k.Lease {
			var l weirv1.AssignmentLease
			if err = proto.Unmarshal(kv.Value, &l); err == nil && l.GetDc() != k.DC {
				err = fmt.Errorf("lease of DC %q under DC %q", l.GetDc(), k.DC)
			}
			if err == nil {
				leases = append(leases, &l)
				own[key] = owned{doc: kv.Value, rev: kv.ModRevision}
				continue
			}
		} else if err == nil {
			var d weirv1.RuleAssignment
			if err = proto.Unmarshal(kv.Value, &d); err == nil {
				err = checkDoc(&d, k.DC, k.Domain, k.RuleID)
			}
			if err == nil {
				docs, revs = append(docs, &d), append(revs, kv.ModRevision)
				own[key] = owned{doc: kv.Value, rev: kv.ModRevision}
				continue
			}
		}
		c.stats.badDocs.Add(1)
		skipped++
		// The planner then assumes the DC may hold anything of the rule:
		// the limiters treat a corrupt document as min(static, last).
		if held, ok := c.skipLines.Allow(); ok {
			c.log.Warn("etcd document skipped", "key", key, "err", err, logthrottle.Held(held))
		}
	}
	if err := c.listInstances(gctx, acks); err != nil {
		return err
	}
	p.Load(c.now(), docs, revs, leases)
	c.log.Info("loaded assignments", "documents", len(docs), "leases", len(leases), "skipped", skipped, "revision", resp.Header.Revision, "epoch", p.Epoch())
	return nil
}

// checkDoc validates a document read at the key of (dc, domain, ruleID).
func checkDoc(d *weirv1.RuleAssignment, dc, domain, ruleID string) error {
	if d.GetDc() != dc || d.GetDomain() != domain || d.GetRuleId() != ruleID {
		return fmt.Errorf("document of %s/%s/%s under key %s/%s/%s", d.GetDc(), d.GetDomain(), d.GetRuleId(), dc, domain, ruleID)
	}
	if s := d.GetShare(); !(s >= 0 && s <= 1) {
		return fmt.Errorf("share %v out of [0, 1]", s)
	}
	if !validLimit(d.GetLimit(), d.GetGlobalLimit()) {
		return fmt.Errorf("local limit %d of %d out of range", d.GetLimit(), d.GetGlobalLimit())
	}
	if len(d.GetKeys()) > planner.MaxKeysPerRule {
		return fmt.Errorf("%d keys; at most %d", len(d.GetKeys()), planner.MaxKeysPerRule)
	}
	seen := make(map[string]bool, len(d.GetKeys()))
	for _, k := range d.GetKeys() {
		if s := k.GetShare(); !(s >= 0 && s <= 1) || !validLimit(k.GetLimit(), k.GetGlobalLimit()) || k.GetKey() == "" || len(k.GetKey()) > planner.MaxKeyLen || seen[k.GetKey()] {
			return fmt.Errorf("bad key share %q: %v", truncate(k.GetKey()), k.GetShare())
		}
		seen[k.GetKey()] = true
	}
	return nil
}

// validLimit reports whether a document's integer limits are usable: a
// local limit in [0, global], global in [0, algorithm.MaxLimit] (0: a
// document written before integer limits, which has none).
func validLimit(local, global int64) bool {
	return global >= 0 && global <= algorithm.MaxLimit && local >= 0 && local <= global
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// ruleRef names a rule.
type ruleRef struct{ domain, id string }

// policyWatch follows the operators' share settings in etcd
// (etcdlayout.Layout.Policies) for as long as the coordinator runs, leading
// or not, so that a new leader has them at once and a change reaches the
// leader's planner without waiting for a tick. Safe for concurrent use.
type policyWatch struct {
	c       *Coordinator
	changed chan struct{} // capacity 1: the policies changed since the leader last took them
	listed  chan struct{} // closed by the first listing
	once    sync.Once

	mu    sync.Mutex
	rules map[ruleRef]sharepolicy.Policy // the last valid policy of each rule; guarded by mu
}

func newPolicyWatch(c *Coordinator) *policyWatch {
	return &policyWatch{c: c, changed: make(chan struct{}, 1), listed: make(chan struct{}), rules: map[ruleRef]sharepolicy.Policy{}}
}

// run lists and watches the policies until ctx ends.
func (w *policyWatch) run(ctx context.Context) {
	loop, err := listwatch.New(listwatch.Config{Client: w.c.cfg.Etcd, Prefix: w.c.cfg.Layout.Policies(), Handler: (*policyHandler)(w), Logger: w.c.log})
	if err != nil {
		w.c.log.Error("share policies not watched", "err", err)
		return
	}
	_ = loop.Run(ctx) // returns nil when ctx ends
}

// wait waits until the policies have been listed once, ctx ends, or d has
// passed: a new leader plans without them rather than not at all.
func (w *policyWatch) wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.listed:
	case <-ctx.Done():
	case <-t.C:
		w.c.log.Warn("share policies not listed yet; planning without them", "waited", d)
	}
}

// applyPolicies gives the planner the share settings of every rule it plans:
// the last valid policy read from etcd, or none. The caller owns p.
func (c *Coordinator) applyPolicies(p *planner.Planner) {
	w := c.policies
	w.mu.Lock()
	defer w.mu.Unlock()
	p.EachRule(func(domain, id string) {
		// Cannot fail: the rule is known, the policy was checked against
		// the DCs when it was read.
		_ = p.SetPolicy(domain, id, w.rules[ruleRef{domain, id}])
	})
}

// policyHandler is the policyWatch as its loop sees it.
type policyHandler policyWatch

var _ listwatch.Handler = (*policyHandler)(nil)

// Replace takes a listing of every policy.
func (h *policyHandler) Replace(_ int64, kvs []listwatch.Event) {
	w := (*policyWatch)(h)
	w.mu.Lock()
	old := w.rules
	w.rules = make(map[ruleRef]sharepolicy.Policy, len(kvs))
	for _, kv := range kvs {
		ref, pol, ok := w.decode(kv)
		if !ok {
			pol, ok = old[ref] // an invalid policy: the rule keeps the previous one
		}
		if ok {
			w.rules[ref] = pol
		}
	}
	w.mu.Unlock()
	w.once.Do(func() { close(w.listed) })
	w.notify()
}

// Apply takes the watch's changes.
func (h *policyHandler) Apply(_ int64, events []listwatch.Event) {
	if len(events) == 0 {
		return
	}
	w := (*policyWatch)(h)
	w.mu.Lock()
	for _, ev := range events {
		if ev.Delete {
			if domain, id, err := w.c.cfg.Layout.ParsePolicy(string(ev.Key)); err == nil {
				delete(w.rules, ruleRef{domain, id})
			}
			continue
		}
		if ref, pol, ok := w.decode(ev); ok {
			w.rules[ref] = pol
		}
	}
	w.mu.Unlock()
	w.notify()
}

// decode reads one policy and checks it against the DCs; an invalid one is
// logged and counted, and the rule keeps its previous settings.
func (w *policyWatch) decode(kv listwatch.Event) (ruleRef, sharepolicy.Policy, bool) {
	domain, id, err := w.c.cfg.Layout.ParsePolicy(string(kv.Key))
	var pol sharepolicy.Policy
	if err == nil {
		pol, err = sharepolicy.Decode(kv.Value)
	}
	if err == nil {
		_, err = pol.Settings(w.c.cfg.Planner.DCs)
	}
	if err != nil {
		w.c.stats.badPolicies.Add(1)
		w.c.log.Warn("share policy ignored; the rule keeps its previous settings", "key", string(kv.Key), "err", err)
		return ruleRef{domain, id}, sharepolicy.Policy{}, false
	}
	return ruleRef{domain, id}, pol, true
}

// notify tells the leader, if any, that the policies changed.
func (w *policyWatch) notify() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// listInstances replaces the tracker's instances by those in etcd.
func (c *Coordinator) listInstances(ctx context.Context, acks *ackTracker) error {
	resp, err := c.cfg.Etcd.Get(ctx, c.cfg.Layout.Instances(), clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("coordinator: list instances: %w", err)
	}
	kvs := make([]listwatch.Event, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		kvs[i] = listwatch.Event{Key: kv.Key, Value: kv.Value, Revision: kv.ModRevision}
	}
	(&instanceHandler{c: c, acks: acks}).Replace(resp.Header.Revision, kvs)
	return nil
}

func (c *Coordinator) decodeInstance(key, value []byte) (instance, bool) {
	dc, name, err := c.cfg.Layout.ParseInstance(string(key))
	var rec weirv1.InstanceRecord
	if err == nil && len(value) > 64<<10 {
		err = fmt.Errorf("%d bytes", len(value))
	}
	if err == nil {
		err = proto.Unmarshal(value, &rec)
	}
	if err == nil && (rec.GetDc() != dc || rec.GetAppliedRevision() < 0) {
		err = fmt.Errorf("record of DC %q, applied revision %d", rec.GetDc(), rec.GetAppliedRevision())
	}
	if err == nil {
		err = rule.CheckDC(dc)
	}
	if err != nil {
		c.stats.badInstances.Add(1)
		if held, ok := c.skipLines.Allow(); ok {
			c.log.Warn("instance record skipped", "key", string(key), "err", err, logthrottle.Held(held))
		}
		// A record we cannot read may be an instance we cannot see:
		// count it as having acknowledged nothing.
		return instance{dc: dc, name: name, applied: 0}, dc != ""
	}
	return instance{dc: dc, name: name, applied: rec.GetAppliedRevision(), httpURL: httpURL(rec.GetHttpScheme(), rec.GetHttpAddr())}, true
}

// instanceHandler keeps an ackTracker in step with the instance records
// and signals acked (when set) after every change.
type instanceHandler struct {
	c     *Coordinator
	acks  *ackTracker
	acked chan<- struct{}
}

var _ listwatch.Handler = (*instanceHandler)(nil)

// Replace takes a listing of every instance record.
func (h *instanceHandler) Replace(_ int64, kvs []listwatch.Event) {
	live := make(map[string]instance, len(kvs))
	for _, kv := range kvs {
		if in, ok := h.c.decodeInstance(kv.Key, kv.Value); ok {
			live[string(kv.Key)] = in
		}
	}
	h.acks.replace(live, h.c.now())
	h.signal()
}

// Apply takes the watch's changes.
func (h *instanceHandler) Apply(_ int64, events []listwatch.Event) {
	if len(events) == 0 {
		return
	}
	for _, ev := range events {
		if ev.Delete {
			h.acks.remove(string(ev.Key), h.c.now())
		} else if in, ok := h.c.decodeInstance(ev.Key, ev.Value); ok {
			h.acks.set(string(ev.Key), in)
		}
	}
	h.signal()
}

func (h *instanceHandler) signal() {
	if h.acked == nil {
		return
	}
	select {
	case h.acked <- struct{}{}:
	default:
	}
}

// watchInstances keeps the tracker current and signals acked on every
// change, until ctx is done.
func (c *Coordinator) watchInstances(ctx context.Context, acks *ackTracker, acked chan<- struct{}) {
	loop, err := listwatch.New(listwatch.Config{Client: c.cfg.Etcd, Prefix: c.cfg.Layout.Instances(), Handler: &instanceHandler{c: c, acks: acks, acked: acked}, Logger: c.log})
	if err != nil {
		c.log.Error("instances not watched", "err", err)
		return
	}
	_ = loop.Run(ctx) // returns nil when ctx ends
}
