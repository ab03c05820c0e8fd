package limiterd

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/internal/dc/metrics"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/store/memstore"
)

// TestRulesDirectory loads a directory of rule files, each a domain, as
// envoyproxy/ratelimit loads its runtime directory: a bad file is refused
// with its field path while the others serve, and changes are re-read.
func TestRulesDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	write("b.yml", "domain: b\nrules:\n  - {rule_id: r, key_type: user, limit: 5, window_seconds: 60}\n")
	write("notes.txt", "not a rule file")
	store, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := limiter.New(limiter.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	met, err := metrics.NewLimiter(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	f := &fileRules{path: dir, lim: lim, met: met, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := f.load(); err != nil {
		t.Fatalf("load: got %v, want none", err)
	}
	for _, d := range []string{"a", "b"} {
		if _, err := lim.Rules(d); err != nil {
			t.Errorf("domain %s: got %v, want its rules", d, err)
		}
	}
	if f.Tree("a") == nil || f.Tree("b") != nil {
		t.Errorf("trees: got a %v, b %v; want a's only (b is a Weir rule file)", f.Tree("a"), f.Tree("b"))
	}

	write("a.yaml", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	write("c.yaml", "domain: c\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2}\n")
	err = f.load()
	if err == nil || !strings.Contains(err.Error(), "a.yaml") || !strings.Contains(err.Error(), "descriptors[0].rate_limit.unit") {
		t.Errorf("reload: got %v, want a.yaml refused with its field path", err)
	}
	for _, d := range []string{"a", "b", "c"} {
		if _, err := lim.Rules(d); err != nil {
			t.Errorf("after reload, domain %s: got %v, want its rules (a's previous ones)", d, err)
		}
	}
	if f.Tree("c") == nil {
		t.Errorf("after reload: got no tree for c, want the new file's")
	}

	write("d.yaml", "domain: c\ndescriptors: []\n")
	if err := f.load(); err == nil || !strings.Contains(err.Error(), `domain "c" is already that of`) {
		t.Errorf("duplicate domain: got %v, want d.yaml refused", err)
	}
	if err := os.Remove(filepath.Join(dir, "b.yml")); err != nil {
		t.Fatal(err)
	}
	_ = f.load()
	if _, err := lim.Rules("b"); err == nil {
		t.Errorf("after removing b.yml: got b's rules, want none")
	}
}
