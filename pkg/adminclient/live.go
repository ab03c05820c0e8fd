package adminclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/weirhq/weir/pkg/adminapi"
	"github.com/weirhq/weir/pkg/sharepolicy"
)

// AuditQuery selects audit records. The zero value asks for the server's
// default number of the latest records of every rule.
type AuditQuery struct {
	// RuleID keeps only the records of this rule; empty keeps all.
	RuleID string
	// Limit is the most records to return; 0 leaves it to the server.
	Limit int
}

// Stats returns a rule's counts. A coordinator that does not lead answers
// ErrUnavailable.
func (c *Client) Stats(ctx context.Context, id string) (adminapi.RuleStats, error) {
	var out adminapi.RuleStats
	if _, err := c.do(ctx, request{method: http.MethodGet, path: []string{"rate-limits", id, "stats"}}, &out); err != nil {
		return adminapi.RuleStats{}, fmt.Errorf("get stats of rule %q: %w", id, err)
	}
	return out, nil
}

// Shares returns a global rule's live shares and share settings, per DC.
// When the answer carries no etag in its body, ETag is the answer's ETag
// header.
func (c *Client) Shares(ctx context.Context, id string) (adminapi.Shares, error) {
	var out adminapi.Shares
	h, err := c.do(ctx, request{method: http.MethodGet, path: []string{"rate-limits", id, "shares"}}, &out)
	if err != nil {
		return adminapi.Shares{}, fmt.Errorf("get shares of rule %q: %w", id, err)
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
func (c *Client) KeyStatus(ctx context.Context, id, key string) (adminapi.KeyStatus, error) {
	var out adminapi.KeyStatus
	if _, err := c.do(ctx, request{method: http.MethodGet, path: []string{"rate-limits", id, key}}, &out); err != nil {
		return adminapi.KeyStatus{}, fmt.Errorf("get status of key %q of rule %q: %w", key, id, err)
	}
	return out, nil
}

// Audit returns audit records, as the server orders them (latest first).
// When c has a domain, it is sent as a filter too.
func (c *Client) Audit(ctx context.Context, q AuditQuery) ([]adminapi.AuditRecord, error) {
	v := url.Values{}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.RuleID != "" {
		v.Set("rule_id", q.RuleID)
	}
	var out adminapi.AuditList
	if _, err := c.do(ctx, request{method: http.MethodGet, path: []string{"audit"}, query: v}, &out); err != nil {
		return nil, fmt.Errorf("get audit records: %w", err)
	}
	return out.Records, nil
}
