package adminapi

import (
	"context"
	"errors"
	"time"
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
	Stats(ctx context.Context, domain, ruleID string) (RuleStats, error)
	// Shares returns the live state of a global rule's shares, one entry
	// per DC, with the policy fields (Pin, Floor, Ceiling, Drained) left
	// zero: the handler fills them from the stored policy. Errors as for
	// Stats.
	Shares(ctx context.Context, domain, ruleID string) ([]DCShare, error)
	// KeyStatus returns a key's status in each DC, consuming nothing.
	// ErrUnknown when the key is not known anywhere (a key that is known
	// but unused should rather be answered with its full limit remaining);
	// otherwise errors as for Stats.
	KeyStatus(ctx context.Context, domain, ruleID, key string) ([]DCKeyStatus, error)
}

// Errors a Live returns; the handlers test them with errors.Is.
var (
	// ErrNotLeader means the coordinator cannot answer because another
	// one leads; the handler answers 503. Return a *NotLeaderError to
	// tell the client where the leader is.
	ErrNotLeader = errors.New("adminapi: not the leader")
	// ErrUnknown means the rule or key is not known to the live view
	// (yet); the handler answers 404.
	ErrUnknown = errors.New("adminapi: unknown to the live view")
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

// RuleStats is the body of GET /rate-limits/{rule_id}/stats, the seed's
// statistics with a per-DC breakdown.
type RuleStats struct {
	// RuleID is set by the handler.
	RuleID           string `json:"rule_id"`
	TotalRequests    int64  `json:"total_requests"`
	RejectedRequests int64  `json:"rejected_requests"`
	// RejectionRate is computed by the handler: RejectedRequests /
	// TotalRequests, 0 when there were none.
	RejectionRate float64 `json:"rejection_rate"`
	// HotKeys are the keys with the most requests, most first. The handler
	// writes nil as [].
	HotKeys []HotKey `json:"hot_keys"`
	// DCs breaks the totals down by DC name. The handler writes nil as {}.
	DCs map[string]DCStats `json:"dcs"`
	// LastUpdated is when the figures were last brought up to date;
	// omitted when zero.
	LastUpdated time.Time `json:"last_updated,omitzero"`
}

// HotKey is one of a rule's busiest keys.
type HotKey struct {
	Key            string `json:"key"`
	RequestCount   int64  `json:"request_count"`
	RejectionCount int64  `json:"rejection_count"`
}

// DCStats is one DC's part of a rule's usage.
type DCStats struct {
	TotalRequests    int64 `json:"total_requests"`
	RejectedRequests int64 `json:"rejected_requests"`
}

// DCShare is one DC's entry in GET /rate-limits/{rule_id}/shares. Demand,
// Target, Share and Admitted are fractions of the rule's limit.
type DCShare struct {
	DC string `json:"dc"`
	// Demand is the DC's estimated demand.
	Demand float64 `json:"demand"`
	// Share is the share in force (written to the DC).
	Share float64 `json:"share"`
	// Target is the share the allocation wants the DC to have.
	Target float64 `json:"target"`
	// Admitted is the traffic the DC admitted over the recent past.
	Admitted float64 `json:"admitted"`
	// Pin, Floor, Ceiling and Drained are the operator's policy for the
	// DC (package sharepolicy), filled in by the handler from etcd; Pin is
	// null when the DC is not pinned.
	Pin     *float64 `json:"pin"`
	Floor   float64  `json:"floor"`
	Ceiling float64  `json:"ceiling"`
	Drained bool     `json:"drained"`
}

// DCKeyStatus is a key's status in one DC, the seed's status body per DC.
type DCKeyStatus struct {
	DC            string    `json:"dc"`
	Limit         int64     `json:"limit"`
	Remaining     int64     `json:"remaining"`
	WindowSeconds int64     `json:"window_seconds"`
	ResetTime     time.Time `json:"reset_time,omitzero"`
	// Error says why the DC could not answer; the other fields are then
	// zero.
	Error string `json:"error,omitempty"`
}
