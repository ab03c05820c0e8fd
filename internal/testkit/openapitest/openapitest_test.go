package openapitest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// itemsDoc is the document the tests hold items to.
const itemsDoc = "internal/testkit/openapitest/testdata/items.yaml"

// items serves testdata/items.yaml, with two faults on purpose: item "odd"
// has a body the document does not allow, and item "boom" a status it
// does not list.
func items() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /items", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch id := r.PathValue("id"); id {
		case "a":
			fmt.Fprint(w, `{"id": "a"}`)
		case "odd":
			fmt.Fprint(w, `{"name": 1}`)
		case "boom":
			w.WriteHeader(http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})
	return mux
}

// spy is a testing.TB that records what it is told to report instead of
// failing the test; Fatal and Fatalf end the goroutine, as on a T.
type spy struct {
	testing.TB
	mu      sync.Mutex
	reports []string
}

func (s *spy) Helper() {}

func (s *spy) Error(args ...any) { s.report(fmt.Sprint(args...)) }

func (s *spy) Errorf(format string, args ...any) { s.report(fmt.Sprintf(format, args...)) }

func (s *spy) Fatal(args ...any) { s.report(fmt.Sprint(args...)); runtime.Goexit() }

func (s *spy) Fatalf(format string, args ...any) {
	s.report(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (s *spy) report(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reports = append(s.reports, msg)
}

// reports runs f with a spy over t, in a goroutine of its own so that a
// Fatal ends only f, and returns what f reported.
func reports(t *testing.T, f func(testing.TB)) []string {
	s := &spy{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(s)
	}()
	<-done
	return s.reports
}

// checkReports fails t unless got has one report per want, in order, each
// holding its want.
func checkReports(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got reports %q, want %d holding %q", got, len(want), want)
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("got report %q, want one holding %q", got[i], want[i])
		}
	}
}

func TestCall(t *testing.T) {
	srv := httptest.NewServer(items())
	t.Cleanup(srv.Close)
	bearer := http.Header{"Authorization": {"Bearer t0ken"}, "Content-Type": {"application/json"}}
	noToken := http.Header{"Content-Type": {"application/json"}}
	cases := []struct {
		name string
		call Call
		want []string // what the call reports, in order
	}{
		{"documented", Call{Method: "GET", Target: "/items/a", WantCode: 200}, nil},
		{"documented status, no body", Call{Method: "GET", Target: "/items/b", WantCode: 404}, nil},
		{"with a bearer token", Call{Method: "POST", Target: "/items", Header: bearer, Body: `{"id": "c"}`, WantCode: 201}, nil},
		{"bad: no bearer token", Call{Method: "POST", Target: "/items", Header: noToken, Body: `{"id": "c"}`, Bad: true, WantCode: 401}, nil},
		{"bad: a field the document forbids", Call{Method: "POST", Target: "/items", Header: bearer, Body: `{"id": "c", "x": 1}`, Bad: true, WantCode: 201}, nil},
		{"no bearer token, not marked bad", Call{Method: "POST", Target: "/items", Header: noToken, Body: `{"id": "c"}`, WantCode: 401},
			[]string{"request validation: got security requirements failed: no bearer token, want an error: false"}},
		{"marked bad, but allowed", Call{Method: "GET", Target: "/items/a", Bad: true, WantCode: 200},
			[]string{"request validation: got <nil>, want an error: true"}},
		{"undocumented path", Call{Method: "GET", Target: "/things/a", WantCode: 200},
			[]string{"GET /things/a is not documented in " + itemsDoc}},
		{"undocumented method", Call{Method: "DELETE", Target: "/items/a", WantCode: 200},
			[]string{"DELETE /items/a is not documented in " + itemsDoc}},
		{"wrong status", Call{Method: "GET", Target: "/items/b", WantCode: 200},
			[]string{"got 404 , want 200"}},
		{"undocumented status", Call{Method: "GET", Target: "/items/boom", WantCode: 500},
			[]string{"response 500  does not match " + itemsDoc}},
		{"body off the schema", Call{Method: "GET", Target: "/items/odd", WantCode: 200},
			[]string{`response 200 {"name": 1} does not match ` + itemsDoc}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Run("Serve", func(t *testing.T) {
				d := Load(t, itemsDoc)
				checkReports(t, reports(t, func(t testing.TB) { d.Serve(t, items(), c.call) }), c.want)
			})
			t.Run("Send", func(t *testing.T) {
				d := Load(t, itemsDoc)
				checkReports(t, reports(t, func(t testing.TB) { d.Send(t, srv.URL, c.call) }), c.want)
			})
		})
	}
}

func TestCheckSeen(t *testing.T) {
	get := func(id string, code int) Call { return Call{Method: "GET", Target: "/items/" + id, WantCode: code} }
	post := Call{Method: "POST", Target: "/items", Body: `{"id": "c"}`, WantCode: 201,
		Header: http.Header{"Authorization": {"Bearer t0ken"}, "Content-Type": {"application/json"}}}
	cases := []struct {
		name  string
		calls []Call
		want  []string
	}{
		{"every status seen", []Call{get("a", 200), get("b", 404), post,
			{Method: "POST", Target: "/items", Body: `{"id": "c"}`, Bad: true, WantCode: 401,
				Header: http.Header{"Content-Type": {"application/json"}}}}, nil},
		{"one status unseen", []Call{get("a", 200), get("b", 404), post},
			[]string{"documented response POST /items 401: never seen"}},
		{"the wrong status is not seen", []Call{get("a", 200), get("b", 200)},
			[]string{"GET /items/{id} 404: never seen", "POST /items 201: never seen", "POST /items 401: never seen"}},
		{"an undocumented status is not a documented one", []Call{get("boom", 500)},
			[]string{"GET /items/{id} 200", "GET /items/{id} 404", "POST /items 201", "POST /items 401"}},
		{"no calls", nil,
			[]string{"GET /items/{id} 200", "GET /items/{id} 404", "POST /items 201", "POST /items 401"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Load(t, itemsDoc)
			for _, call := range c.calls {
				reports(t, func(t testing.TB) { d.Serve(t, items(), call) }) // the calls' own reports are TestCall's
			}
			got := reports(t, d.CheckSeen)
			// Operations come sorted by "METHOD /path", then statuses.
			checkReports(t, got, c.want)
		})
	}
}

func TestCheckRoutes(t *testing.T) {
	cases := []struct {
		name   string
		served []string
		want   []string
	}{
		{"the documented operations", []string{"GET /items/{id}", "POST /items"}, nil},
		{"in another order", []string{"POST /items", "GET /items/{id}"}, nil},
		{"a rest wildcard", []string{"GET /items/{id...}", "POST /items"}, nil},
		{"an undocumented route", []string{"GET /items/{id}", "POST /items", "DELETE /items/{id}"},
			[]string{"route DELETE /items/{id} is served but not documented in " + itemsDoc}},
		{"an operation not served", []string{"GET /items/{id}"},
			[]string{"operation POST /items is documented in " + itemsDoc + " but not served"}},
		{"a pattern without a method", []string{"/items/{id}", "POST /items"},
			[]string{"route /items/{id} is served but not documented", "operation GET /items/{id} is documented"}},
		{"a parameter named otherwise", []string{"GET /items/{name}", "POST /items"},
			[]string{"route GET /items/{name} is served", "operation GET /items/{id} is documented"}},
	}
	d := Load(t, itemsDoc)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkReports(t, reports(t, func(t testing.TB) { d.CheckRoutes(t, c.served) }), c.want)
		})
	}
}

func TestLoad(t *testing.T) {
	cases := []struct {
		name, path string
		want       []string
	}{
		{"valid", itemsDoc, nil},
		{"missing", "internal/testkit/openapitest/testdata/none.yaml", []string{"load internal/testkit/openapitest/testdata/none.yaml"}},
		{"not OpenAPI 3", "internal/testkit/openapitest/testdata/invalid.yaml", []string{"is not valid OpenAPI 3"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkReports(t, reports(t, func(t testing.TB) { Load(t, c.path) }), c.want)
		})
	}
}
