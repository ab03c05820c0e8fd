package deadpeer_test

import (
	"net/http"
	"testing"

	"github.com/weirhq/weir/internal/testkit/deadpeer"
)

// TestURLNeverAnswers checks that a request to the dead peer fails with a
// transport error, every time, and never gets a status.
func TestURLNeverAnswers(t *testing.T) {
	u := deadpeer.URL(t)
	for i := 0; i < 3; i++ {
		resp, err := http.Get(u + "/x")
		if err == nil {
			resp.Body.Close()
			t.Fatalf("call %d: got status %d, want a transport error", i, resp.StatusCode)
		}
	}
}
