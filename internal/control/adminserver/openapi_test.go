package adminserver_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/control/adminserver"
	"github.com/weirhq/weir/internal/testkit/deadpeer"
	"github.com/weirhq/weir/internal/testkit/openapitest"
	"github.com/weirhq/weir/pkg/adminapi"
)

// openapiEnvs are the admin APIs TestOpenAPI calls, each behind the
// bearer tokens of withAuth.
type openapiEnvs struct {
	// main leads: its Live answers every live view of api-global-default.
	main *env
	// standby does not lead; it forwards to a leader that does not answer.
	standby *env
	// down has no Live, and its etcd client is closed.
	down *env
}

func newOpenapiEnvs(t *testing.T) openapiEnvs {
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	sl := &seriesLive{memLive: newMemLive(),
		series: map[string]adminapi.Series{"default/api-global-default": {Limit: 100, WindowSeconds: 60, IntervalSeconds: 1,
			DCs: []adminapi.DCSeries{{DC: "us-east", Points: []adminapi.SeriesPoint{{At: at, Demand: 0.5, Target: 0.4, Share: 0.3, Offered: 7, Admitted: 6, Rejected: 1}}}}}},
		overview: adminapi.Overview{IntervalSeconds: 1, Rules: []adminapi.RuleOverview{{Domain: "default", RuleID: "api-global-default", Limit: 100, WindowSeconds: 60,
			DCs: []adminapi.DCOverview{{DC: "us-east", Demand: 0.5, Share: 1, Last: adminapi.Counts{Offered: 3}, Recent: adminapi.Counts{Offered: 9, Admitted: 8, Rejected: 1}}}}}},
		cluster: adminapi.Cluster{Epoch: 3, IntervalSeconds: 1, Coordinators: []adminapi.Coordinator{{Name: "c1", AdminURL: "http://c1:8070", Leader: true}},
			DCs: []adminapi.DCInstances{{DC: "us-east", WrittenRevision: 9, WrittenAt: at,
				Instances: []adminapi.Instance{{Instance: "l1", AppliedRevision: 9, HTTPURL: "http://l1:8080", LastReport: at}}}}},
	}
	sl.stats["default/api-global-default"] = adminapi.RuleStats{TotalRequests: 10, RejectedRequests: 2,
		HotKeys: []adminapi.HotKey{{Key: "1.2.3.4", RequestCount: 6, RejectionCount: 2}},
		DCs:     map[string]adminapi.DCStats{"us-east": {TotalRequests: 10, RejectedRequests: 2}}, LastUpdated: at}
	pin := 0.5
	sl.shares["default/api-global-default"] = []adminapi.DCShare{{DC: "us-east", Demand: 3, Share: 0.6, Target: 0.6, Admitted: 2, Pin: &pin}, {DC: "eu-west", Share: 0.4}}
	sl.keys["default/api-global-default/k1"] = []adminapi.DCKeyStatus{{DC: "us-east", Limit: 100, Remaining: 99, WindowSeconds: 60, ResetTime: at},
		{DC: "eu-west", Error: "no limiter answered"}}

	main := newEnv(t, func(c *adminserver.Config) { c.Live = sl })
	main.create(seedCreate)
	main.create(localRule)
	main.create(loginRule, "domain=shop")
	// A corrupt document with a valid version kept: listed as invalid.
	main.put(main.layout.Rule("shop", "user-login-attempt"), `{"rule_id": "user-login-attempt", "limit": "lots"}`)
	// The same rule id in two domains, neither the default.
	dup := `{"rule_id": "dup", "limit": 1, "window_seconds": 1}`
	main.create(dup, "domain=a")
	main.create(dup, "domain=b")
	withAuth(t, main)

	notLeader := &adminserver.NotLeaderError{Leader: deadpeer.URL(t)} // a leader that does not answer
	ssl := &seriesLive{memLive: newMemLive(), err: notLeader}
	ssl.setErr(notLeader)
	standby := newEnv(t, func(c *adminserver.Config) { c.Live, c.Forward = ssl, http.DefaultTransport })
	standby.create(seedCreate)
	withAuth(t, standby)

	// The closed client's calls retry until the request's deadline.
	broken := newEnv(t, func(c *adminserver.Config) { c.Live, c.Timeout = nil, 100*time.Millisecond })
	broken.cli.Close()
	withAuth(t, broken)
	return openapiEnvs{main: main, standby: standby, down: broken}
}

// TestOpenAPI checks docs/openapi/admin.yaml against the running server:
// the document is valid; each call below is a request the document allows
// (or one it does not, marked bad) and gets a response of a documented
// status with a documented body and headers; every documented status of
// every operation is seen; every route the server registers is
// documented, and every documented operation is served.
func TestOpenAPI(t *testing.T) {
	doc := openapitest.Load(t, "docs/openapi/admin.yaml")
	envs := newOpenapiEnvs(t)
	m, sb, dn := envs.main, envs.standby, envs.down

	type call struct {
		name         string
		e            *env
		method, url  string
		body         string
		token        string // "" for none
		ifMatch      string
		bad          bool // a request the document does not allow
		wantCode     int
		wantInHeader string // a header the answer must carry, if any
	}
	w, r := writerToken, readerToken
	huge := `{"rule_id": "huge", "description": "` + strings.Repeat("x", adminserver.DefaultMaxBodyBytes) + `"}`
	hugePolicy := `{"dcs": {"` + strings.Repeat("x", 70<<10) + `": {}}}`
	newRule := `{"rule_id": "new-rule", "limit": 5, "window_seconds": 60}`
	const rl, rlDup, rlNope = "/rate-limits/api-global-default", "/rate-limits/dup", "/rate-limits/nope"
	calls := []call{
		{"create", m, "POST", "/rate-limits", newRule, w, "", false, 201, "ETag"},
		{"create, malformed", m, "POST", "/rate-limits", `{`, w, "", true, 400, ""},
		{"create, no token", m, "POST", "/rate-limits", newRule, "", "", true, 401, "WWW-Authenticate"},
		{"create, read-only token", m, "POST", "/rate-limits", newRule, r, "", false, 403, "WWW-Authenticate"},
		{"create, exists", m, "POST", "/rate-limits", seedCreate, w, "", false, 409, ""},
		{"create, too large", m, "POST", "/rate-limits", huge, w, "", false, 413, ""},
		{"create, invalid", m, "POST", "/rate-limits", `{"rule_id": "bad", "limit": -1}`, w, "", false, 422, ""},
		{"create, etcd down", dn, "POST", "/rate-limits", newRule, w, "", false, 503, ""},

		{"list", m, "GET", "/rate-limits", "", r, "", false, 200, ""},
		{"list a domain", m, "GET", "/rate-limits?domain=shop", "", r, "", false, 200, ""},
		{"list, bad domain", m, "GET", "/rate-limits?domain=-x", "", r, "", true, 400, ""},
		{"list, no token", m, "GET", "/rate-limits", "", "", "", true, 401, ""},
		{"list, etcd down", dn, "GET", "/rate-limits", "", r, "", false, 503, ""},

		{"get", m, "GET", rl, "", r, "", false, 200, "ETag"},
		{"get, invalid document", m, "GET", "/rate-limits/user-login-attempt?domain=shop", "", r, "", false, 200, adminapi.HeaderInvalidDocument},
		{"get, bad domain", m, "GET", rl + "?domain=-x", "", r, "", true, 400, ""},
		{"get, no token", m, "GET", rl, "", "", "", true, 401, ""},
		{"get, unknown", m, "GET", rlNope, "", r, "", false, 404, ""},
		{"get, ambiguous", m, "GET", rlDup, "", r, "", false, 409, ""},
		{"get, etcd down", dn, "GET", rl, "", r, "", false, 503, ""},

		{"update", m, "PUT", rl, seedUpdate, w, "*", false, 200, "ETag"},
		{"update, malformed", m, "PUT", rl, `{`, w, "", true, 400, ""},
		{"update, no token", m, "PUT", rl, seedUpdate, "", "", true, 401, ""},
		{"update, read-only token", m, "PUT", rl, seedUpdate, r, "", false, 403, ""},
		{"update, unknown", m, "PUT", rlNope, seedUpdate, w, "", false, 404, ""},
		{"update, ambiguous", m, "PUT", rlDup, seedUpdate, w, "", false, 409, ""},
		{"update, stale If-Match", m, "PUT", rl, seedUpdate, w, `"1"`, false, 412, ""},
		{"update, too large", m, "PUT", rl, huge, w, "", false, 413, ""},
		{"update, invalid", m, "PUT", rl, `{"limit": -1}`, w, "", false, 422, ""},
		{"update, etcd down", dn, "PUT", rl, seedUpdate, w, "", false, 503, ""},

		{"delete", m, "DELETE", "/rate-limits/new-rule", "", w, "", false, 200, ""},
		{"delete, bad domain", m, "DELETE", rl + "?domain=-x", "", w, "", true, 400, ""},
		{"delete, no token", m, "DELETE", rl, "", "", "", true, 401, ""},
		{"delete, read-only token", m, "DELETE", rl, "", r, "", false, 403, ""},
		{"delete, unknown", m, "DELETE", rlNope, "", w, "", false, 404, ""},
		{"delete, ambiguous", m, "DELETE", rlDup, "", w, "", false, 409, ""},
		{"delete, stale If-Match", m, "DELETE", rl, "", w, `"1"`, false, 412, ""},
		{"delete, etcd down", dn, "DELETE", rl, "", w, "", false, 503, ""},

		{"stats", m, "GET", rl + "/stats", "", r, "", false, 200, ""},
		{"stats, bad domain", m, "GET", rl + "/stats?domain=-x", "", r, "", true, 400, ""},
		{"stats, no token", m, "GET", rl + "/stats", "", "", "", true, 401, ""},
		{"stats, unknown", m, "GET", rlNope + "/stats", "", r, "", false, 404, ""},
		{"stats, ambiguous", m, "GET", rlDup + "/stats", "", r, "", false, 409, ""},
		{"stats, leader down", sb, "GET", rl + "/stats", "", r, "", false, 502, ""},
		{"stats, etcd down", dn, "GET", rl + "/stats", "", r, "", false, 503, ""},

		{"shares", m, "GET", rl + "/shares", "", r, "", false, 200, "ETag"},
		{"shares, bad domain", m, "GET", rl + "/shares?domain=-x", "", r, "", true, 400, ""},
		{"shares, no token", m, "GET", rl + "/shares", "", "", "", true, 401, ""},
		{"shares, unknown", m, "GET", rlNope + "/shares", "", r, "", false, 404, ""},
		{"shares, ambiguous", m, "GET", rlDup + "/shares", "", r, "", false, 409, ""},
		{"shares, local rule", m, "GET", "/rate-limits/per-dc/shares", "", r, "", false, 422, ""},
		{"shares, leader down", sb, "GET", rl + "/shares", "", r, "", false, 502, ""},
		{"shares, etcd down", dn, "GET", rl + "/shares", "", r, "", false, 503, ""},

		{"put shares", m, "PUT", rl + "/shares", `{"dcs": {"us-east": {"pin": 0.5}, "eu-west": {"floor": 0.1, "ceiling": 0.8}, "ap-south": {"drained": true}}}`, w, `"0"`, false, 200, "ETag"},
		{"put shares, malformed", m, "PUT", rl + "/shares", `{`, w, "", true, 400, ""},
		{"put shares, no token", m, "PUT", rl + "/shares", `{"dcs": {}}`, "", "", true, 401, ""},
		{"put shares, read-only token", m, "PUT", rl + "/shares", `{"dcs": {}}`, r, "", false, 403, ""},
		{"put shares, unknown", m, "PUT", rlNope + "/shares", `{"dcs": {}}`, w, "", false, 404, ""},
		{"put shares, ambiguous", m, "PUT", rlDup + "/shares", `{"dcs": {}}`, w, "", false, 409, ""},
		{"put shares, stale If-Match", m, "PUT", rl + "/shares", `{"dcs": {}}`, w, `"0"`, false, 412, ""},
		{"put shares, too large", m, "PUT", rl + "/shares", hugePolicy, w, "", false, 413, ""},
		{"put shares, unknown DC", m, "PUT", rl + "/shares", `{"dcs": {"mars": {"pin": 0.5}}}`, w, "", false, 422, ""},
		{"put shares, etcd down", dn, "PUT", rl + "/shares", `{"dcs": {}}`, w, "", false, 503, ""},

		{"series", m, "GET", rl + "/series", "", r, "", false, 200, ""},
		{"series, bad domain", m, "GET", rl + "/series?domain=-x", "", r, "", true, 400, ""},
		{"series, no token", m, "GET", rl + "/series", "", "", "", true, 401, ""},
		{"series, unknown", m, "GET", rlNope + "/series", "", r, "", false, 404, ""},
		{"series, ambiguous", m, "GET", rlDup + "/series", "", r, "", false, 409, ""},
		{"series, leader down", sb, "GET", rl + "/series", "", r, "", false, 502, ""},
		{"series, etcd down", dn, "GET", rl + "/series", "", r, "", false, 503, ""},

		{"key", m, "GET", rl + "/k1", "", r, "", false, 200, ""},
		{"key, too long", m, "GET", rl + "/" + strings.Repeat("k", 4097), "", r, "", false, 400, ""},
		{"key, no token", m, "GET", rl + "/k1", "", "", "", true, 401, ""},
		{"key, unknown", m, "GET", rl + "/k2", "", r, "", false, 404, ""},
		{"key, ambiguous", m, "GET", rlDup + "/k1", "", r, "", false, 409, ""},
		{"key, leader down", sb, "GET", rl + "/k1", "", r, "", false, 502, ""},
		{"key, etcd down", dn, "GET", rl + "/k1", "", r, "", false, 503, ""},

		{"audit", m, "GET", "/audit?limit=10&domain=default", "", r, "", false, 200, ""},
		{"audit, bad limit", m, "GET", "/audit?limit=0", "", r, "", true, 400, ""},
		{"audit, no token", m, "GET", "/audit", "", "", "", true, 401, ""},
		{"audit, etcd down", dn, "GET", "/audit", "", r, "", false, 503, ""},

		{"overview", m, "GET", "/overview", "", r, "", false, 200, ""},
		{"overview, bad domain", m, "GET", "/overview?domain=-x", "", r, "", true, 400, ""},
		{"overview, no token", m, "GET", "/overview", "", "", "", true, 401, ""},
		{"overview, leader down", sb, "GET", "/overview", "", r, "", false, 502, ""},
		{"overview, no live view", dn, "GET", "/overview", "", r, "", false, 503, ""},

		{"cluster", m, "GET", "/cluster", "", r, "", false, 200, ""},
		{"cluster, no token", m, "GET", "/cluster", "", "", "", true, 401, ""},
		{"cluster, leader down", sb, "GET", "/cluster", "", r, "", false, 502, ""},
		{"cluster, no live view", dn, "GET", "/cluster", "", r, "", false, 503, ""},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			hdr := http.Header{}
			if c.body != "" {
				hdr.Set("Content-Type", "application/json")
			}
			if c.token != "" {
				hdr.Set("Authorization", "Bearer "+c.token)
			}
			if c.ifMatch != "" {
				hdr.Set("If-Match", c.ifMatch)
			}
			resp := doc.Serve(t, c.e.h, openapitest.Call{Method: c.method, Target: c.url, Header: hdr, Body: c.body, Bad: c.bad, WantCode: c.wantCode})
			if c.wantInHeader != "" && resp.Header.Get(c.wantInHeader) == "" {
				t.Errorf("no %s header, want one", c.wantInHeader)
			}
		})
	}
	doc.CheckSeen(t)
	doc.CheckRoutes(t, m.srv.Routes())
}
