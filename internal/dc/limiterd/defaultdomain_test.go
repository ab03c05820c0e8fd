package limiterd_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/testkit/etcdtest"
)

// TestDefaultDomain replays the audit's failure: a limiter reading rules
// from etcd answers seed 000's POST /shouldAllowRequest, which names no
// domain, until another team writes a rule in a second domain. Without
// Config.DefaultDomain the endpoint then refuses every request (400, as
// documented); with it, it keeps answering from the default domain.
func TestDefaultDomain(t *testing.T) {
	tests := []struct {
		name          string
		defaultDomain string
		wantCode      int // after the second domain's rule is written
	}{
		{"no default domain", "", http.StatusBadRequest},
		{"default domain", "default", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			etcd := etcdtest.Start(t)
			cli := etcd.Client(t)
			layout := etcdlayout.Layout{}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := cli.Put(ctx, layout.Rule("default", "per-client"), `{"rule_id":"per-client","key_type":"client_id","limit":100,"window_seconds":60}`); err != nil {
				t.Fatal(err)
			}
			base := startLimiter(t, limiterd.Config{DC: "a", Etcd: etcd.Endpoints(), DefaultDomain: tt.defaultDomain})
			call := func(method, path, body string) (int, string) {
				t.Helper()
				req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			const seed = `{"clientId":"123"}`
			if code, body := call("POST", "/shouldAllowRequest", seed); code != http.StatusOK {
				t.Fatalf("one domain: got %d %s, want 200", code, body)
			}
			if _, err := cli.Put(ctx, layout.Rule("other", "x1"), `{"rule_id":"x1","key_type":"user_id","limit":5,"window_seconds":60}`); err != nil {
				t.Fatal(err)
			}
			// The second domain reaches the limiter through its watch.
			for {
				if _, body := call("GET", "/readyz", ""); strings.Contains(body, `"domains":2`) {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatal("the second domain was not loaded before the deadline")
				case <-time.After(20 * time.Millisecond):
				}
			}
			if code, body := call("POST", "/shouldAllowRequest", seed); code != tt.wantCode {
				t.Errorf("two domains: got %d %s, want %d", code, body, tt.wantCode)
			}
		})
	}
}
