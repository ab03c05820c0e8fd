package httpapi_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/dc/httpapi"
	"github.com/weirhq/weir/internal/testkit/redistest"
	"github.com/weirhq/weir/internal/testkit/syncbuf"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/store/redisstore"
)

// TestCallerGoneIsNotAnError: a request whose client went away before the
// store answered (its context canceled) is no error of the limiter's: it
// is answered 503, and the log stays quiet, where it used to log every
// such request as an unexpected error and answer 500.
func TestCallerGoneIsNotAnError(t *testing.T) {
	srv := redistest.Start(t)
	store, err := redisstore.New(srv.Client(t), redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := limiter.New(limiter.Config{Store: store, CacheKeys: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	if err := lim.SetRules(compile(t, rulesYAML)); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	api, err := httpapi.New(httpapi.Config{Limiter: lim, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"clientId":"c1"}`
	check := func(ctx context.Context) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, "POST", "/v1/check", strings.NewReader(body)))
		return rec
	}
	if rec := check(context.Background()); rec.Code != http.StatusOK {
		t.Fatalf("live request: got %d %s, want 200", rec.Code, rec.Body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 20 {
		if rec := check(ctx); rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "canceled") {
			t.Fatalf("request %d, its client gone: got %d %s, want 503 naming the cancellation", i, rec.Code, rec.Body)
		}
	}
	if strings.Contains(logs.String(), "unexpected limiter error") {
		t.Fatalf("a client gone logged as the limiter's error:\n%s", logs.String())
	}
}
