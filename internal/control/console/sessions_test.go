package console_test

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/control/console"
	"github.com/weirhq/weir/internal/platform/auth"
	"github.com/weirhq/weir/internal/testkit/fakeclock"
)

// signedIn reports whether session opens the overview (200) rather than
// being sent to sign in (303).
func signedIn(t *testing.T, h http.Handler, session string) bool {
	t.Helper()
	rec := do(h, "GET", "/ui/", session, nil)
	switch rec.Code {
	case http.StatusOK:
		return true
	case http.StatusSeeOther:
		return false
	}
	t.Fatalf("GET /ui/: got %d, want 200 or 303:\n%s", rec.Code, rec.Body)
	return false
}

// TestSessions: a session cookie is an opaque id, not the token; it ends
// at sign-out, after its idle time or its lifetime (on an injected clock),
// when its token leaves the token file, and when MaxSessions newer
// sessions push it out.
func TestSessions(t *testing.T) {
	type env struct {
		c     *console.Console
		clock *fakeclock.Clock
		file  string     // the token file
		tf    *auth.File // its tokens
	}
	for _, tc := range []struct {
		name string
		max  int
		// run signs in and does what the case is about; it returns the
		// session that must be refused and those that must still work.
		run func(t *testing.T, e env) (refused string, kept []string)
	}{
		{"sign-out", 0, func(t *testing.T, e env) (string, []string) {
			s, other := signIn(t, e.c, rwToken), signIn(t, e.c, rwToken)
			csrf := csrfOf(t, do(e.c, "GET", "/ui/", s, nil).Body.String())
			if rec := do(e.c, "POST", "/ui/signout", s, url.Values{"csrf": {csrf}}); rec.Code != http.StatusSeeOther {
				t.Fatalf("sign-out: got %d, want 303", rec.Code)
			}
			return s, []string{other}
		}},
		{"idle", 0, func(t *testing.T, e env) (string, []string) {
			idle, busy := signIn(t, e.c, rwToken), signIn(t, e.c, rwToken)
			for range 3 { // 90 minutes, busy used every 30
				e.clock.Advance(30 * time.Minute)
				if !signedIn(t, e.c, busy) {
					t.Fatalf("a session used every 30 minutes ended at %v", e.clock.Now())
				}
			}
			return idle, []string{busy}
		}},
		{"lifetime", 0, func(t *testing.T, e env) (string, []string) {
			old := signIn(t, e.c, rwToken)
			var young string
			for i := range 24 { // 12 hours, used every 30 minutes
				if i == 23 {
					young = signIn(t, e.c, rwToken)
				}
				if !signedIn(t, e.c, old) {
					t.Fatalf("a session ended %v after sign-in, want %v", e.clock.Now().Sub(fakeclock.Start), console.DefaultSessionLifetime)
				}
				e.clock.Advance(30 * time.Minute)
			}
			return old, []string{young}
		}},
		{"token revoked", 0, func(t *testing.T, e env) (string, []string) {
			rw, ro := signIn(t, e.c, rwToken), signIn(t, e.c, roToken)
			if err := os.WriteFile(e.file, []byte(roToken+" ro bob\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := e.tf.Reload(); err != nil {
				t.Fatal(err)
			}
			return rw, []string{ro}
		}},
		{"bounded", 2, func(t *testing.T, e env) (string, []string) {
			a := signIn(t, e.c, rwToken)
			e.clock.Advance(time.Minute)
			b := signIn(t, e.c, rwToken)
			e.clock.Advance(time.Minute)
			signedIn(t, e.c, a) // a is now used after b
			e.clock.Advance(time.Minute)
			c := signIn(t, e.c, rwToken) // pushes b, the least recently used, out
			return b, []string{a, c}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "tokens")
			if err := os.WriteFile(file, []byte(rwToken+" rw alice\n"+roToken+" ro bob\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			tf, err := auth.NewFile(auth.FileConfig{Path: file})
			if err != nil {
				t.Fatal(err)
			}
			clock := fakeclock.New(time.Time{})
			c, err := console.New(console.Config{API: (&api{}).handler(tf), Tokens: tf, DefaultDomain: "d", Now: clock.Now, MaxSessions: tc.max})
			if err != nil {
				t.Fatal(err)
			}
			refused, kept := tc.run(t, env{c: c, clock: clock, file: file, tf: tf})
			if signedIn(t, c, refused) {
				t.Errorf("got the overview with the ended session, want a redirect to sign in")
			}
			for i, s := range kept {
				if !signedIn(t, c, s) {
					t.Errorf("session %d: got a redirect to sign in, want the overview", i)
				}
			}
		})
	}
}
