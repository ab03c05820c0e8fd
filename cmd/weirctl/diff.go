package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// change is one top-level field that differs between two JSON objects.
// Old or New is nil when the field is absent (or null) on that side.
type change struct {
	Field string          `json:"field"`
	Old   json.RawMessage `json:"old"`
	New   json.RawMessage `json:"new"`
}

// String returns "field: old → new", absent values shown as (unset).
func (c change) String() string {
	return fmt.Sprintf("%s: %s → %s", c.Field, showValue(c.Old), showValue(c.New))
}

func showValue(v json.RawMessage) string {
	if v == nil {
		return "(unset)"
	}
	var buf bytes.Buffer
	if json.Compact(&buf, v) != nil {
		return string(v)
	}
	return buf.String()
}

// bookkeeping are the fields a diff of rules leaves out: kept by the
// server, or named by the request.
var bookkeeping = map[string]bool{"rule_id": true, "domain": true, "created_at": true, "updated_at": true}

// diffJSON returns the top-level fields whose values differ between the
// JSON objects old and new (either may be empty or null: no object), in
// new's field order then old's, leaving out the fields in skip. Values are
// compared by meaning: field order and spacing do not count.
func diffJSON(old, new []byte, skip map[string]bool) ([]change, error) {
	ok, oldFields, err := objectFields(old)
	if err != nil {
		return nil, fmt.Errorf("read old document: %w", err)
	}
	nk, newFields, err := objectFields(new)
	if err != nil {
		return nil, fmt.Errorf("read new document: %w", err)
	}
	var out []change
	seen := map[string]bool{}
	for _, k := range append(nk, ok...) {
		if seen[k] || skip[k] {
			continue
		}
		seen[k] = true
		o, n := oldFields[k], newFields[k]
		if !sameJSON(o, n) {
			out = append(out, change{Field: k, Old: o, New: n})
		}
	}
	return out, nil
}

// diffDeep is diffJSON descending into objects present on both sides, so
// that a change inside one is named by its path ("dcs.eu-west.pin").
func diffDeep(old, new []byte, skip map[string]bool) ([]change, error) {
	top, err := diffJSON(old, new, skip)
	if err != nil {
		return nil, err
	}
	var out []change
	for _, c := range top {
		if isObject(c.Old) && isObject(c.New) {
			inner, err := diffDeep(c.Old, c.New, nil)
			if err != nil {
				return nil, err
			}
			for _, ic := range inner {
				ic.Field = c.Field + "." + ic.Field
				out = append(out, ic)
			}
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

func isObject(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '{'
}

// objectFields returns the field names of the JSON object doc in order and
// their values; null values count as absent. An empty or null doc has none.
func objectFields(doc []byte) ([]string, map[string]json.RawMessage, error) {
	doc = bytes.TrimSpace(doc)
	if len(doc) == 0 || string(doc) == "null" {
		return nil, nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, errors.New("not a JSON object")
	}
	var keys []string
	vals := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		k := t.(string)
		if string(v) == "null" {
			continue
		}
		if _, dup := vals[k]; !dup {
			keys = append(keys, k)
		}
		vals[k] = v
	}
	if _, err := dec.Token(); err != nil && err != io.EOF {
		return nil, nil, err
	}
	return keys, vals, nil
}

// sameJSON reports whether a and b (nil for absent) hold the same value.
func sameJSON(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ca, errA := canonical(a)
	cb, errB := canonical(b)
	return errA == nil && errB == nil && ca == cb
}

// canonical re-encodes a JSON value with sorted object keys and numbers
// by value (5 and 5.0 are the same). Numbers are float64s: exact for every
// value a rule or policy holds (limits are at most 10^12 < 2^53).
func canonical(v json.RawMessage) (string, error) {
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return "", err
	}
	b, err := json.Marshal(x)
	return string(b), err
}

// summary joins changes for one table cell.
func summary(cs []change) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.String()
	}
	return strings.Join(parts, "; ")
}
