package limiterd_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/testkit/wait"
)

// envoyLimit asks the limiter at base, on Envoy's API over /json, about
// the descriptor route=route of domain shop, and returns the
// requests_per_unit of its current limit (0: none).
func envoyLimit(t *testing.T, base, route string) uint32 {
	t.Helper()
	body := `{"domain":"shop","descriptors":[{"entries":[{"key":"route","value":"` + route + `"}]}]}`
	resp, err := http.Post(base+"/json", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a struct {
		Statuses []struct {
			CurrentLimit struct {
				RequestsPerUnit uint32 `json:"requestsPerUnit"`
			} `json:"currentLimit"`
		} `json:"statuses"`
	}
	if err := json.Unmarshal(b, &a); err != nil || len(a.Statuses) != 1 {
		t.Fatalf("/json: %d %s", resp.StatusCode, b)
	}
	return a.Statuses[0].CurrentLimit.RequestsPerUnit
}

// TestMergeDomainsFlag runs a limiter with MergeDomains on a directory
// holding two configurations of envoyproxy/ratelimit of one domain: both
// files' limits answer on the Envoy API, and a file changed or removed is
// merged again at the next poll. (Files that do not merge stop it at
// start: cmd/limiter's TestMergeDomainsFlag, through its flags.)
func TestMergeDomainsFlag(t *testing.T) {
	route := func(name string, n int) string {
		return "domain: shop\ndescriptors:\n  - key: route\n    value: " + name + "\n    rate_limit: {unit: minute, requests_per_unit: " + strconv.Itoa(n) + "}\n"
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	writeFile(t, a, route("checkout", 2))
	writeFile(t, b, route("search", 3))
	base := startLimiter(t, limiterd.Config{RulesFile: dir, MergeDomains: true, RulesPoll: 20 * time.Millisecond})
	if got := [2]uint32{envoyLimit(t, base, "checkout"), envoyLimit(t, base, "search")}; got != [2]uint32{2, 3} {
		t.Fatalf("limits of checkout and search: got %v, want [2 3]", got)
	}
	writeFile(t, b, route("search", 5))
	wait.For(t, 10*time.Second, "search's limit changed to 5 in b.yaml", func() bool { return envoyLimit(t, base, "search") == 5 })
	if got := envoyLimit(t, base, "checkout"); got != 2 {
		t.Errorf("after b.yaml changed, checkout: got limit %d, want 2 (a.yaml's)", got)
	}
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "checkout without a limit once a.yaml is gone", func() bool { return envoyLimit(t, base, "checkout") == 0 })
	if got := envoyLimit(t, base, "search"); got != 5 {
		t.Errorf("after a.yaml was removed, search: got limit %d, want 5 (b.yaml's)", got)
	}
}

// writeFile writes body to the file at p, by a rename, so that a poll
// never reads it half written.
func writeFile(t *testing.T, p, body string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}
