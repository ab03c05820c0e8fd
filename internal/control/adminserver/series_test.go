package adminserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/control/adminserver"
	"github.com/weirhq/weir/pkg/adminapi"
)

// seriesLive adds fixed answers of the console's endpoints to a memLive.
type seriesLive struct {
	*memLive
	series   map[string]adminapi.Series
	overview adminapi.Overview
	cluster  adminapi.Cluster
	err      error
}

var _ adminserver.SeriesLive = (*seriesLive)(nil)

func (l *seriesLive) Series(_ context.Context, domain, ruleID string) (adminapi.Series, error) {
	if l.err != nil {
		return adminapi.Series{}, l.err
	}
	s, ok := l.series[domain+"/"+ruleID]
	if !ok {
		return adminapi.Series{}, adminserver.ErrUnknown
	}
	return s, nil
}

func (l *seriesLive) Overview(context.Context) (adminapi.Overview, error) { return l.overview, l.err }
func (l *seriesLive) Cluster(context.Context) (adminapi.Cluster, error)   { return l.cluster, l.err }

func TestSeriesEndpoints(t *testing.T) {
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	sl := &seriesLive{memLive: newMemLive(),
		series: map[string]adminapi.Series{"default/api-global-default": {Limit: 1000, WindowSeconds: 60, IntervalSeconds: 1,
			DCs: []adminapi.DCSeries{{DC: "us-east", Points: []adminapi.SeriesPoint{{At: at, Demand: 0.5, Target: 0.4, Share: 0.3, Offered: 7, Admitted: 6, Rejected: 1}}}, {DC: "eu-west"}}}},
		overview: adminapi.Overview{IntervalSeconds: 1, Rules: []adminapi.RuleOverview{{Domain: "default", RuleID: "a"}, {Domain: "other", RuleID: "b"}}},
		cluster:  adminapi.Cluster{Epoch: 7, Coordinators: []adminapi.Coordinator{{Name: "c1", Leader: true}}, DCs: []adminapi.DCInstances{{DC: "us-east"}}},
	}
	e := newEnv(t, func(c *adminserver.Config) { c.Live = sl })
	e.create(seedCreate)

	for _, tc := range []struct {
		name, path string
		code       int
		body       string
	}{
		{"series", "/rate-limits/api-global-default/series", 200,
			`{"domain":"default","rule_id":"api-global-default","limit":1000,"window_seconds":60,"interval_seconds":1,"dcs":[` +
				`{"dc":"us-east","points":[{"at":"2025-03-01T12:00:00Z","demand":0.5,"target":0.4,"share":0.3,"offered":7,"admitted":6,"rejected":1}]},` +
				`{"dc":"eu-west","points":[]}]}`},
		{"series of a rule not in etcd", "/rate-limits/nope/series", 404, ""},
		{"overview", "/overview", 200, `{"interval_seconds":1,"rules":[{"domain":"default","rule_id":"a","limit":0,"window_seconds":0,"dcs":[]},{"domain":"other","rule_id":"b","limit":0,"window_seconds":0,"dcs":[]}]}`},
		{"overview of a domain", "/overview?domain=other", 200, `{"interval_seconds":1,"rules":[{"domain":"other","rule_id":"b","limit":0,"window_seconds":0,"dcs":[]}]}`},
		{"overview of a bad domain", "/overview?domain=-x", 400, ""},
		{"cluster", "/cluster", 200, `{"coordinators":[{"name":"c1","leader":true}],"epoch":7,"interval_seconds":0,"dcs":[{"dc":"us-east","written_revision":0,"lagging":false,"silent":false,"instances":[]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := e.do("GET", tc.path, "")
			want(t, rec, tc.code)
			if got := strings.TrimSpace(rec.Body.String()); tc.body != "" && got != tc.body {
				t.Errorf("body:\ngot  %s\nwant %s", got, tc.body)
			}
		})
	}

	// A standby names the leader.
	sl.err = &adminserver.NotLeaderError{Leader: "http://leader:8070"}
	for _, path := range []string{"/rate-limits/api-global-default/series", "/overview", "/cluster"} {
		rec := e.do("GET", path, "")
		body := wantError(t, rec, 503, "does not lead")
		if body.Leader != "http://leader:8070" {
			t.Errorf("%s: got leader %q, want http://leader:8070", path, body.Leader)
		}
	}
}

func TestSeriesWithoutSeriesLive(t *testing.T) {
	e := newEnv(t) // memLive answers Stats and Shares only
	e.create(seedCreate)
	for _, path := range []string{"/rate-limits/api-global-default/series", "/overview", "/cluster"} {
		wantError(t, e.do("GET", path, ""), 503, "not available")
	}
}
