package envoyrls

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/weirhq/weir/pkg/limiter"
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
// as envoyproxy/ratelimit answers them; so does a body of more than
// limiter.MaxItems descriptors or a descriptor of more than
// limiter.MaxAttributes entries, found before protojson builds them
// (jsonBounds). The handler does not check the method or the content
// type; route it to POST.
func JSONHandler(svc rlsv3.RateLimitServiceServer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxJSONBody))
		if err != nil {
			writeStatus(w, http.StatusBadRequest)
			return
		}
		if !jsonBounds(body) {
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

// jsonBounds reports false for a RateLimitRequest in JSON, body, of more
// descriptors than limiter.MaxItems or a descriptor of more entries than
// limiter.MaxAttributes, reading no further than the first one past the
// bound: protojson would make a message of each of the hundreds of
// thousands of empty descriptors ({}) a 4 MiB body holds before the
// service refused them. It follows body only while body has the shape of
// a request (an object of few members, descriptors a list of objects,
// entries a list of objects of scalars) and reports true where it stops
// following: protojson refuses what has another shape at that point,
// having built no more than jsonBounds has counted.
func jsonBounds(body []byte) bool {
	// fewMembers bounds the members of an object jsonBounds follows: a
	// request, a descriptor, an entry or a limit has at most a few
	// distinct fields, and protojson refuses a repeated or unknown one.
	const fewMembers = 8
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	// scalars reads an object of at most fewMembers scalar values, or a
	// scalar, and reports whether it did.
	scalars := func() bool {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if tok != json.Delim('{') {
			_, isDelim := tok.(json.Delim)
			return !isDelim
		}
		for n := 0; dec.More(); n++ {
			if n == fewMembers {
				return false
			}
			if _, err := dec.Token(); err != nil { // the name
				return false
			}
			if tok, err := dec.Token(); err != nil {
				return false
			} else if _, isDelim := tok.(json.Delim); isDelim {
				return false
			}
		}
		_, err = dec.Token() // '}'
		return err == nil
	}
	// list reads a list, calling item before each of its items, while the
	// count is at most most; it reports whether the count passed most,
	// and whether it read the list whole.
	list := func(most int, item func() bool) (over, ok bool) {
		if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
			return false, false
		}
		for n := 0; dec.More(); n++ {
			if n == most {
				return true, false
			}
			if !item() {
				return false, false
			}
		}
		_, err := dec.Token() // ']'
		return false, err == nil
	}
	// object reads an object of at most fewMembers members, calling member
	// with each name to read its value; it stops when member does.
	object := func(member func(name string) (over, ok bool)) (over, ok bool) {
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return false, false
		}
		for n := 0; dec.More(); n++ {
			tok, err := dec.Token()
			if err != nil || n == fewMembers {
				return false, false
			}
			name, _ := tok.(string)
			if over, ok := member(name); over || !ok {
				return over, ok
			}
		}
		_, err := dec.Token() // '}'
		return false, err == nil
	}
	entriesOver := false
	descriptor := func() bool {
		over, ok := object(func(name string) (bool, bool) {
			if name == "entries" {
				return list(limiter.MaxAttributes, scalars)
			}
			return false, scalars()
		})
		entriesOver = entriesOver || over
		return ok && !over
	}
	over, _ := object(func(name string) (bool, bool) {
		if name == "descriptors" {
			return list(limiter.MaxItems, descriptor)
		}
		return false, scalars()
	})
	return !over && !entriesOver
}
