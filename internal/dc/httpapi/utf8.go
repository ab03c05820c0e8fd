package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// invalidUTF8 names the first string of body, a JSON document that is not
// valid UTF-8, that holds invalid UTF-8: its field path, and whether the
// name or the value is at fault. body must be well-formed JSON.
func invalidUTF8(body []byte) error {
	// frame is an object or array being read: key is the name of the
	// member being read (wantKey: none yet), idx the array index.
	type frame struct {
		obj, wantKey bool
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
				if !utf8.Valid(raw) {
					name := raw[bytes.IndexByte(raw, '"')+1 : bytes.LastIndexByte(raw, '"')]
					where := path(stack[:top])
					if where == "" {
						where = "body"
					}
					return fmt.Errorf("%s: name %q is not valid UTF-8", where, name)
				}
				stack[top].key, stack[top].wantKey = tok.(string), false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{obj: true, wantKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:top]
		default:
			if _, isString := tok.(string); isString && !utf8.Valid(raw) {
				return fmt.Errorf("%s: value is not valid UTF-8", path(stack))
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
	return errors.New("body is not valid UTF-8")
}
