package adminclient

import (
	"context"
	"fmt"
	"net/http"

	"github.com/weirhq/weir/pkg/adminapi"
)

// Series returns a global rule's recent history, a point per planning
// interval per DC. A coordinator that does not lead answers
// ErrUnavailable.
func (c *Client) Series(ctx context.Context, id string) (adminapi.Series, error) {
	var out adminapi.Series
	if _, err := c.do(ctx, request{method: http.MethodGet, path: []string{"rate-limits", id, "series"}}, &out); err != nil {
		return adminapi.Series{}, fmt.Errorf("get series of rule %q: %w", id, err)
	}
	return out, nil
}

// Overview returns every global rule's latest state, of every domain.
func (c *Client) Overview(ctx context.Context) (adminapi.Overview, error) {
	var out adminapi.Overview
	if _, err := c.do(ctx, request{method: http.MethodGet, path: []string{"overview"}}, &out); err != nil {
		return adminapi.Overview{}, fmt.Errorf("get overview: %w", err)
	}
	return out, nil
}

// Cluster returns the coordinators and each DC's limiter instances.
func (c *Client) Cluster(ctx context.Context) (adminapi.Cluster, error) {
	var out adminapi.Cluster
	if _, err := c.do(ctx, request{method: http.MethodGet, path: []string{"cluster"}}, &out); err != nil {
		return adminapi.Cluster{}, fmt.Errorf("get cluster: %w", err)
	}
	return out, nil
}
