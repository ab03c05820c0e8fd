package spyhttp_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/weirhq/weir/internal/testkit/spyhttp"
)

// TestSeen: requests are recorded before they are served, connections as
// they are accepted, and Reset forgets both.
func TestSeen(t *testing.T) {
	s := spyhttp.Start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.URL.Path) }))
	if conns, reqs := s.Seen(); conns != 0 || len(reqs) != 0 {
		t.Fatalf("before any request: %d connections, %d requests", conns, len(reqs))
	}
	for _, c := range []*http.Client{{Transport: &http.Transport{}}, {Transport: &http.Transport{}}} {
		resp, err := c.Get(s.URL + "/a")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		c.CloseIdleConnections()
	}
	conns, reqs := s.Seen()
	if conns != 2 || len(reqs) != 2 || reqs[0].URL.Path != "/a" {
		t.Fatalf("got %d connections and %d requests, want 2 and 2 of /a", conns, len(reqs))
	}
	s.Reset()
	if conns, reqs := s.Seen(); conns != 0 || len(reqs) != 0 {
		t.Fatalf("after Reset: %d connections, %d requests", conns, len(reqs))
	}
}
