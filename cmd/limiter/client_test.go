package main_test

// The Go client (pkg/client) against the limiter binary killed with
// SIGKILL mid-run and started again on the same address: the failure
// policies answer while it is gone, counted, and calls come back to it.

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/platform/embedetcd"
	"github.com/weirhq/weir/internal/testkit/limitertest"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/pkg/client"
	"github.com/weirhq/weir/pkg/limiter"
)

const killRules = `
domain: api
rules:
  - rule_id: per-user
    key_type: user_id
    limit: 1000
    window_seconds: 60
    algorithm: FixedWindow
`

// TestClientThroughLimiterKill: callers of two call sites (reject, and
// decide locally at a conservative limit) keep checking while the limiter
// process is killed with SIGKILL and started again.
func TestClientThroughLimiterKill(t *testing.T) {
	skipShort(t)
	srv := redistest.Start(t)
	rulesPath := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, rulesPath, killRules)
	grpcAddr, err := embedetcd.FreeAddr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--dc", "kill-dc", "--redis", srv.Addr, "--rules", rulesPath,
		"--http-addr", "127.0.0.1:0", "--grpc-addr", grpcAddr, "--store-timeout", "500ms"}
	p := startLimiter(t, args)

	c, err := client.New(client.Config{Addrs: []string{grpcAddr}, Timeout: 200 * time.Millisecond, ReconnectMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reject, err := c.Site(client.Policy{OnFailure: client.Reject})
	if err != nil {
		t.Fatal(err)
	}
	conservative := limitertest.New(t, `
domain: api
rules:
  - rule_id: conservative
    key_type: user_id
    limit: 5
    window_seconds: 60
`, nil)
	local, err := c.Site(client.Policy{OnFailure: client.Local, Local: conservative})
	if err != nil {
		t.Fatal(err)
	}
	check := func(site *client.Site, user string) (limiter.RuleResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := site.Check(ctx, limiter.Request{Items: []limiter.Item{{Attributes: map[string]string{"user_id": user}}}})
		if err != nil {
			return limiter.RuleResult{}, err
		}
		if len(resp.Items) != 1 || len(resp.Items[0].Results) != 1 {
			return limiter.RuleResult{}, fmt.Errorf("check of %s: %d items, want one result", user, len(resp.Items))
		}
		return resp.Items[0].Results[0], nil
	}
	mustCheck := func(site *client.Site, user string) limiter.RuleResult {
		t.Helper()
		r, err := check(site, user)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// Callers keep checking through the kill and the restart.
	var stop atomic.Bool
	var byStore, byReject, byLocal, failed atomic.Int64
	var wg sync.WaitGroup
	defer func() { stop.Store(true); wg.Wait() }()
	for w := range 4 {
		site := reject
		if w%2 == 1 {
			site = local
		}
		wg.Go(func() {
			for n := 0; !stop.Load(); n++ {
				r, err := check(site, fmt.Sprintf("load-%d-%d", w, n%50))
				switch {
				case err != nil:
					failed.Add(1)
				case r.Match.Rule.Spec.ID == "conservative":
					byLocal.Add(1) // the local limiter's own store decided
				case r.Source == limiter.SourceStore:
					byStore.Add(1)
				case r.Source == limiter.SourceFailureClosed:
					byReject.Add(1)
				}
			}
		})
	}

	var window time.Time // when alice's window resets
	for i := range 3 {
		r := mustCheck(reject, "alice")
		if r.Source != limiter.SourceStore || r.Remaining != int64(999-i) {
			t.Fatalf("check %d of alice: got %v remaining %d, want the store's, %d", i, r.Source, r.Remaining, 999-i)
		}
		window = r.ResetAt
	}

	grows := func(n *atomic.Int64, by int64, what string) {
		t.Helper()
		from, deadline := n.Load(), time.Now().Add(15*time.Second)
		for n.Load() < from+by {
			if time.Now().After(deadline) {
				t.Fatalf("after 15s: %d more %s, want %d", n.Load()-from, what, by)
			}
			time.Sleep(10 * time.Millisecond) // between polls of the counter
		}
	}
	grows(&byStore, 200, "answers from the limiter before the kill")
	before := c.Stats().Fallbacks
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	if r := mustCheck(reject, "alice"); r.Source != limiter.SourceFailureClosed || r.Match.Rule.Spec.ID != client.UnavailableRuleID {
		t.Fatalf("reject site with the limiter killed: got %v by %q, want the policy's rejection", r.Source, r.Match.Rule.Spec.ID)
	}
	if r := mustCheck(local, "carol"); r.Match.Rule.Spec.ID != "conservative" || !r.Allowed || r.Limit != 5 {
		t.Fatalf("local site with the limiter killed: got rule %q allowed %v limit %d, want the conservative limiter's", r.Match.Rule.Spec.ID, r.Allowed, r.Limit)
	}
	killed := c.Stats().Fallbacks
	if killed[client.Reject] <= before[client.Reject] || killed[client.Local] <= before[client.Local] {
		t.Errorf("fallbacks while killed: reject %d→%d, local %d→%d; want both counted", before[client.Reject], killed[client.Reject], before[client.Local], killed[client.Local])
	}

	restarted := time.Now()
	startLimiter(t, args) // on the same address: the client finds it there
	var back limiter.RuleResult
	for {
		back = mustCheck(reject, "alice")
		if back.Source == limiter.SourceStore {
			break
		}
		if time.Since(restarted) > 15*time.Second {
			t.Fatal("checks did not reach the limiter in 15s after it started again")
		}
		time.Sleep(20 * time.Millisecond) // between polls of the condition
	}
	t.Logf("calls reached the restarted limiter %v after its start", time.Since(restarted).Round(time.Millisecond))
	// The window is a minute from the epoch: the test may cross into the
	// next one, where alice starts again.
	if back.ResetAt.Equal(window) && back.Remaining != 996 {
		t.Errorf("first check of alice after the restart: remaining %d, want 996 (Redis kept the count)", back.Remaining)
	} else if !back.ResetAt.Equal(window) && back.Remaining != 999 {
		t.Errorf("first check of alice after the restart, in the next window: remaining %d, want 999", back.Remaining)
	}
	grows(&byStore, 200, "answers from the restarted limiter")
	stop.Store(true)
	wg.Wait()
	t.Logf("callers: %d answered by the limiter, %d by the reject policy, %d by the local limiter, %d errors",
		byStore.Load(), byReject.Load(), byLocal.Load(), failed.Load())
	if failed.Load() != 0 || byStore.Load() == 0 || byReject.Load() == 0 || byLocal.Load() == 0 {
		t.Errorf("want answers from the limiter and both policies, and no error")
	}
	settled := c.Stats().Fallbacks
	for _, site := range []*client.Site{reject, local} {
		for range 20 {
			if r := mustCheck(site, "bob"); r.Source != limiter.SourceStore || r.Match.Rule.Spec.ID != "per-user" {
				t.Fatalf("check after the limiter came back: got %v by %q, want the limiter's store", r.Source, r.Match.Rule.Spec.ID)
			}
		}
	}
	if got := c.Stats().Fallbacks; got[client.Reject] != settled[client.Reject] || got[client.Local] != settled[client.Local] {
		t.Errorf("fallbacks after the limiter came back: got %v, want %v", got, settled)
	}
}
