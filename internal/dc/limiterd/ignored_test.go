package limiterd

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A rule file of envoyproxy/ratelimit's with a field out of its place
// loads, as there, and the limiter names the ignored field in a warning.
func TestLoadFileWarnsOfIgnoredFields(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yaml")
	doc := "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 5, shadow_mode: true}\n"
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	f := &fileRules{path: p, log: slog.New(slog.NewTextHandler(&out, nil))}
	got, err := f.loadFile(p, loadedFile{})
	if err != nil {
		t.Fatal(err)
	}
	if got.conf.Tree == nil {
		t.Fatal("no descriptor tree loaded")
	}
	if log := out.String(); !strings.Contains(log, "level=WARN") || !strings.Contains(log, "descriptors[0].rate_limit.shadow_mode") {
		t.Errorf("log %q: want a warning naming descriptors[0].rate_limit.shadow_mode", log)
	}
}
