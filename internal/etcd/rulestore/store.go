package rulestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/rulefile"
)

// MaxDocumentBytes bounds one rule document.
const MaxDocumentBytes = 256 << 10

// ErrTooLarge marks a document over MaxDocumentBytes.
var ErrTooLarge = errors.New("rulestore: rule document too large")

// ErrInvalid marks a rule that Encode refuses: its document would not be
// read back as the same rule by every reader.
var ErrInvalid = errors.New("rulestore: invalid rule document")

// Decode reads the rule document stored for (domain, id): strictly, with
// every check of package rule, and only if it names that domain (or none)
// and that id. It is the one definition of a valid stored rule: the
// Watcher, the admin API and Encode all use it.
func Decode(domain, id string, value []byte) (rule.Rule, error) {
	if len(value) > MaxDocumentBytes {
		return rule.Rule{}, fmt.Errorf("%w: %d bytes; at most %d", ErrTooLarge, len(value), MaxDocumentBytes)
	}
	r, err := rulefile.ParseRule(value)
	if err != nil {
		return rule.Rule{}, err
	}
	switch {
	case r.ID != id:
		return rule.Rule{}, fmt.Errorf("document of rule %q stored as %q", r.ID, id)
	case r.Domain != "" && r.Domain != domain:
		return rule.Rule{}, fmt.Errorf("document of domain %q stored under domain %q", r.Domain, domain)
	}
	r.Domain = domain
	r.SetDefaults()
	return r, nil
}

// Encode returns the document to store for r, under r.Domain and r.ID,
// after checking that Decode reads it back: a writer that stores only
// what Encode returns never stores a document that readers skip. A
// refusal wraps ErrInvalid and Decode's error (a *rule.ValidationError
// when a field is wrong).
func Encode(r rule.Rule) ([]byte, error) {
	doc, err := json.Marshal(&r)
	if err != nil {
		return nil, fmt.Errorf("%w: encode rule %q: %w", ErrInvalid, r.ID, err)
	}
	if _, err := Decode(r.Domain, r.ID, doc); err != nil {
		return nil, fmt.Errorf("%w: rule %q of domain %q: %w", ErrInvalid, r.ID, r.Domain, err)
	}
	return doc, nil
}

// PutOps returns the operations that store doc, a document Encode
// returned, as the rule (domain, id) and as its shadow, the last valid
// version that readers fall back to. Run them in one transaction.
func PutOps(layout etcdlayout.Layout, domain, id string, doc []byte) []clientv3.Op {
	return []clientv3.Op{
		clientv3.OpPut(layout.Rule(domain, id), string(doc)),
		clientv3.OpPut(layout.ValidRule(domain, id), string(doc)),
	}
}

// DeleteOps returns the operations that delete the rule (domain, id) and
// its shadow. Run them in one transaction.
func DeleteOps(layout etcdlayout.Layout, domain, id string) []clientv3.Op {
	return []clientv3.Op{
		clientv3.OpDelete(layout.Rule(domain, id)),
		clientv3.OpDelete(layout.ValidRule(domain, id)),
	}
}

// Stored is one rule as etcd holds it: its document and its shadow.
type Stored struct {
	// Doc is the rule's document as stored and Revision its mod
	// revision; both zero when there is none.
	Doc      []byte
	Revision int64
	// Rule is Doc decoded; Err is Decode's error when Doc is invalid.
	Rule rule.Rule
	Err  error
	// Shadow is the shadow's document, nil when there is none or it is
	// invalid; ShadowRule is it decoded.
	Shadow     []byte
	ShadowRule rule.Rule
}

// Exists reports whether the rule has a document, valid or not.
func (s Stored) Exists() bool { return s.Revision != 0 }

// InForce returns the version of the rule every process enforces: the
// document when it is valid, else its shadow; ok is false when there is
// neither.
func (s Stored) InForce() (r rule.Rule, ok bool) {
	switch {
	case !s.Exists():
		return rule.Rule{}, false
	case s.Err == nil:
		return s.Rule, true
	case s.Shadow != nil:
		return s.ShadowRule, true
	}
	return rule.Rule{}, false
}

// Read reads the rule (domain, id) and its shadow at one revision.
func Read(ctx context.Context, cli *clientv3.Client, layout etcdlayout.Layout, domain, id string) (Stored, error) {
	resp, err := cli.Txn(ctx).Then(clientv3.OpGet(layout.Rule(domain, id)), clientv3.OpGet(layout.ValidRule(domain, id))).Commit()
	if err != nil {
		return Stored{}, fmt.Errorf("rulestore: read rule %s/%s: %w", domain, id, err)
	}
	var s Stored
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		s.Doc, s.Revision = kvs[0].Value, kvs[0].ModRevision
		s.Rule, s.Err = Decode(domain, id, s.Doc)
	}
	if kvs := resp.Responses[1].GetResponseRange().GetKvs(); len(kvs) > 0 {
		if r, err := Decode(domain, id, kvs[0].Value); err == nil {
			s.Shadow, s.ShadowRule = kvs[0].Value, r
		}
	}
	return s, nil
}

// Put writes a set's rules to etcd, with their shadows, creating the ones
// that do not exist yet with created_at and updated_at set to now; it
// never overwrites. It reports how many it created. Coordinators use it to
// bootstrap etcd from a rule file.
func Put(ctx context.Context, cli *clientv3.Client, layout etcdlayout.Layout, set rule.Set, now time.Time) (int, error) {
	created := 0
	for _, r := range set.Rules {
		r.Domain = set.Domain
		r.CreatedAt, r.UpdatedAt = now.UTC(), now.UTC()
		doc, err := Encode(r)
		if err != nil {
			return created, err
		}
		key := layout.Rule(set.Domain, r.ID)
		resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).Then(PutOps(layout, set.Domain, r.ID, doc)...).Commit()
		if err != nil {
			return created, fmt.Errorf("rulestore: put %s: %w", key, err)
		}
		if resp.Succeeded {
			created++
		}
	}
	return created, nil
}
