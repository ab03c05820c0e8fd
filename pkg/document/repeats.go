package document

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/weirhq/weir/pkg/fielderr"
)

// RepeatedKeys returns the paths of the keys that appear more than once in
// an object of the JSON document data, without building its tree: for a
// document that ParseJSON(data, lim) accepts, exactly what Duplicates("")
// returns of that tree (nil when no key repeats). It is the fast path of
// request bodies that a decoder such as encoding/json reads anyway, and
// that would otherwise take the value of a repeated key silently.
//
// RepeatedKeys does not check that data is well-formed JSON; the caller's
// decoder does. For malformed data it returns either an error matching
// ErrSyntax or paths that mean nothing; for data over lim, an error
// matching ErrTooLarge. It never panics.
func RepeatedKeys(data []byte, lim Limits) ([]string, error) {
	keys, err := ScanKeys(data, lim, nil)
	return keys.Repeated, err
}

// Keys is what ScanKeys finds in a document's objects.
type Keys struct {
	// Repeated are the paths of the repeated keys, as RepeatedKeys.
	Repeated []string
	// Miscased are the keys, where the Shape has struct fields, that name
	// no field exactly, in document order: Path, and Want, the field that
	// encoding/json matches case-insensitively ("" when none does).
	Miscased []Miscased
}

// Miscased is a key that names a struct field only case-insensitively.
type Miscased struct{ Path, Want string }

// ScanKeys is RepeatedKeys that also reports, in the same pass, the keys
// of the objects decoded into struct fields according to shape that name
// a field only case-insensitively (or not at all). A nil shape checks no
// names. Its errors are RepeatedKeys's.
func ScanKeys(data []byte, lim Limits, shape *Shape) (Keys, error) {
	if err := lim.CheckSize(data); err != nil {
		return Keys{}, err
	}
	s := keyScanner{data: data, maxDepth: lim.Depth()}
	s.steps, s.keys = s.stepBuf[:0], s.keyBuf[:0]
	if err := s.value(0, false, shape); err != nil {
		return Keys{}, err
	}
	if s.skipSpace(); s.i < len(s.data) {
		return Keys{}, &Error{Reason: "data after the end of the document"}
	}
	return Keys{Repeated: s.out, Miscased: s.miscased}, nil
}

// ReportRepeats reports each of paths as Open reports a repeated key:
// "appears more than once". Decoders that find repeated keys with
// RepeatedKeys word them with it.
func ReportRepeats(rep Reporter, paths []string) {
	for _, p := range paths {
		rep.Fail(p, msgRepeat)
	}
}

// keyScanner finds repeated keys in one pass over a JSON document,
// allocating only for the paths it returns, for keys that must be
// unescaped, and for objects of many keys.
type keyScanner struct {
	data     []byte
	i        int // the next byte to read
	maxDepth int
	steps    []step   // from the document to the value being read
	keys     [][]byte // the keys read so far of each open object, innermost last
	out      []string
	miscased []Miscased

	// Room for the steps and keys of a small document.
	stepBuf [8]step
	keyBuf  [16][]byte
}

// step is one step of a path: a key, or an index in a list.
type step struct {
	inList bool
	key    []byte
	index  int
}

func malformed() error { return &Error{Reason: "malformed JSON"} }

func (s *keyScanner) skipSpace() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

// value reads one value at depth, of shape. Keys repeated within the
// values of repeated keys are not looked for (skip), as Duplicates does
// not walk them.
func (s *keyScanner) value(depth int, skip bool, shape *Shape) error {
	s.skipSpace()
	if s.i >= len(s.data) {
		return malformed()
	}
	switch s.data[s.i] {
	case '"':
		_, _, err := s.str()
		return err
	case '{', '[':
		if depth >= s.maxDepth {
			return &Error{TooLarge: true, Reason: "nested deeper than " + strconv.Itoa(s.maxDepth)}
		}
		if s.data[s.i] == '[' {
			return s.list(depth, skip, shape)
		}
		return s.object(depth, skip, shape)
	}
	// A number, true, false or null: up to the next delimiter.
	start := s.i
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ',', '}', ']', ':', '"', '{', '[', ' ', '\t', '\r', '\n':
			if s.i == start {
				return malformed()
			}
			return nil
		}
		s.i++
	}
	if s.i == start {
		return malformed()
	}
	return nil
}

// str reads a string and returns its raw bytes between the quotes, and
// whether they must be unescaped (or have invalid UTF-8 replaced) to give
// its value.
func (s *keyScanner) str() (raw []byte, plain bool, err error) {
	s.i++ // '"'
	start, plain := s.i, true
	for s.i < len(s.data) {
		switch c := s.data[s.i]; {
		case c == '"':
			raw = s.data[start:s.i]
			s.i++
			return raw, plain && utf8.Valid(raw), nil
		case c == '\\':
			plain = false
			s.i += 2
		default:
			s.i++
		}
	}
	return nil, false, malformed()
}

// key reads an object's key and returns its value.
func (s *keyScanner) key() ([]byte, error) {
	start := s.i
	raw, plain, err := s.str()
	if err != nil || plain {
		return raw, err
	}
	// Escapes and invalid UTF-8 are rare in keys: let encoding/json, whose
	// decoder ParseJSON reads with, say what the key is.
	var k string
	if err := json.Unmarshal(s.data[start:s.i], &k); err != nil {
		return nil, malformed()
	}
	return []byte(k), nil
}

// next reads what follows an item of a list or a value of an object: a
// ',' before the next one, or end, the closing bracket (done).
func (s *keyScanner) next(end byte) (done bool, err error) {
	if s.skipSpace(); s.i >= len(s.data) {
		return false, malformed()
	}
	switch s.data[s.i] {
	case ',':
		s.i++
		return false, nil
	case end:
		s.i++
		return true, nil
	}
	return false, malformed()
}

// empty reads the closing bracket end of an empty list or object, if
// that is what follows its opening one.
func (s *keyScanner) empty(end byte) bool {
	s.i++ // the opening bracket
	if s.skipSpace(); s.i < len(s.data) && s.data[s.i] == end {
		s.i++
		return true
	}
	return false
}

func (s *keyScanner) list(depth int, skip bool, shape *Shape) error {
	var item *Shape
	if shape != nil {
		item = shape.elem
	}
	if s.empty(']') {
		return nil
	}
	s.steps = append(s.steps, step{inList: true})
	top := len(s.steps) - 1
	for {
		if err := s.value(depth+1, skip, item); err != nil {
			return err
		}
		done, err := s.next(']')
		if err != nil || done {
			s.steps = s.steps[:top]
			return err
		}
		s.steps[top].index++
	}
}

// manyKeys is the number of keys above which an object's keys are looked
// up in a map rather than compared one by one.
const manyKeys = 16

func (s *keyScanner) object(depth int, skip bool, shape *Shape) error {
	if s.empty('}') {
		return nil
	}
	// This object's repeats go at out[first:first+repeats], before the
	// repeats found in its values, as Duplicates lists them.
	first, repeats := len(s.out), 0
	firstKey := len(s.keys)
	var index map[string]bool // once the object has many keys
	for {
		if s.skipSpace(); s.i >= len(s.data) || s.data[s.i] != '"' {
			return malformed()
		}
		k, err := s.key()
		if err != nil {
			return err
		}
		if s.skipSpace(); s.i >= len(s.data) || s.data[s.i] != ':' {
			return malformed()
		}
		s.i++
		repeat := false
		if !skip {
			switch {
			case index != nil:
				repeat = index[string(k)]
			default:
				repeat = slices.ContainsFunc(s.keys[firstKey:], func(seen []byte) bool { return bytes.Equal(seen, k) })
			}
		}
		switch {
		case repeat:
			s.out = slices.Insert(s.out, first+repeats, s.path(k))
			repeats++
		case !skip:
			s.keys = append(s.keys, k)
			if index != nil {
				index[string(k)] = true
			} else if len(s.keys)-firstKey > manyKeys {
				index = make(map[string]bool, 2*manyKeys)
				for _, seen := range s.keys[firstKey:] {
					index[string(seen)] = true
				}
			}
		}
		var val *Shape
		switch {
		case shape == nil:
		case shape.fields == nil:
			val = shape.elem // a map's value
		default:
			var ok bool
			if val, ok = shape.fields[string(k)]; !ok && !skip {
				s.miscased = append(s.miscased, Miscased{Path: s.path(k), Want: shape.fold(k)})
			}
		}
		s.steps = append(s.steps, step{key: k})
		err = s.value(depth+1, skip || repeat, val)
		s.steps = s.steps[:len(s.steps)-1]
		if err != nil {
			return err
		}
		done, err := s.next('}')
		if err != nil || done {
			s.keys = s.keys[:firstKey]
			return err
		}
	}
}

// path returns the path of the key k of the innermost open object.
func (s *keyScanner) path(k []byte) string {
	p := ""
	for _, st := range s.steps {
		if st.inList {
			p = fielderr.Index(p, st.index)
		} else {
			p = fielderr.Key(p, string(st.key))
		}
	}
	return fielderr.Key(p, string(k))
}
