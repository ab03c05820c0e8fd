package document

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"
)

// ParseJSON parses one JSON document into a tree. Numbers keep the text
// they were written with; each value knows its line.
//
// Errors are *Error: ErrTooLarge for a document over lim, ErrSyntax for
// one that is not valid UTF-8 (see CheckUTF8), empty, not well-formed JSON
// (with the line and column of the token that could not be read) or
// followed by more data. Duplicate
// keys are not errors: they are kept in the objects' Repeats for the
// decoder to report with their paths.
func ParseJSON(data []byte, lim Limits) (*Node, error) {
	if err := lim.CheckSize(data); err != nil {
		return nil, err
	}
	if err := CheckUTF8(data); err != nil {
		return nil, err
	}
	p := jsonParser{data: data, dec: json.NewDecoder(bytes.NewReader(data)), maxDepth: lim.Depth(), line: 1}
	p.dec.UseNumber()
	n, err := p.value(0)
	if err == nil {
		end := p.start()
		if _, err = p.dec.Token(); err == io.EOF {
			return n, nil
		} else if err == nil {
			return nil, p.errorAt(int64(end), "data after the end of the document")
		}
	}
	var de *Error
	var se *json.SyntaxError
	switch {
	case errors.As(err, &de):
		return nil, err
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		if len(bytes.TrimSpace(data)) == 0 {
			return nil, &Error{Reason: "empty document"}
		}
		return nil, &Error{Reason: "unexpected end of document"}
	case errors.As(err, &se):
		// se.Offset is not always relative to the document; the input
		// offset is, and points at the token that could not be read.
		return nil, p.errorAt(p.dec.InputOffset(), se.Error())
	}
	return nil, &Error{Reason: err.Error()}
}

// CheckUTF8 returns an *Error matching ErrSyntax if data is not valid
// UTF-8, naming the byte offset (from 0), line and column of the first
// byte that is not, else nil. Parsers check the raw document: decoding
// JSON would replace such bytes with U+FFFD, so that two different
// documents would read the same.
func CheckUTF8(data []byte) error {
	if utf8.Valid(data) {
		return nil
	}
	off := 0
	for off < len(data) {
		r, size := utf8.DecodeRune(data[off:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		off += size
	}
	before := data[:off]
	return &Error{
		Line:   bytes.Count(before, []byte{'\n'}) + 1,
		Column: off - (bytes.LastIndexByte(before, '\n') + 1) + 1,
		Reason: "not valid UTF-8 at byte offset " + strconv.Itoa(off),
	}
}

// jsonParser reads a tree from a json.Decoder's tokens, counting lines as
// it goes.
type jsonParser struct {
	data     []byte
	dec      *json.Decoder
	maxDepth int
	off      int // lines are counted up to here
	line     int // the line of off
}

// start returns the offset of the next token: past white space, ',' and
// ':' from the decoder's offset.
func (p *jsonParser) start() int {
	i := int(p.dec.InputOffset())
	for i < len(p.data) {
		switch p.data[i] {
		case ' ', '\t', '\r', '\n', ',', ':':
			i++
			continue
		}
		break
	}
	return i
}

// lineAt returns the line of offset off, which is never before the last
// offset asked about.
func (p *jsonParser) lineAt(off int) int {
	off = min(off, len(p.data))
	if off > p.off {
		p.line += bytes.Count(p.data[p.off:off], []byte{'\n'})
		p.off = off
	}
	return p.line
}

func (p *jsonParser) errorAt(off int64, reason string) *Error {
	off = min(max(off, 0), int64(len(p.data)))
	before := p.data[:off]
	line := bytes.Count(before, []byte{'\n'}) + 1
	col := int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return &Error{Line: line, Column: col, Reason: reason}
}

// value reads one value at the given depth.
func (p *jsonParser) value(depth int) (*Node, error) {
	line := p.lineAt(p.start())
	tok, err := p.dec.Token()
	if err != nil {
		return nil, err
	}
	n := &Node{Line: line}
	switch tok := tok.(type) {
	case nil:
		return n, nil
	case bool:
		n.Kind, n.Text = Bool, strconv.FormatBool(tok)
		return n, nil
	case json.Number:
		n.Kind, n.Text = Number, string(tok)
		return n, nil
	case string:
		n.Kind, n.Text = String, tok
		return n, nil
	}
	if depth >= p.maxDepth {
		return nil, &Error{TooLarge: true, Line: line, Reason: "nested deeper than " + strconv.Itoa(p.maxDepth)}
	}
	if tok == json.Delim('[') {
		n.Kind, n.Items = List, []*Node{}
		for p.dec.More() {
			e, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			n.Items = append(n.Items, e)
		}
		_, err := p.dec.Token() // ']'
		return n, err
	}
	n.Kind = Object
	for p.dec.More() {
		kline := p.lineAt(p.start())
		tok, err := p.dec.Token()
		if err != nil {
			return nil, err
		}
		k := tok.(string) // the decoder allows only strings here
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.Add(k, kline, v)
	}
	_, err = p.dec.Token() // '}'
	return n, err
}
