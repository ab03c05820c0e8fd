package limiter_test

import (
	"context"
	"testing"

	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/pkg/limiter"
)

// TestRefundOnReject checks Request.RefundOnReject on the memory store
// and a real Redis: with user a out of its per-second limit, a request of
// items a and b is rejected; with the flag, b keeps its answer (allowed,
// its remaining as before) and what it took is given back, so b's next
// two requests are allowed; without it, b spent one of its two.
func TestRefundOnReject(t *testing.T) {
	stores := []struct {
		name string
		new  func(t *testing.T, rules string) *limiter.Limiter
	}{
		{"memory", func(t *testing.T, _ string) *limiter.Limiter { return newLimiter(t, mem(t), newClock()) }},
		{"redis", func(t *testing.T, rules string) *limiter.Limiter {
			return redisLimiter(t, redistest.Start(t), newClock(), rules)
		}},
	}
	tests := []struct {
		name     string
		together bool
		wantNext []bool // b's next two requests
	}{
		{"items on their own", false, []bool{true, false}},
		{"refund on reject", true, []bool{true, true}},
	}
	for _, st := range stores {
		for _, tt := range tests {
			t.Run(st.name+"/"+tt.name, func(t *testing.T) {
				l := st.new(t, rulesYAML)
				a := map[string]string{"user_id": "a"}
				b := map[string]string{"user_id": "b"}
				for range 2 {
					check(t, l, a, 1)
				}
				resp, err := l.Check(context.Background(), limiter.Request{
					Items:          []limiter.Item{{Attributes: a}, {Attributes: b}},
					RefundOnReject: tt.together,
				})
				if err != nil {
					t.Fatal(err)
				}
				if resp.Allowed || resp.Items[0].Allowed || !resp.Items[1].Allowed {
					t.Fatalf("got allowed %v, items %v %v; want the request and a rejected, b allowed", resp.Allowed, resp.Items[0].Allowed, resp.Items[1].Allowed)
				}
				for _, r := range resp.Items[1].Results {
					if r.Refunded != tt.together {
						t.Errorf("b's %s: got refunded %v, want %v", r.Match.Rule.Spec.ID, r.Refunded, tt.together)
					}
					if tt.together && r.Remaining != r.Limit {
						t.Errorf("b's %s: got remaining %d, want %d (as before the request)", r.Match.Rule.Spec.ID, r.Remaining, r.Limit)
					}
				}
				for i, want := range tt.wantNext {
					if it := check(t, l, b, 1); it.Allowed != want {
						t.Errorf("b's request %d after: got allowed %v, want %v", i+1, it.Allowed, want)
					}
				}
			})
		}
	}
}
