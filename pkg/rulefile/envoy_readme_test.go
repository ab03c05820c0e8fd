package rulefile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/weirhq/weir/pkg/rulefile"
)

// TestEnvoyReadmeExamples loads, unchanged, each example configuration of
// envoyproxy/ratelimit's README (testdata/envoy), as envoyproxy/ratelimit
// loads every one of them.
func TestEnvoyReadmeExamples(t *testing.T) {
	files, err := filepath.Glob("testdata/envoy/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("glob: got %d files, %v; want the examples", len(files), err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			e, err := rulefile.ParseEnvoyConfig(data)
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if e.Tree == nil || e.Tree.Name != e.Rules.Domain {
				t.Errorf("got tree %v for domain %q, want one of that domain", e.Tree, e.Rules.Domain)
			}
		})
	}
}
