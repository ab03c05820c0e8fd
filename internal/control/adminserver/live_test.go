package adminserver_test

import (
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/control/adminserver"
	"github.com/weirhq/weir/pkg/adminapi"
	"github.com/weirhq/weir/pkg/sharepolicy"
)

func ptr(f float64) *float64 { return &f }

func TestShares(t *testing.T) {
	e := newEnv(t)
	e.create(seedCreate)
	e.create(localRule)
	e.live.shares["default/api-global-default"] = []adminapi.DCShare{
		{DC: "us-east", Demand: 0.6, Share: 0.5, Target: 0.55, Admitted: 0.45},
		{DC: "eu-west", Demand: 0.3, Share: 0.3, Target: 0.3, Admitted: 0.28},
		{DC: "ap-south", Demand: 0.1, Share: 0.2, Target: 0.15, Admitted: 0.1},
	}
	const path = "/rate-limits/api-global-default/shares"

	// Without a policy: Live's view, no settings, tag "0".
	rec := e.do("GET", path, "")
	want(t, rec, 200)
	if got := rec.Header().Get("ETag"); got != `"0"` {
		t.Errorf("ETag without a policy: got %s, want \"0\"", got)
	}
	wantBody := `{"domain":"default","rule_id":"api-global-default","dcs":[` +
		`{"dc":"us-east","demand":0.6,"share":0.5,"target":0.55,"admitted":0.45,"pin":null,"floor":0,"ceiling":0,"drained":false},` +
		`{"dc":"eu-west","demand":0.3,"share":0.3,"target":0.3,"admitted":0.28,"pin":null,"floor":0,"ceiling":0,"drained":false},` +
		`{"dc":"ap-south","demand":0.1,"share":0.2,"target":0.15,"admitted":0.1,"pin":null,"floor":0,"ceiling":0,"drained":false}],"etag":"\"0\""}`
	if got := strings.TrimSpace(rec.Body.String()); got != wantBody {
		t.Errorf("body:\ngot  %s\nwant %s", got, wantBody)
	}

	// Put a policy, on condition that there is none yet.
	policy := `{"dcs": {"eu-west": {"pin": 0.25}, "us-east": {"floor": 0.1, "ceiling": 0.8}, "ap-south": {"drained": true}}}`
	rec = e.do("PUT", path, policy, "If-Match", `"0"`)
	want(t, rec, 200)
	stored, rev := e.get(e.layout.Policy("default", "api-global-default"))
	if got := strings.TrimSpace(rec.Body.String()); got != stored {
		t.Errorf("answer %s, stored %s", got, stored)
	}
	pol, err := sharepolicy.Decode([]byte(stored))
	if err != nil {
		t.Fatalf("the stored policy does not decode: %v", err)
	}
	wantPol := sharepolicy.Policy{DCs: map[string]sharepolicy.DCPolicy{
		"eu-west": {Pin: ptr(0.25)}, "us-east": {Floor: 0.1, Ceiling: 0.8}, "ap-south": {Drained: true}}}
	if !reflect.DeepEqual(pol, wantPol) {
		t.Errorf("stored policy: got %+v, want %+v", pol, wantPol)
	}
	tag := `"` + strconv.FormatInt(rev, 10) + `"`
	if got := rec.Header().Get("ETag"); got != tag {
		t.Errorf("ETag: got %s, want %s", got, tag)
	}

	// GET merges it in.
	rec = e.do("GET", path, "")
	want(t, rec, 200)
	var sh adminapi.Shares
	if err := jsonDecode(rec.Body.Bytes(), &sh); err != nil {
		t.Fatal(err)
	}
	if sh.ETag != tag || rec.Header().Get("ETag") != tag {
		t.Errorf("etag: got %s and header %s, want %s", sh.ETag, rec.Header().Get("ETag"), tag)
	}
	wantDCs := []adminapi.DCShare{
		{DC: "us-east", Demand: 0.6, Share: 0.5, Target: 0.55, Admitted: 0.45, Floor: 0.1, Ceiling: 0.8},
		{DC: "eu-west", Demand: 0.3, Share: 0.3, Target: 0.3, Admitted: 0.28, Pin: ptr(0.25)},
		{DC: "ap-south", Demand: 0.1, Share: 0.2, Target: 0.15, Admitted: 0.1, Drained: true},
	}
	if !reflect.DeepEqual(sh.DCs, wantDCs) {
		t.Errorf("dcs:\ngot  %+v\nwant %+v", sh.DCs, wantDCs)
	}

	// Preconditions.
	wantError(t, e.do("PUT", path, `{"dcs": {}}`, "If-Match", `"0"`), 412, "")
	wantError(t, e.do("PUT", path, `{"dcs": {}}`, "If-Match", `"1"`), 412, "")
	rec = e.do("PUT", path, `{"dcs": {}}`, "If-Match", tag)
	want(t, rec, 200)
	if got := strings.TrimSpace(rec.Body.String()); got != `{"dcs":{}}` {
		t.Errorf("emptied policy: got %s", got)
	}
	want(t, e.do("PUT", path, `{}`, "If-Match", "*"), 200)
	if got, _ := e.get(e.layout.Policy("default", "api-global-default")); got != `{"dcs":{}}` {
		t.Errorf("a policy without dcs is stored as %s, want {\"dcs\":{}}", got)
	}

	// Errors. A policy's own problems are listed field by field, repeated
	// keys at any level included.
	tests := []struct {
		name, target, body string
		code               int
		msg                string
		fields             []adminapi.FieldError
	}{
		{"unknown DC", path, `{"dcs": {"mars": {"pin": 0.5}}}`, 422, `unknown DC "mars"`, nil},
		{"pin out of range", path, `{"dcs": {"us-east": {"pin": 1.5}}}`, 422, "sharepolicy: invalid share policy", nil},
		{"pins over 1", path, `{"dcs": {"us-east": {"pin": 0.6}, "eu-west": {"pin": 0.6}}}`, 422, "sharepolicy: invalid share policy", nil},
		{"unknown field", path, `{"dcs": {"us-east": {"weight": 1}}}`, 422, "invalid share policy", []adminapi.FieldError{
			{Field: "dcs.us-east.weight", Reason: "unknown field (want pin, floor, ceiling or drained)"}}},
		{"wrong type", path, `{"dcs": []}`, 422, "invalid share policy", []adminapi.FieldError{
			{Field: "dcs", Reason: "want an object of DC settings, got a list"}}},
		{"repeated pin", path, `{"dcs": {"us-east": {"pin": 0.9, "pin": 0.1}}}`, 422, "invalid share policy", []adminapi.FieldError{
			{Field: "dcs.us-east.pin", Reason: "appears more than once"}}},
		{"repeated DC", path, `{"dcs": {"us-east": {"pin": 0.9}, "us-east": {"drained": true}}}`, 422, "invalid share policy", []adminapi.FieldError{
			{Field: "dcs.us-east", Reason: "appears more than once"}}},
		{"repeated dcs", path, `{"dcs": {"us-east": {"pin": 0.9}}, "dcs": {}}`, 422, "invalid share policy", []adminapi.FieldError{
			{Field: "dcs", Reason: "appears more than once"}}},
		{"pin below floor", path, `{"dcs": {"us-east": {"pin": 0.5, "floor": 0.6}}}`, 422, "invalid share policy", []adminapi.FieldError{
			{Field: "dcs.us-east.floor", Reason: "floor 0.6 is above the pin 0.5: a pinned DC's share is its pin"}}},
		{"pin above ceiling", path, `{"dcs": {"us-east": {"pin": 0.5, "ceiling": 0.4}}}`, 422, "invalid share policy", []adminapi.FieldError{
			{Field: "dcs.us-east.ceiling", Reason: "ceiling 0.4 is below the pin 0.5: a pinned DC's share is its pin"}}},
		{"two DCs' pins outside their bounds", path, `{"dcs": {"us-east": {"pin": 0.5, "ceiling": 0.4}, "eu-west": {"pin": 0.2, "floor": 0.3}}}`, 422, "invalid share policy", []adminapi.FieldError{
			{Field: "dcs.eu-west.floor", Reason: "floor 0.3 is above the pin 0.2: a pinned DC's share is its pin"},
			{Field: "dcs.us-east.ceiling", Reason: "ceiling 0.4 is below the pin 0.5: a pinned DC's share is its pin"}}},
		{"trailing data", path, `{"dcs": {}} {}`, 400, "malformed JSON", nil},
		{"malformed", path, `{"dcs": `, 400, "malformed JSON", nil},
		{"too large", path, `{"dcs": {}, "x": "` + strings.Repeat("x", sharepolicy.MaxBytes) + `"}`, 413, "at most 65536", nil},
		{"local rule", "/rate-limits/per-dc/shares", `{"dcs": {}}`, 422, `has scope "local"`, nil},
		{"unknown rule", "/rate-limits/nope/shares", `{"dcs": {}}`, 404, "not found", nil},
		{"unknown domain", path + "?domain=shop", `{"dcs": {}}`, 404, "not found", nil},
	}
	_, rev = e.get(e.layout.Policy("default", "api-global-default"))
	for _, tt := range tests {
		t.Run("PUT "+tt.name, func(t *testing.T) {
			body := wantError(t, e.do("PUT", tt.target, tt.body), tt.code, tt.msg)
			if !reflect.DeepEqual(body.Fields, tt.fields) {
				t.Errorf("fields:\ngot  %+v\nwant %+v", body.Fields, tt.fields)
			}
		})
	}
	if _, r := e.get(e.layout.Policy("default", "api-global-default")); r != rev {
		t.Errorf("a refused policy was written: revision %d, want %d", r, rev)
	}
	wantError(t, e.do("GET", "/rate-limits/per-dc/shares", ""), 422, "only global rules have shares")
	wantError(t, e.do("GET", "/rate-limits/nope/shares", ""), 404, "not found")
	e.create(loginRule)
	wantError(t, e.do("GET", "/rate-limits/user-login-attempt/shares", ""), 404, "no live data")

	// A rule whose scope becomes local keeps its policy but cannot take
	// another.
	want(t, e.do("PUT", "/rate-limits/api-global-default", `{"scope": "local"}`), 200)
	wantError(t, e.do("PUT", path, `{"dcs": {}}`), 422, "only global rules")
}

// TestSharesAllZero checks that a policy leaving every DC a share of 0 —
// every DC drained or pinned at 0, so that the rule rejects every request
// everywhere — is accepted, as the way to stop a rule's traffic, and that
// the answer says so in its Weir-Warning header, as no other policy's
// does. A drain over a DC's other settings is accepted: it overrides
// them until it is lifted.
func TestSharesAllZero(t *testing.T) {
	e := newEnv(t)
	e.create(seedCreate)
	const path = "/rate-limits/api-global-default/shares"
	tests := []struct {
		name, body string
		warn       bool
	}{
		{"every DC drained", `{"dcs": {"us-east": {"drained": true}, "eu-west": {"drained": true}, "ap-south": {"drained": true}}}`, true},
		{"drained or pinned at 0", `{"dcs": {"us-east": {"drained": true, "pin": 0.3, "floor": 0.2}, "eu-west": {"pin": 0}, "ap-south": {"drained": true, "ceiling": 0.4}}}`, true},
		{"one DC left", `{"dcs": {"us-east": {"drained": true}, "eu-west": {"drained": true}}}`, false},
		{"one DC pinned above 0", `{"dcs": {"us-east": {"drained": true}, "eu-west": {"drained": true}, "ap-south": {"pin": 0.1}}}`, false},
		{"pin between floor and ceiling", `{"dcs": {"us-east": {"pin": 0.5, "floor": 0.5, "ceiling": 0.6}}}`, false},
		{"empty", `{"dcs": {}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := e.do("PUT", path, tt.body)
			want(t, rec, 200)
			got := rec.Header().Get(adminapi.HeaderWarning)
			if tt.warn && !strings.Contains(got, "rejects every request in every DC") {
				t.Errorf("warning: got %q, want one saying the rule rejects every request", got)
			}
			if !tt.warn && got != "" {
				t.Errorf("warning: got %q, want none", got)
			}
		})
	}
}

func TestLiveErrors(t *testing.T) {
	e := newEnv(t)
	e.create(seedCreate)
	e.live.stats["default/api-global-default"] = adminapi.RuleStats{}
	e.live.shares["default/api-global-default"] = nil
	e.live.keys["default/api-global-default/1.2.3.4"] = nil
	paths := []string{
		"/rate-limits/api-global-default/stats",
		"/rate-limits/api-global-default/shares",
		"/rate-limits/api-global-default/1.2.3.4",
	}
	for _, p := range paths {
		want(t, e.do("GET", p, ""), 200)
	}
	tests := []struct {
		name     string
		err      error
		code     int
		msg      string
		leader   string
		location string
	}{
		{"not the leader, leader known", &adminserver.NotLeaderError{Leader: "https://coord-2:9090/"}, 503, "does not lead", "https://coord-2:9090/", "https://coord-2:9090"},
		{"not the leader, leader unknown", &adminserver.NotLeaderError{}, 503, "does not lead", "", ""},
		{"not the leader, bare", adminserver.ErrNotLeader, 503, "does not lead", "", ""},
		{"unknown", adminserver.ErrUnknown, 404, "no live data", "", ""},
		{"failure", errors.New("limiters unreachable"), 503, "unavailable", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.live.setErr(tt.err)
			defer e.live.setErr(nil)
			for _, p := range paths {
				rec := e.do("GET", p+"?x=1", "")
				body := wantError(t, rec, tt.code, tt.msg)
				if body.Leader != tt.leader {
					t.Errorf("%s: leader: got %q, want %q", p, body.Leader, tt.leader)
				}
				wantLoc := ""
				if tt.location != "" {
					wantLoc = tt.location + p + "?x=1"
				}
				if got := rec.Header().Get("Location"); got != wantLoc {
					t.Errorf("%s: Location: got %q, want %q", p, got, wantLoc)
				}
			}
		})
	}
	if !strings.Contains(e.logs.String(), "limiters unreachable") {
		t.Errorf("the cause of a 503 was not logged")
	}
}

func TestNoLive(t *testing.T) {
	e := newEnv(t, func(c *adminserver.Config) { c.Live = nil })
	e.create(seedCreate)
	for _, p := range []string{"/stats", "/shares", "/some-key"} {
		wantError(t, e.do("GET", "/rate-limits/api-global-default"+p, ""), 503, "live data is not available")
	}
	// Policies are etcd's, not Live's.
	want(t, e.do("PUT", "/rate-limits/api-global-default/shares", `{"dcs": {"us-east": {"pin": 0.5}}}`), 200)
}

func TestStats(t *testing.T) {
	e := newEnv(t)
	e.create(seedCreate)
	e.create(loginRule, "domain=shop")
	e.live.stats["default/api-global-default"] = adminapi.RuleStats{
		TotalRequests: 10000, RejectedRequests: 500, RejectionRate: 0.9, // the handler computes the rate
		HotKeys:     []adminapi.HotKey{{Key: "192.168.1.1", RequestCount: 1200, RejectionCount: 100}, {Key: "192.168.1.2", RequestCount: 800, RejectionCount: 50}},
		DCs:         map[string]adminapi.DCStats{"us-east": {TotalRequests: 6000, RejectedRequests: 400}, "eu-west": {TotalRequests: 4000, RejectedRequests: 100}},
		LastUpdated: time.Date(2023, 8, 25, 12, 0, 0, 0, time.UTC),
	}
	e.live.stats["shop/user-login-attempt"] = adminapi.RuleStats{}
	rec := e.do("GET", "/rate-limits/api-global-default/stats", "")
	want(t, rec, 200)
	// Seed 003's body, with the per-DC breakdown.
	wantBody := `{"rule_id":"api-global-default","total_requests":10000,"rejected_requests":500,"rejection_rate":0.05,` +
		`"hot_keys":[{"key":"192.168.1.1","request_count":1200,"rejection_count":100},{"key":"192.168.1.2","request_count":800,"rejection_count":50}],` +
		`"dcs":{"eu-west":{"total_requests":4000,"rejected_requests":100},"us-east":{"total_requests":6000,"rejected_requests":400}},` +
		`"last_updated":"2023-08-25T12:00:00Z"}`
	if got := strings.TrimSpace(rec.Body.String()); got != wantBody {
		t.Errorf("body:\ngot  %s\nwant %s", got, wantBody)
	}
	rec = e.do("GET", "/rate-limits/user-login-attempt/stats?domain=shop", "")
	want(t, rec, 200)
	if got, want := strings.TrimSpace(rec.Body.String()), `{"rule_id":"user-login-attempt","total_requests":0,"rejected_requests":0,"rejection_rate":0,"hot_keys":[],"dcs":{}}`; got != want {
		t.Errorf("no traffic:\ngot  %s\nwant %s", got, want)
	}
	wantError(t, e.do("GET", "/rate-limits/user-login-attempt/stats?domain=default", ""), 404, "not found in domain 'default'")
	wantError(t, e.do("GET", "/rate-limits/nope/stats", ""), 404, "not found")
}

func TestKeyStatus(t *testing.T) {
	e := newEnv(t)
	e.create(loginRule)
	reset := time.Date(2023, 8, 25, 10, 5, 0, 0, time.UTC)
	e.live.keys["default/user-login-attempt/john_doe"] = []adminapi.DCKeyStatus{
		{DC: "us-east", Limit: 5, Remaining: 3, WindowSeconds: 300, ResetTime: reset},
		{DC: "eu-west", Error: "redis unavailable"},
	}
	e.live.keys["default/user-login-attempt/a/b c"] = []adminapi.DCKeyStatus{{DC: "us-east", Limit: 5, Remaining: 5, WindowSeconds: 300, ResetTime: reset}}
	rec := e.do("GET", "/rate-limits/user-login-attempt/john_doe", "")
	want(t, rec, 200)
	wantBody := `{"domain":"default","rule_id":"user-login-attempt","key":"john_doe","dcs":[` +
		`{"dc":"us-east","limit":5,"remaining":3,"window_seconds":300,"reset_time":"2023-08-25T10:05:00Z"},` +
		`{"dc":"eu-west","limit":0,"remaining":0,"window_seconds":0,"error":"redis unavailable"}]}`
	if got := strings.TrimSpace(rec.Body.String()); got != wantBody {
		t.Errorf("body:\ngot  %s\nwant %s", got, wantBody)
	}
	rec = e.do("GET", "/rate-limits/user-login-attempt/a/b%20c", "")
	want(t, rec, 200)
	if m := decode(t, rec); m["key"] != "a/b c" {
		t.Errorf("key: got %v, want \"a/b c\"", m["key"])
	}
	wantError(t, e.do("GET", "/rate-limits/user-login-attempt/jane", ""), 404, "no live data for key 'jane'")
	wantError(t, e.do("GET", "/rate-limits/nope/john_doe", ""), 404, "rule 'nope' not found")
	wantError(t, e.do("GET", "/rate-limits/user-login-attempt/", ""), 404, "no key given")
	wantError(t, e.do("GET", "/rate-limits/user-login-attempt/"+strings.Repeat("k", 4097), ""), 400, "key longer than 4096")
	wantError(t, e.do("DELETE", "/rate-limits/user-login-attempt/john_doe", ""), http.StatusMethodNotAllowed, "not allowed")
}
