package adminapi

import (
	"time"

	"github.com/weirhq/weir/pkg/sharepolicy"
)

// RuleStats is the body of GET /rate-limits/{rule_id}/stats: the seed's
// statistics of a rule over the recent past, with a per-DC breakdown.
type RuleStats struct {
	RuleID           string `json:"rule_id"`
	TotalRequests    int64  `json:"total_requests"`
	RejectedRequests int64  `json:"rejected_requests"`
	// RejectionRate is RejectedRequests / TotalRequests, 0 when there
	// were none.
	RejectionRate float64 `json:"rejection_rate"`
	// HotKeys are the keys with the most requests, most first; the server
	// writes none as [].
	HotKeys []HotKey `json:"hot_keys"`
	// DCs breaks the totals down by DC name; the server writes none as {}.
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

// Shares is the body of GET /rate-limits/{rule_id}/shares: a global rule's
// live shares and the operator's settings, one entry per DC.
type Shares struct {
	Domain string    `json:"domain"`
	RuleID string    `json:"rule_id"`
	DCs    []DCShare `json:"dcs"`
	// ETag is the entity tag of the stored policy ("0" when there is
	// none), for If-Match on PUT /rate-limits/{rule_id}/shares; also sent
	// as the ETag header.
	ETag string `json:"etag"`
}

// DCShare is one DC's entry in Shares. Demand, Share, Target, Admitted,
// Floor and Ceiling are fractions of the rule's limit.
type DCShare struct {
	DC string `json:"dc"`
	// Demand is the DC's estimated offered demand; it may exceed 1.
	Demand float64 `json:"demand"`
	// Share is the share in force (written to the DC).
	Share float64 `json:"share"`
	// Target is the share the allocation wants the DC to have.
	Target float64 `json:"target"`
	// Admitted is the traffic the DC admitted over the recent past.
	Admitted float64 `json:"admitted"`
	// Pin, Floor, Ceiling and Drained are the operator's policy for the
	// DC, as in sharepolicy.DCPolicy: Pin is null when the DC is not
	// pinned, 0 Floor and Ceiling are none.
	Pin     *float64 `json:"pin"`
	Floor   float64  `json:"floor"`
	Ceiling float64  `json:"ceiling"`
	Drained bool     `json:"drained"`
}

// Policy returns the operator's settings of s as the policy document PUT
// /rate-limits/{rule_id}/shares takes: the DCs with at least one setting.
func (s Shares) Policy() sharepolicy.Policy {
	p := sharepolicy.Policy{DCs: map[string]sharepolicy.DCPolicy{}}
	for _, d := range s.DCs {
		dp := sharepolicy.DCPolicy{Floor: d.Floor, Ceiling: d.Ceiling, Drained: d.Drained}
		if d.Pin != nil {
			v := *d.Pin
			dp.Pin = &v
		}
		if dp.Pin != nil || dp.Floor != 0 || dp.Ceiling != 0 || dp.Drained {
			p.DCs[d.DC] = dp
		}
	}
	return p
}

// KeyStatus is the body of GET /rate-limits/{rule_id}/{key}: the seed's
// status of a key, per DC, as each DC's limiters answer it (consuming
// nothing).
type KeyStatus struct {
	Domain string        `json:"domain"`
	RuleID string        `json:"rule_id"`
	Key    string        `json:"key"`
	DCs    []DCKeyStatus `json:"dcs"`
}

// DCKeyStatus is a key's status in one DC.
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
