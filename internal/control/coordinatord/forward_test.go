package coordinatord

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/kafka/usagetopic"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
	"github.com/weirhq/weir/internal/testkit/kafkatest"
	"github.com/weirhq/weir/internal/testkit/spyhttp"
	"github.com/weirhq/weir/internal/testkit/wait"
	"github.com/weirhq/weir/pkg/adminapi"
)

// TestStandbyForwardsOnlyToPeerURLs runs a leader whose advertised URL is
// a front that counts the connections and requests it gets (and passes
// them on to the leader), then, for each case, a standby with its own
// PeerURLs, and asks the standby for the leader-only views: the
// coordinator's /v1/shares (leaderViews) and the admin API's shares of a
// rule (adminserver's forwarding). A standby forwards them, the caller's
// Authorization included, to a leader it lists or when it lists none;
// to a leader it does not list (another host, or the same one with
// another scheme) it makes no connection at all and answers 502 naming
// the leader's URL.
func TestStandbyForwardsOnlyToPeerURLs(t *testing.T) {
	etcd := etcdtest.Start(t)
	broker := kafkatest.Start(t, usagetopic.Name)
	cli := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	putRule(ctx, t, cli, loginRule())
	tokens := tokenFile(t, "ro operator")

	// The front: the leader's advertised URL.
	var leaderAddr atomic.Value // host:port of the leader's admin port
	front := spyhttp.Start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := &url.URL{Scheme: "http", Host: leaderAddr.Load().(string)}
		(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) }}).ServeHTTP(w, r)
	}))
	frontHost := strings.TrimPrefix(front.URL, "http://")

	base := Config{
		Etcd: etcd.Endpoints(), Kafka: []string{broker.Addr()}, DCs: []string{"a", "b"},
		AdminTokenFile: tokens, DefaultDomain: "api", AdminAddr: "127.0.0.1:0", Interval: 200 * time.Millisecond,
	}
	lc := base
	lc.Name, lc.AdvertiseURL = "c1", front.URL
	leaderAddr.Store(start(t, lc))
	get := func(addr, path string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	wait.For(t, 20*time.Second, "c1 to lead", func() bool {
		code, body := get(leaderAddr.Load().(string), "/v1/status")
		var st struct{ Leader bool }
		return code == 200 && json.Unmarshal([]byte(body), &st) == nil && st.Leader
	})

	// Every standby advertises this URL and lists it, as a shared list
	// would: a coordinator's own URL among its peers is fine.
	const self = "https://standby.example:8070"
	refused := front.URL + " is not among --peer-urls"
	tests := []struct {
		name    string
		peers   []string
		forward bool
	}{
		{"no --peer-urls: forwarded unchecked", nil, true},
		{"leader listed", []string{self, "HTTP://" + frontHost + "/"}, true},
		{"leader not listed", []string{self, "http://c3.example:8070"}, false},
		{"leader listed with https, advertising http", []string{self, "https://" + frontHost}, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := base
			sc.Name, sc.AdvertiseURL, sc.PeerURLs = "c2-"+string(rune('a'+i)), self, tt.peers
			standby := start(t, sc)
			for _, path := range []string{"/v1/shares", "/rate-limits/login/shares"} {
				front.Reset()
				code, body := get(standby, path)
				gotConns, gotSeen := front.Seen()
				if !tt.forward {
					var eb adminapi.ErrorBody
					if code != http.StatusBadGateway || json.Unmarshal([]byte(body), &eb) != nil || !strings.Contains(eb.Error, refused) || eb.Leader != front.URL {
						t.Errorf("%s: got %d %s, want 502 with a JSON error saying %q, naming the leader", path, code, body, refused)
					}
					if gotConns != 0 || len(gotSeen) != 0 {
						t.Errorf("%s: the leader's URL got %d connections and %d requests, want none", path, gotConns, len(gotSeen))
					}
					continue
				}
				if code == http.StatusBadGateway {
					t.Errorf("%s: got 502 %s, want the leader's answer", path, body)
				}
				if len(gotSeen) != 1 {
					t.Fatalf("%s: the leader's URL got %d requests, want 1", path, len(gotSeen))
				}
				if got := gotSeen[0].Header.Get("Authorization"); got != "Bearer "+token {
					t.Errorf("%s: Authorization at the leader: got %q, want the caller's", path, got)
				}
				if got := gotSeen[0].URL.Path; got != path {
					t.Errorf("path at the leader: got %s, want %s", got, path)
				}
			}
		})
	}
}
