package adminserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/control/adminserver"
	"github.com/weirhq/weir/internal/etcd/rulestore"
	"github.com/weirhq/weir/internal/testkit/wait"
	"github.com/weirhq/weir/pkg/adminapi"
	"github.com/weirhq/weir/pkg/rule"
)

// TestCorruptRuleReported writes garbage by hand over a rule the admin
// API created: GET answers the last valid version, in force, and says the
// stored document is invalid; the list says so too; PUT patches the
// version in force and so fixes the document; DELETE deletes the rule and
// its shadow.
func TestCorruptRuleReported(t *testing.T) {
	e := newEnv(t)
	want(t, e.create(loginRule), 201)
	key, shadow := e.layout.Rule("default", "user-login-attempt"), e.layout.ValidRule("default", "user-login-attempt")
	e.put(key, `{"rule_id": "user-login-attempt", "limit": "lots"}`)

	rec := e.do("GET", "/rate-limits/user-login-attempt", "")
	want(t, rec, 200)
	if got := rec.Header().Get(adminapi.HeaderInvalidDocument); !strings.Contains(got, "limit") {
		t.Errorf("%s: got %q, want why the document is invalid", adminapi.HeaderInvalidDocument, got)
	}
	var r rule.Rule
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || r.Limit != 5 {
		t.Errorf("body: got limit %d (%v), want the last valid version's 5", r.Limit, err)
	}

	rec = e.do("GET", "/rate-limits", "")
	want(t, rec, 200)
	var list adminapi.RuleList
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Rules) != 1 || list.Rules[0].Limit != 5 {
		t.Errorf("listed rules %+v, want the last valid version in force", list.Rules)
	}
	if len(list.Invalid) != 1 || list.Invalid[0].RuleID != "user-login-attempt" || !list.Invalid[0].InForce || list.Invalid[0].Error == "" || !list.Invalid[0].UpdatedAt.Equal(t0) {
		t.Errorf("invalid: got %+v, want user-login-attempt, in force, updated at %v, with its error", list.Invalid, t0)
	}

	rec = e.do("PUT", "/rate-limits/user-login-attempt", `{"limit": 7}`)
	want(t, rec, 200)
	for _, k := range []string{key, shadow} {
		doc, _ := e.get(k)
		if r, err := rulestore.Decode("default", "user-login-attempt", []byte(doc)); err != nil || r.Limit != 7 || r.WindowSeconds != 300 {
			t.Errorf("%s after PUT: got %+v, %v; want the kept version with limit 7", k, r, err)
		}
	}
	rec = e.do("GET", "/rate-limits/user-login-attempt", "")
	if got := rec.Header().Get(adminapi.HeaderInvalidDocument); got != "" {
		t.Errorf("after the fix %s: got %q, want none", adminapi.HeaderInvalidDocument, got)
	}

	e.put(key, `garbage`)
	want(t, e.do("DELETE", "/rate-limits/user-login-attempt", ""), 200)
	for _, rec := range e.audit() {
		if rec.Action == adminapi.ActionDelete && string(rec.Before) != `"garbage"` {
			t.Errorf("audit of the delete: before %s, want the corrupt document as a string", rec.Before)
		}
	}
	for _, k := range []string{key, shadow} {
		if doc, rev := e.get(k); rev != 0 {
			t.Errorf("%s after DELETE: got %q, want no key", k, doc)
		}
	}

	// Without a kept version GET has nothing to show; PUT replaces the
	// document with a whole rule (a partial one is refused) and DELETE
	// deletes it.
	e.put(key, `{"rule_id": "user-login-attempt"`)
	wantError(t, e.do("GET", "/rate-limits/user-login-attempt", ""), 409, "no valid version")
	want(t, e.do("PUT", "/rate-limits/user-login-attempt", `{"limit": 1}`), 422)
	want(t, e.do("PUT", "/rate-limits/user-login-attempt", loginRule), 200)
	for _, k := range []string{key, shadow} {
		doc, _ := e.get(k)
		if r, err := rulestore.Decode("default", "user-login-attempt", []byte(doc)); err != nil || r.Limit != 5 || !r.CreatedAt.Equal(t0) {
			t.Errorf("%s after the whole PUT: got %+v, %v; want the PUT rule, created now", k, r, err)
		}
	}
	e.put(key, `{"rule_id": "user-login-attempt"`)
	e.put(shadow, `garbage`)
	want(t, e.do("DELETE", "/rate-limits/user-login-attempt", ""), 200)
}

// TestCorruptRuleHeldInMemory corrupts both a rule's document and its
// shadow while this coordinator's rule watcher holds the last valid
// version in memory (Config.Held): GET answers that version, the list
// says it is in force, kept in memory, and PUT patches it, repairing both
// keys — no delete and create again.
func TestCorruptRuleHeldInMemory(t *testing.T) {
	var w *rulestore.Watcher
	e := newEnv(t, func(cfg *adminserver.Config) {
		cfg.Held = func(domain, id string) (rulestore.Held, bool) { return w.HeldRule(domain, id) }
	})
	want(t, e.create(loginRule), 201)
	var err error
	w, err = rulestore.New(rulestore.Config{Client: e.cli, Layout: e.layout, Apply: func(int64, []rule.Set) error { return nil }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { stop(); <-done }()
	if err := w.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	key, shadow := e.layout.Rule("default", "user-login-attempt"), e.layout.ValidRule("default", "user-login-attempt")
	e.put(key, strings.Repeat("j", 300_000))
	e.put(shadow, "garbage")
	wait.For(t, 10*time.Second, "the watcher holding the rule from memory", func() bool {
		h, ok := w.HeldRule("default", "user-login-attempt")
		return ok && h.Kept && !h.Shadowed
	})

	rec := e.do("GET", "/rate-limits/user-login-attempt", "")
	want(t, rec, 200)
	var r rule.Rule
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || r.Limit != 5 {
		t.Errorf("GET body: got limit %d (%v), want the version held in memory, 5", r.Limit, err)
	}
	if got := rec.Header().Get(adminapi.HeaderInvalidDocument); got == "" {
		t.Errorf("%s: got none, want why the document is invalid", adminapi.HeaderInvalidDocument)
	}

	rec = e.do("GET", "/rate-limits", "")
	want(t, rec, 200)
	var list adminapi.RuleList
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Rules) != 1 || list.Rules[0].Limit != 5 {
		t.Errorf("listed rules %+v, want the version held in memory", list.Rules)
	}
	if len(list.Invalid) != 1 || !list.Invalid[0].InForce || list.Invalid[0].Kept != adminapi.KeptMemory || !list.Invalid[0].UpdatedAt.Equal(t0) {
		t.Errorf("invalid: got %+v, want in force, kept in memory, updated at %v", list.Invalid, t0)
	}

	want(t, e.do("PUT", "/rate-limits/user-login-attempt", `{"limit": 7}`), 200)
	for _, k := range []string{key, shadow} {
		doc, _ := e.get(k)
		if r, err := rulestore.Decode("default", "user-login-attempt", []byte(doc)); err != nil || r.Limit != 7 || r.WindowSeconds != 300 || !r.CreatedAt.Equal(t0) {
			t.Errorf("%s after PUT: got %+v, %v; want the version held in memory with limit 7", k, r, err)
		}
	}
}

// bigOverrides returns a JSON list of overrides, valid for a rule keyed by
// one dimension, whose document is larger than limiters read.
func bigOverrides() string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range rule.MaxOverrides {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"key": "%0250d", "action": "deny"}`, i)
	}
	b.WriteByte(']')
	return b.String()
}

// TestWritesOnlyValidDocuments sends every kind of rule write and checks
// that what is stored, at the rule's key and its shadow, is a document
// every reader takes (rulestore.Decode), and that a rule the readers
// would skip is refused and nothing stored.
func TestWritesOnlyValidDocuments(t *testing.T) {
	e := newEnv(t)
	big := bigOverrides()
	steps := []struct {
		name, method, target, body string
		code                       int
	}{
		{"create", "POST", "/rate-limits", loginRule, 201},
		{"create in a domain", "POST", "/rate-limits?domain=shop", seedCreate, 201},
		{"create larger than limiters read", "POST", "/rate-limits", `{"rule_id": "big", "key_type": "user", "limit": 1, "window_seconds": 1, "overrides": ` + big + `}`, 413},
		{"update", "PUT", "/rate-limits/user-login-attempt", `{"limit": 9, "description": "d"}`, 200},
		{"update in a domain", "PUT", "/rate-limits/api-global-default?domain=shop", seedUpdate, 200},
		{"update larger than limiters read", "PUT", "/rate-limits/user-login-attempt", `{"overrides": ` + big + `}`, 413},
		{"update to an invalid rule", "PUT", "/rate-limits/user-login-attempt", `{"limit": -1}`, 422},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			want(t, e.do(st.method, st.target, st.body), st.code)
			for _, ref := range [][2]string{{"default", "user-login-attempt"}, {"shop", "api-global-default"}, {"default", "big"}} {
				doc, rev := e.get(e.layout.Rule(ref[0], ref[1]))
				shadow, _ := e.get(e.layout.ValidRule(ref[0], ref[1]))
				if rev == 0 {
					if shadow != "" {
						t.Errorf("%s/%s: a shadow without a rule", ref[0], ref[1])
					}
					continue
				}
				if _, err := rulestore.Decode(ref[0], ref[1], []byte(doc)); err != nil {
					t.Errorf("%s/%s: stored a document readers skip: %v", ref[0], ref[1], err)
				}
				if shadow != doc {
					t.Errorf("%s/%s: shadow %q, want the document %q", ref[0], ref[1], shadow, doc)
				}
			}
		})
	}
	if doc, _ := e.get(e.layout.Rule("default", "user-login-attempt")); !strings.Contains(doc, `"limit":9`) {
		t.Errorf("after the refused updates: got %s, want the last accepted one (limit 9)", doc)
	}
}

// TestInvalidUTF8Refused: a rule document with bytes that are not UTF-8
// is refused (400, naming the offset) rather than accepted with the bytes
// replaced by U+FFFD; one written to etcd by hand is an invalid document,
// answered at its last valid version.
func TestInvalidUTF8Refused(t *testing.T) {
	e := newEnv(t)
	want(t, e.create(loginRule), 201)
	for _, tc := range []struct{ name, method, target, body string }{
		{"create", "POST", "/rate-limits", "{\"rule_id\": \"other\", \"limit\": 1, \"window_seconds\": 1, \"description\": \"x\xff\xfe\"}"},
		{"patch", "PUT", "/rate-limits/user-login-attempt", "{\"description\": \"x\xff\xfe\"}"},
		{"a key", "PUT", "/rate-limits/user-login-attempt", "{\"descr\xffiption\": \"x\"}"},
		{"replace", "PUT", "/rate-limits/user-login-attempt", strings.Replace(loginRule, `"enabled"`, "\"description\": \"\xfe\", \"enabled\"", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, e.do(tc.method, tc.target, tc.body), 400, "not valid UTF-8 at byte offset")
			doc, _ := e.get(e.layout.Rule("default", "user-login-attempt"))
			if r, err := rulestore.Decode("default", "user-login-attempt", []byte(doc)); err != nil || r.Description != "" {
				t.Errorf("stored rule: got %+v, %v; want the created one, without a description", r, err)
			}
			if _, rev := e.get(e.layout.Rule("default", "other")); rev != 0 {
				t.Errorf("rule other: created, want refused")
			}
		})
	}

	t.Run("written to etcd", func(t *testing.T) {
		e.put(e.layout.Rule("default", "user-login-attempt"), "{\"rule_id\": \"user-login-attempt\", \"limit\": 6, \"window_seconds\": 300, \"description\": \"\xff\"}")
		rec := e.do("GET", "/rate-limits/user-login-attempt", "")
		want(t, rec, 200)
		if got := rec.Header().Get(adminapi.HeaderInvalidDocument); !strings.Contains(got, "line 1, column 86: not valid UTF-8 at byte offset 85") {
			t.Errorf("%s: got %q, want the bad byte's offset", adminapi.HeaderInvalidDocument, got)
		}
		var r rule.Rule
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || r.Limit != 5 {
			t.Errorf("body: got limit %d (%v), want the last valid version's 5", r.Limit, err)
		}
	})
}
