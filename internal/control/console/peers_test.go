package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/control/adminserver"
	"github.com/weirhq/weir/internal/control/console"
	"github.com/weirhq/weir/internal/platform/auth"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
	"github.com/weirhq/weir/pkg/adminapi"
)

// standbyLive is the live view of a coordinator that does not lead and
// names leader (as read from its election key), except for the Cluster
// page's list of coordinators, which every coordinator knows.
type standbyLive struct{ leader string }

var _ adminserver.SeriesLive = standbyLive{}

func (l standbyLive) err() error { return &adminserver.NotLeaderError{Leader: l.leader} }

func (l standbyLive) Stats(context.Context, string, string) (adminapi.RuleStats, error) {
	return adminapi.RuleStats{}, l.err()
}

func (l standbyLive) Shares(context.Context, string, string) ([]adminapi.DCShare, error) {
	return nil, l.err()
}

func (l standbyLive) KeyStatus(context.Context, string, string, string) ([]adminapi.DCKeyStatus, error) {
	return nil, l.err()
}

func (l standbyLive) Series(context.Context, string, string) (adminapi.Series, error) {
	return adminapi.Series{}, l.err()
}

func (l standbyLive) Overview(context.Context) (adminapi.Overview, error) {
	return adminapi.Overview{}, l.err()
}

func (l standbyLive) Cluster(context.Context) (adminapi.Cluster, error) {
	return adminapi.Cluster{Coordinators: []adminapi.Coordinator{
		{Name: "c2", AdminURL: l.leader, Leader: true},
		{Name: "c1", AdminURL: "http://c1.example:8070"},
	}}, nil
}

// TestLeaderLinkOnlyToPeerURLs serves, over HTTP, the console of a standby
// (a real admin API over etcd, whose live view names the leader) and
// checks where it links: to the leader's console (the standby banner of
// the overview) and to the coordinators' (Cluster page) only when their
// URLs are among --peer-urls, or when there is no list. An unlisted
// leader is neither linked nor named, and the banner says why; the
// console checks its own list too, should the admin API name one.
func TestLeaderLinkOnlyToPeerURLs(t *testing.T) {
	const leader = "http://c2.example:8070"
	cli := etcdtest.Start(t).Client(t)
	tokens, err := auth.Parse([]byte(roToken + " ro bob\n"))
	if err != nil {
		t.Fatal(err)
	}
	list := func(urls ...string) *adminserver.PeerURLs {
		p, err := adminserver.ParsePeerURLs(urls)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name       string
		api, ui    *adminserver.PeerURLs // the admin API's Peers, the console's PeerAllowed; nil: none
		leaderLink bool                  // want the leader linked
	}{
		{"no list", nil, nil, true},
		{"leader listed", list("http://c1.example:8070", leader), list("http://c1.example:8070", leader), true},
		{"leader not listed", list("http://c1.example:8070"), list("http://c1.example:8070"), false},
		{"listed only with https", list("https://c2.example:8070", "http://c1.example:8070"), list("https://c2.example:8070", "http://c1.example:8070"), false},
		{"named by the API, not in the console's list", nil, list("http://c1.example:8070"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api, err := adminserver.New(adminserver.Config{Etcd: cli, Live: standbyLive{leader}, Peers: tt.api})
			if err != nil {
				t.Fatal(err)
			}
			cfg := console.Config{API: auth.Middleware(tokens, api), Tokens: tokens}
			if tt.ui != nil {
				cfg.PeerAllowed = tt.ui.Allows
			}
			c, err := console.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(c)
			defer hs.Close()
			jar, err := cookiejar.New(nil)
			if err != nil {
				t.Fatal(err)
			}
			hc := &http.Client{Jar: jar}
			get := func(path string) string {
				t.Helper()
				resp, err := hc.Get(hs.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("GET %s: got %d (%v), want 200:\n%s", path, resp.StatusCode, err, b)
				}
				return string(b)
			}
			resp, err := hc.PostForm(hs.URL+"/ui/signin", url.Values{"token": {roToken}})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()

			const link = `href="` + leader + `/ui/"`
			const refused = "not among this coordinator's --peer-urls"
			overview := get("/ui/")
			if !strings.Contains(overview, `id="standby"`) {
				t.Fatalf("overview: got no standby banner:\n%s", overview)
			}
			if tt.leaderLink {
				if !strings.Contains(overview, link) || strings.Contains(overview, refused) {
					t.Errorf("overview: got no link %s to the leader's console (or a refusal):\n%s", link, overview)
				}
			} else {
				if strings.Contains(overview, "c2.example") {
					t.Errorf("overview: got the unlisted leader's URL, want it left out:\n%s", overview)
				}
				if !strings.Contains(overview, refused) {
					t.Errorf("overview: got no %q, want the banner to say why the leader is not linked:\n%s", refused, overview)
				}
			}

			cluster := get("/ui/cluster")
			if got := strings.Contains(cluster, link); got != tt.leaderLink {
				t.Errorf("cluster: link %s to the leader: got %v, want %v:\n%s", link, got, tt.leaderLink, cluster)
			}
			if !tt.leaderLink && !strings.Contains(cluster, "not among --peer-urls: not linked") {
				t.Errorf("cluster: got no note that the leader's URL is not among --peer-urls:\n%s", cluster)
			}
			if !strings.Contains(cluster, `href="http://c1.example:8070/ui/"`) {
				t.Errorf("cluster: got no link to c1, whose URL is listed (or there is no list):\n%s", cluster)
			}
		})
	}
}
