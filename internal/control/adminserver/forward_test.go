package adminserver_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/control/adminserver"
	"github.com/weirhq/weir/internal/testkit/deadpeer"
	"github.com/weirhq/weir/internal/testkit/spyhttp"
	"github.com/weirhq/weir/pkg/adminapi"
)

// TestForwardToLeader checks that a standby with Forward carries the live
// views to the leader its Live names, with the request's Authorization,
// at most one hop, and that without Forward it names the leader. With
// Peers, it carries them only to a leader whose URL is listed, and does
// not even connect to another: 502 naming the URL.
func TestForwardToLeader(t *testing.T) {
	// The leader: an admin API over the same etcd that can answer.
	leaderEnv := newEnv(t)
	leaderEnv.create(seedCreate)
	leaderEnv.live.stats["default/api-global-default"] = adminapi.RuleStats{TotalRequests: 7}
	leaderEnv.live.shares["default/api-global-default"] = []adminapi.DCShare{{DC: "us-east", Share: 1}}
	leaderEnv.live.keys["default/api-global-default/k"] = []adminapi.DCKeyStatus{{DC: "us-east", Limit: 100, Remaining: 99}}
	leader := spyhttp.Start(t, leaderEnv.h)
	down := deadpeer.URL(t) // a leader that does not answer
	// The leader's URL as a list may spell it (upper-case scheme, trailing
	// slash), and with the other scheme.
	host := strings.TrimPrefix(leader.URL, "http://")
	listed, tlsTwin := "HTTP://"+host+"/", "https://"+host

	tests := []struct {
		name    string
		forward bool
		peers   []string // Config.Peers; nil: none
		leader  string
		hdr     []string
		code    int
		want    string // in the body
		hops    int    // requests the leader got
	}{
		{"forwarded", true, nil, leader.URL, nil, 200, "", 1},
		{"no Forward: 503 naming the leader", false, nil, leader.URL, nil, 503, "does not lead", 0},
		{"already forwarded once", true, nil, leader.URL, []string{adminserver.ForwardedHeader, "c0"}, 503, "does not lead", 0},
		{"leader unknown", true, nil, "", nil, 503, "does not lead", 0},
		{"leader down", true, nil, down, nil, 502, "did not answer", 0},
		{"leader among the peers", true, []string{"https://standby-1.example", listed}, leader.URL, nil, 200, "", 1},
		{"leader not among the peers", true, []string{"https://standby-1.example", "http://c2.example:8070"}, leader.URL, nil, 502, leader.URL + " is not among --peer-urls", 0},
		{"peer listed with https, leader on http", true, []string{tlsTwin}, leader.URL, nil, 502, leader.URL + " is not among --peer-urls", 0},
		{"peers, leader down", true, []string{down}, down, nil, 502, "did not answer", 0},
	}
	paths := map[string]string{
		"stats":  "/rate-limits/api-global-default/stats",
		"shares": "/rate-limits/api-global-default/shares",
		"key":    "/rate-limits/api-global-default/k",
	}
	for _, tt := range tests {
		for what, path := range paths {
			t.Run(tt.name+"/"+what, func(t *testing.T) {
				leader.Reset()
				standby := newEnv(t, func(c *adminserver.Config) {
					if tt.forward {
						// A transport of its own, so that no connection
						// of an earlier case is reused.
						c.Forward = http.DefaultTransport.(*http.Transport).Clone()
						c.Name = "standby-1"
					}
					if tt.peers != nil {
						p, err := adminserver.ParsePeerURLs(tt.peers)
						if err != nil {
							t.Fatal(err)
						}
						c.Peers = p
					}
				})
				standby.create(seedCreate)
				standby.live.setErr(&adminserver.NotLeaderError{Leader: tt.leader})
				rec := standby.do("GET", path, "", append([]string{"Authorization", "Bearer secret"}, tt.hdr...)...)
				if rec.Code != tt.code {
					t.Fatalf("got %d %s, want %d", rec.Code, rec.Body, tt.code)
				}
				if !strings.Contains(rec.Body.String(), tt.want) {
					t.Errorf("body: got %s, want it to contain %q", rec.Body, tt.want)
				}
				conns, seen := leader.Seen()
				if len(seen) != tt.hops {
					t.Fatalf("the leader got %d requests, want %d", len(seen), tt.hops)
				}
				if tt.hops == 0 {
					if conns != 0 {
						t.Errorf("the leader accepted %d connections, want 0", conns)
					}
					if tt.code == 502 && strings.Contains(tt.want, "--peer-urls") && !strings.Contains(standby.logs.String(), "not among --peer-urls") {
						t.Errorf("logs: got\n%s\nwant a warning that the leader is not among --peer-urls", standby.logs)
					}
					return
				}
				r := seen[0]
				if got := r.Header.Get("Authorization"); got != "Bearer secret" {
					t.Errorf("Authorization at the leader: got %q, want the client's", got)
				}
				if got := r.Header.Get(adminserver.ForwardedHeader); got != "standby-1" {
					t.Errorf("%s at the leader: got %q, want standby-1", adminserver.ForwardedHeader, got)
				}
				if r.URL.Path != path {
					t.Errorf("path at the leader: got %s, want %s", r.URL.Path, path)
				}
			})
		}
	}
}

// TestForwardedAnswerNamesOnlyPeerURLs: the coordinator a standby
// forwards to may have lost the leadership meanwhile, and answers 503
// naming the next leader it read from etcd — checked against no list of
// its own. The standby passes that answer on naming the leader only when
// the URL is among its --peer-urls, in the body and in Location alike.
func TestForwardedAnswerNamesOnlyPeerURLs(t *testing.T) {
	const listed, unlisted = "http://c3.example:8070", "http://evil.example:1"
	former := newEnv(t) // no --peer-urls of its own
	former.create(seedCreate)
	spy := spyhttp.Start(t, former.h)
	peers, err := adminserver.ParsePeerURLs([]string{spy.URL, listed})
	if err != nil {
		t.Fatal(err)
	}
	standby := newEnv(t, func(c *adminserver.Config) {
		c.Forward = http.DefaultTransport.(*http.Transport).Clone()
		c.Name = "standby-1"
		c.Peers = peers
	})
	standby.create(seedCreate)
	standby.live.setErr(&adminserver.NotLeaderError{Leader: spy.URL})
	const path = "/rate-limits/api-global-default/stats"
	for _, tt := range []struct {
		next         string // the leader the former leader names
		wantLeader   string
		wantLocation string
	}{
		{listed, listed, listed + path},
		{unlisted, "", ""},
	} {
		former.live.setErr(&adminserver.NotLeaderError{Leader: tt.next})
		rec := standby.do("GET", path, "", "Authorization", "Bearer secret")
		var body adminapi.ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &body); rec.Code != http.StatusServiceUnavailable || err != nil {
			t.Fatalf("next leader %s: got %d %s, want 503 with a JSON error", tt.next, rec.Code, rec.Body)
		}
		if _, reqs := spy.Seen(); len(reqs) == 0 {
			t.Fatal("the standby did not forward to the former leader")
		}
		if body.Leader != tt.wantLeader || rec.Header().Get("Location") != tt.wantLocation || strings.Contains(rec.Body.String(), "evil") {
			t.Errorf("next leader %s: got leader %q, Location %q, body %s; want %q and %q", tt.next, body.Leader, rec.Header().Get("Location"), rec.Body, tt.wantLeader, tt.wantLocation)
		}
		if tt.wantLeader == "" && !strings.Contains(body.Error, "not among --peer-urls") {
			t.Errorf("next leader %s: error %q does not say why no leader is named", tt.next, body.Error)
		}
	}
}
