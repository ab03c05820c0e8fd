// Package rulesettest helps tests build compiled rule sets from rule
// documents written inline.
package rulesettest

import (
	"testing"

	"github.com/weirhq/weir/pkg/rulefile"
	"github.com/weirhq/weir/pkg/ruleset"
)

// Compile parses src (a YAML or JSON rule file) and compiles it, failing
// t on any error.
func Compile(t testing.TB, src string) *ruleset.Set {
	t.Helper()
	set, err := rulefile.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := ruleset.Compile(set)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
