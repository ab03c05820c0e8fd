package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/weirhq/weir/internal/control/planner"
)

// Stats returns a rule's recent usage, top hot keys first; ErrNotLeader on
// a standby, and a zero RuleStats for a rule no report mentioned yet.
func (c *Coordinator) Stats(domain, ruleID string, top int) (planner.RuleStats, error) {
	var st planner.RuleStats
	if err := c.view(func(p *planner.Planner) { st, _ = p.RuleStats(domain, ruleID, top) }); err != nil {
		return planner.RuleStats{}, err
	}
	if st.DCs == nil {
		st.DCs = map[string]planner.DCStats{}
	}
	return st, nil
}

// RuleShares returns the leader's view of one global rule, and false when
// the planner has no such rule; ErrNotLeader on a standby.
func (c *Coordinator) RuleShares(domain, ruleID string) (planner.RuleView, bool, error) {
	var views []planner.RuleView
	if err := c.view(func(p *planner.Planner) { views = p.Snapshot() }); err != nil {
		return planner.RuleView{}, false, err
	}
	for _, v := range views {
		if v.Domain == domain && v.RuleID == ruleID {
			return v, true, nil
		}
	}
	return planner.RuleView{}, false, nil
}

// KeyStatus is what one DC's limiter says of a key.
type KeyStatus struct {
	DC            string `json:"dc"`
	Limit         int64  `json:"limit"`
	Remaining     int64  `json:"remaining"`
	WindowSeconds int64  `json:"window_seconds"`
	ResetTime     string `json:"reset_time"`
	// Error says why the DC could not answer; the other fields are then
	// zero.
	Error string `json:"error,omitempty"`
}

// KeyStatus asks one live limiter instance of each DC — through the HTTP
// address it advertises in etcd — how much quota a key has left under a
// rule, consuming nothing. A DC that cannot answer says why in its Error.
// ErrNotLeader on a standby (only the leader tracks the instances).
func (c *Coordinator) KeyStatus(ctx context.Context, domain, ruleID, key string) ([]KeyStatus, error) {
	c.mu.Lock()
	acks := c.acks
	c.mu.Unlock()
	if acks == nil {
		return nil, ErrNotLeader
	}
	out := make([]KeyStatus, len(c.cfg.Planner.DCs))
	var wg sync.WaitGroup
	for i, dc := range c.cfg.Planner.DCs {
		out[i].DC = dc
		addrs := acks.addrs(dc)
		if len(addrs) == 0 {
			out[i].Error = "no live limiter instance advertises an HTTP address"
			continue
		}
		wg.Go(func() {
			if err := askStatus(ctx, addrs, domain, ruleID, key, &out[i]); err != nil {
				out[i].Error = err.Error()
			}
		})
	}
	wg.Wait()
	return out, nil
}

var statusClient = &http.Client{Timeout: 2 * time.Second}

// askStatus tries the addresses in turn until one answers.
func askStatus(ctx context.Context, addrs []string, domain, ruleID, key string, st *KeyStatus) error {
	var last error
	for _, addr := range addrs {
		u := fmt.Sprintf("http://%s/v1/rate-limits/%s/%s?domain=%s", addr, url.PathEscape(ruleID), url.PathEscape(key), url.QueryEscape(domain))
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		resp, err := statusClient.Do(req)
		if err != nil {
			last = err
			continue
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if err != nil {
			last = err
			continue
		}
		if resp.StatusCode != http.StatusOK {
			var e struct {
				Message string `json:"message"`
			}
			_ = json.Unmarshal(body, &e)
			return fmt.Errorf("limiter %s: %s: %s", addr, resp.Status, e.Message)
		}
		if err := json.Unmarshal(body, st); err != nil {
			return fmt.Errorf("limiter %s: %w", addr, err)
		}
		return nil
	}
	return fmt.Errorf("no limiter answered: %w", last)
}
