package adminclient

import (
	"context"
	"fmt"
	"net/http"

	"github.com/weirhq/weir/pkg/adminapi"
	"github.com/weirhq/weir/pkg/rule"
)

// CreateRule creates r (POST /rate-limits) and returns the rule as stored,
// with its created_at. A rule with r's id in the domain gives ErrConflict;
// a rule the server refuses, ErrInvalid with the reason for each field.
func (c *Client) CreateRule(ctx context.Context, r rule.Rule) (rule.Rule, error) {
	var out rule.Rule
	if _, err := c.do(ctx, request{method: http.MethodPost, path: []string{"rate-limits"}, body: r}, &out); err != nil {
		return rule.Rule{}, fmt.Errorf("create rule %q: %w", r.ID, err)
	}
	return out, nil
}

// GetRule returns the rule with the given id and its ETag (the revision it
// was read at, as the server wrote it: "7"), to pass to UpdateRule as
// ifMatch. An unknown rule gives ErrNotFound.
func (c *Client) GetRule(ctx context.Context, id string) (r rule.Rule, etag string, err error) {
	h, err := c.do(ctx, request{method: http.MethodGet, path: []string{"rate-limits", id}}, &r)
	if err != nil {
		return rule.Rule{}, "", fmt.Errorf("get rule %q: %w", id, err)
	}
	return r, h.Get("ETag"), nil
}

// StoredRule is a rule as GetStoredRule returns it.
type StoredRule struct {
	// Rule is the version in force.
	Rule rule.Rule
	// ETag is the stored document's, as GetRule returns it.
	ETag string
	// Invalid, when not empty, says why the stored document is invalid:
	// Rule is then its last valid version, which limiters enforce and
	// coordinators plan until the document is fixed or deleted.
	Invalid string
}

// GetStoredRule is GetRule that also says whether the rule's stored
// document is invalid (adminapi.HeaderInvalidDocument).
func (c *Client) GetStoredRule(ctx context.Context, id string) (StoredRule, error) {
	var out StoredRule
	h, err := c.do(ctx, request{method: http.MethodGet, path: []string{"rate-limits", id}}, &out.Rule)
	if err != nil {
		return StoredRule{}, fmt.Errorf("get rule %q: %w", id, err)
	}
	out.ETag, out.Invalid = h.Get("ETag"), h.Get(adminapi.HeaderInvalidDocument)
	return out, nil
}

// RuleList returns the whole answer of GET /rate-limits: the rules in
// force, as ListRules does, and the rules whose stored document is
// invalid.
func (c *Client) RuleList(ctx context.Context) (adminapi.RuleList, error) {
	var out adminapi.RuleList
	if _, err := c.do(ctx, request{method: http.MethodGet, path: []string{"rate-limits"}}, &out); err != nil {
		return adminapi.RuleList{}, fmt.Errorf("list rules: %w", err)
	}
	return out, nil
}

// ListRules returns every rule of c's domain (GET /rate-limits), in the
// server's order. Without a domain, the server may answer the rules of
// every domain (the coordinator's does), each carrying its domain.
func (c *Client) ListRules(ctx context.Context) ([]rule.Rule, error) {
	var out adminapi.RuleList
	if _, err := c.do(ctx, request{method: http.MethodGet, path: []string{"rate-limits"}}, &out); err != nil {
		return nil, fmt.Errorf("list rules: %w", err)
	}
	return out.Rules, nil
}

// UpdateRule changes some fields of a rule (PUT /rate-limits/{id}) and
// returns the rule as stored. fields are top-level fields of the rule
// document, each replacing the stored one whole ({"limit": 150}); a field
// set to nil (JSON null) is removed and takes its default. ifMatch, an
// ETag from GetRule, makes the update conditional: if the rule changed
// since, the server refuses it with ErrPrecondition. Empty updates
// unconditionally. An invalid result gives ErrInvalid; a write that
// conflicts with the server's state, ErrConflict.
func (c *Client) UpdateRule(ctx context.Context, id string, fields map[string]any, ifMatch string) (rule.Rule, error) {
	if fields == nil {
		fields = map[string]any{}
	}
	var out rule.Rule
	req := request{method: http.MethodPut, path: []string{"rate-limits", id}, body: fields, ifMatch: ifMatch}
	if _, err := c.do(ctx, req, &out); err != nil {
		return rule.Rule{}, fmt.Errorf("update rule %q: %w", id, err)
	}
	return out, nil
}

// DeleteRule deletes a rule and returns the server's confirmation ("Rate
// limit rule 'x' deleted successfully."). An unknown rule gives
// ErrNotFound.
func (c *Client) DeleteRule(ctx context.Context, id string) (message string, err error) {
	var out adminapi.Deleted
	if _, err := c.do(ctx, request{method: http.MethodDelete, path: []string{"rate-limits", id}}, &out); err != nil {
		return "", fmt.Errorf("delete rule %q: %w", id, err)
	}
	return out.Message, nil
}
