// Package adminclienttest serves Weir's admin API from memory, to the same
// contract as the coordinator, for tests of clients (package adminclient,
// weirctl). It keeps rules per domain with revisions (ETags), share
// policies, an audit log, and whatever statistics, live shares and key
// status a test sets, and it records every request it was sent.
//
// It is a test double of Weir's own HTTP API, not a model of etcd or the
// coordinator: rules are validated with package rule and share policies
// with package sharepolicy, as the real server does, but nothing is
// planned or enforced.
package adminclienttest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/pkg/adminapi"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/sharepolicy"
)

// The tokens the server accepts.
const (
	// AdminToken may read and write; its audit actor is "admin".
	AdminToken = "admin-secret-token"
	// ReadOnlyToken may only read; writes get 403. Its actor is "reader".
	ReadOnlyToken = "read-only-secret-token"
)

// DefaultDomain is the domain of requests that name none.
const DefaultDomain = "default"

// Request is one request the server received.
type Request struct {
	Method string
	// Path is the escaped path, e.g. /rate-limits/a/shares.
	Path    string
	Query   url.Values
	IfMatch string
	Body    string
}

// Server is an in-memory admin API on a loopback httptest server. Its
// methods are safe for concurrent use with the requests it serves.
type Server struct {
	// URL is the base URL of the API.
	URL string

	hs *httptest.Server

	dcs []string
	now func() time.Time

	mu        sync.Mutex
	rev       int64 // the last revision given out
	rules     map[ref]stored
	policies  map[ref]storedPolicy
	stats     map[ref]json.RawMessage
	live      map[ref]map[string]Live
	keys      map[keyRef]json.RawMessage
	audit     []adminapi.AuditRecord
	requests  []Request
	notLeader bool
	leaderURL string

	console consoleDocs // the console's endpoints
}

type ref struct{ domain, id string }

type keyRef struct {
	ref
	key string
}

type stored struct {
	r   rule.Rule
	rev int64
}

type storedPolicy struct {
	p   sharepolicy.Policy
	rev int64
}

// Live is what the coordinator reports of one DC of a global rule.
type Live struct {
	Demand, Share, Target, Admitted float64
}

// New starts a server whose rules are planned over the DCs dcs, and
// closes it when t ends. Times (created_at, audit) come from now; nil
// means a fixed clock at 2026-01-02T03:04:05Z.
func New(t testing.TB, now func() time.Time, dcs ...string) *Server {
	t.Helper()
	s := Start(now, dcs...)
	t.Cleanup(s.Close)
	return s
}

// Start starts a server as New does; the caller closes it.
func Start(now func() time.Time, dcs ...string) *Server {
	if now == nil {
		fixed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		now = func() time.Time { return fixed }
	}
	s := &Server{
		dcs:      dcs,
		now:      now,
		rules:    map[ref]stored{},
		policies: map[ref]storedPolicy{},
		stats:    map[ref]json.RawMessage{},
		live:     map[ref]map[string]Live{},
		keys:     map[keyRef]json.RawMessage{},
	}
	s.hs = httptest.NewServer(s.handler())
	s.URL = s.hs.URL
	return s
}

// Close shuts the server down, waiting for the requests it is serving.
func (s *Server) Close() { s.hs.Close() }

// AddRule stores a rule document (JSON) in domain without a request or an
// audit record, failing t if it is invalid.
func (s *Server) AddRule(t testing.TB, domain, doc string) {
	t.Helper()
	r, err := rule.ParseRule([]byte(doc))
	if err != nil {
		t.Fatalf("adminclienttest: AddRule: %v", err)
	}
	r.Domain = domain
	r.CreatedAt = s.now().UTC()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev++
	s.rules[ref{domain, r.ID}] = stored{r, s.rev}
}

// Rule returns the stored rule, as JSON, and whether there is one.
func (s *Server) Rule(domain, id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.rules[ref{domain, id}]
	if !ok {
		return "", false
	}
	b, _ := json.Marshal(st.r)
	return string(b), true
}

// Policy returns a rule's stored share policy.
func (s *Server) Policy(domain, id string) sharepolicy.Policy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.policies[ref{domain, id}].p
}

// SetPolicy stores a rule's share policy without a request, as if another
// operator had written it; its ETag changes.
func (s *Server) SetPolicy(domain, id string, p sharepolicy.Policy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev++
	s.policies[ref{domain, id}] = storedPolicy{p, s.rev}
}

// SetStats sets the answer of GET /rate-limits/{id}/stats, a JSON document.
func (s *Server) SetStats(domain, id, doc string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats[ref{domain, id}] = json.RawMessage(doc)
}

// SetLive sets what GET /rate-limits/{id}/shares reports of one DC.
func (s *Server) SetLive(domain, id, dc string, l Live) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := ref{domain, id}
	if s.live[r] == nil {
		s.live[r] = map[string]Live{}
	}
	s.live[r][dc] = l
}

// SetKeyStatus sets the answer of GET /rate-limits/{id}/{key}, a JSON
// document.
func (s *Server) SetKeyStatus(domain, id, key, doc string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[keyRef{ref{domain, id}, key}] = json.RawMessage(doc)
}

// SetLeader makes the server answer live data (statistics, shares, key
// status) or, when leader is false, 503 as a coordinator that does not
// lead, naming leaderURL as the leader unless it is empty.
func (s *Server) SetLeader(leader bool, leaderURL string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notLeader, s.leaderURL = !leader, leaderURL
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Writes returns the requests received so far other than GET, in order.
func (s *Server) Writes() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Method != http.MethodGet {
			out = append(out, r)
		}
	}
	return out
}

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /rate-limits", s.createRule)
	mux.HandleFunc("GET /rate-limits", s.listRules)
	mux.HandleFunc("GET /rate-limits/{rule_id}", s.getRule)
	mux.HandleFunc("PUT /rate-limits/{rule_id}", s.updateRule)
	mux.HandleFunc("DELETE /rate-limits/{rule_id}", s.deleteRule)
	mux.HandleFunc("GET /rate-limits/{rule_id}/stats", s.leader(s.getStats))
	mux.HandleFunc("GET /rate-limits/{rule_id}/shares", s.leader(s.getShares))
	mux.HandleFunc("PUT /rate-limits/{rule_id}/shares", s.leader(s.putShares))
	mux.HandleFunc("GET /rate-limits/{rule_id}/{key}", s.leader(s.getKey))
	mux.HandleFunc("GET /audit", s.getAudit)
	s.routeConsole(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		if err != nil {
			writeError(w, http.StatusBadRequest, "read body: "+err.Error())
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.mu.Lock()
		s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.Query(), IfMatch: r.Header.Get("If-Match"), Body: string(body)})
		s.mu.Unlock()
		actor, write := "", false
		switch strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") {
		case AdminToken:
			actor, write = "admin", true
		case ReadOnlyToken:
			actor = "reader"
		default:
			writeError(w, http.StatusUnauthorized, "missing or invalid bearer token")
			return
		}
		if !write && r.Method != http.MethodGet {
			writeError(w, http.StatusForbidden, "this token may only read")
			return
		}
		r.Header.Set("X-Actor", actor)
		mux.ServeHTTP(w, r)
	})
}

// leader answers 503 for live data while the server does not lead.
func (s *Server) leader(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		no, leader := s.notLeader, s.leaderURL
		s.mu.Unlock()
		if no {
			writeJSON(w, http.StatusServiceUnavailable, adminapi.ErrorBody{Error: "this coordinator is not the leader", Leader: leader})
			return
		}
		h(w, r)
	}
}

func domainOf(r *http.Request) string {
	if d := r.URL.Query().Get("domain"); d != "" {
		return d
	}
	return DefaultDomain
}

func (s *Server) createRule(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	nr, err := rule.ParseRule(body)
	if err != nil {
		writeRuleError(w, err)
		return
	}
	domain := domainOf(r)
	if nr.Domain != "" && r.URL.Query().Get("domain") == "" {
		domain = nr.Domain
	}
	if nr.Domain != "" && nr.Domain != domain {
		writeFields(w, "invalid rule", rule.FieldError{Path: "domain", Reason: fmt.Sprintf("%q is not the domain of the request, %q", nr.Domain, domain)})
		return
	}
	nr.Domain = domain
	nr.CreatedAt, nr.UpdatedAt = s.now().UTC(), time.Time{}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := ref{domain, nr.ID}
	if _, ok := s.rules[k]; ok {
		writeError(w, http.StatusConflict, fmt.Sprintf("rule %q already exists in domain %q", nr.ID, domain))
		return
	}
	s.rev++
	s.rules[k] = stored{nr, s.rev}
	s.record(r, adminapi.ActionCreate, k, nil, nr)
	w.Header().Set("ETag", etag(s.rev))
	writeJSON(w, http.StatusCreated, nr)
}

// listRules answers the rules of ?domain=, or of every domain, sorted by
// domain and id.
func (s *Server) listRules(w http.ResponseWriter, r *http.Request) {
	domain := r.URL.Query().Get("domain")
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []rule.Rule{}
	byName := func(a, b ref) int { return cmp.Or(strings.Compare(a.domain, b.domain), strings.Compare(a.id, b.id)) }
	for _, k := range slices.SortedFunc(maps.Keys(s.rules), byName) {
		if domain == "" || k.domain == domain {
			out = append(out, s.rules[k].r)
		}
	}
	writeJSON(w, http.StatusOK, adminapi.RuleList{Rules: out})
}

func (s *Server) getRule(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.rules[ref{domainOf(r), r.PathValue("rule_id")}]
	if !ok {
		writeNotFound(w, r)
		return
	}
	w.Header().Set("ETag", etag(st.rev))
	writeJSON(w, http.StatusOK, st.r)
}

func (s *Server) updateRule(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var patch map[string]json.RawMessage
	if err := json.Unmarshal(body, &patch); err != nil || patch == nil {
		writeError(w, http.StatusBadRequest, "want a JSON object of the fields to change")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := ref{domainOf(r), r.PathValue("rule_id")}
	st, ok := s.rules[k]
	if !ok {
		writeNotFound(w, r)
		return
	}
	if im := r.Header.Get("If-Match"); im != "" && im != "*" && im != etag(st.rev) {
		writeError(w, http.StatusPreconditionFailed, fmt.Sprintf("rule %q changed since %s (now %s)", k.id, im, etag(st.rev)))
		return
	}
	cur, _ := json.Marshal(st.r)
	var doc map[string]json.RawMessage
	json.Unmarshal(cur, &doc)
	for f, v := range patch {
		switch {
		case f == "rule_id" && string(v) != strconv.Quote(k.id):
			writeError(w, http.StatusConflict, "rule_id cannot change; create a new rule")
			return
		case f == "created_at" || f == "updated_at":
			continue // kept by the server
		case string(v) == "null":
			delete(doc, f)
		default:
			doc[f] = v
		}
	}
	merged, _ := json.Marshal(doc)
	nr, err := rule.ParseRule(merged)
	if err != nil {
		writeRuleError(w, err)
		return
	}
	if nr.Domain != k.domain {
		writeFields(w, "invalid rule", rule.FieldError{Path: "domain", Reason: "cannot change"})
		return
	}
	nr.CreatedAt, nr.UpdatedAt = st.r.CreatedAt, s.now().UTC()
	s.rev++
	s.rules[k] = stored{nr, s.rev}
	s.record(r, adminapi.ActionUpdate, k, st.r, nr)
	w.Header().Set("ETag", etag(s.rev))
	writeJSON(w, http.StatusOK, nr)
}

func (s *Server) deleteRule(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := ref{domainOf(r), r.PathValue("rule_id")}
	st, ok := s.rules[k]
	if !ok {
		writeNotFound(w, r)
		return
	}
	delete(s.rules, k)
	delete(s.policies, k)
	s.rev++
	s.record(r, adminapi.ActionDelete, k, st.r, nil)
	writeJSON(w, http.StatusOK, adminapi.Deleted{Message: fmt.Sprintf("Rate limit rule '%s' deleted successfully.", k.id)})
}

func (s *Server) getStats(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := ref{domainOf(r), r.PathValue("rule_id")}
	if _, ok := s.rules[k]; !ok {
		writeNotFound(w, r)
		return
	}
	doc, ok := s.stats[k]
	if !ok {
		writeJSON(w, http.StatusOK, adminapi.RuleStats{RuleID: k.id, HotKeys: []adminapi.HotKey{},
			DCs: map[string]adminapi.DCStats{}, LastUpdated: s.now().UTC()})
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

func (s *Server) getShares(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := ref{domainOf(r), r.PathValue("rule_id")}
	if _, ok := s.rules[k]; !ok {
		writeNotFound(w, r)
		return
	}
	sp := s.policies[k]
	doc := adminapi.Shares{Domain: k.domain, RuleID: k.id, DCs: []adminapi.DCShare{}, ETag: etag(sp.rev)}
	for _, dc := range s.dcs {
		l, p := s.live[k][dc], sp.p.DCs[dc]
		doc.DCs = append(doc.DCs, adminapi.DCShare{DC: dc, Demand: l.Demand, Share: l.Share, Target: l.Target, Admitted: l.Admitted,
			Pin: p.Pin, Floor: p.Floor, Ceiling: p.Ceiling, Drained: p.Drained})
	}
	w.Header().Set("ETag", doc.ETag)
	writeJSON(w, http.StatusOK, doc)
}

func (s *Server) putShares(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	p, err := sharepolicy.Decode(body)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	if _, err := p.Settings(s.dcs); err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	if err := p.Contradictions(); err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	if p.DCs == nil {
		p.DCs = map[string]sharepolicy.DCPolicy{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := ref{domainOf(r), r.PathValue("rule_id")}
	if _, ok := s.rules[k]; !ok {
		writeNotFound(w, r)
		return
	}
	old := s.policies[k]
	if im := r.Header.Get("If-Match"); im != "" && im != "*" && im != etag(old.rev) {
		writeError(w, http.StatusPreconditionFailed, fmt.Sprintf("the shares of rule %q changed since %s (now %s)", k.id, im, etag(old.rev)))
		return
	}
	s.rev++
	s.policies[k] = storedPolicy{p, s.rev}
	var before any
	if old.rev != 0 {
		before = old.p
	}
	s.record(r, adminapi.ActionShares, k, before, p)
	w.Header().Set("ETag", etag(s.rev))
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) getKey(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := ref{domainOf(r), r.PathValue("rule_id")}
	if _, ok := s.rules[k]; !ok {
		writeNotFound(w, r)
		return
	}
	doc, ok := s.keys[keyRef{k, r.PathValue("key")}]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no status for key %q of rule %q", r.PathValue("key"), k.id))
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

func (s *Server) getAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 50
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, "limit: want 1 to 1000")
			return
		}
		limit = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := adminapi.AuditList{Records: []adminapi.AuditRecord{}}
	for i := len(s.audit) - 1; i >= 0 && len(out.Records) < limit; i-- {
		a := s.audit[i]
		if (q.Get("rule_id") == "" || a.RuleID == q.Get("rule_id")) && (q.Get("domain") == "" || a.Domain == q.Get("domain")) {
			out.Records = append(out.Records, a)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// record appends an audit record; s.mu is held.
func (s *Server) record(r *http.Request, action string, k ref, before, after any) {
	doc := func(v any) json.RawMessage {
		if v == nil {
			return json.RawMessage("null")
		}
		b, _ := json.Marshal(v)
		return b
	}
	s.audit = append(s.audit, adminapi.AuditRecord{ID: fmt.Sprintf("%020d", len(s.audit)+1), Time: s.now().UTC(), Actor: r.Header.Get("X-Actor"),
		Action: action, Domain: k.domain, RuleID: k.id, Before: doc(before), After: doc(after)})
}

func etag(rev int64) string { return `"` + strconv.FormatInt(rev, 10) + `"` }

func writeNotFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("rule %q not found in domain %q", r.PathValue("rule_id"), domainOf(r)))
}

func writeRuleError(w http.ResponseWriter, err error) {
	var ve *rule.ValidationError
	if errors.As(err, &ve) {
		writeFields(w, "invalid rule", ve.Errors...)
		return
	}
	writeError(w, http.StatusBadRequest, err.Error())
}

func writeFields(w http.ResponseWriter, msg string, fe ...rule.FieldError) {
	body := adminapi.ErrorBody{Error: msg, Fields: []adminapi.FieldError{}}
	for _, f := range fe {
		body.Fields = append(body.Fields, adminapi.FieldError{Field: f.Path, Reason: f.Reason})
	}
	writeJSON(w, http.StatusUnprocessableEntity, body)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, adminapi.ErrorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if raw, ok := v.(json.RawMessage); ok {
		w.Write(append(raw, '\n'))
		return
	}
	json.NewEncoder(w).Encode(v)
}

// HTTPClient returns an HTTP client for the server.
func (s *Server) HTTPClient() *http.Client { return s.hs.Client() }
