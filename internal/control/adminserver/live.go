package adminserver

import (
	"context"
	"errors"

	"github.com/weirhq/weir/pkg/adminapi"
)

// Live answers for a coordinator's live view of the traffic: what the
// limiters report and what the leader allocates. The coordinator implements
// it; the admin API only reads through it.
//
// Implementations must be safe for concurrent use and should return within
// ctx's deadline. The handlers have already checked that the rule exists in
// etcd; domain and ruleID are valid names.
type Live interface {
	// Stats returns the usage of a rule over the recent past, in total and
	// per DC. ErrUnknown (wrapped or not) when there is nothing known about
	// the rule; ErrNotLeader, or a *NotLeaderError naming the leader, when
	// this coordinator cannot answer.
	Stats(ctx context.Context, domain, ruleID string) (adminapi.RuleStats, error)
	// Shares returns the live state of a global rule's shares, one entry
	// per DC, with the policy fields (Pin, Floor, Ceiling, Drained) left
	// zero: the handler fills them from the stored policy. Errors as for
	// Stats.
	Shares(ctx context.Context, domain, ruleID string) ([]adminapi.DCShare, error)
	// KeyStatus returns a key's status in each DC, consuming nothing.
	// ErrUnknown when the key is not known anywhere (a key that is known
	// but unused should rather be answered with its full limit remaining);
	// otherwise errors as for Stats.
	KeyStatus(ctx context.Context, domain, ruleID, key string) ([]adminapi.DCKeyStatus, error)
}

// Errors a Live returns; the handlers test them with errors.Is.
var (
	// ErrNotLeader means the coordinator cannot answer because another
	// one leads; the handler answers 503. Return a *NotLeaderError to
	// tell the client where the leader is.
	ErrNotLeader = errors.New("adminserver: not the leader")
	// ErrUnknown means the rule or key is not known to the live view
	// (yet); the handler answers 404.
	ErrUnknown = errors.New("adminserver: unknown to the live view")
)

// NotLeaderError is an ErrNotLeader that knows the leader's admin URL. The
// handler answers 503 with the URL in the body's "leader" field and a
// Location header pointing at the same path on the leader.
type NotLeaderError struct {
	// Leader is the base URL of the leader's admin API (such as
	// "https://coord-2.example:9090"); empty if unknown.
	Leader string
}

// Error says who leads.
func (e *NotLeaderError) Error() string {
	if e.Leader == "" {
		return ErrNotLeader.Error()
	}
	return ErrNotLeader.Error() + "; the leader is at " + e.Leader
}

// Is reports whether target is ErrNotLeader.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }
