package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/dc/httpapi"
	"github.com/weirhq/weir/pkg/document"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/store/memstore"
)

// FuzzCheck posts arbitrary bodies to POST /v1/check. Whatever the body,
// the server must answer (never panic) with one of the statuses the API
// documents, and may decide (200 or 429) only a body that is one JSON
// object of the documented fields and types within the documented limits,
// as strictJSON, written independently of the server's decoder, says.
// Errors carry a JSON {"error", "message"}. The seed corpus is in
// testdata/fuzz/FuzzCheck.
func FuzzCheck(f *testing.F) {
	store, err := memstore.New(memstore.Config{MaxKeys: 10_000})
	if err != nil {
		f.Fatal(err)
	}
	lim, err := limiter.New(limiter.Config{Store: store, CacheKeys: -1})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(lim.Close)
	if err := lim.SetRules(compile(f, rulesYAML)); err != nil {
		f.Fatal(err)
	}
	const maxBody = 4 << 10 // small, so that 413 is within the fuzzer's reach
	api, err := httpapi.New(httpapi.Config{Limiter: lim, MaxBody: maxBody})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/v1/check", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		code := rec.Code
		switch code {
		case http.StatusOK, http.StatusTooManyRequests:
			if err := strictJSON(body); err != nil {
				t.Fatalf("body %q: got %d, want an error status: %v", body, code, err)
			}
			var resp httpapi.CheckResponse
			dec := json.NewDecoder(rec.Body)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&resp); err != nil {
				t.Fatalf("response to %q: %v", body, err)
			}
			if resp.Allowed != (code == http.StatusOK) {
				t.Fatalf("body %q: got allowed=%v with status %d", body, resp.Allowed, code)
			}
			if resp.Matched != (len(resp.Results) > 0) {
				t.Fatalf("body %q: got matched=%v with %d results", body, resp.Matched, len(resp.Results))
			}
			ra := rec.Header().Get("Retry-After")
			if code == http.StatusOK && ra != "" {
				t.Fatalf("body %q: got Retry-After %q on a 200, want none", body, ra)
			}
			if n, err := strconv.Atoi(ra); code == http.StatusTooManyRequests && (err != nil || n < 1) {
				t.Fatalf("body %q: got Retry-After %q on a 429, want at least 1", body, ra)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusServiceUnavailable:
			if code == http.StatusRequestEntityTooLarge && len(body) <= maxBody {
				t.Fatalf("body of %d bytes: got 413, want the limit %d to allow it", len(body), maxBody)
			}
			var e struct {
				Error   string `json:"error"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" || e.Message == "" {
				t.Fatalf("body %q: got %d with %q, want a JSON error and message", body, code, rec.Body.Bytes())
			}
		default:
			t.Fatalf("body %q: got status %d, want 200, 400, 413, 429 or 503", body, code)
		}
	})
}

// strictJSON returns nil if body is a check request the API may decide:
// one JSON object, repeating no key in any object, whose names are
// CheckRequest's fields (encoding/json matches them case-insensitively,
// and so does this) with values of their types (null is none of them),
// within the limits of the limiter. Repeated keys are found by the full
// document parser, not the server's scan.
func strictJSON(body []byte) error {
	if !json.Valid(body) {
		return fmt.Errorf("not one JSON value")
	}
	if tree, err := document.ParseJSON(body, document.Limits{MaxDepth: 1 << 20}); err != nil {
		return err
	} else if d := tree.Duplicates(""); len(d) > 0 {
		return fmt.Errorf("repeated keys %q", d)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var top any
	if err := dec.Decode(&top); err != nil {
		return err
	}
	obj, ok := top.(map[string]any)
	if !ok {
		return fmt.Errorf("not an object: %T", top)
	}
	if foldDup(obj) {
		// encoding/json gives the field the last of these values; which one
		// that is, a map does not say. Abstain.
		return nil
	}
	var attrs, descs int
	names := map[string]bool{}
	for k, v := range obj {
		if v == nil {
			return fmt.Errorf("%s: null", k)
		}
		switch field(k, "domain", "attributes", "descriptors", "clientId", "hits") {
		case "domain":
			s, ok := v.(string)
			if !ok || (s != "" && s != "shop") {
				return fmt.Errorf("domain %v", v)
			}
		case "clientId":
			if s, ok := v.(string); !ok || len(s) > limiter.MaxValueLen {
				return fmt.Errorf("clientId %v", v)
			}
			attrs++
		case "attributes":
			m, ok := v.(map[string]any)
			if !ok {
				return fmt.Errorf("attributes %T", v)
			}
			for name, val := range m {
				if err := attribute(name, val); err != nil {
					return err
				}
				names[name] = true
			}
			attrs += len(m)
		case "descriptors":
			l, ok := v.([]any)
			if !ok {
				return fmt.Errorf("descriptors %T", v)
			}
			for _, d := range l {
				var key string
				if d == nil {
					return fmt.Errorf("descriptor null")
				}
				dm, ok := d.(map[string]any)
				if !ok {
					return fmt.Errorf("descriptor %T", d)
				}
				if foldDup(dm) {
					return nil
				}
				for dk, dv := range dm {
					if dv == nil {
						return fmt.Errorf("descriptor %q: null", dk)
					}
					s, ok := dv.(string)
					switch field(dk, "key", "value") {
					case "key":
						key = s
					case "value":
						if len(s) > limiter.MaxValueLen {
							return fmt.Errorf("descriptor value of %d bytes", len(s))
						}
					default:
						return fmt.Errorf("descriptor field %q", dk)
					}
					if !ok {
						return fmt.Errorf("descriptor %q: %T", dk, dv)
					}
				}
				if key == "" || len(key) > limiter.MaxNameLen {
					return fmt.Errorf("descriptor key %q", key)
				}
				if names[key] {
					return fmt.Errorf("descriptor key %q given twice", key)
				}
				names[key] = true
			}
			descs += len(l)
		case "hits":
			n, ok := v.(json.Number)
			if !ok {
				return fmt.Errorf("hits %T", v)
			}
			h, err := strconv.ParseInt(string(n), 10, 64)
			if err != nil || h < 1 || h > limiter.MaxHits {
				return fmt.Errorf("hits %s", n)
			}
		default:
			return fmt.Errorf("unknown field %q", k)
		}
	}
	if attrs+descs > limiter.MaxAttributes+1 { // +1: clientId may repeat client_id
		return fmt.Errorf("%d attributes", attrs+descs)
	}
	return nil
}

// foldDup reports whether two of m's names differ only in case, as
// encoding/json sees case.
func foldDup(m map[string]any) bool {
	var seen []string
	for k := range m {
		for _, s := range seen {
			if strings.EqualFold(k, s) {
				return true
			}
		}
		seen = append(seen, k)
	}
	return false
}

// field returns the name of fields that k selects as encoding/json does
// (exactly, or else without regard to case), or "".
func field(k string, fields ...string) string {
	for _, f := range fields {
		if k == f {
			return f
		}
	}
	for _, f := range fields {
		if strings.EqualFold(k, f) {
			return f
		}
	}
	return ""
}

func attribute(name string, val any) error {
	if name == "" || len(name) > limiter.MaxNameLen {
		return fmt.Errorf("attribute name of %d bytes", len(name))
	}
	s, ok := val.(string) // null is not a string
	if !ok || len(s) > limiter.MaxValueLen {
		return fmt.Errorf("attribute %q: %T", name, val)
	}
	return nil
}
