// Package pbwire reads a protobuf message in wire form field by field: the
// one reader of the handlers that decode their requests without the
// generated messages (internal/dc/grpcapi's Check, internal/dc/envoyrls's
// ShouldRateLimit). It refuses the framing proto.Unmarshal refuses — a bad
// tag, a field number past the largest, a value cut short, a group left
// open — and leaves what a field means to its caller.
package pbwire

import "google.golang.org/protobuf/encoding/protowire"

// Field is one field of a message.
type Field struct {
	Num  protowire.Number
	Type protowire.Type
	// Bytes is a length-delimited field's value, within the message, and
	// Off its offset there.
	Bytes []byte
	Off   int
	// Varint is a varint field's value.
	Varint uint64
}

// In returns a length-delimited field's value cut from s, a string that
// holds the same bytes as the message Each read (a decoder converts the
// message to a string once, and every string field it keeps is a slice of
// it rather than a copy of its own).
func (f Field) In(s string) string { return s[f.Off : f.Off+len(f.Bytes)] }

// Each calls fn with each field of msg, in order, while fn returns true. A
// fixed-width field or a group is read whole and handed over with only
// its number and type. Each returns the error of the first field it cannot
// read, and whether fn stopped it.
func Each(msg []byte, fn func(Field) bool) (stopped bool, err error) {
	for pos := 0; pos < len(msg); {
		num, typ, n := protowire.ConsumeTag(msg[pos:])
		if n < 0 {
			return false, protowire.ParseError(n)
		}
		if num > protowire.MaxValidNumber {
			return false, protowire.ParseError(-1)
		}
		f := Field{Num: num, Type: typ}
		var m int
		switch typ {
		case protowire.VarintType:
			f.Varint, m = protowire.ConsumeVarint(msg[pos+n:])
		case protowire.BytesType:
			f.Bytes, m = protowire.ConsumeBytes(msg[pos+n:])
			f.Off = pos + n + m - len(f.Bytes)
		default:
			m = protowire.ConsumeFieldValue(num, typ, msg[pos+n:])
		}
		if m < 0 {
			return false, protowire.ParseError(m)
		}
		if !fn(f) {
			return true, nil
		}
		pos += n + m
	}
	return false, nil
}
