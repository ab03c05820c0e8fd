package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/weirhq/weir/pkg/httplimit"
)

// FuzzMiddleware sends requests with arbitrary paths, peers and header
// values: the middleware must answer every one — passed on, 429 or 400,
// never a crash, and never both passed on and answered.
func FuzzMiddleware(f *testing.F) {
	f.Add("/api/a", "192.0.2.1:5000", "alice", "198.51.100.7, 10.0.0.1")
	f.Add("/users/me", "10.1.2.3:80", "", "not-an-ip")
	f.Add("/api/%zz", "[::ffff:10.0.0.1]:1", "\x00\xff", ",,,")
	f.Add("/", "", "a,b", "::1, fe80::1%eth0")
	lim := newLimiter(f, rulesYAML)
	m, err := httplimit.New(httplimit.Config{
		Checker: lim, Headers: map[string]string{"X-User-Id": "user_id"},
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path, peer, user, xff string) {
		up := &upstream{}
		h := m.Wrap(up)
		r := httptest.NewRequest("GET", "/", nil)
		r.URL.Path, r.RemoteAddr = path, peer
		r.Header.Set("X-User-Id", user)
		r.Header.Set("X-Forwarded-For", xff)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		switch {
		case up.served == 1 && w.Code == http.StatusOK:
		case up.served == 0 && (w.Code == http.StatusTooManyRequests || w.Code == http.StatusBadRequest):
		default:
			t.Fatalf("path %q peer %q user %q xff %q: served %d, code %d %q", path, peer, user, xff, up.served, w.Code, w.Body.String())
		}
	})
}
