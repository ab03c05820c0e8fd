package readme_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/pkg/algorithm"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/rulefile"
)

// day is the window from which a rule reads as a daily quota.
const day = 86400

// TestExampleDailyQuotas checks that the example rules a reader copies
// (deploy/multidc/rules.yaml, the YAML examples of docs/rules.md) count a
// daily quota in fixed windows (or shape it with a bucket on purpose):
// under the default sliding window counter a key that spent its quota
// is told to come back in up to two windows (Retry-After: 141055 with
// "Daily limit reached"), which no reader of "a day" expects.
func TestExampleDailyQuotas(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	var rules []rule.Rule
	set, err := rulefile.Load(filepath.Join(root, "deploy", "multidc", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rules = append(rules, set.Rules...)
	md, err := os.ReadFile(filepath.Join(root, "docs", "rules.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range yamlBlocks(string(md)) {
		if s, err := rulefile.Parse([]byte(block)); err == nil && len(s.Rules) > 0 {
			rules = append(rules, s.Rules...)
		} else if r, err := rulefile.ParseRule([]byte(block)); err == nil {
			rules = append(rules, r)
		}
	}
	daily := 0
	for _, r := range rules {
		if r.WindowSeconds < day || r.Unlimited {
			continue
		}
		daily++
		switch r.Algorithm {
		case algorithm.FixedWindow, algorithm.TokenBucket, algorithm.LeakyBucket:
		default:
			t.Errorf("rule %q (window %ds) uses %v: want FixedWindow for a daily quota (or a bucket, on purpose)", r.ID, r.WindowSeconds, r.Algorithm)
		}
	}
	if daily == 0 {
		t.Errorf("no daily rule found among %d example rules: the examples moved; point this test at them", len(rules))
	}
}

// yamlBlocks returns the bodies of md's ```yaml fenced blocks.
func yamlBlocks(md string) []string {
	var blocks []string
	var body []string
	in := false
	for _, line := range strings.Split(md, "\n") {
		switch {
		case !in && strings.HasPrefix(line, "```yaml"):
			in, body = true, nil
		case in && strings.HasPrefix(line, "```"):
			in = false
			blocks = append(blocks, strings.Join(body, "\n"))
		case in:
			body = append(body, line)
		}
	}
	return blocks
}
