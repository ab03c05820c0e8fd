package document

import (
	"strconv"

	"github.com/weirhq/weir/pkg/fielderr"
)

// Kind is the kind of a Node's value.
type Kind uint8

// The kinds of value a document holds.
const (
	Null Kind = iota
	Bool
	Number
	String
	List
	Object
)

// Node is one value of a parsed document. Nodes are built by the parsers
// and read by decoders; a decoder does not change them. The zero Node is
// a null.
type Node struct {
	// Kind is the kind of the value.
	Kind Kind
	// Line is the line (from 1) on which the value starts, or 0 when the
	// parser does not say.
	Line int
	// Text is a String's value, a Number as written (JSON) or as the
	// YAML parser read it ("5", "2.5", "1e+21", ".inf"), and "true" or
	// "false" for a Bool.
	Text string
	// Written is a YAML Number's or Bool's text as written in the
	// document ("0x1F", "017", "yes", "On"), which YAML 1.1 resolved
	// into Text; empty for other values and for JSON, whose Text is as
	// written.
	Written string
	// Items are a List's elements.
	Items []*Node
	// Fields are an Object's fields in document order, the first
	// occurrence of each key.
	Fields []Field
	// Repeats are an Object's later occurrences of keys already in
	// Fields, in document order.
	Repeats []Field

	keys map[string]int // Fields' indices, once there are many of them
}

// Field is one key of an object and its value.
type Field struct {
	Key   string
	Line  int // of the key; 0 when the parser does not say
	Value *Node
}

// Get returns the value of the field key of an object, and whether it is
// present. A null value is present.
func (n *Node) Get(key string) (*Node, bool) {
	if i := n.index(key); i >= 0 {
		return n.Fields[i].Value, true
	}
	return nil, false
}

// manyFields is the number of fields above which an object indexes them.
const manyFields = 16

func (n *Node) index(key string) int {
	if n.keys != nil {
		if i, ok := n.keys[key]; ok {
			return i
		}
		return -1
	}
	for i := range n.Fields {
		if n.Fields[i].Key == key {
			return i
		}
	}
	return -1
}

// Add appends the field key to the object n, to Repeats when key is in
// Fields already. line is the key's line, or 0.
func (n *Node) Add(key string, line int, v *Node) {
	f := Field{Key: key, Line: line, Value: v}
	if n.index(key) >= 0 {
		n.Repeats = append(n.Repeats, f)
		return
	}
	n.Fields = append(n.Fields, f)
	switch {
	case n.keys != nil:
		n.keys[key] = len(n.Fields) - 1
	case len(n.Fields) > manyFields:
		n.keys = make(map[string]int, 2*len(n.Fields))
		for i := range n.Fields {
			n.keys[n.Fields[i].Key] = i
		}
	}
}

// Duplicates returns the paths of the keys that appear more than once in
// the tree under n, itself at path, in document order: once for each
// repeat. A JSON request body is refused with them, as Open would refuse
// each.
func (n *Node) Duplicates(path string) []string {
	var out []string
	var walk func(n *Node, path string)
	walk = func(n *Node, path string) {
		switch n.Kind {
		case List:
			for i, e := range n.Items {
				walk(e, fielderr.Index(path, i))
			}
		case Object:
			for _, f := range n.Repeats {
				out = append(out, fielderr.Key(path, f.Key))
			}
			for _, f := range n.Fields {
				walk(f.Value, fielderr.Key(path, f.Key))
			}
		}
	}
	walk(n, path)
	return out
}

// Describe names a value for an error message, as every message of this
// package does: null, true, 5, "text" (quoted, cut after 40 bytes), a
// list, an object.
func Describe(n *Node) string {
	if n == nil {
		return "null"
	}
	switch n.Kind {
	case String:
		if len(n.Text) > 40 {
			return strconv.Quote(n.Text[:37] + "...")
		}
		return strconv.Quote(n.Text)
	case Number, Bool:
		return n.Text
	case List:
		return "a list"
	case Object:
		return "an object"
	}
	return "null"
}
