package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/weirhq/weir/pkg/document"
	"github.com/weirhq/weir/pkg/fielderr"
	"github.com/weirhq/weir/pkg/httplimit"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/logthrottle"
)

// DefaultMaxBody is the default limit on a request body.
const DefaultMaxBody = 64 << 10

// Config configures a Server. Limiter is required.
type Config struct {
	Limiter *limiter.Limiter
	// Metrics serves /metrics; nil serves 404 there.
	Metrics http.Handler
	// Envoy serves POST /json, envoyproxy/ratelimit's JSON endpoint of
	// Envoy's rate limit API (envoyrls.JSONHandler); nil serves 404 there.
	Envoy http.Handler
	// MaxBody limits request bodies in bytes. Default DefaultMaxBody.
	MaxBody int64
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock for relative header fields; use the limiter's.
	// Default time.Now.
	Now func() time.Time
	// Warnings, if set, returns what /readyz lists under "warnings":
	// conditions an operator should fix that do not make the limiter
	// unready, such as rules held at their last valid version.
	Warnings func() []string
	// ShuttingDown, if set, is closed when the limiter begins to shut
	// down; from then on GET /readyz answers 503 and GET /healthcheck
	// 500, as envoyproxy/ratelimit's does after SIGTERM, while the other
	// routes go on serving. Default nil: never.
	ShuttingDown <-chan struct{}
}

// Server is the HTTP API. Safe for concurrent use.
type Server struct {
	lim     *limiter.Limiter
	metrics http.Handler
	envoy   http.Handler
	maxBody int64
	log     *slog.Logger
	now     func() time.Time
	warn    func() []string
	closing <-chan struct{}
	// unexpected rate-limits the log of the limiter's unexpected errors.
	unexpected *logthrottle.Throttle
	mux        *http.ServeMux
	routes     []string
	// The bodies' shapes, for the names encoding/json would match
	// case-insensitively (see keyMistakes).
	checkShape, seedShape *document.Shape
}

// New returns the API server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Limiter == nil {
		return nil, errors.New("httpapi: Config.Limiter is required")
	}
	if cfg.MaxBody < 0 {
		return nil, fmt.Errorf("httpapi: negative MaxBody %d", cfg.MaxBody)
	}
	s := &Server{lim: cfg.Limiter, metrics: cfg.Metrics, envoy: cfg.Envoy, maxBody: cfg.MaxBody, log: cfg.Logger}
	if s.maxBody == 0 {
		s.maxBody = DefaultMaxBody
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.now, s.warn, s.closing = cfg.Now, cfg.Warnings, cfg.ShuttingDown
	s.checkShape = document.ShapeOf(reflect.TypeFor[CheckRequest]())
	s.seedShape = document.ShapeOf(reflect.TypeFor[seedRequest]())
	if s.now == nil {
		s.now = time.Now
	}
	s.unexpected = logthrottle.New(10*time.Second, s.now)
	mux := http.NewServeMux()
	handle := func(pattern string, h http.HandlerFunc) {
		mux.Handle(pattern, h)
		s.routes = append(s.routes, pattern)
	}
	handle("POST /v1/check", s.check)
	handle("POST /shouldAllowRequest", s.shouldAllow)
	handle("GET /v1/rate-limits/{rule_id}/{key...}", s.status)
	handle("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		httplimit.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	handle("GET /readyz", s.ready)
	handle("GET /healthcheck", s.healthcheck)
	if s.metrics != nil {
		handle("GET /metrics", s.metrics.ServeHTTP)
	}
	s.methodNotAllowed(mux)
	if s.envoy != nil {
		// Not in methodNotAllowed: its errors are envoyproxy/ratelimit's
		// plain text (envoyrls.JSONHandler), ServeMux's 405 included,
		// which the catch-all below would otherwise take over.
		handle("POST /json", s.envoy.ServeHTTP)
		mux.HandleFunc("/json", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
		})
	}
	// Any other path: a JSON 404, as every error of the API is JSON
	// (ServeMux's own is plain text).
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no such path: %s", r.URL.Path))
	})
	s.mux = mux
	return s, nil
}

// methodNotAllowed routes a request for the path of each route served so
// far with a method none of them takes to a JSON 405, as every error of
// the API is JSON, with an Allow header listing the methods that are
// taken (GET taking HEAD too, as ServeMux routes it). Without it,
// ServeMux answers such a request with a plain-text 405. A route's own
// pattern, which names its method, takes precedence over the path alone.
func (s *Server) methodNotAllowed(mux *http.ServeMux) {
	allowed := map[string][]string{}
	var paths []string
	for _, pattern := range s.routes {
		method, path, _ := strings.Cut(pattern, " ")
		if _, seen := allowed[path]; !seen {
			paths = append(paths, path)
		}
		allowed[path] = append(allowed[path], method)
		if method == http.MethodGet {
			allowed[path] = append(allowed[path], http.MethodHead)
		}
	}
	for _, path := range paths {
		allow := strings.Join(allowed[path], ", ")
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", fmt.Sprintf("method %s: want %s", r.Method, allow))
		})
	}
}

// Routes returns the patterns the server serves, as http.ServeMux reads
// them ("POST /v1/check"); docs/openapi/check.yaml must document each.
func (s *Server) Routes() []string { return slices.Clone(s.routes) }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// errorBody is every error's JSON.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, code int, kind, msg string) {
	httplimit.WriteJSON(w, code, errorBody{Error: kind, Message: msg})
}

// writeLimiterError maps the limiter's errors to statuses.
func (s *Server) writeLimiterError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, limiter.ErrInvalid), errors.Is(err, limiter.ErrUnknownDomain):
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", err.Error())
	case errors.Is(err, limiter.ErrUnknownRule):
		writeError(w, http.StatusNotFound, "NOT_FOUND", err.Error())
	case errors.Is(err, limiter.ErrNoRules), errors.Is(err, limiter.ErrUnavailable):
		writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The request ended (its client went away) before the store
		// answered: the caller's doing, not the limiter's; nothing to log.
		writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", err.Error())
	default:
		if held, ok := s.unexpected.Allow(); ok {
			s.log.Error("unexpected limiter error", "err", err, logthrottle.Held(held))
		}
		writeError(w, http.StatusInternalServerError, "INTERNAL", "internal error")
	}
}

// decode reads r's body into v, of shape, strictly: one JSON value, known
// fields only, by their exact names, at most maxBody bytes, valid UTF-8
// with no escape of a lone surrogate, and no null.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any, shape *document.Shape) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" && !isJSON(ct) {
		writeError(w, http.StatusUnsupportedMediaType, "INVALID_REQUEST", fmt.Sprintf("content type %q: want application/json", ct))
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "INVALID_REQUEST", fmt.Sprintf("body exceeds %d bytes", s.maxBody))
			return false
		}
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "read body: "+err.Error())
		return false
	}
	if err := decodeStrict(body, v); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", err.Error())
		return false
	}
	if mayHoldBadValue(body) {
		// encoding/json turns every invalid byte and lone surrogate into
		// U+FFFD, so that distinct names and values would collide, and
		// takes null for a field left out: refuse them.
		if err := badValue(body, reflect.TypeOf(v)); err != nil {
			writeError(w, http.StatusBadRequest, "INVALID_REQUEST", err.Error())
			return false
		}
	}
	if err := keyMistakes(body, shape); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", err.Error())
		return false
	}
	return true
}

// errBody is the sentinel of a body's field errors, which answer 400.
var errBody = errors.New("httpapi: invalid body")

type invalidBody struct{}

func (invalidBody) Sentinel() error { return errBody }

// maxListed is the most field errors one message lists.
const maxListed = 10

// keyMistakes refuses a body, well-formed JSON, that repeats a key of one
// of its objects ("attributes.user_id: appears more than once"), or names
// a field of shape in another case than its own ("HITS: unknown field;
// names are case-sensitive: want \"hits\""), with the path of each (the
// first maxListed of them). encoding/json takes the last value of a
// repeated key, and matches names case-insensitively; a proxy before Weir
// may take the first, or only the exact name, so that the two would
// disagree about the request's key and cost. The scan builds no tree; a
// check body pays well under a microsecond for it.
func keyMistakes(body []byte, shape *document.Shape) error {
	keys, err := document.ScanKeys(body, document.Limits{}, shape)
	if err != nil {
		return fmt.Errorf("malformed JSON: %w", err)
	}
	n := len(keys.Repeated) + len(keys.Miscased)
	if n == 0 {
		return nil
	}
	var rep fielderr.Report[invalidBody]
	document.ReportRepeats(&rep, keys.Repeated[:min(len(keys.Repeated), maxListed)])
	// decodeStrict has refused the names that match no field at all: each
	// left matches one in another case.
	for _, m := range keys.Miscased[:min(len(keys.Miscased), max(0, maxListed-len(keys.Repeated)))] {
		rep.Fail(m.Path, "unknown field; names are case-sensitive: want %q", m.Want)
	}
	list := rep.Err().(*fielderr.List[invalidBody])
	msgs := make([]string, 0, len(list.Errors)+1)
	for _, fe := range list.Errors {
		msgs = append(msgs, fe.Error())
	}
	if more := n - len(list.Errors); more > 0 {
		msgs = append(msgs, fmt.Sprintf("and %d more mistakes in keys", more))
	}
	return errors.New(strings.Join(msgs, "; "))
}

// isJSON reports whether the media type ct is application/json (media
// types are case-insensitive and may carry parameters).
// isJSON reports whether a request's content type may carry the JSON body:
// application/json, or application/x-www-form-urlencoded, which curl -d
// sends by default (the body must still be JSON).
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || mt == "application/x-www-form-urlencoded")
}

// decodeStrict decodes exactly one JSON object with only known fields.
func decodeStrict(body []byte, v any) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return errors.New("empty body: want a JSON object")
	}
	// encoding/json takes null for a zero object; a body must be one.
	if trimmed[0] != '{' {
		return errors.New("malformed JSON: want an object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return fmt.Errorf("%s: want %s, got %s", typeErr.Field, typeErr.Type, typeErr.Value)
		}
		return fmt.Errorf("malformed JSON: %w", err)
	}
	if dec.More() {
		return errors.New("malformed JSON: data after the object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("malformed JSON: data after the object")
	}
	return nil
}

// CheckRequest is the body of POST /v1/check.
type CheckRequest struct {
	// Domain names the rule set; optional when one is loaded.
	Domain string `json:"domain,omitempty"`
	// Attributes describe the request: ip, user_id, path, method, ...
	Attributes map[string]string `json:"attributes,omitempty"`
	// Descriptors are attributes as Envoy-style entries, merged into
	// Attributes (a name given twice is an error).
	Descriptors []Descriptor `json:"descriptors,omitempty"`
	// ClientID is a shorthand for the attribute client_id.
	ClientID string `json:"clientId,omitempty"`
	// Hits is the request's cost, 1 when absent.
	Hits *int64 `json:"hits,omitempty"`
}

// Descriptor is one key/value attribute.
type Descriptor struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// item turns the body into a limiter item.
func (c *CheckRequest) item() (limiter.Item, error) {
	it := limiter.Item{Attributes: c.Attributes, Hits: 1}
	if it.Attributes == nil {
		it.Attributes = make(map[string]string, len(c.Descriptors)+1)
	}
	if len(c.Descriptors) > limiter.MaxAttributes {
		return it, fmt.Errorf("%d descriptors, at most %d", len(c.Descriptors), limiter.MaxAttributes)
	}
	for i, d := range c.Descriptors {
		if _, dup := it.Attributes[d.Key]; dup {
			return it, fmt.Errorf("descriptors[%d]: attribute %q given twice", i, d.Key)
		}
		it.Attributes[d.Key] = d.Value
	}
	if c.ClientID != "" {
		if v, dup := it.Attributes["client_id"]; dup && v != c.ClientID {
			return it, errors.New("clientId and attributes.client_id disagree")
		}
		it.Attributes["client_id"] = c.ClientID
	}
	if c.Hits != nil {
		if *c.Hits < 1 || *c.Hits > limiter.MaxHits {
			return it, fmt.Errorf("hits: %d outside [1, %d]", *c.Hits, limiter.MaxHits)
		}
		it.Hits = *c.Hits
	}
	return it, nil
}

// RuleResult is one rule's decision in JSON. Limit, Remaining, ResetAt
// and RetryAfterSeconds are absent for a result that bounds nothing (an
// unlimited rule, an allow or deny override): see
// limiter.RuleResult.Limited.
type RuleResult struct {
	RuleID            string `json:"rule_id"`
	Key               string `json:"key"`
	Allowed           bool   `json:"allowed"`
	Limit             *int64 `json:"limit,omitempty"`
	Remaining         *int64 `json:"remaining,omitempty"`
	ResetAt           string `json:"reset_at,omitempty"`
	RetryAfterSeconds *int64 `json:"retry_after_seconds,omitempty"`
	WindowSeconds     int64  `json:"window_seconds"`
	Shadow            bool   `json:"shadow,omitempty"`
	Source            string `json:"source"`
	RetryAdvice       string `json:"retry_advice,omitempty"`
	// Refunded is true when the rule admitted the request but gave the
	// admission back, because another rule rejected it.
	Refunded bool `json:"refunded,omitempty"`
}

// CheckResponse is the body answering POST /v1/check. The top-level rule
// fields are those of the decisive result: the most constraining
// enforcing rule. Shadow rules show only in Results.
type CheckResponse struct {
	Allowed bool `json:"allowed"`
	// Matched is false when no rule applied (the request is then allowed).
	Matched           bool         `json:"matched"`
	RuleID            string       `json:"rule_id,omitempty"`
	Key               string       `json:"key,omitempty"`
	Limit             *int64       `json:"limit,omitempty"`
	Remaining         *int64       `json:"remaining,omitempty"`
	ResetAt           string       `json:"reset_at,omitempty"`
	RetryAfterSeconds *int64       `json:"retry_after_seconds,omitempty"`
	Error             string       `json:"error,omitempty"`
	Message           string       `json:"message,omitempty"`
	Results           []RuleResult `json:"results"`
}

func ruleResult(r *limiter.RuleResult) RuleResult {
	out := RuleResult{
		RuleID: r.Match.Rule.Spec.ID, Key: r.Match.Key, Allowed: r.Allowed,
		WindowSeconds: r.Match.Rule.Spec.WindowSeconds, Shadow: r.Shadow(), Source: r.Source.String(),
		Refunded: r.Refunded,
	}
	if r.Limited() {
		retry := httplimit.CeilSeconds(r.RetryAfter)
		out.Limit, out.Remaining, out.RetryAfterSeconds = &r.Limit, &r.Remaining, &retry
		out.ResetAt = r.ResetAt.UTC().Format(time.RFC3339)
	}
	if !r.Allowed && r.Source != limiter.SourceOverrideDeny {
		out.RetryAdvice = string(r.Match.Rule.Spec.RetryAdvice)
	}
	return out
}

func (s *Server) check(w http.ResponseWriter, r *http.Request) {
	var req CheckRequest
	if !s.decode(w, r, &req, s.checkShape) {
		return
	}
	it, err := req.item()
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", err.Error())
		return
	}
	s.answer(w, r.Context(), req.Domain, it, false)
}

// answer runs a check and writes headers and body; seed selects seed 000's
// {"allowed"} body and a 200 either way.
func (s *Server) answer(w http.ResponseWriter, ctx context.Context, domain string, it limiter.Item, seed bool) {
	resp, err := s.lim.Check(ctx, limiter.Request{Domain: domain, Items: []limiter.Item{it}})
	if err != nil {
		s.writeLimiterError(w, err)
		return
	}
	item := &resp.Items[0]
	out := CheckResponse{Allowed: item.Allowed, Matched: len(item.Results) > 0, Results: make([]RuleResult, len(item.Results))}
	for i := range item.Results {
		out.Results[i] = ruleResult(&item.Results[i])
	}
	h := w.Header()
	code := http.StatusOK
	switch {
	case item.Decisive >= 0:
		d := &item.Results[item.Decisive]
		rr := out.Results[item.Decisive]
		out.RuleID, out.Key, out.Limit, out.Remaining, out.ResetAt, out.RetryAfterSeconds = rr.RuleID, rr.Key, rr.Limit, rr.Remaining, rr.ResetAt, rr.RetryAfterSeconds
		httplimit.SetHeaders(h, item, d, s.now())
		if !item.Allowed {
			rej := httplimit.Rejected(d)
			code, out.Error, out.Message = rej.Status, rej.Error, rej.Message
			if rej.RetryAfter > 0 {
				out.RetryAfterSeconds = &rej.RetryAfter
				h.Set("Retry-After", strconv.FormatInt(rej.RetryAfter, 10))
			}
		}
	case len(item.Results) > 0:
		out.Message = "only shadow rules matched; allowed"
	default:
		out.Message = "no rule matched; allowed"
	}
	if seed {
		httplimit.WriteJSON(w, http.StatusOK, map[string]bool{"allowed": item.Allowed})
		return
	}
	httplimit.WriteJSON(w, code, out)
}

// seedRequest is seed 000's body, and the rule domain, which the seed's
// API does not name.
type seedRequest struct {
	ClientID  string `json:"clientId"`
	Timestamp string `json:"timestamp,omitempty"`
	// Domain names the rule set, as ?domain= does (the two must agree);
	// optional, as in CheckRequest.
	Domain string `json:"domain,omitempty"`
}

func (s *Server) shouldAllow(w http.ResponseWriter, r *http.Request) {
	var req seedRequest
	if !s.decode(w, r, &req, s.seedShape) {
		return
	}
	if req.ClientID == "" {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "clientId: required")
		return
	}
	if req.Timestamp != "" {
		// Accepted for compatibility and checked, never trusted: a client's
		// clock must not move its own windows.
		if _, err := time.Parse(time.RFC3339Nano, req.Timestamp); err != nil {
			writeError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Sprintf("timestamp: %q is not RFC 3339", req.Timestamp))
			return
		}
	}
	domain := req.Domain
	if q := r.URL.Query().Get("domain"); q != "" {
		if domain != "" && domain != q {
			writeError(w, http.StatusBadRequest, "INVALID_REQUEST", fmt.Sprintf("domain: %q in the body, %q in the query", domain, q))
			return
		}
		domain = q
	}
	s.answer(w, r.Context(), domain, limiter.Item{Attributes: map[string]string{"client_id": req.ClientID}, Hits: 1}, true)
}

// StatusResponse is the body answering GET /v1/rate-limits/{rule}/{key}.
// Limit, Remaining and ResetTime are absent for a rule or key without a
// limit: a disabled rule (Disabled), an unlimited rule, an allow or deny
// override (see Source).
type StatusResponse struct {
	RuleID        string `json:"rule_id"`
	Key           string `json:"key"`
	Disabled      bool   `json:"disabled,omitempty"`
	Limit         *int64 `json:"limit,omitempty"`
	Remaining     *int64 `json:"remaining,omitempty"`
	WindowSeconds int64  `json:"window_seconds"`
	ResetTime     string `json:"reset_time,omitempty"`
	Source        string `json:"source"`
	Message       string `json:"message,omitempty"`
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	ruleID, key, domain := r.PathValue("rule_id"), r.PathValue("key"), r.URL.Query().Get("domain")
	if len(key) > limiter.MaxValueLen*4 {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "key too long")
		return
	}
	// Percent-escapes can spell any bytes: refuse those that are not
	// UTF-8, as /v1/check does, rather than answer for a key that the
	// answer's JSON would show with U+FFFD in their place.
	for _, p := range [...]struct{ name, value string }{{"rule_id", ruleID}, {"key", key}, {"domain", domain}} {
		if !utf8.ValidString(p.value) {
			writeError(w, http.StatusBadRequest, "INVALID_REQUEST", p.name+": not valid UTF-8")
			return
		}
	}
	res, err := s.lim.Status(r.Context(), domain, ruleID, key)
	if err != nil {
		s.writeLimiterError(w, err)
		return
	}
	out := StatusResponse{
		RuleID: res.Match.Rule.Spec.ID, Key: res.Match.Key, WindowSeconds: res.Match.Rule.Spec.WindowSeconds, Source: res.Source.String(),
	}
	switch {
	case res.Limited():
		out.Limit, out.Remaining, out.ResetTime = &res.Limit, &res.Remaining, res.ResetAt.UTC().Format(time.RFC3339)
	case res.Source == limiter.SourceDisabled:
		out.Disabled, out.Message = true, "the rule is disabled: it applies to no request"
	case res.Source == limiter.SourceOverrideDeny:
		out.Message = "an override denies this key"
	default:
		out.Message = "no limit applies to this key"
	}
	httplimit.WriteJSON(w, http.StatusOK, out)
}

// readyBody answers GET /readyz: 503 while not ready (reason given), and
// from shutdown on. Rules is "not_loaded" until rules are
// first loaded (the limiter is not ready), then "empty" when no rule is
// in force (every check allowed, no rule matching), else "loaded".
// Warnings are Config.Warnings'.
type readyBody struct {
	Status   string   `json:"status"`
	Reason   string   `json:"reason,omitempty"`
	Rules    string   `json:"rules"`
	Domains  int      `json:"domains"`
	Count    int      `json:"rule_count"`
	Warnings []string `json:"warnings,omitempty"`
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	st := s.lim.RuleState()
	body := readyBody{Status: "ready", Rules: "loaded", Domains: st.Domains, Count: st.Rules}
	switch {
	case !st.Loaded:
		body.Rules = "not_loaded"
	case st.Rules == 0:
		body.Rules = "empty"
	}
	if s.warn != nil {
		body.Warnings = s.warn()
	}
	if s.shuttingDown() {
		body.Status, body.Reason = "not ready", "shutting down"
		httplimit.WriteJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	if err := s.lim.Ready(r.Context()); err != nil {
		body.Status, body.Reason = "not ready", err.Error()
		httplimit.WriteJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	httplimit.WriteJSON(w, http.StatusOK, body)
}

// shuttingDown reports whether Config.ShuttingDown is closed.
func (s *Server) shuttingDown() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// healthcheck answers GET /healthcheck, envoyproxy/ratelimit's health
// check on its HTTP port: 200 with the text "OK" while healthy, 500
// otherwise. envoyproxy/ratelimit's is readiness, not liveness
// (src/server/health.go): it fails until Redis answers at start (and,
// with REDIS_HEALTH_CHECK_ACTIVE_CONNECTION, while no connection to Redis
// is open), with HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED until a
// configuration is loaded, and from SIGTERM on. So this one is /readyz's
// check — rules loaded and the store answering a ping (limiter.Ready) —
// that also fails once Config.ShuttingDown is closed. Where it differs:
// the 500 carries the reason as text (envoyproxy/ratelimit's is empty),
// and only GET and HEAD are routed (it takes any method).
func (s *Server) healthcheck(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if s.shuttingDown() {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "shutting down\n")
		return
	}
	if err := s.lim.Ready(r.Context()); err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, err.Error()+"\n")
		return
	}
	_, _ = io.WriteString(w, "OK")
}
