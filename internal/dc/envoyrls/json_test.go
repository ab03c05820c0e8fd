package envoyrls_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/dc/envoyrls"
	"github.com/weirhq/weir/pkg/limiter"
)

// TestJSONHandler replays envoyproxy/ratelimit's /json endpoint (its
// server_impl_test and README) against a limiter on a real Redis: the
// request in protobuf's JSON mapping, the answer the peer renders, its
// status codes, and a sequence that goes over a limit.
func TestJSONHandler(t *testing.T) {
	svc, _ := peerService(t, envoyrls.Headers{}, peerBasic, peerMixed)
	srv := httptest.NewServer(envoyrls.JSONHandler(svc))
	t.Cleanup(srv.Close)

	const badRequest = "Bad Request\n"
	tests := []struct {
		name     string
		body     string
		wantCode int
		wantBody string // JSON compared by value, or badRequest's text
	}{
		{"missing body", "", 400, badRequest},
		{"not JSON", "}", 400, badRequest},
		{"unknown field", `{"domain":"basic","descriptors":[{"entries":[{"key":"key1","value":"a"}]}],"hits":1}`, 400, badRequest},
		{"wrong type", `{"domain":"basic","descriptors":{"entries":[]}}`, 400, badRequest},
		{"empty domain", `{"descriptors":[{"entries":[{"key":"key1","value":"a"}]}]}`, 400, badRequest},
		{"no descriptors", `{"domain":"basic"}`, 400, badRequest},
		// More than the limiter takes, refused before protojson builds
		// them, whatever the domain (envoyproxy/ratelimit sets no bound).
		{"more descriptors than the limiter takes", `{"domain":"basic","descriptors":[` + strings.Repeat(`{},`, limiter.MaxItems) + `{}]}`, 400, badRequest},
		{"4 MiB of empty descriptors", `{"domain":"basic","descriptors":[` + strings.Repeat(`{},`, (envoyrls.MaxJSONBody-64)/3) + `{}]}`, 400, badRequest},
		{"more entries than the limiter takes", `{"domain":"basic","descriptors":[{"entries":[` + strings.Repeat(`{"key":"k"},`, limiter.MaxAttributes) + `{"key":"k"}]}]}`, 400, badRequest},
		{"own limit with no unit", `{"domain":"basic","descriptors":[{"entries":[{"key":"x"}],"limit":{"requestsPerUnit":1}}]}`, 400, badRequest},
		{"unknown domain", `{"domain":"dummy","descriptors":[{"entries":[{"key":"perday"}]}]}`, 200,
			`{"overallCode":"OK","statuses":[{"code":"OK"}]}`},
		{"no limit for the descriptor", `{"domain":"basic","descriptors":[{"entries":[{"key":"other","value":"a"}]}]}`, 200,
			`{"overallCode":"OK","statuses":[{"code":"OK"}]}`},
		{"within the limit", `{"domain":"basic","descriptors":[{"entries":[{"key":"key1","value":"a"}]}]}`, 200,
			`{"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"requestsPerUnit":50,"unit":"SECOND"},"limitRemaining":49,"durationUntilReset":"1s"}]}`},
		// Proto field names are accepted beside the JSON names.
		{"proto names, hits", `{"domain":"basic","hits_addend":10,"descriptors":[{"entries":[{"key":"key1","value":"a"}]}]}`, 200,
			`{"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"requestsPerUnit":50,"unit":"SECOND"},"limitRemaining":39,"durationUntilReset":"1s"}]}`},
		{"first in the minute", `{"domain":"basic","descriptors":[{"entries":[{"key":"one_per_minute","value":"x"}]}]}`, 200,
			`{"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"requestsPerUnit":1,"unit":"MINUTE"},"durationUntilReset":"50s"}]}`},
		{"over the limit", `{"domain":"basic","descriptors":[{"entries":[{"key":"one_per_minute","value":"x"}]}]}`, 429,
			`{"overallCode":"OVER_LIMIT","statuses":[{"code":"OVER_LIMIT","currentLimit":{"requestsPerUnit":1,"unit":"MINUTE"},"durationUntilReset":"50s"}]}`},
		{"unlimited, named limit, two descriptors", `{"domain":"mixed","descriptors":[{"entries":[{"key":"free","value":"x"}]},{"entries":[{"key":"code","value":"500"}]}]}`, 200,
			`{"overallCode":"OK","statuses":[{"code":"OK","limitRemaining":4294967295},{"code":"OK","currentLimit":{"name":"errors","requestsPerUnit":1,"unit":"MINUTE"},"durationUntilReset":"50s"}]}`},
		{"descriptor's own limit, per-descriptor hits", `{"domain":"mixed","descriptors":[{"entries":[{"key":"x","value":"y"}],"limit":{"requestsPerUnit":3,"unit":"HOUR"},"hitsAddend":"2"}]}`, 200,
			`{"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"requestsPerUnit":3,"unit":"HOUR"},"limitRemaining":1,"durationUntilReset":"3590s"}]}`},
	}
	for _, tt := range tests { // in order: later cases count on earlier ones
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL, "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, body, tt.wantCode)
			}
			if tt.wantBody == badRequest {
				if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" || string(body) != badRequest {
					t.Errorf("got %q %q, want text/plain %q", ct, body, badRequest)
				}
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("got content type %q, want application/json", ct)
			}
			var got, want any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("body %s: %v", body, err)
			}
			if err := json.Unmarshal([]byte(tt.wantBody), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %s, want %s", body, tt.wantBody)
			}
		})
	}
}

// TestJSONHandlerBodyLimit: a body beyond MaxJSONBody is not read whole; it
// is refused as a body that cannot be read.
func TestJSONHandlerBodyLimit(t *testing.T) {
	svc, _ := peerService(t, envoyrls.Headers{}, peerBasic)
	srv := httptest.NewServer(envoyrls.JSONHandler(svc))
	t.Cleanup(srv.Close)
	body := `{"domain":"basic","descriptors":[{"entries":[{"key":"key1","value":"` + strings.Repeat("a", envoyrls.MaxJSONBody) + `"}]}]}`
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("got %d, want 400", resp.StatusCode)
	}
}
