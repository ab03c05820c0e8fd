package rule_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/rule"
)

// The documents of seed 003 ("5. API Design", "6. Database Schema Design"),
// verbatim.
const (
	seedCreateRequest = `{
"rule_id": "api-global-default",
"path_pattern": "/api/v1/**",
"key_type": "ip",
"limit": 100,
"window_seconds": 60,
"algorithm": "SlidingWindowCounter",
"enabled": true
}`
	seedCreateResponse = `{
"rule_id": "api-global-default",
"path_pattern": "/api/v1/**",
"key_type": "ip",
"limit": 100,
"window_seconds": 60,
"algorithm": "SlidingWindowCounter",
"enabled": true,
"created_at": "2023-08-25T10:00:00Z"
}`
	seedUpdateResponse = `{
"rule_id": "api-global-default",
"path_pattern": "/api/v1/**",
"key_type": "ip",
"limit": 150,
"window_seconds": 60,
"algorithm": "SlidingWindowCounter",
"enabled": true,
"updated_at": "2023-08-25T11:00:00Z"
}`
	seedSchemaDocument = `{
"_id": "64e5f2c3d5b6b9a01d2f4e12",
"rule_id": "user-login-attempt",
"path_pattern": "/auth/login",
"key_type": "username",
"limit": 5,
"window_seconds": 300,
"algorithm": "SlidingWindowLog",
"enabled": true,
"created_at": "2023-08-25T10:00:00Z",
"updated_at": "2023-08-25T10:00:00Z"
}`
	issueExample = `{"rule_id":"user-login-attempt","path_pattern":"/auth/login","key_type":"username","limit":5,"window_seconds":300,"algorithm":"SlidingWindowLog","enabled":true}`
)

// apiDefault is the seed's api-global-default rule, with defaults.
func apiDefault() rule.Rule {
	return rule.Rule{
		ID:            "api-global-default",
		PathPattern:   "/api/v1/**",
		KeyType:       rule.Dimensions{"ip"},
		Limit:         100,
		WindowSeconds: 60,
		Algorithm:     algorithm.SlidingWindowCounter,
		Scope:         rule.ScopeGlobal,
		FailureMode:   rule.FailLocal,
		Enabled:       true,
		RetryAdvice:   rule.RetryAfter,
	}
}

// loginAttempt is the seed's user-login-attempt rule, with defaults.
func loginAttempt() rule.Rule {
	return rule.Rule{
		ID:            "user-login-attempt",
		PathPattern:   "/auth/login",
		KeyType:       rule.Dimensions{"username"},
		Limit:         5,
		WindowSeconds: 300,
		Algorithm:     algorithm.SlidingWindowLog,
		Scope:         rule.ScopeGlobal,
		FailureMode:   rule.FailLocal,
		Enabled:       true,
		RetryAdvice:   rule.RetryAfter,
	}
}

func date(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestParseRuleSeedDocuments(t *testing.T) {
	withTimes := func(r rule.Rule, created, updated string) rule.Rule {
		if created != "" {
			r.CreatedAt = date(created)
		}
		if updated != "" {
			r.UpdatedAt = date(updated)
		}
		return r
	}
	updated := apiDefault()
	updated.Limit = 150
	tests := []struct {
		name string
		doc  string
		want rule.Rule
	}{
		{"create request", seedCreateRequest, apiDefault()},
		{"create response", seedCreateResponse, withTimes(apiDefault(), "2023-08-25T10:00:00Z", "")},
		{"update response", seedUpdateResponse, withTimes(updated, "", "2023-08-25T11:00:00Z")},
		{"schema document", seedSchemaDocument, withTimes(loginAttempt(), "2023-08-25T10:00:00Z", "2023-08-25T10:00:00Z")},
		{"issue example", issueExample, loginAttempt()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rule.ParseRule([]byte(tt.doc))
			if err != nil {
				t.Fatalf("ParseRule: got error %v, want none", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate: got %v, want nil", err)
			}
		})
	}
}

// TestMarshalSeedShape checks that a parsed seed rule marshals back to the
// seed's shape, with the defaults written out.
func TestMarshalSeedShape(t *testing.T) {
	r, err := rule.ParseRule([]byte(seedCreateResponse))
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"rule_id":"api-global-default","path_pattern":"/api/v1/**","key_type":"ip","limit":100,"window_seconds":60,"algorithm":"SlidingWindowCounter","scope":"global","failure_mode":"local","enabled":true,"retry_advice":"retry_after","created_at":"2023-08-25T10:00:00Z"}`
	if string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestSeedUpdateBodyIsNotARule checks that the seed's PUT body, a partial
// document, is not mistaken for a rule: it lacks only the id.
func TestSeedUpdateBodyIsNotARule(t *testing.T) {
	_, err := rule.ParseRule([]byte(`{"limit": 150, "window_seconds": 60, "enabled": true}`))
	if got, want := paths(t, err), []string{"rule_id"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got paths %q, want %q", got, want)
	}
}

const fullSetJSON = `{
  "domain": "shop",
  "rules": [
    {"rule_id": "api-global-default", "path_pattern": "/api/v1/**", "key_type": "ip",
     "limit": 100, "window_seconds": 60, "algorithm": "SlidingWindowCounter", "enabled": true,
     "overrides": [
       {"cidr": "10.0.0.0/8", "action": "allow"},
       {"cidr": "2001:db8::/32", "action": "deny"},
       {"key": "203.0.113.7", "limit": 1000}
     ]},
    {"rule_id": "tenant-user", "domain": "shop", "description": "per user of each tenant",
     "path_pattern": "/orders/*/items/*.json", "methods": ["GET", "POST"],
     "conditions": {"plan": "free", "x-api-key": "*"}, "key_type": ["tenant", "user_id"],
     "limit": 1000, "window_seconds": 86400, "algorithm": "TokenBucket", "burst": 50,
     "scope": "global", "shares": {"us-east": 0.5, "eu-west": 0.3, "ap-south": 0.2},
     "overrides": [
       {"match": {"tenant": "acme"}, "limit": 5000, "burst": 200},
       {"match": {"tenant": "acme", "user_id": "42"}, "action": "deny"}
     ],
     "shadow": true, "failure_mode": "closed", "enabled": false,
     "rejection_message": "Daily order quota used up.", "retry_advice": "daily_limit_reached",
     "created_at": "2023-08-25T10:00:00Z", "updated_at": "2023-08-26T09:30:00.5+02:00"},
    {"rule_id": "everyone", "limit": 10000, "window_seconds": 1, "algorithm": "LeakyBucket",
     "scope": "local", "failure_mode": "open"},
    {"rule_id": "migrated-unlimited", "key_type": "client_id", "unlimited": true,
     "overrides": [{"key": "bad-bot", "action": "deny"}]},
    {"rule_id": "fixed", "limit": 1, "window_seconds": 31622400, "algorithm": "FixedWindow",
     "retry_advice": "exponential_backoff"}
  ]
}`

func TestParseSetFull(t *testing.T) {
	s, err := rule.ParseSet([]byte(fullSetJSON))
	if err != nil {
		t.Fatalf("ParseSet: got error %v, want none", err)
	}
	if got, want := len(s.Rules), 5; got != want {
		t.Fatalf("got %d rules, want %d", got, want)
	}
	for i, r := range s.Rules {
		if r.Domain != "shop" {
			t.Errorf("rules[%d].Domain: got %q, want %q", i, r.Domain, "shop")
		}
	}
	r := s.Rules[1]
	want := rule.Rule{
		ID:            "tenant-user",
		Domain:        "shop",
		Description:   "per user of each tenant",
		PathPattern:   "/orders/*/items/*.json",
		Methods:       []string{"GET", "POST"},
		Conditions:    map[string]string{"plan": "free", "x-api-key": "*"},
		KeyType:       rule.Dimensions{"tenant", "user_id"},
		Limit:         1000,
		WindowSeconds: 86400,
		Algorithm:     algorithm.TokenBucket,
		Burst:         50,
		Scope:         rule.ScopeGlobal,
		Shares:        map[string]float64{"us-east": 0.5, "eu-west": 0.3, "ap-south": 0.2},
		Overrides: []rule.Override{
			{Match: map[string]string{"tenant": "acme"}, Action: rule.ActionLimit, Limit: 5000, Burst: 200},
			{Match: map[string]string{"tenant": "acme", "user_id": "42"}, Action: rule.ActionDeny},
		},
		Shadow:           true,
		FailureMode:      rule.FailClosed,
		Enabled:          false,
		RejectionMessage: "Daily order quota used up.",
		RetryAdvice:      rule.DailyLimitReached,
		CreatedAt:        date("2023-08-25T10:00:00Z"),
		UpdatedAt:        date("2023-08-26T07:30:00.5Z"),
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("rules[1]: got %+v, want %+v", r, want)
	}
	if got, want := s.Rules[0].Overrides[2], (rule.Override{Key: "203.0.113.7", Action: rule.ActionLimit, Limit: 1000}); !reflect.DeepEqual(got, want) {
		t.Errorf("rules[0].overrides[2]: got %+v, want %+v", got, want)
	}
	if got := s.Rules[3]; !got.Unlimited || got.Limit != 0 || got.WindowSeconds != 0 {
		t.Errorf("rules[3]: got %+v, want an unlimited rule", got)
	}
	if err := s.Validate(); err != nil {
		t.Errorf("Validate: got %v, want nil", err)
	}
}

func TestRoundTrip(t *testing.T) {
	docs := map[string]string{"full set": fullSetJSON, "seed": `{"domain":"seed","rules":[` + seedSchemaDocument + `]}`,
		"monthly": `{"domain":"d","rules":[{"rule_id":"m","limit":100000,"calendar":"month","algorithm":"FixedWindow"}]}`}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			s1, err := rule.ParseSet([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(&s1)
			if err != nil {
				t.Fatal(err)
			}
			s2, err := rule.ParseSet(b)
			if err != nil {
				t.Fatalf("reparse %s: %v", b, err)
			}
			if !reflect.DeepEqual(s1, s2) {
				t.Errorf("got %+v, want %+v", s2, s1)
			}
			b2, err := json.Marshal(&s2)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != string(b2) {
				t.Errorf("second marshal: got %s, want %s", b2, b)
			}
		})
	}
}

// TestCalendarMonth checks that a monthly rule, written without a window,
// gets the longest month as its window and calendar months as its
// algorithm's windows: its keys reset at midnight UTC on the 1st.
func TestCalendarMonth(t *testing.T) {
	r, err := rule.ParseRule([]byte(`{"rule_id":"m","limit":3,"calendar":"month","algorithm":"FixedWindow"}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.WindowSeconds != 31*86400 || r.Window() != algorithm.MonthWindow {
		t.Errorf("window %d s (%v), want 31 days", r.WindowSeconds, r.Window())
	}
	if rule.CalendarMonth != algorithm.Month.String() {
		t.Errorf("rule.CalendarMonth %q, algorithm.Month %q", rule.CalendarMonth, algorithm.Month)
	}
	p := r.Params(r.Limit, r.Burst)
	if p.Calendar != algorithm.Month || p.Validate() != nil {
		t.Fatalf("params %+v (%v), want valid calendar months", p, p.Validate())
	}
	at := time.Date(2028, 2, 10, 15, 4, 5, 0, time.UTC) // a leap year's February
	d, _ := algorithm.Decide(p, algorithm.State{}, at, 1)
	if want := time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC); !d.ResetAt.Equal(want) {
		t.Errorf("reset at %v, want %v", d.ResetAt.UTC(), want)
	}
	plain := r
	plain.Calendar = ""
	if err := plain.Validate(); err != nil {
		t.Errorf("the same rule of 31-day windows: %v", err)
	}
}

func TestDimensionsJSON(t *testing.T) {
	tests := []struct {
		name string
		dims rule.Dimensions
		json string
	}{
		{"one", rule.Dimensions{"ip"}, `"ip"`},
		{"two", rule.Dimensions{"tenant", "user_id"}, `["tenant","user_id"]`},
		{"none", rule.Dimensions{}, `[]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.dims)
			if err != nil || string(b) != tt.json {
				t.Fatalf("Marshal: got %s, %v, want %s", b, err, tt.json)
			}
			var d rule.Dimensions
			if err := json.Unmarshal(b, &d); err != nil || !reflect.DeepEqual(d, tt.dims) {
				t.Errorf("Unmarshal: got %q, %v, want %q", d, err, tt.dims)
			}
		})
	}
	var d rule.Dimensions
	if err := json.Unmarshal([]byte(`5`), &d); err == nil {
		t.Errorf("Unmarshal(5): got nil error, want one")
	}
	if err := json.Unmarshal([]byte(`null`), &d); err != nil || d != nil {
		t.Errorf("Unmarshal(null): got %q, %v, want nil, nil", d, err)
	}
}

func TestSetDefaultsAndValidate(t *testing.T) {
	r := rule.Rule{ID: "go-made", KeyType: rule.Dimensions{"user_id"}, Limit: 10, WindowSeconds: 1,
		Overrides: []rule.Override{{Key: "vip", Limit: 100}}}
	if err := r.Validate(); err == nil {
		t.Fatal("Validate before SetDefaults: got nil, want errors for the empty enums")
	} else if got, want := paths(t, err), []string{"algorithm", "scope", "overrides[0].action", "failure_mode", "retry_advice"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got paths %q, want %q", got, want)
	}
	r.SetDefaults()
	if err := r.Validate(); err != nil {
		t.Fatalf("Validate after SetDefaults: got %v, want nil", err)
	}
	if got, want := r.Overrides[0].Action, rule.ActionLimit; got != want {
		t.Errorf("override action: got %q, want %q", got, want)
	}
	if got, want := r.Params(r.Limit, r.Burst), (algorithm.Params{Algorithm: algorithm.SlidingWindowCounter, Limit: 10, Window: time.Second}); got != want {
		t.Errorf("Params: got %+v, want %+v", got, want)
	}
}

func TestValidationErrorFormat(t *testing.T) {
	doc := `{"domain": "d", "rules": [
	  {"rule_id": "a", "limit": 1, "window_seconds": 1},
	  {"rule_id": "a", "limit": 1, "window_seconds": 1},
	  {"rule_id": "c", "key_type": "ip", "limit": "5", "window_seconds": 1,
	   "overrides": [{"cidr": "10.0.0/8", "action": "allow"}]}]}`
	_, err := rule.ParseSet([]byte(doc))
	want := `rules[2].limit: want an integer, got "5"
rules[2].overrides[0].cidr: "10.0.0/8" is not a CIDR prefix (want e.g. 10.0.0.0/8 or 2001:db8::/32)
rules[1].rule_id: "a" is also the id of rules[0]`
	if err == nil || err.Error() != want {
		t.Fatalf("got error\n%v\nwant\n%s", err, want)
	}
	if !errors.Is(err, rule.ErrInvalid) {
		t.Errorf("errors.Is(err, ErrInvalid): got false, want true")
	}
	var ve *rule.ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) != 3 {
		t.Fatalf("errors.As: got %#v, want a *ValidationError of 3 errors", err)
	}
	if got, want := ve.Errors[1], (rule.FieldError{Path: "rules[2].overrides[0].cidr", Reason: `"10.0.0/8" is not a CIDR prefix (want e.g. 10.0.0.0/8 or 2001:db8::/32)`}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestManyErrorsAreCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"domain":"d","rules":[`)
	for i := range 3000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"x":1}`) // unknown field, no id, no limit, no window: 4 problems
	}
	b.WriteString(`]}`)
	_, err := rule.ParseSet([]byte(b.String()))
	var ve *rule.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want a *ValidationError", err)
	}
	if got, want := len(ve.Errors)+ve.Omitted, 4*3000; got != want {
		t.Errorf("problems: got %d, want %d", got, want)
	}
	if len(ve.Errors) != 1000 {
		t.Errorf("listed: got %d, want 1000", len(ve.Errors))
	}
	if !strings.HasSuffix(ve.Error(), "(and 11000 more problems)") {
		t.Errorf("got error ending %q, want it to end with the count of omitted problems", ve.Error()[len(ve.Error())-40:])
	}
}

// paths returns the field paths of err, a *ValidationError.
func paths(t *testing.T, err error) []string {
	t.Helper()
	var ve *rule.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got error %v, want a *ValidationError", err)
	}
	return ve.Paths()
}

// Static limits are integers that never sum above the limit, and sum to
// exactly the limit when the static shares cover it; every DC computes
// the same split whatever the order of its list.
func TestStaticLimitProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	for i := range 5000 {
		n := 1 + r.IntN(16)
		dcs := make([]string, n)
		for d := range dcs {
			dcs[d] = fmt.Sprintf("dc-%d", d)
		}
		ru := rule.Rule{Scope: rule.ScopeGlobal}
		if i%2 == 1 {
			ru.Shares = map[string]float64{}
			for _, d := range dcs {
				if r.IntN(3) == 0 {
					ru.Shares[d] = r.Float64() / float64(n)
				}
			}
		}
		limit := int64(1 + r.IntN(1_000_000_000))
		if i%3 == 0 {
			limit = int64(1 + r.IntN(10))
		}
		shuffled := slices.Clone(dcs)
		r.Shuffle(n, func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		sum := int64(0)
		for _, d := range dcs {
			got := ru.StaticLimit(d, dcs, limit)
			if again := ru.StaticLimit(d, shuffled, limit); again != got {
				t.Fatalf("StaticLimit(%s) = %d with %v, %d with %v", d, got, dcs, again, shuffled)
			}
			sum += got
		}
		if sum > limit {
			t.Fatalf("static limits of %v (shares %v) sum to %d > %d", dcs, ru.Shares, sum, limit)
		}
		if len(ru.Shares) == 0 && sum != limit {
			t.Fatalf("equal split of %d over %d DCs sums to %d", limit, n, sum)
		}
	}
	one := rule.Rule{Scope: rule.ScopeGlobal}
	if got := one.StaticLimit("a", []string{"a"}, 3); got != 3 {
		t.Errorf("lone DC's static limit of 3 = %d, want 3", got)
	}
	five := []int64{}
	for _, d := range []string{"c", "a", "b"} {
		five = append(five, one.StaticLimit(d, []string{"c", "b", "a"}, 5))
	}
	if !slices.Equal(five, []int64{1, 2, 2}) {
		t.Errorf("5 over c, a, b = %v, want [1 2 2] (the remainder to a and b, first by name)", five)
	}
}
