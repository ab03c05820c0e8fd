package rulefile

import (
	"fmt"
	"io"
	"os"

	"github.com/weirhq/weir/pkg/document"
	"github.com/weirhq/weir/pkg/document/yamldoc"
	"github.com/weirhq/weir/pkg/rule"
)

// Parse reads a rule file, in YAML or JSON, and returns its validated set.
// The document is parsed by package yamldoc (YAML 1.1, as
// go.yaml.in/yaml/v2 reads it, or JSON) and decoded by rule.DecodeSet, so
// both formats take the same fields and give the same errors. More than
// one YAML document is an error; a key that appears more than once is
// reported with its path.
//
// A configuration file of envoyproxy/ratelimit (a document with
// descriptors and no rules) is recognised and converted, as ParseEnvoy
// does.
//
// Errors wrap rule.ErrSyntax (not well-formed YAML or JSON), rule.ErrTooLarge
// (over rule.MaxDocumentSize), or are a *rule.ValidationError listing every
// problem with its field path.
func Parse(data []byte) (rule.Set, error) {
	tree, err := parse(data)
	if err != nil {
		return rule.Set{}, err
	}
	return Decode(tree)
}

// Decode reads a rule file, or a configuration of envoyproxy/ratelimit,
// from a parsed document, as Parse reads it from YAML or JSON.
func Decode(tree *document.Node) (rule.Set, error) {
	if isEnvoy(tree) {
		return decodeEnvoy(tree)
	}
	return rule.DecodeSet(tree)
}

// ParseRule reads one rule, in YAML or JSON, as Parse reads a file; see
// rule.ParseRule.
func ParseRule(data []byte) (rule.Rule, error) {
	tree, err := parse(data)
	if err != nil {
		return rule.Rule{}, err
	}
	return rule.DecodeRule(tree)
}

// parse parses a YAML or JSON document within rule.Limits.
func parse(data []byte) (*document.Node, error) {
	tree, err := yamldoc.Parse(data, rule.Limits)
	return tree, document.Wrap(err, rule.ErrSyntax, rule.ErrTooLarge)
}

// Load reads and parses the rule file at path. Errors are Parse's, or the
// file system's, wrapped with the path.
func Load(path string) (rule.Set, error) {
	s, err := load(path)
	if err != nil {
		return rule.Set{}, fmt.Errorf("load rules from %s: %w", path, err)
	}
	return s, nil
}

func load(path string) (rule.Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return rule.Set{}, err
	}
	defer f.Close()
	// Read one byte past the limit, so that Parse sees an oversized file
	// as such without reading all of it.
	data, err := io.ReadAll(io.LimitReader(f, rule.MaxDocumentSize+1))
	if err != nil {
		return rule.Set{}, err
	}
	return Parse(data)
}
