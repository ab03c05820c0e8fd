package coordinator

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/control/planner"
	"github.com/weirhq/weir/internal/etcd/listwatch"
	"github.com/weirhq/weir/internal/etcd/rulestore"
)

// Self-repair. The leader knows every document it wrote under the quotas
// prefix, and those it found valid when it took over: its own. A watch of
// the prefix, for as long as it leads, reports every change; a document
// that is not the leader's own current one — corrupt, deleted, or written
// by anyone else — is put back: the leader's own last-written bytes,
// which the planner already accounts for, or, for a document it never
// owned, the planner's current document at the next round
// (planner.Rewrite). The writes are fenced like every other.

// The rules' shadows (rules-valid/, package rulestore) are mended the
// same way: the rule watcher plans the writes (a valid document copied,
// the last valid version it holds in memory put back over an invalid or
// missing shadow, an orphaned shadow deleted) and the leader makes them
// under its fence, so that two coordinators never write them at once.

// Shadows is what the leader needs of the rule watcher to mend the rules'
// shadows (rulestore.Watcher with Config.Mirror).
type Shadows interface {
	// Mends receives a value when shadow writes wait.
	Mends() <-chan struct{}
	// MendShadows makes the waiting writes, each only if fence holds and
	// the rule is unchanged since it was read; it returns how many it
	// made, and rulestore.ErrFenced when the fence did not hold.
	MendShadows(ctx context.Context, fence ...clientv3.Cmp) (int, error)
}

var _ Shadows = (*rulestore.Watcher)(nil)

// mendShadows makes the shadow writes the rule watcher planned, fenced.
// A refused fence ends leadership; an etcd error is logged and the next
// tick retries.
func (c *Coordinator) mendShadows(ctx context.Context, fence clientv3.Cmp) error {
	if c.cfg.Shadows == nil {
		return nil
	}
	n, err := c.cfg.Shadows.MendShadows(ctx, fence)
	c.stats.shadowRepairs.Add(uint64(n))
	switch {
	case errors.Is(err, rulestore.ErrFenced):
		return errDeposed
	case err != nil:
		return c.softError("mend rule shadows", err)
	}
	return nil
}

// owned is what the leader wrote at a key, or found valid there when it
// took over, and the revision of that write.
type owned struct {
	doc []byte
	rev int64
}

// ownDocs maps keys under the quotas prefix to the leader's own documents.
// The leader's loop only.
type ownDocs map[string]owned

// seen is a document the quotas watch saw: its value and mod revision,
// or its deletion.
type seen struct {
	doc     []byte
	rev     int64
	deleted bool
}

// quotaWatch collects what a watch of the quotas prefix sees, for the
// leader's loop to compare with its own documents. Safe for concurrent
// use.
type quotaWatch struct {
	changed chan struct{} // capacity 1: something was seen since the last take

	mu     sync.Mutex
	docs   map[string]seen // the newest seen per key since the last take; guarded by mu
	listed map[string]bool // the keys of a listing since the last take, nil if none; guarded by mu
	listAt int64           // the listing's revision; guarded by mu
}

func newQuotaWatch() *quotaWatch {
	return &quotaWatch{changed: make(chan struct{}, 1), docs: map[string]seen{}}
}

// take returns what was seen since the last take.
func (q *quotaWatch) take() (docs map[string]seen, listed map[string]bool, listAt int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	docs, listed, listAt = q.docs, q.listed, q.listAt
	q.docs, q.listed = map[string]seen{}, nil
	return docs, listed, listAt
}

func (q *quotaWatch) signal() {
	select {
	case q.changed <- struct{}{}:
	default:
	}
}

var _ listwatch.Handler = (*quotaWatch)(nil)

// Replace takes a listing: every key as it is; keys not listed are gone.
func (q *quotaWatch) Replace(rev int64, kvs []listwatch.Event) {
	q.mu.Lock()
	q.listed, q.listAt = make(map[string]bool, len(kvs)), rev
	for _, kv := range kvs {
		q.listed[string(kv.Key)] = true
		q.docs[string(kv.Key)] = seen{doc: bytes.Clone(kv.Value), rev: kv.Revision}
	}
	q.mu.Unlock()
	q.signal()
}

// Apply takes the watch's changes.
func (q *quotaWatch) Apply(_ int64, events []listwatch.Event) {
	if len(events) == 0 {
		return
	}
	q.mu.Lock()
	for _, ev := range events {
		q.docs[string(ev.Key)] = seen{doc: bytes.Clone(ev.Value), rev: ev.Revision, deleted: ev.Delete}
	}
	q.mu.Unlock()
	q.signal()
}

// watchQuotas runs the quotas watch into q until ctx is done.
func (c *Coordinator) watchQuotas(ctx context.Context, q *quotaWatch) {
	loop, err := listwatch.New(listwatch.Config{Client: c.cfg.Etcd, Prefix: c.cfg.Layout.Quotas(), Handler: q, Logger: c.log})
	if err != nil {
		c.log.Error("assignments not watched: corrupt ones are not repaired", "err", err)
		return
	}
	_ = loop.Run(ctx) // returns nil when ctx ends
}

// repair compares what the quotas watch saw with the leader's own
// documents and puts back every one that differs. It runs on the leader's
// loop, which records its own writes as soon as they are made: a change
// seen at or before the revision of the leader's own write at a key is
// that write or an older one, not a foreign change.
func (c *Coordinator) repair(ctx context.Context, p *planner.Planner, own ownDocs, q *quotaWatch, fence clientv3.Cmp) error {
	docs, listed, listAt := q.take()
	if listed != nil {
		for key, o := range own {
			if _, ok := docs[key]; !ok && !listed[key] && o.rev < listAt {
				docs[key] = seen{rev: listAt, deleted: true}
			}
		}
	}
	var keys []string
	for key, s := range docs {
		o, mine := own[key]
		switch {
		case mine && (s.rev <= o.rev || !s.deleted && bytes.Equal(s.doc, o.doc)):
			// The leader's own document, or one it has overwritten since.
		case mine:
			keys = append(keys, key)
		case !s.deleted:
			// Never the leader's: the planner writes its own at the next
			// round. A lease is renewed at the next tick if the DC is heard
			// from; a key of no known shape is left alone.
			k, err := c.cfg.Layout.ParseQuota(key)
			if err == nil && !k.Lease && p.HasRule(k.Domain, k.RuleID) {
				p.Rewrite(k.DC, k.Domain, k.RuleID)
				c.stats.repairs.Add(1)
				c.log.Warn("assignment not written by this leader; rewriting it at the next round", "key", key, "revision", s.rev)
			}
		}
	}
	sort.Strings(keys)
	for len(keys) > 0 {
		n := min(len(keys), maxTxnOps)
		batch := keys[:n]
		keys = keys[n:]
		ops := make([]clientv3.Op, len(batch))
		for i, key := range batch {
			ops[i] = clientv3.OpPut(key, string(own[key].doc))
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := c.cfg.Etcd.Txn(wctx).If(fence).Then(ops...).Commit()
		cancel()
		switch {
		case err != nil:
			// Retried at the next tick.
			back := make(map[string]seen, len(batch)+len(keys))
			for _, key := range append(batch, keys...) {
				back[key] = docs[key]
			}
			q.requeue(back)
			return c.softError("repair assignments", err)
		case !resp.Succeeded:
			return errDeposed
		}
		for _, key := range batch {
			own[key] = owned{doc: own[key].doc, rev: resp.Header.Revision}
			c.log.Warn("document under the quotas prefix was not the leader's: rewritten", "key", key, "revision", resp.Header.Revision)
		}
		c.stats.repairs.Add(uint64(len(batch)))
	}
	return nil
}

// requeue gives back documents a failed repair did not put back, unless
// something newer was seen meanwhile; the next tick retries them.
func (q *quotaWatch) requeue(docs map[string]seen) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for key, s := range docs {
		if cur, ok := q.docs[key]; !ok || cur.rev < s.rev {
			q.docs[key] = s
		}
	}
}
