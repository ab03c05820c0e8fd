package httpapi_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/weirhq/weir/internal/dc/httpapi"
	"github.com/weirhq/weir/internal/testkit/limitertest"
)

// typicalCheck is a check body as docs/api.md shows it.
const typicalCheck = `{"domain": "shop",
 "attributes": {"ip": "203.0.113.7", "username": "john", "path": "/auth/login", "method": "POST"},
 "hits": 1}`

// BenchmarkCheck serves POST /v1/check in process, body decoding included:
// the figure to compare before and after a change to the decoding of
// check bodies (go test -bench Check -benchmem -count 10, then benchstat).
func BenchmarkCheck(b *testing.B) {
	lim := limitertest.New(b, rulesYAML, nil)
	api, err := httpapi.New(httpapi.Config{Limiter: lim})
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(typicalCheck)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/check", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK && rec.Code != http.StatusTooManyRequests {
			b.Fatalf("got %d %s, want 200 or 429", rec.Code, rec.Body)
		}
	}
}
