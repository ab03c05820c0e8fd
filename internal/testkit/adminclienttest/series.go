package adminclienttest

import (
	"encoding/json"
	"net/http"
	"sync"
)

// consoleDocs holds the answers of the console's endpoints (series,
// overview, cluster).
type consoleDocs struct {
	mu       sync.Mutex
	series   map[ref]json.RawMessage
	overview json.RawMessage
	cluster  json.RawMessage
}

// SetSeries sets the answer of GET /rate-limits/{id}/series, a JSON
// document; a rule without one is answered 404.
func (s *Server) SetSeries(domain, id, doc string) {
	s.console.mu.Lock()
	defer s.console.mu.Unlock()
	if s.console.series == nil {
		s.console.series = map[ref]json.RawMessage{}
	}
	s.console.series[ref{domain, id}] = json.RawMessage(doc)
}

// SetOverview sets the answer of GET /overview, a JSON document.
func (s *Server) SetOverview(doc string) {
	s.console.mu.Lock()
	defer s.console.mu.Unlock()
	s.console.overview = json.RawMessage(doc)
}

// SetCluster sets the answer of GET /cluster, a JSON document.
func (s *Server) SetCluster(doc string) {
	s.console.mu.Lock()
	defer s.console.mu.Unlock()
	s.console.cluster = json.RawMessage(doc)
}

func (s *Server) routeConsole(mux *http.ServeMux) {
	mux.HandleFunc("GET /rate-limits/{rule_id}/series", s.leader(s.getSeries))
	mux.HandleFunc("GET /overview", s.leader(s.getConsoleDoc(func() json.RawMessage { return s.console.overview })))
	mux.HandleFunc("GET /cluster", s.leader(s.getConsoleDoc(func() json.RawMessage { return s.console.cluster })))
}

func (s *Server) getSeries(w http.ResponseWriter, r *http.Request) {
	s.console.mu.Lock()
	doc, ok := s.console.series[ref{domainOf(r), r.PathValue("rule_id")}]
	s.console.mu.Unlock()
	if !ok {
		writeNotFound(w, r)
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

func (s *Server) getConsoleDoc(get func() json.RawMessage) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.console.mu.Lock()
		doc := get()
		s.console.mu.Unlock()
		if doc == nil {
			writeNotFound(w, r)
			return
		}
		writeJSON(w, http.StatusOK, doc)
	}
}
