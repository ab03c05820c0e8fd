package console_test

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/control/console"
	"github.com/weirhq/weir/pkg/adminapi"
)

// longReason is an invalid document's reason as the API gives it for a
// document with many unknown fields: far longer than a marker should be.
var longReason = "unknown fields: " + strings.Repeat("field_with_a_long_name, ", 800) + "end"

// leading answers GET /overview as a leader with nothing planned yet.
func leading(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(adminapi.Overview{IntervalSeconds: 1})
}

// row returns the overview's row of rule id in domain d.
func row(t *testing.T, body, id string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<tr data-rule="d/` + regexp.QuoteMeta(html.EscapeString(id)) + `">.*?</tr>`).FindString(body)
	if m == "" {
		t.Fatalf("overview: no row of rule %q in\n%s", id, body)
	}
	return m
}

// TestOverviewReadsPoliciesInParallel: the overview of many global rules
// reads their share policies a few at a time, not one after the other,
// and shows every rule's settings.
func TestOverviewReadsPoliciesInParallel(t *testing.T) {
	const rules, delay = 200, 20 * time.Millisecond // one after the other: 4 s
	c, a := newConsoleWith(t, &api{overview: leading, globals: rules, sharesDelay: delay}, console.Config{})
	start := time.Now()
	rec := do(c, "GET", "/ui/", signIn(t, c, roToken), nil)
	took := time.Since(start)
	body := rec.Body.String()
	if rec.Code != 200 {
		t.Fatalf("GET /ui/: got %d, want 200:\n%s", rec.Code, body)
	}
	if took > rules*delay/3 {
		t.Errorf("overview of %d global rules whose policies take %v each: took %v, want under %v", rules, delay, took, rules*delay/3)
	}
	for i := range rules {
		if id := fmt.Sprintf("g%d", i); !strings.Contains(row(t, body, id), "c drained") {
			t.Errorf("overview: row of %s has no marker \"c drained\"", id)
		}
	}
	if strings.Contains(body, `id="error"`) || strings.Contains(body, `id="standby"`) {
		t.Errorf("overview: got an error or standby banner from a leader that answered everything:\n%s", body)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.maxInFlight < 2 || a.maxInFlight > 8 {
		t.Errorf("got at most %d share reads in flight, want 2 to 8", a.maxInFlight)
	}
}

// TestOverviewIncomplete: a page that could not read everything says so in
// an error banner, and only the API's answer that this coordinator does
// not lead makes it say so.
func TestOverviewIncomplete(t *testing.T) {
	unavailable := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(adminapi.ErrorBody{Error: "etcd unavailable"})
	}
	// late answers like the API when the page's deadline passes first.
	late := func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		unavailable(w, r)
	}
	withDomainE := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(adminapi.Overview{IntervalSeconds: 1, Rules: []adminapi.RuleOverview{{Domain: "e", RuleID: "x"}}})
	}
	for _, tc := range []struct {
		name  string
		api   *api
		cfg   console.Config
		error string // want in the error banner
	}{
		{"live figures unavailable (503, not the not-leader answer)", &api{overview: unavailable}, console.Config{},
			"the live figures could not be read: get overview: etcd unavailable (HTTP 503)"},
		{"live figures past the page's deadline", &api{overview: late}, console.Config{PageTimeout: 100 * time.Millisecond},
			"the live figures could not be read"},
		{"a domain's rules not listed", &api{overview: withDomainE, failList: map[string]bool{"e": true}}, console.Config{},
			"the rules of domain e could not be listed, so none of them is shown"},
		{"share settings unavailable", &api{overview: leading, sharesFail: unavailable}, console.Config{},
			"the share settings of 1 of 1 global rules could not be read"},
		{"share settings past the page's deadline", &api{overview: leading, globals: 40, sharesDelay: 50 * time.Millisecond}, console.Config{PageTimeout: 100 * time.Millisecond},
			"global rules could not be read, so their rows lack them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newConsoleWith(t, tc.api, tc.cfg)
			rec := do(c, "GET", "/ui/", signIn(t, c, roToken), nil)
			body := rec.Body.String()
			if rec.Code != 200 {
				t.Fatalf("GET /ui/: got %d, want 200:\n%s", rec.Code, body)
			}
			if strings.Contains(body, `id="standby"`) {
				t.Errorf("got the standby banner, want none: the API did not say this coordinator does not lead")
			}
			banner := regexp.MustCompile(`(?s)<p class="banner error" id="error">(.*?)</p>`).FindStringSubmatch(body)
			if banner == nil || !strings.Contains(html.UnescapeString(banner[1]), tc.error) {
				t.Errorf("got error banner %q, want one saying %q", banner, tc.error)
			}
			if !strings.Contains(body, `data-rule="d/r"`) {
				t.Errorf("got no row of rule r, which was listed")
			}
		})
	}
}

// TestOverviewCutsLongReasons: a marker quotes the start of a long reason,
// with more in its title; the rule's page gives it whole.
func TestOverviewCutsLongReasons(t *testing.T) {
	c, _ := newConsoleWith(t, &api{overview: leading, invalid: []adminapi.InvalidRule{{Domain: "d", RuleID: "huge", Error: longReason}}}, console.Config{})
	body := do(c, "GET", "/ui/", signIn(t, c, roToken), nil).Body.String()
	for _, id := range []string{"huge"} {
		r := row(t, body, id)
		text := regexp.MustCompile(`<span class="marker[^"]*"[^>]*>([^<]*)</span>`).FindStringSubmatch(r)
		if text == nil {
			t.Fatalf("row of %s: no marker in\n%s", id, r)
		}
		if n := len(html.UnescapeString(text[1])); n > 400 {
			t.Errorf("row of %s: got a marker of %d bytes, want at most 400", id, n)
		}
		if !strings.Contains(r, `title="stored document invalid and no valid version kept`) {
			t.Errorf("row of %s: got no title with the longer reason", id)
		}
	}
	rule := do(c, "GET", "/ui/rules/d/held", signIn(t, c, roToken), nil).Body.String()
	if !strings.Contains(html.UnescapeString(rule), longReason) {
		t.Errorf("rule page of held: got no whole reason of its invalid document")
	}
}

// TestOverviewUnaddressableRules: a rule whose id the admin API cannot
// address has no link (it would lead to a 404) and names the etcd key to
// delete.
func TestOverviewUnaddressableRules(t *testing.T) {
	ids := []string{"a<b", "has space", "bad\ufffdutf8", "-dash-first", strings.Repeat("x", 129)}
	var invalid []adminapi.InvalidRule
	for _, id := range ids {
		invalid = append(invalid, adminapi.InvalidRule{Domain: "d", RuleID: id, Error: "malformed JSON"})
	}
	c, _ := newConsoleWith(t, &api{overview: leading, invalid: invalid}, console.Config{EtcdPrefix: "/custom/"})
	body := do(c, "GET", "/ui/", signIn(t, c, roToken), nil).Body.String()
	for _, id := range ids {
		r := row(t, body, id)
		if strings.Contains(r, "<a ") {
			t.Errorf("row of %q: got a link, want none:\n%s", id, r)
		}
		if want := "Delete its key in etcd: <code>" + html.EscapeString("/custom/rules/d/"+id) + "</code>"; !strings.Contains(r, want) {
			t.Errorf("row of %q: got no %q in\n%s", id, want, r)
		}
	}
	if r := row(t, body, "bad\ufffdutf8"); !strings.Contains(r, "not UTF-8") {
		t.Errorf("row of an id shown with U+FFFD: got no word that the key holds other bytes:\n%s", r)
	}
	// A valid id keeps its link.
	if r := row(t, body, "lost"); !strings.Contains(r, `<a href="/ui/rules/d/lost">`) {
		t.Errorf("row of lost: got no link:\n%s", r)
	}
}
