// Package spyhttp gives tests an HTTP server that records what reached it:
// each connection it accepted and each request, before its handler serves
// the request. Tests of who may contact whom (a standby forwarding to a
// leader's URL, or refusing to) assert on it that a refused peer was not
// even connected to.
package spyhttp

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Server is a loopback HTTP server that records its connections and
// requests. Safe for concurrent use.
type Server struct {
	*httptest.Server

	mu    sync.Mutex
	conns int
	reqs  []*http.Request
}

// Start starts a Server serving h until t ends.
func Start(t testing.TB, h http.Handler) *Server {
	s := &Server{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, r.Clone(context.Background()))
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	s.Server.Start()
	t.Cleanup(s.Close)
	return s
}

// Seen returns the connections accepted and the requests received (each
// a clone, its body not readable) since Start or the last Reset.
func (s *Server) Seen() (conns int, reqs []*http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns, append([]*http.Request(nil), s.reqs...)
}

// Reset forgets the connections and requests seen so far.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns, s.reqs = 0, nil
}
