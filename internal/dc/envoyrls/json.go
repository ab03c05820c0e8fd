package envoyrls

import (
	"io"
	"net/http"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// MaxJSONBody is the largest body JSONHandler reads: the limiter's
// largest gRPC message.
const MaxJSONBody = 4 << 20

// JSONHandler returns envoyproxy/ratelimit's /json debug endpoint over
// svc, for clients that cannot speak gRPC: the body is a RateLimitRequest
// in protobuf's JSON mapping (protojson: camelCase or proto field names,
// unknown fields refused), the answer is svc's RateLimitResponse in the
// same mapping, as application/json, with status 200 when its overall
// code is OK and 429 when it is OVER_LIMIT (500 for any other code). A
// body that cannot be read or parsed, one larger than MaxJSONBody, and
// any error of svc (an empty domain or descriptor list, an invalid
// descriptor, an unavailable store) get 400 with the text "Bad Request",
// as envoyproxy/ratelimit answers them. The handler does not check the
// method or the content type; route it to POST.
func JSONHandler(svc rlsv3.RateLimitServiceServer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxJSONBody))
		if err != nil {
			writeStatus(w, http.StatusBadRequest)
			return
		}
		var req rlsv3.RateLimitRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			writeStatus(w, http.StatusBadRequest)
			return
		}
		resp, err := svc.ShouldRateLimit(r.Context(), &req)
		if err != nil {
			writeStatus(w, http.StatusBadRequest)
			return
		}
		if resp == nil {
			writeStatus(w, http.StatusInternalServerError)
			return
		}
		out, err := protojson.Marshal(resp)
		if err != nil {
			writeStatus(w, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch resp.GetOverallCode() {
		case rlsv3.RateLimitResponse_OK:
			w.WriteHeader(http.StatusOK)
		case rlsv3.RateLimitResponse_OVER_LIMIT:
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
		_, _ = w.Write(out) // the client hung up: nothing to do
	})
}

// writeStatus answers with code and its text, as envoyproxy/ratelimit's
// /json answers its errors.
func writeStatus(w http.ResponseWriter, code int) {
	http.Error(w, http.StatusText(code), code)
}
