package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/weirhq/weir/pkg/sharepolicy"
)

// Stats are a rule's counts (GET /rate-limits/{id}/stats).
type Stats struct {
	RuleID           string  `json:"rule_id"`
	TotalRequests    int64   `json:"total_requests"`
	RejectedRequests int64   `json:"rejected_requests"`
	RejectionRate    float64 `json:"rejection_rate"`
	// HotKeys are the keys with the most requests, in the server's order.
	HotKeys []HotKey `json:"hot_keys"`
	// DCs are the counts of each DC, by DC name.
	DCs         map[string]DCStats `json:"dcs"`
	LastUpdated time.Time          `json:"last_updated,omitzero"`
}

// HotKey is one key's counts.
type HotKey struct {
	Key            string `json:"key"`
	RequestCount   int64  `json:"request_count"`
	RejectionCount int64  `json:"rejection_count"`
}

// DCStats are one DC's counts of a rule.
type DCStats struct {
	TotalRequests    int64 `json:"total_requests"`
	RejectedRequests int64 `json:"rejected_requests"`
}

// Shares are a global rule's live shares and the operator's settings per
// DC (GET /rate-limits/{id}/shares). Shares, demands and settings are
// fractions of the rule's limit.
type Shares struct {
	Domain string    `json:"domain,omitempty"`
	RuleID string    `json:"rule_id"`
	DCs    []DCShare `json:"dcs"`
	// ETag is the revision of the policy, for SetShares' ifMatch.
	ETag string `json:"etag"`
}

// DCShare is one DC's part of a global rule.
type DCShare struct {
	DC string `json:"dc"`
	// Demand is the estimated offered demand; it may exceed 1.
	Demand float64 `json:"demand"`
	// Share is the share written for the DC; Target the share the
	// allocation aims at; Admitted the traffic the DC admitted.
	Share    float64 `json:"share"`
	Target   float64 `json:"target"`
	Admitted float64 `json:"admitted"`
	// Pin, Floor, Ceiling and Drained are the operator's settings, as in
	// sharepolicy.DCPolicy: nil Pin is no pin, 0 Floor and Ceiling none.
	Pin     *float64 `json:"pin"`
	Floor   float64  `json:"floor"`
	Ceiling float64  `json:"ceiling"`
	Drained bool     `json:"drained"`
}

// Policy returns the operator's settings of s as the policy document
// SetShares takes: the DCs with at least one setting.
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

// KeyStatus is a key's remaining quota in every DC (GET
// /rate-limits/{id}/{key}).
type KeyStatus struct {
	Domain string        `json:"domain,omitempty"`
	RuleID string        `json:"rule_id"`
	Key    string        `json:"key"`
	DCs    []DCKeyStatus `json:"dcs"`
}

// DCKeyStatus is a key's quota in one DC.
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

// AuditQuery selects audit records. The zero value asks for the server's
// default number of the latest records of every rule.
type AuditQuery struct {
	// RuleID keeps only the records of this rule; empty keeps all.
	RuleID string
	// Limit is the most records to return; 0 leaves it to the server.
	Limit int
}

// AuditRecord is one change made through the admin API.
type AuditRecord struct {
	// ID names the record; ids sort by time.
	ID     string    `json:"id"`
	Time   time.Time `json:"time"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Domain string    `json:"domain"`
	RuleID string    `json:"rule_id"`
	// Before and After are the documents before and after the change
	// (rules, or share policies); null for none.
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// UnmarshalJSON reads a record whose id is a string or a number.
func (a *AuditRecord) UnmarshalJSON(b []byte) error {
	type plain AuditRecord
	var r struct {
		plain
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return err
	}
	*a = AuditRecord(r.plain)
	a.ID = ""
	if len(r.ID) > 0 && !bytes.Equal(r.ID, []byte("null")) {
		if err := json.Unmarshal(r.ID, &a.ID); err != nil {
			var n json.Number
			if err := json.Unmarshal(r.ID, &n); err != nil {
				return fmt.Errorf("audit record id: want a string or a number, got %s", r.ID)
			}
			a.ID = n.String()
		}
	}
	return nil
}

// Stats returns a rule's counts. A coordinator that does not lead answers
// ErrUnavailable.
func (c *Client) Stats(ctx context.Context, id string) (Stats, error) {
	var out Stats
	if _, err := c.do(ctx, request{method: http.MethodGet, path: []string{"rate-limits", id, "stats"}}, &out); err != nil {
		return Stats{}, fmt.Errorf("get stats of rule %q: %w", id, err)
	}
	return out, nil
}

// Shares returns a global rule's live shares and share settings, per DC.
// When the answer carries no etag in its body, ETag is the answer's ETag
// header.
func (c *Client) Shares(ctx context.Context, id string) (Shares, error) {
	var out Shares
	h, err := c.do(ctx, request{method: http.MethodGet, path: []string{"rate-limits", id, "shares"}}, &out)
	if err != nil {
		return Shares{}, fmt.Errorf("get shares of rule %q: %w", id, err)
	}
	if out.ETag == "" {
		out.ETag = h.Get("ETag")
	}
	return out, nil
}

// SetShares replaces a global rule's share policy with p (a DC p does not
// name has no settings) and returns the policy as stored. ifMatch, the
// ETag of Shares, makes the write conditional: if the policy changed
// since, the server refuses it with ErrPrecondition. Empty writes
// unconditionally.
func (c *Client) SetShares(ctx context.Context, id string, p sharepolicy.Policy, ifMatch string) (sharepolicy.Policy, error) {
	if p.DCs == nil {
		p.DCs = map[string]sharepolicy.DCPolicy{} // "dcs": {} rather than null
	}
	var out sharepolicy.Policy
	req := request{method: http.MethodPut, path: []string{"rate-limits", id, "shares"}, body: p, ifMatch: ifMatch}
	if _, err := c.do(ctx, req, &out); err != nil {
		return sharepolicy.Policy{}, fmt.Errorf("set shares of rule %q: %w", id, err)
	}
	return out, nil
}

// KeyStatus returns a key's remaining quota in each DC, consuming nothing.
// For a composite key, key is the values in key_type order joined by "|"
// (with "|" and "\" escaped by "\"). The key may hold any character; the
// keys "stats" and "shares" cannot be asked for, as the API's paths for
// them name the rule's statistics and shares.
func (c *Client) KeyStatus(ctx context.Context, id, key string) (KeyStatus, error) {
	var out KeyStatus
	if _, err := c.do(ctx, request{method: http.MethodGet, path: []string{"rate-limits", id, key}}, &out); err != nil {
		return KeyStatus{}, fmt.Errorf("get status of key %q of rule %q: %w", key, id, err)
	}
	return out, nil
}

// Audit returns audit records, as the server orders them (latest first).
// When c has a domain, it is sent as a filter too.
func (c *Client) Audit(ctx context.Context, q AuditQuery) ([]AuditRecord, error) {
	v := url.Values{}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.RuleID != "" {
		v.Set("rule_id", q.RuleID)
	}
	var out struct {
		Records []AuditRecord `json:"records"`
	}
	if _, err := c.do(ctx, request{method: http.MethodGet, path: []string{"audit"}, query: v}, &out); err != nil {
		return nil, fmt.Errorf("get audit records: %w", err)
	}
	return out.Records, nil
}
