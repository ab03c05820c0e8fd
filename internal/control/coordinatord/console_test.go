package coordinatord

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/control/console"
	"github.com/weirhq/weir/internal/kafka/usagetopic"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
	"github.com/weirhq/weir/internal/testkit/kafkatest"
	"github.com/weirhq/weir/internal/testkit/wait"
)

// TestConsoleShowsServerWarningOnce drives a real coordinator's console
// over HTTP: an operator signs in and drains every DC through the Shares
// form; the admin API accepts the policy with a Weir-Warning, and the
// page the redirect leads to shows it exactly once (escaped), though the
// redirect's URL does not carry it. A reload, and a normal change, show
// none; a refresh by console.js (console.RefreshHeader) leaves the
// warning for the next page.
func TestConsoleShowsServerWarningOnce(t *testing.T) {
	etcd := etcdtest.Start(t)
	broker := kafkatest.Start(t, usagetopic.Name)
	cli := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	putRule(ctx, t, cli, loginRule())
	tokens := tokenFile(t, "rw operator")
	addr := start(t, Config{
		Etcd: etcd.Endpoints(), Kafka: []string{broker.Addr()}, DCs: []string{"a", "b"},
		AdminAddr: "127.0.0.1:0", AdminTokenFile: tokens, DefaultDomain: "api", Name: "c1", Interval: 100 * time.Millisecond,
	})
	base := "http://" + addr
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(method, path string, form url.Values, hdr ...string) (*http.Response, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, body)
		if err != nil {
			t.Fatal(err)
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}

	if resp, body := send("POST", "/ui/signin", url.Values{"token": {token}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: got %d, want 303:\n%s", resp.StatusCode, body)
	}
	const page = "/ui/rules/api/login/shares"
	var form string
	wait.For(t, 20*time.Second, "the Shares page with both DCs (the coordinator leads and has planned)", func() bool {
		resp, body := send("GET", page, nil)
		form = body
		return resp.StatusCode == http.StatusOK && strings.Contains(body, `data-dc="a"`) && strings.Contains(body, `data-dc="b"`)
	})
	hidden := func(body, name string) string {
		t.Helper()
		m := regexp.MustCompile(`name="` + name + `" value="([^"]*)"`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no %s in the page:\n%s", name, body)
		}
		return html.UnescapeString(m[1])
	}
	csrf := hidden(form, "csrf")

	// apply submits the form with the DCs drained, and returns the
	// redirect's target.
	apply := func(drained ...string) string {
		t.Helper()
		_, current := send("GET", page, nil)
		f := url.Values{"csrf": {csrf}, "etag": {hidden(current, "etag")}, "action": {"apply"}}
		for _, dc := range drained {
			f.Set("drained-"+dc, "1")
		}
		resp, body := send("POST", page, f)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("apply %v: got %d, want 303:\n%s", drained, resp.StatusCode, body)
		}
		return resp.Header.Get("Location")
	}
	const msg = "every DC is drained or pinned at 0: rule 'login' in domain 'api' rejects every request in every DC"
	shown := func(body string) int { return strings.Count(body, html.EscapeString(msg)) }
	get := func(path string, hdr ...string) string {
		t.Helper()
		resp, body := send("GET", path, nil, hdr...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: got %d, want 200:\n%s", path, resp.StatusCode, body)
		}
		return body
	}

	// Drain every DC: the warning, once, on the page the redirect leads to.
	target := apply("a", "b")
	if target != page+"?applied=1" {
		t.Errorf("redirect: got %q, want %q (the warning stays on the server)", target, page+"?applied=1")
	}
	body := get(target)
	if n := shown(body); n != 1 || strings.Count(body, `id="warnings"`) != 1 || !strings.Contains(body, `id="applied"`) {
		t.Errorf("after draining every DC: got the warning %d times, want once with the applied banner:\n%s", n, body)
	}
	if n := shown(get(target)); n != 0 {
		t.Errorf("reload: got the warning %d times, want none", n)
	}

	// A refresh by the page's script does not take it: the next page
	// shows it.
	target = apply("a", "b")
	if n := shown(get(target, console.RefreshHeader, "1")); n != 0 {
		t.Errorf("refresh after draining every DC: got the warning %d times, want none (kept for the next page)", n)
	}
	if n := shown(get("/ui/cluster")); n != 1 {
		t.Errorf("the next page after a refresh: got the warning %d times, want once", n)
	}

	// A normal change warns of nothing.
	body = get(apply("a"))
	if n := shown(body); n != 0 || strings.Contains(body, `id="warnings"`) || !strings.Contains(body, `id="applied"`) {
		t.Errorf("after draining one DC: got the warning %d times (or a warnings banner), want none and the applied banner:\n%s", n, body)
	}
}
