package coordinator

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/control/planner"
	"github.com/weirhq/weir/internal/platform/backoff"
	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/sharepolicy"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// load gives a new leader's planner what etcd holds: the documents, the
// leases and the instances' acknowledgements.
func (c *Coordinator) load(ctx context.Context, p *planner.Planner, acks *ackTracker) error {
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.cfg.Etcd.Get(gctx, c.cfg.Layout.Quotas(), clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("coordinator: load assignments: %w", err)
	}
	var (
		docs   []*weirv1.RuleAssignment
		revs   []int64
		leases []*weirv1.AssignmentLease
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
				continue
			}
		} else if err == nil {
			var d weirv1.RuleAssignment
			if err = proto.Unmarshal(kv.Value, &d); err == nil {
				err = checkDoc(&d, k.DC, k.Domain, k.RuleID)
			}
			if err == nil {
				docs, revs = append(docs, &d), append(revs, kv.ModRevision)
				continue
			}
		}
		c.stats.badDocs.Add(1)
		// The planner then assumes the DC may hold anything of the rule:
		// the limiters treat a corrupt document as min(static, last).
		c.log.Warn("etcd document skipped", "key", key, "err", err)
	}
	if err := c.listInstances(gctx, acks); err != nil {
		return err
	}
	p.Load(c.now(), docs, revs, leases)
	c.log.Info("loaded assignments", "documents", len(docs), "leases", len(leases), "revision", resp.Header.Revision, "epoch", p.Epoch())
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

// ruleRef names a rule.
type ruleRef struct{ domain, id string }

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// loadPolicies reads the operators' share settings; an invalid one is
// logged, counted and ignored (the rule keeps its previous settings).
func (c *Coordinator) loadPolicies(ctx context.Context, p *planner.Planner) {
	gctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := c.cfg.Etcd.Get(gctx, c.cfg.Layout.Policies(), clientv3.WithPrefix())
	if err != nil {
		c.log.Warn("etcd", "op", "read policies", "err", err)
		return
	}
	seen := map[ruleRef]bool{}
	for _, kv := range resp.Kvs {
		domain, id, err := c.cfg.Layout.ParsePolicy(string(kv.Key))
		var pol sharepolicy.Policy
		if err == nil {
			pol, err = sharepolicy.Decode(kv.Value)
		}
		if err == nil {
			if !p.HasRule(domain, id) {
				continue // a policy for a rule not (yet) loaded
			}
			err = p.SetPolicy(domain, id, pol)
		}
		if err != nil {
			c.stats.badPolicies.Add(1)
			c.log.Warn("share policy ignored; the rule keeps its previous settings", "key", string(kv.Key), "err", err)
			if domain != "" {
				seen[ruleRef{domain, id}] = true
			}
			continue
		}
		seen[ruleRef{domain, id}] = true
	}
	p.EachRule(func(domain, id string) {
		if !seen[ruleRef{domain, id}] {
			_ = p.SetPolicy(domain, id, sharepolicy.Policy{})
		}
	})
}

// listInstances replaces the tracker's instances by those in etcd.
func (c *Coordinator) listInstances(ctx context.Context, acks *ackTracker) error {
	resp, err := c.cfg.Etcd.Get(ctx, c.cfg.Layout.Instances(), clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("coordinator: list instances: %w", err)
	}
	live := map[string]instance{}
	for _, kv := range resp.Kvs {
		if in, ok := c.decodeInstance(kv.Key, kv.Value); ok {
			live[string(kv.Key)] = in
		}
	}
	acks.replace(live, c.now())
	return nil
}

func (c *Coordinator) decodeInstance(key, value []byte) (instance, bool) {
	dc, _, err := c.cfg.Layout.ParseInstance(string(key))
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
		c.log.Warn("instance record skipped", "key", string(key), "err", err)
		// A record we cannot read may be an instance we cannot see:
		// count it as having acknowledged nothing.
		return instance{dc: dc, applied: 0}, dc != ""
	}
	return instance{dc: dc, applied: rec.GetAppliedRevision(), httpURL: httpURL(rec.GetHttpScheme(), rec.GetHttpAddr())}, true
}

// watchInstances keeps the tracker current and signals acked on every
// change, until ctx is done.
func (c *Coordinator) watchInstances(ctx context.Context, acks *ackTracker, acked chan<- struct{}) {
	signal := func() {
		select {
		case acked <- struct{}{}:
		default:
		}
	}
	bo := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	for ctx.Err() == nil {
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := c.cfg.Etcd.Get(gctx, c.cfg.Layout.Instances(), clientv3.WithPrefix())
		cancel()
		if err != nil {
			c.log.Warn("etcd", "op", "list instances", "err", err)
			bo.Wait(ctx)
			continue
		}
		live := map[string]instance{}
		for _, kv := range resp.Kvs {
			if in, ok := c.decodeInstance(kv.Key, kv.Value); ok {
				live[string(kv.Key)] = in
			}
		}
		acks.replace(live, c.now())
		signal()
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wr := range c.cfg.Etcd.Watch(wctx, c.cfg.Layout.Instances(), clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
			if err := wr.Err(); err != nil {
				c.log.Warn("etcd", "op", "watch instances", "err", err)
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					acks.remove(string(ev.Kv.Key), c.now())
				} else if in, ok := c.decodeInstance(ev.Kv.Key, ev.Kv.Value); ok {
					acks.set(string(ev.Kv.Key), in)
				}
			}
			signal()
			bo.Reset()
		}
		wcancel()
		bo.Wait(ctx)
	}
}
