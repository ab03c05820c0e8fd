package adminserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/weirhq/weir/pkg/adminapi"
	"github.com/weirhq/weir/pkg/logthrottle"
)

// ForwardedHeader marks a request one coordinator forwarded to the leader.
// A coordinator that gets a forwarded request it cannot answer (the
// leadership moved on meanwhile) answers 503 rather than forwarding it
// again, so that a request makes at most one hop.
const ForwardedHeader = "Weir-Forwarded-By"

// forward carries a request that err says only the leader can answer to
// the leader, when the config allows it and the leader is known. It
// reports whether it answered.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, err error) bool {
	var nl *NotLeaderError
	if s.fwd == nil || !errors.As(err, &nl) || nl.Leader == "" || r.Header.Get(ForwardedHeader) != "" {
		return false
	}
	s.fwd.Proxy(w, r, nl.Leader)
	return true
}

// Forwarder returns the Forwarder that carries the requests this server
// forwards to the leader (Config.Forward), nil without one: for other
// handlers of the process to forward with, so that its warnings share one
// rate limit.
func (s *Server) Forwarder() *Forwarder { return s.fwd }

// ForwardFailLogEvery is how often, at most, a Forwarder logs that one
// leader URL did not answer.
const ForwardFailLogEvery = 10 * time.Second

// Forwarder carries requests that only the leader can answer to the
// leader's admin API (see Proxy). Safe for concurrent use; make one with
// NewForwarder.
type Forwarder struct {
	rt    http.RoundTripper
	peers *PeerURLs
	name  string
	log   *slog.Logger
	// failed rate-limits the warnings of leaders that did not answer, by
	// URL: a standby whose leader is down would otherwise log one line
	// per request it gets.
	failed *logthrottle.Keyed
}

// NewForwarder returns a Forwarder whose requests rt carries, marked with
// ForwardedHeader naming name, to leader URLs that peers allow (nil:
// every URL); its warnings go to log (nil: nowhere).
func NewForwarder(rt http.RoundTripper, peers *PeerURLs, name string, log *slog.Logger) *Forwarder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Forwarder{rt: rt, peers: peers, name: name, log: log, failed: logthrottle.NewKeyed(ForwardFailLogEvery, maxWarned, nil)}
}

// Proxy answers a request with the answer of the leader's admin API at
// leader (a base URL such as "http://10.0.0.2:8070"): the same method,
// path, query and headers, Authorization included (the leader checks the
// same tokens), marked with ForwardedHeader. When the leader does not
// answer, or leader is not an http(s) URL, it answers 502 with a JSON
// error naming the leader, and logs a warning at most once per
// ForwardFailLogEvery for each leader URL. Callers check ForwardedHeader
// first, so that a request makes one hop.
//
// When the peers are set and leader is not among them, the leader is not
// contacted at all: the answer is 502 with a JSON error naming leader as
// not among the peer URLs, and a warning is logged (at most once per
// PeerWarnInterval for each URL). The body's "leader" names leader, as in
// every 502 (docs/openapi/admin.yaml, BadGateway): a URL no one answered
// for, not a place to retry. A 503 of the leader's that names a next
// leader outside the peers is passed on without that name
// (withoutUnlistedLeader).
func (f *Forwarder) Proxy(w http.ResponseWriter, r *http.Request, leader string) {
	peers := f.peers
	if !peers.Allows(leader) {
		if held, ok := peers.refusals.Allow(leader); ok {
			f.log.Warn("not forwarding to the leader: its advertised URL is not among --peer-urls (who wrote its election key in etcd?)",
				"leader", leader, "peer_urls", peers.String(), "path", r.URL.Path, logthrottle.Held(held))
		}
		writeJSON(w, http.StatusBadGateway, adminapi.ErrorBody{
			Error:  "this coordinator does not lead, and the leader's advertised URL " + leader + " is not among --peer-urls: the request was not forwarded",
			Leader: leader,
		})
		return
	}
	fail := func(err error) {
		if held, ok := f.failed.Allow(leader); ok {
			f.log.Warn("forwarding to the leader failed", "leader", leader, "path", r.URL.Path, "err", err, logthrottle.Held(held))
		}
		writeJSON(w, http.StatusBadGateway, adminapi.ErrorBody{
			Error:  "this coordinator does not lead, and the leader at " + leader + " did not answer",
			Leader: leader,
		})
	}
	target, err := url.Parse(strings.TrimSuffix(leader, "/"))
	if err == nil && (target.Scheme != "http" && target.Scheme != "https" || target.Host == "") {
		err = errors.New("not an http(s) URL")
	}
	if err != nil {
		fail(fmt.Errorf("leader's admin URL %q: %w", leader, err))
		return
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Set(ForwardedHeader, f.name)
			pr.SetXForwarded()
		},
		Transport:      f.rt,
		ModifyResponse: func(resp *http.Response) error { return withoutUnlistedLeader(resp, peers) },
		ErrorHandler:   func(w http.ResponseWriter, r *http.Request, err error) { fail(err) },
	}
	p.ServeHTTP(w, r)
}

// maxNotLeaderBody bounds the body of a 503 from the leader that
// withoutUnlistedLeader reads.
const maxNotLeaderBody = 64 << 10

// withoutUnlistedLeader keeps the leader's answer from naming a leader
// URL outside peers (when not nil). The coordinator forwarded to may have
// lost the leadership meanwhile: its 503 then names the next leader, read
// from etcd, in the body's "leader" and in Location, and it may have no
// --peer-urls of its own to check that URL against. Such an answer is
// passed on naming no leader, as this coordinator's own 503 would be.
// An error (the body unreadable) makes the forward fail with 502.
func withoutUnlistedLeader(resp *http.Response, peers *PeerURLs) error {
	if peers == nil || resp.StatusCode != http.StatusServiceUnavailable {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxNotLeaderBody+1))
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("read the leader's 503: %w", err)
	}
	var body adminapi.ErrorBody
	parsed := len(b) <= maxNotLeaderBody && json.Unmarshal(b, &body) == nil
	loc := resp.Header.Get("Location")
	if parsed && (body.Leader == "" || peers.Allows(body.Leader)) && (loc == "" || peers.Allows(origin(loc))) {
		resp.Body = io.NopCloser(bytes.NewReader(b))
		return nil
	}
	if !parsed {
		body = adminapi.ErrorBody{Error: "this coordinator does not lead, and the coordinator it forwarded to answered 503"}
	}
	if body.Leader != "" || loc != "" {
		body.Error += unlistedLeaderNote
	}
	body.Leader = ""
	if b, err = json.Marshal(body); err != nil {
		return fmt.Errorf("rewrite the leader's 503: %w", err)
	}
	resp.Header.Del("Location")
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
	resp.ContentLength = int64(len(b))
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return nil
}

// origin returns the scheme://host of a URL, "" when it has none.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
