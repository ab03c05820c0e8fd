// Package yamldoc parses YAML documents into the trees of package
// document, so that YAML and JSON are decoded, and their mistakes worded,
// the same way. It reads YAML 1.1 as go.yaml.in/yaml/v2 does (yes, no, on
// and off unquoted are booleans), and keeps this dependency out of the
// packages that decode documents.
package yamldoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v2"

	"github.com/weirhq/weir/pkg/document"
)

// Parse parses one YAML or JSON document into a tree. JSON is read by
// document.ParseJSON (so its values know their lines); anything else as
// YAML, whose values do not. Duplicate keys are kept in the objects'
// Repeats, for the decoder to report with their paths, except in a YAML
// document whose top is not a mapping, where they are syntax errors.
// Merge keys ("<<") are applied, the merged fields following the others.
//
// Errors are *document.Error: too large (over lim), or not well-formed:
// not valid UTF-8 (document.CheckUTF8), empty, not YAML, more than one YAML document, or a key that is a list
// or a mapping. A document that starts like JSON and is not YAML gets the
// JSON parser's complaint, with its line and column.
func Parse(data []byte, lim document.Limits) (*document.Node, error) {
	if err := lim.CheckSize(data); err != nil {
		return nil, err
	}
	if err := document.CheckUTF8(data); err != nil {
		return nil, err
	}
	if json.Valid(data) {
		return document.ParseJSON(data, lim)
	}
	n, err := parseYAML(data, lim)
	if err != nil && !errors.Is(err, document.ErrTooLarge) && looksLikeJSON(data) {
		// Meant as JSON, most likely: the JSON parser's complaint, with
		// its line and column, is the more useful one.
		if _, jerr := document.ParseJSON(data, lim); jerr != nil {
			return nil, jerr
		}
	}
	return n, err
}

func parseYAML(data []byte, lim document.Limits) (*document.Node, error) {
	// The plain decoding applies merge keys; the ordered one below keeps
	// the order and the repeats of keys, and loses merged fields.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var plain any
	if err := dec.Decode(&plain); err == io.EOF {
		return nil, &document.Error{Reason: "empty document"}
	} else if err != nil {
		return nil, yamlError(err)
	}
	var next any
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, &document.Error{Reason: "more than one YAML document (want one)"}
	case err != io.EOF:
		return nil, yamlError(err)
	}
	c := converter{maxDepth: lim.Depth()}
	switch plain.(type) {
	case nil:
		return nil, &document.Error{Reason: "empty document"}
	case map[any]any:
		var ordered yaml.MapSlice
		if err := yaml.Unmarshal(data, &ordered); err != nil {
			return nil, yamlError(err)
		}
		// The scalars as written, for Node.Written: where the top is a
		// mapping, as in every document Weir reads. A document this
		// decoding refuses (a key that is a list) is refused below, in
		// the words of the conversion.
		written := new(writtenValue)
		if yaml.Unmarshal(data, written) != nil {
			written = nil
		}
		return c.convert(ordered, plain, written, 0)
	}
	// Not a mapping at the top: its mappings decode unordered, so they
	// are read strictly, to refuse the repeats that would be lost.
	if err := yaml.UnmarshalStrict(data, &plain); err != nil {
		return nil, yamlError(err)
	}
	return c.convert(plain, plain, nil, 0)
}

// writtenValue is a YAML value with its scalars as written, before YAML
// 1.1 resolves them ("yes", "0x1F", "017" rather than true, 31, 15): a
// mapping's values by their resolved keys (merge keys applied, as in the
// plain decoding), a sequence's in order.
type writtenValue struct {
	text   string
	scalar bool
	items  []*writtenValue
	fields map[any]*writtenValue
}

// UnmarshalYAML implements yaml.Unmarshaler. A string target takes any
// scalar's text as written; a sequence or a mapping refuses it at once.
func (w *writtenValue) UnmarshalYAML(unmarshal func(any) error) error {
	if unmarshal(&w.text) == nil {
		w.scalar = true
		return nil
	}
	if unmarshal(&w.items) == nil {
		return nil
	}
	return unmarshal(&w.fields)
}

// field returns the value of a mapping's key, or nil.
func (w *writtenValue) field(k any) *writtenValue {
	if w == nil || w.fields == nil || !comparableKey(k) {
		return nil
	}
	return w.fields[k]
}

// item returns a sequence's ith value, or nil.
func (w *writtenValue) item(i int) *writtenValue {
	if w == nil || i >= len(w.items) {
		return nil
	}
	return w.items[i]
}

// writtenText returns w's text when w is a scalar written otherwise than
// text, the Node.Text the parser resolved it to, else "". A mapping's
// repeated key holds its last value in w, the first in the tree: a
// written text that does not resolve to text is not the node's.
func (w *writtenValue) writtenText(text string) string {
	if w == nil || !w.scalar || w.text == text {
		return ""
	}
	var v any
	if yaml.Unmarshal([]byte(w.text), &v) != nil {
		return ""
	}
	switch v := v.(type) {
	case bool:
		if strconv.FormatBool(v) == text {
			return w.text
		}
	case int, int64, uint64, float64:
		if formatNumber(v) == text {
			return w.text
		}
	}
	return ""
}

// comparableKey reports whether k can index a map: the scalar keys the
// YAML decoder gives (NaN included: it finds nothing, harmlessly).
func comparableKey(k any) bool {
	switch k.(type) {
	case string, bool, int, int64, uint64, float64, nil:
		return true
	}
	return false
}

// converter turns decoded YAML into a tree.
type converter struct{ maxDepth int }

// convert returns the tree of v, a value decoded with mappings as
// MapSlice or map[any]any; plain is the same value decoded with mappings
// as map[any]any, which holds merged fields, and w the same with its
// scalars as written (nil when not known).
func (c converter) convert(v, plain any, w *writtenValue, depth int) (*document.Node, error) {
	switch v := v.(type) {
	case nil:
		return &document.Node{}, nil
	case string:
		return &document.Node{Kind: document.String, Text: v}, nil
	case bool:
		text := strconv.FormatBool(v)
		return &document.Node{Kind: document.Bool, Text: text, Written: w.writtenText(text)}, nil
	case int, int64, uint64, float64:
		text := formatNumber(v)
		return &document.Node{Kind: document.Number, Text: text, Written: w.writtenText(text)}, nil
	case time.Time:
		return &document.Node{Kind: document.String, Text: v.Format(time.RFC3339Nano)}, nil
	}
	if depth >= c.maxDepth {
		return nil, &document.Error{TooLarge: true, Reason: "nested deeper than " + strconv.Itoa(c.maxDepth)}
	}
	switch v := v.(type) {
	case []any:
		pl, _ := plain.([]any)
		n := &document.Node{Kind: document.List, Items: make([]*document.Node, len(v))}
		for i, e := range v {
			var pe any
			if i < len(pl) {
				pe = pl[i]
			}
			var err error
			if n.Items[i], err = c.convert(e, pe, w.item(i), depth+1); err != nil {
				return nil, err
			}
		}
		return n, nil
	case yaml.MapSlice:
		pm, _ := plain.(map[any]any)
		n := &document.Node{Kind: document.Object}
		for _, item := range v {
			if err := c.add(n, item.Key, item.Value, pm[item.Key], w, depth); err != nil {
				return nil, err
			}
		}
		// Fields that came from merge keys.
		return n, c.addSorted(n, pm, w, func(k string) bool { _, ok := n.Get(k); return ok }, depth)
	case map[any]any:
		n := &document.Node{Kind: document.Object}
		return n, c.addSorted(n, v, w, func(string) bool { return false }, depth)
	}
	return nil, &document.Error{Reason: fmt.Sprintf("unsupported value of type %T", v)}
}

// addSorted adds the fields of m that skip does not name, in the order of
// their keys; w is m with its scalars as written, or nil.
func (c converter) addSorted(n *document.Node, m map[any]any, w *writtenValue, skip func(string) bool, depth int) error {
	type entry struct {
		key string
		k   any
	}
	var es []entry
	for k := range m {
		ks, err := formatKey(k)
		if err != nil {
			return err
		}
		if !skip(ks) {
			es = append(es, entry{ks, k})
		}
	}
	slices.SortFunc(es, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	for _, e := range es {
		if err := c.add(n, e.k, m[e.k], m[e.k], w, depth); err != nil {
			return err
		}
	}
	return nil
}

// add adds the field k: v to n, an object whose value with its scalars
// as written is w (or nil).
func (c converter) add(n *document.Node, k, v, plain any, w *writtenValue, depth int) error {
	key, err := formatKey(k)
	if err != nil {
		return err
	}
	vn, err := c.convert(v, plain, w.field(k), depth+1)
	if err != nil {
		return err
	}
	n.Add(key, 0, vn)
	return nil
}

// formatKey returns a mapping key as the key of a JSON object: strings as
// they are, other scalars as they would be written.
func formatKey(k any) (string, error) {
	switch k := k.(type) {
	case string:
		return k, nil
	case nil:
		return "null", nil
	case bool:
		return strconv.FormatBool(k), nil
	case int, int64, uint64, float64:
		return formatNumber(k), nil
	}
	return "", &document.Error{Reason: fmt.Sprintf("a key is %s; want a string", describeKey(k))}
}

func describeKey(k any) string {
	switch k.(type) {
	case []any:
		return "a list"
	case yaml.MapSlice, map[any]any:
		return "a mapping"
	}
	return fmt.Sprintf("a %T", k)
}

// formatNumber writes a YAML number as JSON would, and infinities and
// NaN as YAML does (.inf, -.inf, .nan), which no decoder takes as a
// number.
func formatNumber(v any) string {
	switch v := v.(type) {
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case float64:
		switch {
		case math.IsNaN(v):
			return ".nan"
		case math.IsInf(v, 1):
			return ".inf"
		case math.IsInf(v, -1):
			return "-.inf"
		case v == 0 || math.Abs(v) >= 1e-6 && math.Abs(v) < 1e21:
			return strconv.FormatFloat(v, 'f', -1, 64)
		}
		return strconv.FormatFloat(v, 'e', -1, 64)
	}
	return fmt.Sprint(v)
}

// looksLikeJSON reports whether data starts like a JSON object or list.
func looksLikeJSON(data []byte) bool {
	data = bytes.TrimLeft(data, " \t\r\n")
	return len(data) > 0 && (data[0] == '{' || data[0] == '[')
}

var linePrefix = regexp.MustCompile(`^line (\d+): `)

// yamlError returns a YAML parser's error as a *document.Error: on one
// line, without the parser's prefixes, with the line it names.
func yamlError(err error) *document.Error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	lines := strings.Split(msg, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	e := &document.Error{Reason: strings.Join(lines, "; ")}
	if m := linePrefix.FindStringSubmatch(e.Reason); m != nil && len(lines) == 1 {
		e.Line, _ = strconv.Atoi(m[1])
		e.Reason = e.Reason[len(m[0]):]
	}
	return e
}
