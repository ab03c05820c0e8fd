package rulestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrFenced is returned by MendShadows when the caller's fence did not
// hold: another writer (a new leader) mends the shadows now.
var ErrFenced = errors.New("rulestore: shadows not mended: the fence did not hold")

// mend is a shadow write the Watcher planned, conditional on the
// revisions it read.
type mend struct {
	// doc is the shadow to put; nil deletes the shadow, if the rule has
	// no document.
	doc []byte
	// docRev and shadowRev are the mod revisions of the document and of
	// the shadow (0: none) that a put is conditional on.
	docRev, shadowRev int64
	// restored tells that doc is the version held in force from memory
	// (both the document and the shadow invalid, or the shadow missing),
	// not the document.
	restored bool
}

// plan records the shadow write the rule needs, if any: the valid
// document copied to a shadow that differs; the version held in force
// put back over an invalid or missing shadow of an invalid document; the
// shadow of a deleted rule deleted. Called on the loop's goroutine with
// mu held.
func (w *Watcher) plan(r ref, d stored, ok bool, s stored, hasShadow bool) {
	delete(w.mends, r)
	shadowed := hasShadow && s.err == nil
	switch {
	case ok && d.err == nil && (!shadowed || !bytes.Equal(s.raw, d.raw)):
		w.mends[r] = mend{doc: d.raw, docRev: d.rev, shadowRev: s.rev}
	case ok && d.err != nil && !shadowed:
		v, kept := w.inForce[r]
		if !kept {
			return // nothing known to put back
		}
		w.mends[r] = mend{doc: v.doc, docRev: d.rev, shadowRev: s.rev, restored: true}
	case !ok && hasShadow:
		w.mends[r] = mend{}
	default:
		return
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Mends receives a value when shadow writes wait for MendShadows.
func (w *Watcher) Mends() <-chan struct{} { return w.wake }

// MendShadows makes the shadow writes the Watcher planned (Config.Mirror),
// one transaction each. A transaction runs only if every compare of
// fence holds — the caller's proof that it is the one writer, a leader's
// election key — and writes only if the rule's document and shadow are
// still at the revisions the Watcher read: a write that finds either
// changed is dropped, the change having been planned anew when the
// Watcher saw it, so a mend never overwrites a newer write. It returns how
// many shadows it wrote or deleted (also counted in Stats.Mended). At the
// first failure it stops and keeps the writes not made for the next call,
// unless newer ones were planned meanwhile, and returns ErrFenced when
// the fence did not hold, else etcd's error. Safe for concurrent use; it
// is meant for one caller.
func (w *Watcher) MendShadows(ctx context.Context, fence ...clientv3.Cmp) (int, error) {
	w.mu.Lock()
	mends := w.mends
	w.mends = map[ref]mend{}
	w.mu.Unlock()
	refs := make([]ref, 0, len(mends))
	for r := range mends {
		refs = append(refs, r)
	}
	sort.Slice(refs, func(i, j int) bool {
		return refs[i].domain < refs[j].domain || refs[i].domain == refs[j].domain && refs[i].id < refs[j].id
	})
	n := 0
	for i, r := range refs {
		done, err := w.mendOne(ctx, r, mends[r], fence)
		if err != nil {
			w.mu.Lock()
			for _, r := range refs[i:] {
				if _, newer := w.mends[r]; !newer {
					w.mends[r] = mends[r]
				}
			}
			w.mu.Unlock()
			return n, err
		}
		if done {
			n++
		}
	}
	return n, nil
}

// mendOne makes one shadow write; done is false when the rule changed
// since it was planned.
func (w *Watcher) mendOne(ctx context.Context, r ref, m mend, fence []clientv3.Cmp) (done bool, err error) {
	key, shadow := w.cfg.Layout.Rule(r.domain, r.id), w.cfg.Layout.ValidRule(r.domain, r.id)
	var op clientv3.Op
	if m.doc != nil {
		op = clientv3.OpTxn([]clientv3.Cmp{
			clientv3.Compare(clientv3.ModRevision(key), "=", m.docRev),
			clientv3.Compare(clientv3.ModRevision(shadow), "=", m.shadowRev),
		}, []clientv3.Op{clientv3.OpPut(shadow, string(m.doc))}, nil)
	} else {
		op = clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
			[]clientv3.Op{clientv3.OpDelete(shadow)}, nil)
	}
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := w.cfg.Client.Txn(tctx).If(fence...).Then(op).Commit()
	switch {
	case err != nil:
		return false, fmt.Errorf("rulestore: mend the shadow of %s/%s: %w", r.domain, r.id, err)
	case !resp.Succeeded:
		return false, ErrFenced
	case !resp.Responses[0].GetResponseTxn().GetSucceeded():
		return false, nil
	}
	w.mended.Add(1)
	switch {
	case m.restored:
		w.log.Warn("rulestore: shadow restored from the last valid version held in memory; processes started since the corruption now enforce it",
			"domain", r.domain, "rule", r.id, "document_revision", m.docRev, "revision", resp.Header.Revision)
	default:
		w.log.Info("rulestore: shadow mended", "domain", r.domain, "rule", r.id, "deleted", m.doc == nil, "revision", resp.Header.Revision)
	}
	return true, nil
}
