package adminserver_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/control/adminserver"
	"github.com/weirhq/weir/pkg/adminapi"
	"github.com/weirhq/weir/pkg/rule"
)

func TestCreateSeedRule(t *testing.T) {
	e := newEnv(t)
	rec := e.create(seedCreate)

	// The seed's response, with the defaults and bookkeeping written out.
	wantBody := `{"rule_id":"api-global-default","domain":"default","path_pattern":"/api/v1/**","key_type":"ip",` +
		`"limit":100,"window_seconds":60,"algorithm":"SlidingWindowCounter","scope":"global","failure_mode":"local",` +
		`"enabled":true,"retry_advice":"retry_after","created_at":"2023-08-25T10:00:00Z","updated_at":"2023-08-25T10:00:00Z"}`
	if got := strings.TrimSpace(rec.Body.String()); got != wantBody {
		t.Errorf("body:\ngot  %s\nwant %s", got, wantBody)
	}
	stored, rev := e.get(e.layout.Rule("default", "api-global-default"))
	if stored != wantBody {
		t.Errorf("stored:\ngot  %s\nwant %s", stored, wantBody)
	}
	if got, want := rec.Header().Get("ETag"), `"`+strconv.FormatInt(rev, 10)+`"`; got != want {
		t.Errorf("ETag: got %s, want %s", got, want)
	}
	if got, want := rec.Header().Get("Location"), "/rate-limits/api-global-default"; got != want {
		t.Errorf("Location: got %q, want %q", got, want)
	}

	// Again: 409, nothing changed.
	e.clock.Advance(time.Hour)
	wantError(t, e.do("POST", "/rate-limits", seedCreate), http.StatusConflict, "already exists")
	if s, r := e.get(e.layout.Rule("default", "api-global-default")); s != stored || r != rev {
		t.Errorf("a refused create changed the rule")
	}
	// The same id in another domain is another rule.
	rec = e.create(seedCreate, "domain=shop")
	if got, want := rec.Header().Get("Location"), "/rate-limits/api-global-default?domain=shop"; got != want {
		t.Errorf("Location: got %q, want %q", got, want)
	}
	if s, _ := e.get(e.layout.Rule("shop", "api-global-default")); !strings.Contains(s, `"domain":"shop"`) {
		t.Errorf("stored in shop: got %s", s)
	}
	// A domain in the body.
	e.create(`{"rule_id": "r", "domain": "mail", "limit": 1, "window_seconds": 1}`)
	e.create(`{"rule_id": "r2", "domain": "mail", "limit": 1, "window_seconds": 1}`, "domain=mail")
	if s, _ := e.get(e.layout.Rule("mail", "r")); s == "" {
		t.Errorf("the rule with a domain in its body is not stored in that domain")
	}
	// Times given in the body are the control plane's to set.
	rec = e.create(`{"rule_id": "timed", "limit": 1, "window_seconds": 1, "created_at": "2001-01-01T00:00:00Z", "updated_at": "2001-01-01T00:00:00Z"}`)
	if m := decode(t, rec); m["created_at"] != "2023-08-25T11:00:00Z" || m["updated_at"] != "2023-08-25T11:00:00Z" {
		t.Errorf("times: got %v and %v, want the clock's", m["created_at"], m["updated_at"])
	}
}

func TestCreateErrors(t *testing.T) {
	e := newEnv(t, func(c *adminserver.Config) { c.MaxBodyBytes = 1000 })
	invalid := `{"rule_id": "bad rule", "limit": -1, "algorithm": "Magic", "colour": "red"}`
	_, parseErr := rule.ParseRule([]byte(invalid))
	var ve *rule.ValidationError
	if !errors.As(parseErr, &ve) {
		t.Fatal(parseErr)
	}
	var allFields []adminapi.FieldError
	for _, fe := range ve.Errors {
		allFields = append(allFields, adminapi.FieldError{Field: fe.Path, Reason: fe.Reason})
	}
	tests := []struct {
		name   string
		query  string
		body   string
		hdr    []string
		code   int
		msg    string
		fields []adminapi.FieldError
	}{
		{"every problem reported", "", invalid, nil, 422, "invalid rule", allFields},
		{"seed update body is no rule", "", seedUpdate, nil, 422, "invalid rule", []adminapi.FieldError{{Field: "rule_id", Reason: "required"}}},
		{"not an object", "", `[1, 2]`, nil, 422, "invalid rule", []adminapi.FieldError{{Field: "", Reason: "want an object, got a list"}}},
		{"domain disagrees with the query", "domain=shop", `{"rule_id": "r", "domain": "mail", "limit": 1, "window_seconds": 1}`, nil, 422, "invalid rule",
			[]adminapi.FieldError{{Field: "domain", Reason: "does not match ?domain=shop"}}},
		{"repeated keys at every level", "", `{"rule_id": "r", "limit": 1, "window_seconds": 1, "key_type": "user_id", "conditions": {"plan": "a", "plan": "b"}, "overrides": [{"key": "k", "action": "deny", "key": "j"}], "rule_id": "s"}`, nil, 422, "invalid rule",
			[]adminapi.FieldError{{Field: "rule_id", Reason: "appears more than once"}, {Field: "conditions.plan", Reason: "appears more than once"}, {Field: "overrides[0].key", Reason: "appears more than once"}}},
		{"malformed JSON", "", `{"rule_id": "r",`, nil, 400, "malformed", nil},
		{"trailing data", "", `{"rule_id": "r", "limit": 1, "window_seconds": 1} {}`, nil, 400, "data after the end", nil},
		{"empty body", "", ``, nil, 400, "empty document", nil},
		{"nested too deep", "", strings.Repeat("[", 100) + strings.Repeat("]", 100), nil, 400, "nested deeper", nil},
		{"too large", "", `{"description": "` + strings.Repeat("x", 1000) + `"}`, nil, 413, "at most 1000", nil},
		{"too large, length unknown", "", `{"description": "` + strings.Repeat("x", 1000) + `"}`, []string{unknownLength, ""}, 413, "larger than 1000", nil},
		{"bad domain", "domain=a/b", `{"rule_id": "r", "limit": 1, "window_seconds": 1}`, nil, 400, "invalid domain", nil},
		{"static shares of unknown DCs", "", `{"rule_id": "r", "limit": 1, "window_seconds": 1, "shares": {"zz": 0.5, "us-east": 0.2, "mars": 0.1}}`, nil, 422, "invalid rule", []adminapi.FieldError{
			{Field: "shares.mars", Reason: `unknown DC "mars" (known: us-east, eu-west, ap-south)`},
			{Field: "shares.zz", Reason: `unknown DC "zz" (known: us-east, eu-west, ap-south)`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := "/rate-limits"
			if tt.query != "" {
				target += "?" + tt.query
			}
			req := e.do("POST", target, tt.body, tt.hdr...)
			body := wantError(t, req, tt.code, tt.msg)
			if !reflect.DeepEqual(body.Fields, tt.fields) {
				t.Errorf("fields:\ngot  %+v\nwant %+v", body.Fields, tt.fields)
			}
		})
	}
	if recs := e.audit(); len(recs) != 0 {
		t.Errorf("refused creates left %d audit records", len(recs))
	}
}

func TestGetAndList(t *testing.T) {
	e := newEnv(t)
	e.create(seedCreate)
	e.create(loginRule)
	e.create(loginRule, "domain=shop")
	e.create(seedCreate, "domain=a-b")

	rec := e.do("GET", "/rate-limits/user-login-attempt", "")
	want(t, rec, 200)
	_, rev := e.get(e.layout.Rule("default", "user-login-attempt"))
	if got, want := rec.Header().Get("ETag"), `"`+strconv.FormatInt(rev, 10)+`"`; got != want {
		t.Errorf("ETag: got %s, want %s", got, want)
	}
	got, err := rule.ParseRule(rec.Body.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "user-login-attempt" || got.Domain != "default" || got.Limit != 5 || !got.CreatedAt.Equal(t0) {
		t.Errorf("got %+v", got)
	}
	want(t, e.do("HEAD", "/rate-limits/user-login-attempt", ""), 200)

	for _, tt := range []struct{ target, msg string }{
		{"/rate-limits/nope", "rule 'nope' not found in any domain"},
		{"/rate-limits/user-login-attempt?domain=other", "not found in domain 'other'"},
		{"/rate-limits/a%2Fb", "not found"},
		{"/rate-limits/-x", "not found"},
		{"/rate-limits/" + strings.Repeat("x", 129), "not found"},
	} {
		wantError(t, e.do("GET", tt.target, ""), 404, tt.msg)
	}
	wantError(t, e.do("GET", "/rate-limits/x?domain=..", ""), 400, "invalid domain")

	ids := func(rec interface{ Bytes() []byte }) []string {
		var list adminapi.RuleList
		if err := json.Unmarshal(rec.Bytes(), &list); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range list.Rules {
			out = append(out, r.Domain+"/"+r.ID)
		}
		return out
	}
	rec = e.do("GET", "/rate-limits", "")
	want(t, rec, 200)
	if got, want := ids(rec.Body), []string{"a-b/api-global-default", "default/api-global-default", "default/user-login-attempt", "shop/user-login-attempt"}; !reflect.DeepEqual(got, want) {
		t.Errorf("all rules: got %q, want %q", got, want)
	}
	rec = e.do("GET", "/rate-limits?domain=shop", "")
	want(t, rec, 200)
	if got, want := ids(rec.Body), []string{"shop/user-login-attempt"}; !reflect.DeepEqual(got, want) {
		t.Errorf("shop's rules: got %q, want %q", got, want)
	}
	rec = e.do("GET", "/rate-limits?domain=empty", "")
	if strings.TrimSpace(rec.Body.String()) != `{"rules":[]}` {
		t.Errorf("an empty domain: got %s, want no rules", rec.Body)
	}
	// A bad document in etcd does not hide the others.
	e.put(e.layout.Rule("shop", "broken"), `{"rule_id": "broken"`)
	rec = e.do("GET", "/rate-limits?domain=shop", "")
	if got, want := ids(rec.Body), []string{"shop/user-login-attempt"}; !reflect.DeepEqual(got, want) {
		t.Errorf("with a broken rule: got %q, want %q", got, want)
	}
	wantError(t, e.do("GET", "/rate-limits/broken?domain=shop", ""), 409, "no valid version of it is known")
}

func TestUpdate(t *testing.T) {
	e := newEnv(t)
	e.create(seedCreate)
	e.clock.Set(t0.Add(time.Hour))
	rec := e.do("PUT", "/rate-limits/api-global-default", seedUpdate)
	want(t, rec, 200)
	// The seed's response, with the defaults and bookkeeping written out.
	wantBody := `{"rule_id":"api-global-default","domain":"default","path_pattern":"/api/v1/**","key_type":"ip",` +
		`"limit":150,"window_seconds":60,"algorithm":"SlidingWindowCounter","scope":"global","failure_mode":"local",` +
		`"enabled":true,"retry_advice":"retry_after","created_at":"2023-08-25T10:00:00Z","updated_at":"2023-08-25T11:00:00Z"}`
	if got := strings.TrimSpace(rec.Body.String()); got != wantBody {
		t.Errorf("body:\ngot  %s\nwant %s", got, wantBody)
	}
	stored, rev := e.get(e.layout.Rule("default", "api-global-default"))
	if stored != wantBody {
		t.Errorf("stored:\ngot  %s\nwant %s", stored, wantBody)
	}
	if got, want := rec.Header().Get("ETag"), `"`+strconv.FormatInt(rev, 10)+`"`; got != want {
		t.Errorf("ETag: got %s, want %s", got, want)
	}

	steps := []struct {
		name  string
		body  string
		check func(r rule.Rule) bool
	}{
		{"add fields", `{"burst": 20, "algorithm": "TokenBucket", "description": "d"}`,
			func(r rule.Rule) bool { return r.Burst == 20 && r.Description == "d" && r.Limit == 150 }},
		{"null removes a field", `{"burst": null, "description": null}`,
			func(r rule.Rule) bool {
				return r.Burst == 0 && r.Description == "" && r.Algorithm.String() == "TokenBucket"
			}},
		{"null gives the default", `{"enabled": false, "algorithm": null}`,
			func(r rule.Rule) bool { return !r.Enabled && r.Algorithm.String() == "SlidingWindowCounter" }},
		{"rule_id and domain unchanged, and a rule read back", "", func(r rule.Rule) bool { return r.Limit == 150 }},
		{"empty patch", `{}`, func(r rule.Rule) bool { return r.Limit == 150 }},
		{"null rule_id and domain", `{"rule_id": null, "domain": null, "limit": 7}`, func(r rule.Rule) bool { return r.Limit == 7 }},
		{"created_at is kept", `{"created_at": "1999-01-01T00:00:00Z"}`, func(r rule.Rule) bool { return r.CreatedAt.Equal(t0) }},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			body := st.body
			if body == "" {
				body = e.do("GET", "/rate-limits/api-global-default", "").Body.String()
			}
			rec := e.do("PUT", "/rate-limits/api-global-default", body)
			want(t, rec, 200)
			r, err := rule.ParseRule(rec.Body.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if !st.check(r) {
				t.Errorf("got %+v", r)
			}
			if r.ID != "api-global-default" || r.Domain != "default" || !r.CreatedAt.Equal(t0) || !r.UpdatedAt.Equal(t0.Add(time.Hour)) {
				t.Errorf("bookkeeping: got %+v", r)
			}
		})
	}
}

func TestUpdateErrors(t *testing.T) {
	e := newEnv(t, func(c *adminserver.Config) { c.MaxBodyBytes = 1000 })
	e.create(seedCreate)
	e.create(loginRule, "domain=shop")
	before, rev := e.get(e.layout.Rule("default", "api-global-default"))
	tests := []struct {
		name   string
		target string
		body   string
		code   int
		msg    string
		fields []adminapi.FieldError
	}{
		{"unknown rule", "/rate-limits/nope", seedUpdate, 404, "not found", nil},
		{"unknown in the domain", "/rate-limits/api-global-default?domain=shop", seedUpdate, 404, "not found", nil},
		{"invalid result", "", `{"limit": 0, "window_seconds": -5, "bogus": 1}`, 422, "invalid rule", []adminapi.FieldError{
			{Field: "limit", Reason: "required, from 1 to 1000000000000"},
			{Field: "window_seconds", Reason: "-5 is out of range [1, 31622400]"},
			{Field: "bogus", Reason: "unknown field"},
		}},
		{"other rule_id", "", `{"rule_id": "other"}`, 422, "invalid rule", []adminapi.FieldError{{Field: "rule_id", Reason: "does not match the rule in the path ('api-global-default')"}}},
		{"rule_id not a string", "", `{"rule_id": 5}`, 422, "invalid rule", []adminapi.FieldError{{Field: "rule_id", Reason: "does not match the rule in the path ('api-global-default')"}}},
		{"domain change", "", `{"domain": "shop"}`, 422, "invalid rule", []adminapi.FieldError{{Field: "domain", Reason: "cannot change (it is 'default'; create the rule in the other domain and delete this one)"}}},
		{"duplicate field", "", `{"limit": 5, "limit": 6}`, 422, "invalid rule", []adminapi.FieldError{{Field: "limit", Reason: "appears more than once"}}},
		{"repeated keys at every level", "", `{"limit": 5, "conditions": {"plan": "a", "plan": "b"}, "limit": 6, "overrides": [{"key": "a", "action": "deny", "action": "allow"}]}`, 422, "invalid rule", []adminapi.FieldError{
			{Field: "limit", Reason: "appears more than once"},
			{Field: "conditions.plan", Reason: "appears more than once"},
			{Field: "overrides[0].action", Reason: "appears more than once"},
		}},
		{"repeated key within a field", "", `{"conditions": {"plan": "a", "plan": "b"}}`, 422, "invalid rule", []adminapi.FieldError{{Field: "conditions.plan", Reason: "appears more than once"}}},
		{"bad time", "", `{"updated_at": "yesterday"}`, 422, "invalid rule", []adminapi.FieldError{{Field: "updated_at", Reason: `want an RFC 3339 time such as 2023-08-25T10:00:00Z, got "yesterday"`}}},
		{"malformed", "", `{"limit": }`, 400, "malformed JSON", nil},
		{"not an object", "", `[{"limit": 5}]`, 400, "want a JSON object", nil},
		{"a string", "", `"limit"`, 400, "want a JSON object", nil},
		{"empty", "", ``, 400, "empty body", nil},
		{"trailing data", "", `{"limit": 5} x`, 400, "data after the object", nil},
		{"unterminated", "", `{"limit": 5`, 400, "malformed JSON", nil},
		{"nested too deep", "", `{"conditions": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, 400, "nested deeper", nil},
		{"too large", "", `{"description": "` + strings.Repeat("x", 1000) + `"}`, 413, "at most 1000", nil},
		{"static shares of an unknown DC", "", `{"shares": {"zz": 1}}`, 422, "invalid rule", []adminapi.FieldError{
			{Field: "shares.zz", Reason: `unknown DC "zz" (known: us-east, eu-west, ap-south)`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := tt.target
			if target == "" {
				target = "/rate-limits/api-global-default"
			}
			body := wantError(t, e.do("PUT", target, tt.body), tt.code, tt.msg)
			if !reflect.DeepEqual(body.Fields, tt.fields) {
				t.Errorf("fields:\ngot  %+v\nwant %+v", body.Fields, tt.fields)
			}
		})
	}
	if after, r := e.get(e.layout.Rule("default", "api-global-default")); after != before || r != rev {
		t.Errorf("a refused update changed the rule: %s", after)
	}
	if n := len(e.audit()); n != 2 {
		t.Errorf("got %d audit records, want the 2 creates", n)
	}
}

func TestIfMatch(t *testing.T) {
	e := newEnv(t)
	e.create(seedCreate)
	_, rev := e.get(e.layout.Rule("default", "api-global-default"))
	tag := `"` + strconv.FormatInt(rev, 10) + `"`
	stale := `"` + strconv.FormatInt(rev-1, 10) + `"`

	wantError(t, e.do("PUT", "/rate-limits/api-global-default", `{"limit": 1}`, "If-Match", stale), 412, "does not match the current ETag "+tag)
	wantError(t, e.do("PUT", "/rate-limits/api-global-default", `{"limit": 1}`, "If-Match", "W/"+tag), 412, "")
	wantError(t, e.do("PUT", "/rate-limits/api-global-default", `{"limit": 1}`, "If-Match", "garbage"), 412, "")
	wantError(t, e.do("DELETE", "/rate-limits/api-global-default", "", "If-Match", stale), 412, "")

	rec := e.do("PUT", "/rate-limits/api-global-default", `{"limit": 1}`, "If-Match", stale+", "+tag)
	want(t, rec, 200)
	tag = rec.Header().Get("ETag")
	rec = e.do("PUT", "/rate-limits/api-global-default", `{"limit": 2}`, "If-Match", tag)
	want(t, rec, 200)
	// The first writer's tag is stale now.
	wantError(t, e.do("PUT", "/rate-limits/api-global-default", `{"limit": 3}`, "If-Match", tag), 412, "")
	rec = e.do("PUT", "/rate-limits/api-global-default", `{"limit": 4}`, "If-Match", "*")
	want(t, rec, 200)
	// GET's tag is what PUT's answer said.
	if got := e.do("GET", "/rate-limits/api-global-default", "").Header().Get("ETag"); got != rec.Header().Get("ETag") {
		t.Errorf("GET ETag %s, PUT ETag %s", got, rec.Header().Get("ETag"))
	}
	want(t, e.do("DELETE", "/rate-limits/api-global-default", "", "If-Match", rec.Header().Get("ETag")), 200)
	// Nothing matches a missing rule, not even "*"; 404 first.
	wantError(t, e.do("PUT", "/rate-limits/api-global-default", `{"limit": 5}`, "If-Match", "*"), 404, "")
}

// TestConcurrentChanges makes a change between every read and write of a
// request, through the injected clock, which the handlers read in between.
func TestConcurrentChanges(t *testing.T) {
	e := newEnv(t)
	e.create(seedCreate)
	e.do("PUT", "/rate-limits/api-global-default/shares", `{"dcs": {}}`)
	key := e.layout.Rule("default", "api-global-default")
	// interfere makes the clock set the rule's description to "sneaky-N"
	// on its first times readings.
	interfere := func(times int) {
		n := 0
		e.clock.OnNow(func() {
			if n < times {
				n++
				cur, _ := e.get(key)
				var doc map[string]any
				if err := json.Unmarshal([]byte(cur), &doc); err != nil {
					t.Error(err)
					return
				}
				doc["description"] = "sneaky-" + strconv.Itoa(n)
				b, _ := json.Marshal(doc)
				e.put(key, string(b))
			}
		})
	}

	// Two interfering changes: the third attempt succeeds, on top of them.
	interfere(2)
	rec := e.do("PUT", "/rate-limits/api-global-default", `{"limit": 150}`)
	want(t, rec, 200)
	r, err := rule.ParseRule(rec.Body.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if r.Limit != 150 || r.Description != "sneaky-2" {
		t.Errorf("got limit %d and description %q, want 150 and the concurrent change kept", r.Limit, r.Description)
	}

	// Endless interference: 409 after three attempts, for every write.
	interfere(1 << 30)
	wantError(t, e.do("PUT", "/rate-limits/api-global-default", `{"limit": 1}`), 409, "kept changing")
	wantError(t, e.do("DELETE", "/rate-limits/api-global-default", ""), 409, "kept changing")
	wantError(t, e.do("PUT", "/rate-limits/api-global-default/shares", `{"dcs": {"us-east": {"pin": 0.5}}}`), 409, "kept changing")
	e.clock.OnNow(nil)
	if r, _ := e.get(key); !strings.Contains(r, `"limit":150`) {
		t.Errorf("a refused write changed the rule: %s", r)
	}
	if p, _ := e.get(e.layout.Policy("default", "api-global-default")); p != `{"dcs":{}}` {
		t.Errorf("a refused write changed the policy: %s", p)
	}
	// One record per successful change: create, shares, update.
	if n := len(e.audit()); n != 3 {
		t.Errorf("got %d audit records, want 3", n)
	}
}

func TestDelete(t *testing.T) {
	e := newEnv(t)
	e.create(seedCreate)
	e.create(seedCreate, "domain=shop")
	want(t, e.do("PUT", "/rate-limits/api-global-default/shares", `{"dcs": {"us-east": {"floor": 0.2}}}`), 200)
	want(t, e.do("PUT", "/rate-limits/api-global-default/shares?domain=shop", `{"dcs": {"us-east": {"floor": 0.2}}}`), 200)
	rec := e.do("DELETE", "/rate-limits/api-global-default", "")
	want(t, rec, 200)
	if got, want := strings.TrimSpace(rec.Body.String()), `{"message":"Rate limit rule 'api-global-default' deleted successfully."}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	for _, key := range []string{e.layout.Rule("default", "api-global-default"), e.layout.Policy("default", "api-global-default")} {
		if v, _ := e.get(key); v != "" {
			t.Errorf("%s is still there: %s", key, v)
		}
	}
	for _, key := range []string{e.layout.Rule("shop", "api-global-default"), e.layout.Policy("shop", "api-global-default")} {
		if v, _ := e.get(key); v == "" {
			t.Errorf("%s of another domain was deleted", key)
		}
	}
	wantError(t, e.do("GET", "/rate-limits/api-global-default?domain=default", ""), 404, "not found")
	wantError(t, e.do("DELETE", "/rate-limits/api-global-default?domain=default", ""), 404, "not found")
	// Created again, it starts without the old policy.
	e.create(seedCreate)
	rec = e.do("GET", "/rate-limits/api-global-default/shares", "")
	if rec.Code == 200 && strings.Contains(rec.Body.String(), `"floor":0.2`) {
		t.Errorf("the old policy came back: %s", rec.Body)
	}
}

// TestConcurrentWriters races writers on one rule. Whatever each is told
// (200 or 409), the audit trail must be one unbroken chain: every change
// starts from the document the previous one left, so none was lost.
func TestConcurrentWriters(t *testing.T) {
	e := newEnv(t, func(c *adminserver.Config) { c.Now = time.Now })
	e.create(seedCreate)
	const writers = 8
	codes := make(chan int, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			rec := e.do("PUT", "/rate-limits/api-global-default", `{"description": "writer `+strconv.Itoa(i)+`"}`)
			codes <- rec.Code
		})
	}
	wg.Wait()
	close(codes)
	ok := 0
	for c := range codes {
		switch c {
		case 200:
			ok++
		case 409:
		default:
			t.Errorf("got %d, want 200 or 409", c)
		}
	}
	recs := e.audit()
	if len(recs) != ok+1 {
		t.Fatalf("%d writers were told 200, but there are %d audit records after the create", ok, len(recs)-1)
	}
	// Order the updates by revision: each one's before is its
	// predecessor's after.
	chain := string(recs[0].After)
	for range ok {
		found := false
		for _, r := range recs[1:] {
			if string(r.Before) == chain {
				chain, found = string(r.After), true
				break
			}
		}
		if !found {
			t.Fatalf("the chain of changes breaks after %s", chain)
		}
	}
	if stored, _ := e.get(e.layout.Rule("default", "api-global-default")); stored != chain {
		t.Errorf("stored %s, want the end of the chain %s", stored, chain)
	}
}

// TestStaticShareDCs checks that a rule's static shares must name DCs the
// server knows, as a share policy must, when it knows them: on create,
// and on an update that writes shares; an update that leaves shares
// stored before as they are is not refused for them.
func TestStaticShareDCs(t *testing.T) {
	const withShares = `{"rule_id": "r", "limit": 10, "window_seconds": 60, "shares": {"us-east": 0.5, "zz": 0.5}}`
	tests := []struct {
		name   string
		dcs    []string
		method string
		target string
		body   string
		code   int
	}{
		{"create, DCs known", sharedDCs, "POST", "/rate-limits", withShares, 422},
		{"create, no DCs configured", nil, "POST", "/rate-limits", withShares, 201},
		{"create, known DCs only", sharedDCs, "POST", "/rate-limits", `{"rule_id": "r", "limit": 10, "window_seconds": 60, "shares": {"us-east": 0.5, "eu-west": 0.5}}`, 201},
		{"update writing shares", sharedDCs, "PUT", "/rate-limits/stored", `{"shares": {"zz": 1}}`, 422},
		{"update leaving stored shares", sharedDCs, "PUT", "/rate-limits/stored", `{"limit": 20}`, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(c *adminserver.Config) { c.DCs = tt.dcs })
			// A rule stored when its shares' DC was known.
			e.put(e.layout.Rule("default", "stored"), `{"rule_id": "stored", "domain": "default", "limit": 10, "window_seconds": 60, "shares": {"gone": 1}}`)
			rec := e.do(tt.method, tt.target, tt.body)
			if rec.Code != tt.code {
				t.Fatalf("got %d %s, want %d", rec.Code, rec.Body, tt.code)
			}
		})
	}
}
