package adminserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/internal/etcd/etcdlayout"
	"github.com/weirhq/weir/internal/etcd/rulestore"
	"github.com/weirhq/weir/internal/platform/auth"
	"github.com/weirhq/weir/pkg/adminapi"
	"github.com/weirhq/weir/pkg/rule"
)

// Defaults of Config's zero fields.
const (
	DefaultDomain         = "default"
	DefaultMaxBodyBytes   = 1 << 20
	DefaultAuditRetention = 10_000
	DefaultTimeout        = 10 * time.Second
)

// Config configures a Server. The zero value of every field but Etcd
// selects its default.
type Config struct {
	// Etcd is the client rules, share policies and audit records are read
	// and written with. Required.
	Etcd *clientv3.Client
	// Layout names the keys; the zero Layout uses etcdlayout.DefaultPrefix.
	Layout etcdlayout.Layout
	// DefaultDomain is the domain of requests that name none (no
	// ?domain= and, for POST, no "domain" in the body); default
	// DefaultDomain ("default").
	DefaultDomain string
	// DCs are the DC names share policies may mention. Default none: only
	// empty policies are accepted.
	DCs []string
	// Live answers the stats, shares and key-status endpoints; nil makes
	// them answer 503.
	Live Live
	// Now is the clock of created_at, updated_at and audit records;
	// default time.Now.
	Now func() time.Time
	// Logger receives one line per change and the causes of 5xx answers;
	// default: discard.
	Logger *slog.Logger
	// MaxBodyBytes bounds request bodies (413 beyond); default
	// DefaultMaxBodyBytes (1 MiB). Share policies are also bounded by
	// sharepolicy.MaxBytes.
	MaxBodyBytes int64
	// AuditRetention is how many audit records are kept, the newest;
	// default DefaultAuditRetention (10,000).
	AuditRetention int
	// Timeout bounds the etcd work of one request; default DefaultTimeout.
	Timeout time.Duration
	// Forward, when set, carries the live-view requests (stats, shares,
	// key status) that this coordinator cannot answer because another one
	// leads to the leader's admin API (the URL of the *NotLeaderError Live
	// returns): the same method, path, query and headers, Authorization
	// included, and answers with the leader's answer (502 when the leader
	// does not answer). A request that was already forwarded once is not
	// forwarded again (see ForwardedHeader). Nil answers such requests 503
	// naming the leader, in the body's "leader" and in Location (when
	// Peers allow it).
	Forward http.RoundTripper
	// Peers, when set, are the only leader URLs Forward carries requests
	// to: a leader whose URL is not among them is not contacted, and the
	// request is answered 502 (see Forwarder.Proxy). They are also the only
	// leader URLs a 503 names: when the request is not forwarded (no
	// Forward, or it was forwarded once already), a leader outside them
	// is left out of the body's "leader" and of Location, and the message
	// says it is not among --peer-urls. Default nil: any http(s) URL the
	// leader's election key names, unchecked.
	Peers *PeerURLs
	// Held, when set, returns what this process holds in force for a
	// rule whose stored document is invalid (rulestore.Watcher.HeldRule):
	// the API then answers the last valid version this process knows
	// when etcd keeps none (its shadow invalid or missing), rather than
	// none. Default nil: only the shadow in etcd counts.
	Held func(domain, id string) (rulestore.Held, bool)
	// Name identifies this server in the ForwardedHeader of the requests
	// it forwards; default "adminserver".
	Name string
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	var errs []error
	if c.Etcd == nil {
		errs = append(errs, errors.New("an etcd client (Etcd) is required"))
	}
	if c.DefaultDomain != "" && !validName(c.DefaultDomain) {
		errs = append(errs, fmt.Errorf("invalid DefaultDomain %q: not a valid domain (1 to 128 letters, digits, '.', '_' and '-', starting with a letter or digit)", c.DefaultDomain))
	}
	for i, dc := range c.DCs {
		if err := rule.CheckDC(dc); err != nil {
			errs = append(errs, fmt.Errorf("DCs[%d]: %v", i, err))
		} else if slices.Contains(c.DCs[:i], dc) {
			errs = append(errs, fmt.Errorf("DCs[%d]: %q listed twice", i, dc))
		}
	}
	if c.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("negative MaxBodyBytes %d", c.MaxBodyBytes))
	}
	if c.AuditRetention < 0 {
		errs = append(errs, fmt.Errorf("negative AuditRetention %d", c.AuditRetention))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("negative Timeout %v", c.Timeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("adminserver: invalid config: %w", err)
	}
	return nil
}

// Server is the admin API, an http.Handler; see the package documentation
// for its endpoints. It keeps no state of its own between requests (every
// coordinator may serve it, all writing to the same etcd) and is safe for
// concurrent use.
type Server struct {
	cfg    Config
	log    *slog.Logger
	mux    *http.ServeMux
	routes []string   // the patterns of mux, in order
	fwd    *Forwarder // nil without Config.Forward
}

var _ http.Handler = (*Server)(nil)

// New returns a Server for cfg, with defaults filled in.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.DefaultDomain == "" {
		cfg.DefaultDomain = DefaultDomain
	}
	cfg.DCs = slices.Clone(cfg.DCs)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.AuditRetention == 0 {
		cfg.AuditRetention = DefaultAuditRetention
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Name == "" {
		cfg.Name = "adminserver"
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux()}
	if cfg.Forward != nil {
		s.fwd = NewForwarder(cfg.Forward, cfg.Peers, cfg.Name, cfg.Logger)
	}
	s.handle("POST /rate-limits", s.createRule)
	s.handle("GET /rate-limits", s.listRules)
	s.handle("GET /rate-limits/{rule_id}", s.getRule)
	s.handle("PUT /rate-limits/{rule_id}", s.updateRule)
	s.handle("DELETE /rate-limits/{rule_id}", s.deleteRule)
	s.handle("GET /rate-limits/{rule_id}/stats", s.getStats)
	s.handle("GET /rate-limits/{rule_id}/shares", s.getShares)
	s.handle("PUT /rate-limits/{rule_id}/shares", s.putShares)
	s.handle("GET /rate-limits/{rule_id}/{key...}", s.getKeyStatus)
	s.handle("GET /audit", s.listAudit)
	s.routeSeries()
	return s, nil
}

// Routes returns the patterns ("METHOD /path/{name}") of the endpoints s
// serves, in net/http.ServeMux syntax, for tests that hold them against
// the API's documentation (docs/openapi/admin.yaml).
func (s *Server) Routes() []string { return slices.Clone(s.routes) }

// ServeHTTP serves the admin API. Requests that match no endpoint are
// answered 404 (or 405, with Allow, when the path exists for other
// methods) with a JSON error, like every other error.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h, pattern := s.mux.Handler(r); pattern == "" {
		s.unrouted(w, r, h)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// unrouted answers a request the mux has no endpoint for, as the mux's own
// handler h would (404, 405 with Allow, or a redirect to the clean path),
// with a JSON body.
func (s *Server) unrouted(w http.ResponseWriter, r *http.Request, h http.Handler) {
	rec := &headerRecorder{header: make(http.Header)}
	h.ServeHTTP(rec, r)
	for _, k := range []string{"Allow", "Location"} {
		if v := rec.header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	switch rec.code {
	case http.StatusNotFound:
		writeJSON(w, rec.code, adminapi.ErrorBody{Error: "no such endpoint: " + r.URL.Path})
	case http.StatusMethodNotAllowed:
		writeJSON(w, rec.code, adminapi.ErrorBody{Error: "method " + r.Method + " not allowed here (allowed: " + rec.header.Get("Allow") + ")"})
	default:
		writeJSON(w, rec.code, adminapi.ErrorBody{Error: http.StatusText(rec.code)})
	}
}

// headerRecorder keeps the status and headers a handler writes and drops
// its body.
type headerRecorder struct {
	header http.Header
	code   int
}

func (h *headerRecorder) Header() http.Header { return h.header }
func (h *headerRecorder) Write(b []byte) (int, error) {
	if h.code == 0 {
		h.code = http.StatusOK
	}
	return len(b), nil
}
func (h *headerRecorder) WriteHeader(code int) {
	if h.code == 0 {
		h.code = code
	}
}

// handlerFunc serves one endpoint; an error it returns is answered by
// writeError.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (s *Server) handle(pattern string, h handlerFunc) {
	s.routes = append(s.routes, pattern)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil && !s.forward(w, r, err) {
			s.writeError(w, r, err)
		}
	})
}

// httpError is an error answered with a status code other than 500.
type httpError struct {
	code  int
	body  adminapi.ErrorBody
	cause error // logged, for 5xx answers
}

func (e *httpError) Error() string { return e.body.Error }

// Unwrap returns the cause, so that the leader a *NotLeaderError names
// reaches forward.
func (e *httpError) Unwrap() error { return e.cause }

func errorf(code int, format string, args ...any) *httpError {
	return &httpError{code: code, body: adminapi.ErrorBody{Error: fmt.Sprintf(format, args...)}}
}

// unlistedLeaderNote ends an error that would have named a leader URL
// outside --peer-urls.
const unlistedLeaderNote = " (the leader's advertised URL is not among --peer-urls, so it is not named)"

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		he = &httpError{code: http.StatusInternalServerError, body: adminapi.ErrorBody{Error: "internal error"}, cause: err}
	}
	if he.code >= 500 {
		s.log.Error("admin request failed", "method", r.Method, "path", r.URL.Path, "status", he.code, "err", he.cause)
	}
	body := he.body
	if body.Leader != "" && !s.cfg.Peers.Allows(body.Leader) {
		// The leader's URL comes from its election key in etcd: one
		// outside Peers is named neither in the body nor in Location,
		// so that whoever wrote it cannot send clients (the console's
		// link among them) to a server of their own.
		body.Error += unlistedLeaderNote
		body.Leader = ""
	}
	if body.Leader != "" {
		w.Header().Set("Location", strings.TrimSuffix(body.Leader, "/")+r.URL.RequestURI())
	}
	writeJSON(w, he.code, body)
}

// etcdError turns a failed etcd call (doing what) into an answer: 413 for
// a change larger than etcd takes, 503 otherwise.
func etcdError(doing string, err error) error {
	if errors.Is(err, rpctypes.ErrRequestTooLarge) || status.Code(err) == codes.ResourceExhausted {
		return errorf(http.StatusRequestEntityTooLarge, "the change is larger than etcd accepts")
	}
	he := errorf(http.StatusServiceUnavailable, "etcd unavailable")
	he.cause = fmt.Errorf("%s: %w", doing, err)
	return he
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own types are written; they always marshal.
		code, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	writeRaw(w, code, b)
}

func writeRaw(w http.ResponseWriter, code int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// readCtx bounds the etcd work of a request that only reads; it ends when
// the client goes away.
func (s *Server) readCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.cfg.Timeout)
}

// writeCtx bounds the etcd work of a request that writes. It does not end
// when the client goes away: a change, once begun, runs to its outcome
// (which is logged), so that the client's hang-up cannot leave the
// read-merge-write loop or the audit trim half done. Each etcd transaction
// is atomic either way.
func (s *Server) writeCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.Timeout)
}

// domain returns the domain the request's ?domain= names, or the default.
func (s *Server) domain(r *http.Request) (string, error) {
	d := r.URL.Query().Get("domain")
	if d == "" {
		return s.cfg.DefaultDomain, nil
	}
	if !validName(d) {
		return "", errorf(http.StatusBadRequest, "invalid domain %q", d)
	}
	return d, nil
}

// ruleRef returns the domain and rule id of a request for one rule. A
// request that names a domain (?domain=) gets it. One that names none gets
// the default domain when it holds the rule, else the only domain that
// does; a rule id held by several other domains is answered 409 naming
// them, one held by none 404. An id that no rule can have is answered 404.
func (s *Server) ruleRef(r *http.Request) (domain, id string, err error) {
	id = r.PathValue("rule_id")
	if r.URL.Query().Get("domain") != "" {
		domain, err = s.domain(r)
		if err != nil {
			return "", "", err
		}
		if !validName(id) {
			return "", "", notFound(domain, id)
		}
		return domain, id, nil
	}
	if !validName(id) {
		return "", "", errorf(http.StatusNotFound, "rule '%s' not found in any domain", id)
	}
	ctx, cancel := s.readCtx(r)
	defer cancel()
	domain, err = s.inferDomain(ctx, id)
	return domain, id, err
}

// inferDomain returns the domain of the rule id for a request that names
// none: the default domain if it holds the rule, else the only domain that
// holds it.
func (s *Server) inferDomain(ctx context.Context, id string) (string, error) {
	resp, err := s.cfg.Etcd.Get(ctx, s.cfg.Layout.Rule(s.cfg.DefaultDomain, id), clientv3.WithCountOnly())
	if err != nil {
		return "", etcdError("read rule", err)
	}
	if resp.Count > 0 {
		return s.cfg.DefaultDomain, nil
	}
	resp, err = s.cfg.Etcd.Get(ctx, s.cfg.Layout.Rules(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return "", etcdError("list rules", err)
	}
	var domains []string
	for _, kv := range resp.Kvs {
		if d, rid, err := s.cfg.Layout.ParseRule(string(kv.Key)); err == nil && rid == id {
			domains = append(domains, d)
		}
	}
	switch len(domains) {
	case 0:
		return "", errorf(http.StatusNotFound, "rule '%s' not found in any domain", id)
	case 1:
		return domains[0], nil
	}
	slices.Sort(domains)
	return "", errorf(http.StatusConflict, "rule '%s' exists in several domains (%s) and none is the default ('%s'); name one with ?domain=",
		id, strings.Join(domains, ", "), s.cfg.DefaultDomain)
}

func notFound(domain, id string) error {
	return errorf(http.StatusNotFound, "rule '%s' not found in domain '%s'", id, domain)
}

// readBody reads the request body, answering 413 beyond max bytes.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength > max {
		return nil, errorf(http.StatusRequestEntityTooLarge, "body of %d bytes; at most %d", r.ContentLength, max)
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, errorf(http.StatusRequestEntityTooLarge, "body larger than %d bytes", max)
	case err != nil:
		return nil, errorf(http.StatusBadRequest, "read body: %v", err)
	}
	return data, nil
}

// validName reports whether s is a valid domain or rule id, as package
// rule checks them: 1 to 128 letters, digits, '.', '_' and '-', starting
// with a letter or digit. Such names are safe in etcd keys and URLs.
func validName(s string) bool { return rule.ValidID(s) }

// etag returns the entity tag of a key's mod revision.
func etag(rev int64) string { return `"` + strconv.FormatInt(rev, 10) + `"` }

// checkIfMatch answers 412 unless the request's If-Match headers, if any,
// match the current mod revision rev of a key (0: absent). "*" matches any
// present key; the tag "0" matches an absent one. Weak tags never match.
func checkIfMatch(r *http.Request, rev int64) error {
	vals := r.Header.Values("If-Match")
	if len(vals) == 0 {
		return nil
	}
	want := etag(rev)
	for _, v := range vals {
		for _, tag := range strings.Split(v, ",") {
			tag = strings.TrimSpace(tag)
			if tag == want || tag == "*" && rev != 0 {
				return nil
			}
		}
	}
	return errorf(http.StatusPreconditionFailed, "If-Match does not match the current ETag %s", want)
}

// principal returns the name of the request's principal, for audit
// records.
func principal(r *http.Request) string {
	if p, ok := auth.FromContext(r.Context()); ok && p.Name != "" {
		return p.Name
	}
	return auth.Anonymous
}
