package sim_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/weirhq/weir/internal/control/console"
	"github.com/weirhq/weir/internal/sim"
	"github.com/weirhq/weir/internal/sim/scenario"
)

// consoleScenario keeps three DCs busy on a global rule (and lists a local
// one) for longer than the browser test needs; the test ends the run.
const consoleScenario = `
name: console
duration: 5m
interval: 500ms
seed: 3
dcs: [a, b, c]
rules:
  domain: shop
  rules:
    - rule_id: checkout
      path_pattern: /checkout
      limit: 300
      window_seconds: 1
      scope: global
    - rule_id: login
      path_pattern: /login
      limit: 10
      window_seconds: 60
      scope: local
traffic:
  - {dc: a, rule: checkout, attributes: {path: /checkout}, rate: 200}
  - {dc: b, rule: checkout, attributes: {path: /checkout}, rate: 80}
  - {dc: c, rule: checkout, attributes: {path: /checkout}, rate: 40}
`

// chromium returns the browser to drive, or skips (loudly) when there is
// none and this is not CI or root, where the test setup installs it
// (scripts/ensure-chromium.sh).
func chromium(t *testing.T) string {
	if p := os.Getenv("WEIR_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" || os.Geteuid() == 0 {
		t.Fatal("chromium is not installed (scripts/ensure-chromium.sh installs it)")
	}
	t.Skip("!!! SKIPPED: the console's browser test needs chromium (apt-get install -y chromium, or WEIR_CHROMIUM=/path)")
	return ""
}

// TestConsoleInBrowser drives headless Chromium against a running
// simulation's console: sign in, see every rule, watch a chart move, pin a
// DC and see its share reach the pin, see the admin API's warning once
// after draining every DC, and be refused with a read-only token. With
// WEIR_UPDATE_SCREENSHOTS=1 it writes docs/console/*.png.
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a simulation and a browser")
	}
	browser := chromium(t)
	sc, err := scenario.Parse([]byte(consoleScenario))
	if err != nil {
		t.Fatal(err)
	}
	cfg := sim.FromScenario(sc)
	cfg.Memory = true
	type ready struct {
		url    string
		tokens sim.ConsoleTokens
	}
	readyc := make(chan ready, 1)
	cfg.Console = &sim.ConsoleConfig{Ready: func(url string, tk sim.ConsoleTokens) { readyc <- ready{url, tk} }}
	runCtx, stopRun := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { _, err := sim.Run(runCtx, cfg); runErr <- err }()
	defer func() {
		stopRun()
		if err := <-runErr; err != nil {
			t.Errorf("sim.Run: %v", err)
		}
	}()
	var rd ready
	select {
	case rd = <-readyc:
	case err := <-runErr:
		runErr <- err
		t.Fatalf("sim.Run ended before the console served: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the console did not start within 60 s")
	}
	interval := cfg.Interval

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	// The first Run starts the browser, which lives as long as its
	// context: ctx, not one of the per-step contexts below.
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start %s: %v", browser, err)
	}
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		actx, acancel := context.WithTimeout(ctx, 30*time.Second)
		defer acancel()
		if err := chromedp.Run(actx, actions...); err != nil {
			var loc, body string
			_ = chromedp.Run(ctx, chromedp.Location(&loc), chromedp.Evaluate(`document.body ? document.body.innerText.slice(0, 2000) : ''`, &body))
			t.Fatalf("%s: %v\nthe page at %s reads:\n%s", what, err, loc, body)
		}
	}
	shots := os.Getenv("WEIR_UPDATE_SCREENSHOTS") == "1"
	shot := func(name string) {
		t.Helper()
		if !shots {
			return
		}
		var png []byte
		run("screenshot "+name, chromedp.FullScreenshot(&png, 100)) // 100: PNG
		dir := filepath.Join("..", "..", "docs", "console")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	signIn := func(token string) {
		t.Helper()
		run("sign in", chromedp.Navigate(rd.url),
			chromedp.WaitVisible(`#token`, chromedp.ByID),
			chromedp.SendKeys(`#token`, token, chromedp.ByID),
			chromedp.Submit(`#token`, chromedp.ByID),
			chromedp.WaitVisible(`#rules`, chromedp.ByID))
	}

	// Sign in, and see every rule. Before that, the console sends one to
	// the sign-in page.
	var loc string
	run("open", chromedp.Navigate(rd.url), chromedp.WaitVisible(`#token`, chromedp.ByID), chromedp.Location(&loc))
	if !strings.Contains(loc, "/ui/signin") {
		t.Errorf("before signing in: got %s, want the sign-in page", loc)
	}
	run("size", chromedp.EmulateViewport(1280, 900))
	shot("signin")
	signIn(rd.tokens.ReadWrite)
	for _, id := range []string{"checkout", "login"} {
		var n int
		run("find "+id, chromedp.Evaluate(fmt.Sprintf(`document.querySelectorAll('#rules tr[data-rule="shop/%s"]').length`, id), &n))
		if n != 1 {
			t.Errorf("overview: got %d rows of rule %s, want 1", n, id)
		}
	}
	// Wait for the leader's figures (its first rounds) before the picture.
	waitJS(t, ctx, 30*time.Second, "the overview shows the shares in force", `document.querySelector('#rules tr[data-rule="shop/checkout"] svg.bar') !== null`)
	shot("overview")

	// Open the rule: its charts' latest point moves within two intervals
	// (the page refreshes itself every interval).
	run("open checkout", chromedp.Click(`a[href="/ui/rules/shop/checkout"]`, chromedp.ByQuery), chromedp.WaitVisible(`#chart-admitted`, chromedp.ByID))
	waitJS(t, ctx, 30*time.Second, "the admitted chart has a point", `(document.querySelector('#chart-admitted')||{}).dataset.latest > ''`)
	var first string
	run("latest", chromedp.AttributeValue(`#chart-admitted`, "data-latest", &first, nil, chromedp.ByID))
	start := time.Now()
	waitJS(t, ctx, 2*interval+time.Second, "the admitted chart's latest point changes", fmt.Sprintf(`document.querySelector('#chart-admitted').dataset.latest !== %q`, first))
	t.Logf("the chart's latest point changed after %v (interval %v)", time.Since(start).Round(time.Millisecond), interval)
	if shots {
		// A picture of a few seconds of history says little; let it grow.
		time.Sleep(20 * time.Second)
		run("reload rule", chromedp.Reload(), chromedp.WaitVisible(`#chart-admitted`, chromedp.ByID))
	}
	shot("rule")

	// Pin DC c at 50% with the read-write token: preview, apply, and see
	// the share in force reach the pin.
	run("shares", chromedp.Click(`a[href="/ui/rules/shop/checkout/shares"]`, chromedp.ByQuery), chromedp.WaitVisible(`#shares-form`, chromedp.ByID),
		chromedp.SendKeys(`input[name="pin-c"]`, "50", chromedp.ByQuery),
		chromedp.Click(`#preview`, chromedp.ByID), chromedp.WaitVisible(`td.preview`, chromedp.ByQuery))
	var preview string
	run("preview", chromedp.Text(`tr[data-dc="c"] td.preview`, &preview, chromedp.ByQuery))
	if preview != "50.0%" {
		t.Errorf("preview of c pinned at 50%%: got %q, want 50.0%%", preview)
	}
	shot("shares-preview")
	run("apply", chromedp.Click(`#apply`, chromedp.ByID), chromedp.WaitVisible(`#applied`, chromedp.ByID))
	deadline := time.Now().Add(30 * time.Second)
	for {
		var share string
		run("reload shares", chromedp.Reload(), chromedp.WaitVisible(`#shares-form`, chromedp.ByID), chromedp.Text(`tr[data-dc="c"] td.share`, &share, chromedp.ByQuery))
		if share == "50.0%" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("c's share in force: got %s 30 s after the pin, want 50.0%%", share)
		}
		time.Sleep(interval / 2)
	}
	shot("shares")
	run("back to the rule", chromedp.Navigate(rd.url+"rules/shop/checkout"), chromedp.WaitVisible(`#chart-shares`, chromedp.ByID))
	if shots {
		time.Sleep(10 * time.Second) // the pin on the charts, for the picture
	}
	run("reload rule", chromedp.Reload(), chromedp.WaitVisible(`#chart-shares`, chromedp.ByID))
	shot("rule-pinned")

	run("cluster", chromedp.Navigate(rd.url+"cluster"), chromedp.WaitVisible(`#coordinators`, chromedp.ByID))
	var leaders int
	run("leaders", chromedp.Evaluate(`[...document.querySelectorAll('#coordinators td strong')].filter(e => e.textContent === 'leader').length`, &leaders))
	if leaders != 1 {
		t.Errorf("cluster: got %d leaders, want 1", leaders)
	}
	waitJS(t, ctx, 10*time.Second, "every DC in step", `document.querySelectorAll('section.dc').length === 3 && document.querySelectorAll('section.dc.silent').length === 0`)
	shot("cluster")

	// At phone width the overview still reads.
	run("phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(rd.url), chromedp.WaitVisible(`#rules`, chromedp.ByID))
	shot("overview-phone")
	run("desktop", chromedp.EmulateViewport(1280, 900))

	// Draining every DC is accepted with the admin API's warning, kept in
	// the session for the next page: the refreshes of an open page
	// (console.js, every interval) do not take it, the next page shows
	// it once. The form is sent by script, its redirect not followed, as
	// from another tab.
	run("rule page for the drain", chromedp.Navigate(rd.url+"rules/shop/checkout"), chromedp.WaitVisible(`#chart-admitted`, chromedp.ByID))
	var drained int
	run("drain every DC", chromedp.Evaluate(`fetch('/ui/rules/shop/checkout/shares', {method: 'POST', redirect: 'manual', body: new URLSearchParams({csrf: document.querySelector('[name=csrf]').value, etag: '', action: 'apply', 'pin-c': '50', 'drained-a': '1', 'drained-b': '1', 'drained-c': '1'})}).then(r => r.type === 'opaqueredirect' ? 303 : r.status)`, &drained,
		func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if drained != 303 {
		t.Fatalf("drain every DC: got status %d, want the form's redirect", drained)
	}
	time.Sleep(3 * interval) // refreshes of the rule page
	var warning string
	run("warning", chromedp.Navigate(rd.url+"cluster"), chromedp.WaitVisible(`#warnings`, chromedp.ByID), chromedp.Text(`#warnings`, &warning, chromedp.ByID))
	if !strings.Contains(warning, "every DC is drained or pinned at 0: rule 'checkout' in domain 'shop'") {
		t.Errorf("the page after draining every DC: got warnings %q, want the admin API's", warning)
	}
	var warnings int
	run("reload after the warning", chromedp.Reload(), chromedp.WaitVisible(`#coordinators`, chromedp.ByID), chromedp.Evaluate(`document.querySelectorAll('#warnings').length`, &warnings))
	if warnings != 0 {
		t.Errorf("reload after the warning: got it again, want it shown once")
	}

	// A read-only token sees the shares and may not change them: no form
	// to submit, and a submission made anyway is refused.
	run("sign out", chromedp.Click(`header form.who button`, chromedp.ByQuery), chromedp.WaitVisible(`#token`, chromedp.ByID))
	signIn(rd.tokens.ReadOnly)
	run("read-only shares", chromedp.Navigate(rd.url+"rules/shop/checkout/shares"), chromedp.WaitVisible(`#readonly`, chromedp.ByID))
	var applyButtons int
	run("apply button", chromedp.Evaluate(`document.querySelectorAll('#apply').length`, &applyButtons))
	if applyButtons != 0 {
		t.Errorf("read-only: got %d apply buttons, want none", applyButtons)
	}
	var status int
	run("forced apply", chromedp.Evaluate(`fetch(location.href, {method: 'POST', body: new URLSearchParams({csrf: document.querySelector('[name=csrf]').value, etag: '', action: 'apply', 'pin-c': '10'})}).then(r => r.status)`, &status,
		func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if status != 403 {
		t.Errorf("read-only apply: got status %d, want 403", status)
	}
	var pin string
	run("pin", chromedp.Reload(), chromedp.WaitVisible(`#shares-form`, chromedp.ByID), chromedp.Value(`input[name="pin-c"]`, &pin, chromedp.ByQuery))
	if pin != "50" {
		t.Errorf("after a read-only apply: got c's pin %q, want 50 (unchanged)", pin)
	}
	shot("shares-readonly")

	// A refresh that fails leaves the page under a banner saying since
	// when and why, the refreshes go on, and one that succeeds removes it.
	const stale = `(document.querySelector('#stale') || {textContent: ''}).textContent`
	run("rule page", chromedp.Navigate(rd.url+"rules/shop/checkout"), chromedp.WaitVisible(`#chart-admitted`, chromedp.ByID))
	run("offline", network.Enable(), network.EmulateNetworkConditions(true, 0, -1, -1))
	waitJS(t, ctx, 10*interval, "a banner says the coordinator is unreachable", `/^Not refreshed since \d\d:\d\d:\d\d: the coordinator is unreachable/.test(`+stale+`)`)
	run("online", network.EmulateNetworkConditions(false, 0, -1, -1))
	waitJS(t, ctx, 10*interval, "the banner goes once a refresh succeeds", `document.querySelector('#stale') === null`)

	// A rule deleted under its open page: the page stays, and says so.
	api := strings.TrimSuffix(rd.url, "ui/") + "rate-limits"
	adminCall(t, "POST", api+"?domain=shop", rd.tokens.ReadWrite, `{"rule_id": "doomed", "path_pattern": "/doomed", "limit": 5, "window_seconds": 1, "scope": "global"}`)
	run("doomed rule page", chromedp.Navigate(rd.url+"rules/shop/doomed"), chromedp.WaitVisible(`#definition`, chromedp.ByID))
	adminCall(t, "DELETE", api+"/doomed?domain=shop", rd.tokens.ReadWrite, "")
	waitJS(t, ctx, 10*interval, "a banner says the rule was deleted", stale+`.includes('the rule was deleted or is not found (HTTP 404)') && document.querySelector('#definition') !== null`)

	// A session that is no longer valid (a revoked token): the next
	// refresh goes to the sign-in page instead of putting it inside this
	// one, and what is typed there stays.
	run("rule page again", chromedp.Navigate(rd.url+"rules/shop/checkout"), chromedp.WaitVisible(`#chart-admitted`, chromedp.ByID))
	run("revoke", network.SetCookie(console.CookieName, "revoked-token-0123456789").WithURL(rd.url).WithPath("/ui/").WithHTTPOnly(true).WithSameSite(network.CookieSameSiteStrict))
	waitJS(t, ctx, 10*interval, "the refresh goes to the sign-in page", `location.pathname === '/ui/signin' && document.querySelectorAll('main').length === 1 && document.querySelector('#token') !== null`)
	run("type a token", chromedp.SendKeys(`#token`, "typed", chromedp.ByID))
	time.Sleep(3 * interval)
	var typed string
	run("typed token", chromedp.Value(`#token`, &typed, chromedp.ByID))
	if typed != "typed" {
		t.Errorf("sign-in page after a revoked session: got the token field %q %v after typing, want \"typed\"", typed, 3*interval)
	}
}

// adminCall sends a request to the admin API with token, and fails the
// test unless it is answered 2xx.
func adminCall(t *testing.T, method, url, token, body string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: got %d, want 2xx: %s", method, url, resp.StatusCode, msg)
	}
}

// waitJS polls a JavaScript condition until it holds or d passes.
func waitJS(t *testing.T, ctx context.Context, d time.Duration, what, cond string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var ok bool
		if err := chromedp.Run(ctx, chromedp.Evaluate(cond, &ok)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: not yet: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
