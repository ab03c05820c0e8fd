package rulefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
	"sigs.k8s.io/yaml"

	"github.com/weirhq/weir/pkg/rule"
)

// Parse reads a rule file, in YAML or JSON, and returns its validated set.
// JSON documents are read by rule.ParseSet directly; anything else is read
// as YAML (1.1, as go.yaml.in/yaml/v2 reads it), converted to JSON and then
// read by rule.ParseSet, so both formats take the same fields and give the
// same errors. Duplicate keys and more than one YAML document are errors.
//
// A configuration file of envoyproxy/ratelimit (a document with
// descriptors and no rules) is recognised and converted, as ParseEnvoy
// does.
//
// Errors wrap rule.ErrSyntax (not well-formed YAML or JSON), rule.ErrTooLarge
// (over rule.MaxDocumentSize), or are a *rule.ValidationError listing every
// problem with its field path.
func Parse(data []byte) (rule.Set, error) {
	j, err := toJSON(data)
	if err != nil {
		return rule.Set{}, err
	}
	if isEnvoy(j) {
		return parseEnvoyJSON(j)
	}
	return rule.ParseSet(j)
}

// ParseRule reads one rule, in YAML or JSON, as Parse reads a file; see
// rule.ParseRule.
func ParseRule(data []byte) (rule.Rule, error) {
	j, err := toJSON(data)
	if err != nil {
		return rule.Rule{}, err
	}
	return rule.ParseRule(j)
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

// toJSON returns data as JSON: unchanged if it is JSON already, converted
// from YAML otherwise.
func toJSON(data []byte) ([]byte, error) {
	if len(data) > rule.MaxDocumentSize {
		return nil, fmt.Errorf("%w: %d bytes; at most %d", rule.ErrTooLarge, len(data), rule.MaxDocumentSize)
	}
	if json.Valid(data) {
		return data, nil
	}
	j, err := StrictYAMLToJSON(data, "a rule file")
	if err != nil {
		if looksLikeJSON(data) {
			// Meant as JSON, most likely: the JSON parser's complaint,
			// with its line and column, is the more useful one.
			if _, jerr := rule.ParseSet(data); errors.Is(jerr, rule.ErrSyntax) {
				return nil, jerr
			}
		}
		return nil, fmt.Errorf("%w: %v", rule.ErrSyntax, err)
	}
	if bytes.Equal(j, []byte("null")) {
		return nil, fmt.Errorf("%w: empty document", rule.ErrSyntax)
	}
	return j, nil
}

// StrictYAMLToJSON converts one YAML (or JSON) document to JSON. Duplicate
// keys are errors, and so is a second document, which would otherwise be
// silently ignored; what names the document in that complaint ("a rule
// file"). Errors are one line without the YAML parser's prefixes, for the
// caller to wrap in its own syntax sentinel.
func StrictYAMLToJSON(data []byte, what string) ([]byte, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err == nil {
		err = checkOneDocument(data, what)
	}
	if err != nil {
		return nil, errors.New(yamlMessage(err))
	}
	return j, nil
}

// checkOneDocument reports an error if data, which holds one well-formed
// YAML document, holds another after it.
func checkOneDocument(data []byte, what string) error {
	dec := yamlv2.NewDecoder(bytes.NewReader(data))
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	switch err := dec.Decode(&v); {
	case err == io.EOF:
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("more than one YAML document (%s is one document)", what)
}

// looksLikeJSON reports whether data starts like a JSON object.
func looksLikeJSON(data []byte) bool {
	data = bytes.TrimLeft(data, " \t\r\n")
	return len(data) > 0 && data[0] == '{'
}

// yamlMessage returns the message of a YAML error without the parser's
// prefixes, on one line.
func yamlMessage(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	lines := strings.Split(msg, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.Join(lines, "; ")
}
