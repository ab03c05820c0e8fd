package quota

import (
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
)

// Bounds on a document; a document beyond them is corrupt.
const (
	// MaxDocumentSize is the largest encoded document, in bytes (1 MiB).
	MaxDocumentSize = 1 << 20
	// MaxKeys is the most keys one assignment may list.
	MaxKeys = 100_000
	// MaxKeyLen is the longest key string, in bytes (4 KiB).
	MaxKeyLen = 4 << 10
)

// ErrCorrupt marks a document that was skipped; the errors Validate returns
// and those Stats and logs report wrap it.
var ErrCorrupt = errors.New("quota: corrupt document")

// ErrNotSynced is returned by WaitSynced when its context ends before the
// first sync.
var ErrNotSynced = errors.New("quota: not synced")

// Assignment is a decoded weirv1.RuleAssignment: the DC's share of one
// global rule, and of the rule's keys that have shares of their own.
type Assignment struct {
	DC, Domain, RuleID string
	// Epoch is the coordinator round that wrote the document.
	Epoch uint64
	// Share is the DC's fraction of the rule's limit, in [0, 1].
	Share float64
	// Limit is the DC's local limit out of GlobalLimit, the rule's limit
	// the coordinator apportioned; both 0 in documents written before
	// integer limits, which the DC enforces as floor(Share × limit).
	Limit, GlobalLimit int64
	// Keys are the keys with shares of their own, each listed once.
	Keys []KeyShare
}

// KeyShare is the DC's fraction, in [0, 1], of one key's limit, and its
// local limit out of GlobalLimit (both 0 in documents that predate them).
type KeyShare struct {
	Key                string
	Share              float64
	Limit, GlobalLimit int64
}

// Lease is a decoded weirv1.AssignmentLease: it keeps the DC's assignments
// in force until ValidUntil (the coordinator's clock) and for TTL after it
// is applied (the Table's clock), whichever ends first.
type Lease struct {
	DC string
	// Epoch is the coordinator round that wrote the lease.
	Epoch      uint64
	ValidUntil time.Time
	TTL        time.Duration
}

// Change is one document of the DC read from the store: a put or a delete
// of the assignment of rule (Domain, RuleID), or of the lease when Domain
// and RuleID are both empty. A put carries the decoded document in
// Assignment or Lease, or, when it could not be decoded, the reason in Err
// (the document is then corrupt).
type Change struct {
	// Domain and RuleID name the rule, as read from the document's key;
	// both empty for the lease.
	Domain, RuleID string
	// Revision is the store revision of the put or delete (etcd
	// ModRevision).
	Revision int64
	// Delete marks a deleted document.
	Delete bool
	// Assignment is the decoded assignment of a put of a rule's document.
	Assignment *Assignment
	// Lease is the decoded lease of a put of the lease.
	Lease *Lease
	// Err says why a put could not be decoded.
	Err error
}

// IsLease reports whether c is about the lease.
func (c *Change) IsLease() bool { return c.Domain == "" && c.RuleID == "" }

// validShare reports whether v is in [0, 1] (NaN is not).
func validShare(v float64) bool { return v >= 0 && v <= 1 }

// validLimit reports whether local out of global is usable: global in
// [0, algorithm.MaxLimit] (0: no integer limits) and local in [0, global].
func validLimit(local, global int64) bool {
	return global >= 0 && global <= algorithm.MaxLimit && local >= 0 && local <= global
}

// limits is a DC's assignment of one rule or key: its share, and its local
// limit out of the global limit apportioned (see Assignment).
type limits struct {
	share         float64
	local, global int64
}

// assignment checks c, a put of a rule's document for dc, and returns its
// rule's limits and its keys' (nil when none).
func (c *Change) assignment(dc string) (limits, map[string]limits, error) {
	if c.Err != nil {
		return limits{}, nil, fmt.Errorf("%w: %w", ErrCorrupt, c.Err)
	}
	a := c.Assignment
	switch {
	case a == nil:
		return limits{}, nil, fmt.Errorf("%w: no assignment in a put", ErrCorrupt)
	case a.DC != dc:
		return limits{}, nil, fmt.Errorf("%w: dc %q in the document of dc %q", ErrCorrupt, a.DC, dc)
	case a.Domain != c.Domain || a.RuleID != c.RuleID:
		return limits{}, nil, fmt.Errorf("%w: rule %s/%s in the document of rule %s/%s", ErrCorrupt, a.Domain, a.RuleID, c.Domain, c.RuleID)
	case !validShare(a.Share):
		return limits{}, nil, fmt.Errorf("%w: share %v not in [0, 1]", ErrCorrupt, a.Share)
	case !validLimit(a.Limit, a.GlobalLimit):
		return limits{}, nil, fmt.Errorf("%w: local limit %d of %d out of range", ErrCorrupt, a.Limit, a.GlobalLimit)
	case len(a.Keys) > MaxKeys:
		return limits{}, nil, fmt.Errorf("%w: %d keys, more than %d", ErrCorrupt, len(a.Keys), MaxKeys)
	}
	rl := limits{a.Share, a.Limit, a.GlobalLimit}
	if len(a.Keys) == 0 {
		return rl, nil, nil
	}
	keys := make(map[string]limits, len(a.Keys))
	for _, k := range a.Keys {
		switch _, dup := keys[k.Key]; {
		case len(k.Key) > MaxKeyLen:
			return limits{}, nil, fmt.Errorf("%w: key of %d bytes, more than %d", ErrCorrupt, len(k.Key), MaxKeyLen)
		case dup:
			return limits{}, nil, fmt.Errorf("%w: key %.64q listed twice", ErrCorrupt, k.Key)
		case !validShare(k.Share):
			return limits{}, nil, fmt.Errorf("%w: share %v of key %.64q not in [0, 1]", ErrCorrupt, k.Share, k.Key)
		case !validLimit(k.Limit, k.GlobalLimit):
			return limits{}, nil, fmt.Errorf("%w: local limit %d of %d of key %.64q out of range", ErrCorrupt, k.Limit, k.GlobalLimit, k.Key)
		}
		keys[k.Key] = limits{k.Share, k.Limit, k.GlobalLimit}
	}
	return rl, keys, nil
}

// lease checks c, a put of the lease of dc.
func (c *Change) lease(dc string) (*Lease, error) {
	if c.Err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, c.Err)
	}
	l := c.Lease
	switch {
	case l == nil:
		return nil, fmt.Errorf("%w: no lease in a put", ErrCorrupt)
	case l.DC != dc:
		return nil, fmt.Errorf("%w: dc %q in the lease of dc %q", ErrCorrupt, l.DC, dc)
	case l.TTL < 0:
		return nil, fmt.Errorf("%w: negative lease TTL %v", ErrCorrupt, l.TTL)
	}
	return l, nil
}
