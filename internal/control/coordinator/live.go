package coordinator

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/weirhq/weir/internal/control/planner"
	"github.com/weirhq/weir/pkg/adminapi"
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

// KeyStatus asks one live limiter instance of each DC — at the scheme and
// address it advertises in etcd, with Config.LimiterClient — how much
// quota a key has left under a rule, consuming nothing. A DC that cannot
// answer says why in its Error. ErrNotLeader on a standby (only the leader
// tracks the instances).
func (c *Coordinator) KeyStatus(ctx context.Context, domain, ruleID, key string) ([]adminapi.DCKeyStatus, error) {
	c.mu.Lock()
	acks := c.acks
	c.mu.Unlock()
	if acks == nil {
		return nil, ErrNotLeader
	}
	out := make([]adminapi.DCKeyStatus, len(c.cfg.Planner.DCs))
	var wg sync.WaitGroup
	for i, dc := range c.cfg.Planner.DCs {
		out[i].DC = dc
		urls := acks.urls(dc)
		if len(urls) == 0 {
			out[i].Error = "no live limiter instance advertises an HTTP address"
			continue
		}
		wg.Go(func() {
			if err := c.askStatus(ctx, urls, domain, ruleID, key, &out[i]); err != nil {
				out[i].Error = err.Error()
			}
		})
	}
	wg.Wait()
	return out, nil
}

// httpURL returns the base URL of an instance's HTTP API from the scheme
// and address of its record: an empty scheme (records of limiters that
// predate it) is http. It returns "" for an empty address or a scheme
// other than http and https.
func httpURL(scheme, addr string) string {
	switch {
	case addr == "":
		return ""
	case scheme == "":
		scheme = "http"
	case scheme != "http" && scheme != "https":
		return ""
	}
	return scheme + "://" + addr
}

// limiterStatus is a limiter's answer to GET /v1/rate-limits/{rule}/{key}
// (package httpapi's StatusResponse), as far as the admin API uses it.
type limiterStatus struct {
	Limit         int64  `json:"limit"`
	Remaining     int64  `json:"remaining"`
	WindowSeconds int64  `json:"window_seconds"`
	ResetTime     string `json:"reset_time"` // RFC 3339
}

// askStatus asks the limiters at the base URLs in turn until one answers,
// and fills in st's figures.
func (c *Coordinator) askStatus(ctx context.Context, urls []string, domain, ruleID, key string, st *adminapi.DCKeyStatus) error {
	var last error
	for _, base := range urls {
		u := base + "/v1/rate-limits/" + url.PathEscape(ruleID) + "/" + url.PathEscape(key) + "?domain=" + url.QueryEscape(domain)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		resp, err := c.cfg.LimiterClient.Do(req)
		if err != nil {
			last = limiterError(base, err)
			continue
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if err != nil {
			last = fmt.Errorf("limiter %s: read answer: %w", base, err)
			continue
		}
		if resp.StatusCode != http.StatusOK {
			var e struct {
				Message string `json:"message"`
			}
			_ = json.Unmarshal(body, &e)
			return fmt.Errorf("limiter %s: %s: %s", base, resp.Status, e.Message)
		}
		var ls limiterStatus
		if err := json.Unmarshal(body, &ls); err != nil {
			return fmt.Errorf("limiter %s: decode answer: %w", base, err)
		}
		st.Limit, st.Remaining, st.WindowSeconds = ls.Limit, ls.Remaining, ls.WindowSeconds
		if t, err := time.Parse(time.RFC3339, ls.ResetTime); err == nil {
			st.ResetTime = t
		}
		return nil
	}
	return fmt.Errorf("no limiter answered: %w", last)
}

// limiterError says why a limiter could not be reached, naming the
// remedy when its certificate is not trusted.
func limiterError(base string, err error) error {
	if ue, ok := err.(*url.Error); ok {
		err = ue.Err // the URL is base's, named below
	}
	var cv *tls.CertificateVerificationError
	if errors.As(err, &cv) {
		return fmt.Errorf("limiter %s: its TLS certificate is not trusted (is the CA that signs it among the coordinator's limiter CAs?): %w", base, err)
	}
	return fmt.Errorf("limiter %s: %w", base, err)
}
