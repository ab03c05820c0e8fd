package adminserver_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/control/adminserver"
	"github.com/weirhq/weir/internal/testkit/deadpeer"
	"github.com/weirhq/weir/internal/testkit/fakeclock"
	"github.com/weirhq/weir/internal/testkit/syncbuf"
	"github.com/weirhq/weir/pkg/adminapi"
)

// TestParsePeerURLs checks which URLs an allow-list takes (normalised as
// String shows) and that a bad one is refused with ErrPeerURL, naming it.
func TestParsePeerURLs(t *testing.T) {
	tests := []struct {
		name    string
		urls    []string
		want    string // String(), when valid
		wantErr string // in the error, when not
	}{
		{"host and port", []string{"http://10.0.0.2:8070"}, "http://10.0.0.2:8070", ""},
		{"default ports made explicit", []string{"http://c1", "https://c2"}, "http://c1:80,https://c2:443", ""},
		{"case and trailing slash", []string{"HTTPS://C1.Example.COM:8443/"}, "https://c1.example.com:8443", ""},
		{"IPv6", []string{"https://[::1]:8070"}, "https://[::1]:8070", ""},
		{"duplicates kept once", []string{"http://c1:80", "http://c1/"}, "http://c1:80", ""},
		{"empty list", nil, "", "the list is empty"},
		{"no scheme", []string{"http://c1:8070", "c2:8070"}, "", `"c2:8070"`},
		{"other scheme", []string{"ftp://c1"}, "", `"ftp://c1": not an absolute http(s) URL`},
		{"relative", []string{"/admin"}, "", `"/admin": not an absolute http(s) URL`},
		{"no host", []string{"http://"}, "", `"http://": no host`},
		{"opaque", []string{"http:c1"}, "", `"http:c1": no host`},
		{"path", []string{"http://c1:8070/admin"}, "", `"http://c1:8070/admin": a path, query or fragment is not allowed`},
		{"query", []string{"http://c1:8070/?x=1"}, "", "a path, query or fragment is not allowed"},
		{"fragment", []string{"http://c1:8070#x"}, "", "a path, query or fragment is not allowed"},
		{"user", []string{"http://u:p@c1:8070"}, "", "user information is not allowed"},
		{"port zero", []string{"http://c1:0"}, "", "port 0 out of range"},
		{"port too large", []string{"http://c1:70000"}, "", "port 70000 out of range"},
		{"unparsable", []string{"http://c1:80 80"}, "", `"http://c1:80 80"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := adminserver.ParsePeerURLs(tt.urls)
			if tt.wantErr != "" {
				if !errors.Is(err, adminserver.ErrPeerURL) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an ErrPeerURL containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			if got := p.String(); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// TestPeerURLsAllows checks which leader URLs a list allows: compared
// normalised, the scheme included.
func TestPeerURLsAllows(t *testing.T) {
	p, err := adminserver.ParsePeerURLs([]string{"https://c1.example.com", "http://10.0.0.2:8070", "https://[::1]:8443"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		leader string
		want   bool
	}{
		{"https://c1.example.com", true},
		{"https://c1.example.com:443/", true},
		{"HTTPS://C1.EXAMPLE.COM", true},
		{"http://10.0.0.2:8070", true},
		{"http://10.0.0.2:8070/", true},
		{"https://[::1]:8443", true},
		{"http://c1.example.com", false},       // the scheme counts
		{"http://c1.example.com:443", false},   // so does it with the port
		{"https://10.0.0.2:8070", false},       // and the other way round
		{"http://10.0.0.2:8071", false},        // another port
		{"http://10.0.0.2", false},             // port 80
		{"https://c1.example.com/evil", false}, // not a base URL
		{"https://evil@c1.example.com", false},
		{"https://c1.example.com.evil.net", false},
		{"", false},
		{"10.0.0.2:8070", false},
	}
	for _, tt := range tests {
		if got := p.Allows(tt.leader); got != tt.want {
			t.Errorf("Allows(%q): got %v, want %v", tt.leader, got, tt.want)
		}
	}
	var none *adminserver.PeerURLs
	if !none.Allows("http://anything:1") {
		t.Error("a nil list: got a URL refused, want every URL allowed")
	}
}

// TestPeerRefusalLogRateLimited checks that a standby refusing to forward
// to a leader URL outside its list logs it at most once per
// PeerWarnInterval for each URL.
func TestPeerRefusalLogRateLimited(t *testing.T) {
	p, err := adminserver.ParsePeerURLs([]string{"http://c1:8070"})
	if err != nil {
		t.Fatal(err)
	}
	clock := fakeclock.New(t0)
	adminserver.SetPeerClock(p, clock.Now)
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	steps := []struct {
		advance time.Duration
		leader  string
		lines   int // warnings logged so far
	}{
		{0, "http://evil:1", 1},
		{0, "http://evil:1", 1},
		{30 * time.Second, "http://evil:1", 1},
		{0, "http://evil:2", 2}, // another URL: its own line
		{30 * time.Second, "http://evil:1", 3},
		{time.Second, "http://evil:1", 3},
		{time.Second, "http://evil:2", 3},
	}
	fwd := adminserver.NewForwarder(nil, p, "standby-1", log)
	for i, s := range steps {
		clock.Advance(s.advance)
		rec := httptest.NewRecorder()
		fwd.Proxy(rec, httptest.NewRequest("GET", "/v1/shares", nil), s.leader)
		if rec.Code != 502 {
			t.Fatalf("step %d: got %d, want 502", i, rec.Code)
		}
		if got := strings.Count(logs.String(), "not among --peer-urls"); got != s.lines {
			t.Fatalf("step %d (%s): got %d warnings, want %d; logs:\n%s", i, s.leader, got, s.lines, logs.String())
		}
	}
}

// TestForwardFailureLogRateLimited checks that a standby whose leader
// does not answer answers every request 502 and logs it at most once per
// ForwardFailLogEvery for each leader URL, the next line counting those
// held back.
func TestForwardFailureLogRateLimited(t *testing.T) {
	clock := fakeclock.New(t0)
	var logs syncbuf.Buffer
	fwd := adminserver.NewForwarder(http.DefaultTransport.(*http.Transport).Clone(), nil, "standby-1", slog.New(slog.NewTextHandler(&logs, nil)))
	adminserver.SetForwarderClock(fwd, clock.Now)
	down, other := deadpeer.URL(t), deadpeer.URL(t)
	steps := []struct {
		advance time.Duration
		leader  string
		calls   int
		lines   int    // warnings logged so far
		held    string // in the last line: unlogged_since_last_line=
	}{
		{0, down, 20, 1, "0"},
		{adminserver.ForwardFailLogEvery / 2, down, 5, 1, "0"},
		{0, other, 3, 2, "0"}, // another URL: its own line
		{adminserver.ForwardFailLogEvery / 2, down, 1, 3, "24"},
		{adminserver.ForwardFailLogEvery, "not a URL", 2, 4, "0"},
	}
	for i, s := range steps {
		clock.Advance(s.advance)
		for range s.calls {
			rec := httptest.NewRecorder()
			fwd.Proxy(rec, httptest.NewRequest("GET", "/v1/shares", nil), s.leader)
			if rec.Code != http.StatusBadGateway || !strings.Contains(rec.Body.String(), "did not answer") {
				t.Fatalf("step %d: got %d %s, want 502 saying the leader did not answer", i, rec.Code, rec.Body)
			}
		}
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		if got := strings.Count(logs.String(), "forwarding to the leader failed"); got != s.lines {
			t.Fatalf("step %d (%s): got %d warnings, want %d; logs:\n%s", i, s.leader, got, s.lines, logs.String())
		}
		if last := lines[len(lines)-1]; !strings.Contains(last, "unlogged_since_last_line="+s.held+" ") && !strings.HasSuffix(last, "unlogged_since_last_line="+s.held) {
			t.Errorf("step %d: last line %q, want unlogged_since_last_line=%s", i, last, s.held)
		}
	}
}

// refuseTrip is a Forward that must not be used.
type refuseTrip struct{ t *testing.T }

func (f refuseTrip) RoundTrip(r *http.Request) (*http.Response, error) {
	f.t.Errorf("forwarded %s %s, want no forwarding", r.Method, r.URL)
	return nil, errors.New("not forwarding")
}

// TestNotLeaderNamesOnlyPeerURLs checks, over HTTP, the 503 of a standby
// that does not forward (no Forward, or the request was forwarded once
// already): it names the leader in "leader" and Location when there is
// no Peers or the leader's URL is among them; a leader URL outside them
// is in neither, and the message says why.
func TestNotLeaderNamesOnlyPeerURLs(t *testing.T) {
	const leader = "http://c2.example:8070"
	tests := []struct {
		name      string
		peers     []string // Config.Peers; nil: none
		forwarded bool     // Forward set, and the request forwarded once already
		named     bool     // want the leader in "leader" and Location
	}{
		{"no list", nil, false, true},
		{"no list, forwarded once", nil, true, true},
		{"listed", []string{"http://c1.example:8070", "HTTP://C2.example:8070/"}, false, true},
		{"listed, forwarded once", []string{leader}, true, true},
		{"not listed", []string{"http://c1.example:8070"}, false, false},
		{"not listed, forwarded once", []string{"http://c1.example:8070"}, true, false},
		{"listed with https", []string{"https://c2.example:8070"}, false, false},
	}
	paths := []string{
		"/rate-limits/api-global-default/stats",
		"/rate-limits/api-global-default/shares",
		"/rate-limits/api-global-default/k",
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(c *adminserver.Config) {
				if tt.forwarded {
					c.Forward = refuseTrip{t}
				}
				if tt.peers != nil {
					p, err := adminserver.ParsePeerURLs(tt.peers)
					if err != nil {
						t.Fatal(err)
					}
					c.Peers = p
				}
			})
			e.create(seedCreate)
			e.live.setErr(&adminserver.NotLeaderError{Leader: leader})
			hs := httptest.NewServer(e.h)
			defer hs.Close()
			for _, path := range paths {
				req, err := http.NewRequest("GET", hs.URL+path+"?x=1", nil)
				if err != nil {
					t.Fatal(err)
				}
				if tt.forwarded {
					req.Header.Set(adminserver.ForwardedHeader, "c0")
				}
				resp, err := hs.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var body adminapi.ErrorBody
				dec := json.NewDecoder(resp.Body)
				dec.DisallowUnknownFields()
				err = dec.Decode(&body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body.Error, "does not lead") {
					t.Fatalf("%s: got %d %+v (%v), want 503 saying it does not lead", path, resp.StatusCode, body, err)
				}
				wantLeader, wantLoc := "", ""
				if tt.named {
					wantLeader, wantLoc = leader, leader+path+"?x=1"
				}
				if body.Leader != wantLeader {
					t.Errorf("%s: leader: got %q, want %q", path, body.Leader, wantLeader)
				}
				if got := resp.Header.Get("Location"); got != wantLoc {
					t.Errorf("%s: Location: got %q, want %q", path, got, wantLoc)
				}
				if refused := strings.Contains(body.Error, "not among --peer-urls"); refused == tt.named {
					t.Errorf("%s: error: got %q, want it to say the URL is not among --peer-urls: %v", path, body.Error, !tt.named)
				}
				if strings.Contains(body.Error, "c2.example") && !tt.named {
					t.Errorf("%s: error: got %q, want the unlisted URL left out", path, body.Error)
				}
			}
		})
	}
}
