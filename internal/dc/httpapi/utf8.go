package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// mayHoldBadValue reports whether body, well-formed JSON, may hold what
// badValue looks for: invalid UTF-8, an escape \u (of a lone surrogate,
// perhaps) or a null. It is a byte scan, so that the bodies that hold none
// of them, nearly all, are not read token by token again.
func mayHoldBadValue(body []byte) bool {
	return !utf8.Valid(body) || bytes.Contains(body, []byte(`\u`)) || bytes.Contains(body, []byte("null"))
}

// badValue names the first name or value of body, a JSON object that
// encoding/json decoded into a value of type t, that encoding/json reads
// other than as written, with its field path:
//
//   - a name or string holding invalid UTF-8, or the escape of a lone
//     UTF-16 surrogate (\ud800 to \udfff not in a pair): encoding/json
//     reads each as U+FFFD, so that distinct names and values would share
//     one counter;
//   - null, which encoding/json takes as the field left out: a client
//     bug that sent {"tenant": null} would be allowed, unmatched.
//
// It returns nil when there is none. body must be well-formed JSON.
func badValue(body []byte, t reflect.Type) error {
	// frame is an object or array being read: its type; key is the name
	// of the member being read (wantKey: none yet), idx the array index.
	type frame struct {
		obj, wantKey bool
		typ          reflect.Type
		key          string
		idx          int
	}
	path := func(fs []frame) string {
		var b strings.Builder
		for _, f := range fs {
			switch {
			case !f.obj:
				b.WriteString("[" + strconv.Itoa(f.idx) + "]")
			case b.Len() > 0:
				b.WriteString("." + f.key)
			default:
				b.WriteString(f.key)
			}
		}
		return b.String()
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var stack []frame
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			break
		}
		// The token's own bytes, with the separators before it (ASCII).
		raw := body[start:dec.InputOffset()]
		top := len(stack) - 1
		if top >= 0 && stack[top].obj && stack[top].wantKey {
			if _, isKey := tok.(string); isKey {
				name := raw[bytes.IndexByte(raw, '"')+1 : bytes.LastIndexByte(raw, '"')]
				where := path(stack[:top])
				if where == "" {
					where = "body"
				}
				if !utf8.Valid(raw) {
					return fmt.Errorf("%s: name %q is not valid UTF-8", where, name)
				}
				if esc := loneSurrogate(name); esc != "" {
					return fmt.Errorf("%s: name %q has the escape %s, a lone surrogate, not a character", where, name, esc)
				}
				stack[top].key, stack[top].wantKey = tok.(string), false
				continue
			}
		}
		// The type of the value tok begins.
		var typ reflect.Type
		if top < 0 {
			typ = t
		} else {
			typ = memberType(stack[top].typ, stack[top].key)
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{obj: true, wantKey: true, typ: typ})
			continue
		case json.Delim('['):
			stack = append(stack, frame{typ: typ})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:top]
		case nil:
			return fmt.Errorf("%s: want %s, got null; leave the field out instead", path(stack), kindName(typ))
		default:
			if _, isString := tok.(string); isString {
				if !utf8.Valid(raw) {
					return fmt.Errorf("%s: value is not valid UTF-8", path(stack))
				}
				if esc := loneSurrogate(raw); esc != "" {
					return fmt.Errorf("%s: value has the escape %s, a lone surrogate, not a character", path(stack), esc)
				}
			}
		}
		if n := len(stack) - 1; n >= 0 { // a value ended
			if stack[n].obj {
				stack[n].wantKey = true
			} else {
				stack[n].idx++
			}
		}
	}
	if !utf8.Valid(body) {
		return fmt.Errorf("body is not valid UTF-8")
	}
	return nil
}

// memberType is the type of the member key of a value of type t (an
// element, for a map or slice; a field by its JSON name, for a struct),
// or nil when there is none.
func memberType(t reflect.Type, key string) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Map, reflect.Slice, reflect.Array:
		return t.Elem()
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name == key {
				return f.Type
			}
		}
	}
	return nil
}

// kindName says what a JSON value of type t is: "a string", "an
// integer", ...
func kindName(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "a value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Bool:
		return "true or false"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return "a value"
}

// loneSurrogate returns the first escape in s, a JSON string as written
// (its escapes not read), of a UTF-16 surrogate that is not in a pair
// (\ud800 to \udbff followed by \udc00 to \udfff), or "" when there is
// none. s must be well-formed.
func loneSurrogate(s []byte) string {
	hex := func(i int) rune { // the 4 hex digits at s[i:], or -1
		if i+4 > len(s) {
			return -1
		}
		v, err := strconv.ParseUint(string(s[i:i+4]), 16, 16)
		if err != nil {
			return -1
		}
		return rune(v)
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		i++ // the escaped byte, skipped by the loop unless it is 'u'
		if i >= len(s) || s[i] != 'u' {
			continue
		}
		r := hex(i + 1)
		switch {
		case r >= 0xd800 && r < 0xdc00:
			if i+6 < len(s) && s[i+5] == '\\' && s[i+6] == 'u' {
				if low := hex(i + 7); low >= 0xdc00 && low < 0xe000 {
					i += 10 // the pair
					continue
				}
			}
			return string(s[i-1 : i+5])
		case r >= 0xdc00 && r < 0xe000:
			return string(s[i-1 : i+5])
		}
		i += 4
	}
	return ""
}
