package grpcapi

import (
	"context"
	"errors"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/weirhq/weir/pkg/limiter"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// A weir.v1 CheckRequest is decoded straight from its wire form into the
// limiter's items, without the generated messages in between: protobuf's
// own decoding of a request of 16 items made a CheckItem, a map and a
// string per attribute name and value for each item, all thrown away once
// the items were built (a fifth of the limiter's CPU in 16-item requests).
// Here each item costs its map and one string holding all its attribute
// bytes. The decoding accepts and refuses exactly what proto.Unmarshal
// does for a CheckRequest (FuzzDecodeCheck compares them): fields in any
// order and repeated (the last scalar wins, each items field adds an
// item, a repeated map key keeps its last value), unknown fields and
// known fields of an unexpected wire type skipped, and strings that are
// not UTF-8 refused.

// Field numbers of weir.v1 CheckRequest, CheckItem and its map entry.
const (
	fieldDomain     protowire.Number = 1
	fieldItems      protowire.Number = 2
	fieldAttributes protowire.Number = 1
	fieldHits       protowire.Number = 2
	fieldEntryKey   protowire.Number = 1
	fieldEntryValue protowire.Number = 2
)

var errNotUTF8 = errors.New("string field contains invalid UTF-8")

// consumeTag is protowire.ConsumeTag, refusing too what proto.Unmarshal
// refuses and protowire does not: a field number past MaxValidNumber.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n >= 0 && num > protowire.MaxValidNumber {
		return 0, 0, -1
	}
	return num, typ, n
}

// checkRequest is a decoded CheckRequest.
type checkRequest struct {
	domain string
	items  []limiter.Item
	buf    [8]limiter.Item // most requests fit: no allocation for the list
}

// decode parses b, the wire form of a CheckRequest, into r, which must be
// empty. On error r holds what was parsed before it.
func (r *checkRequest) decode(b []byte) error {
	r.items = r.buf[:0]
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == fieldDomain && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if !utf8.Valid(v) {
				return errNotUTF8
			}
			r.domain, b = string(v), b[n:]
		case num == fieldItems && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			it, err := decodeItem(v)
			if err != nil {
				return err
			}
			r.items, b = append(r.items, it), b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
		}
	}
	return nil
}

// decodeItem parses a CheckItem. Its attribute names and values are cut
// from one string, a copy of the item's bytes, which a retained name or
// value therefore keeps alive: at most one item.
func decodeItem(b []byte) (limiter.Item, error) {
	var it limiter.Item
	// A first pass checks the framing and counts the entries, to size the
	// map; the second reads them.
	entries := 0
	for pos := 0; pos < len(b); {
		num, typ, n := consumeTag(b[pos:])
		if n < 0 {
			return it, protowire.ParseError(n)
		}
		pos += n
		n = protowire.ConsumeFieldValue(num, typ, b[pos:])
		if n < 0 {
			return it, protowire.ParseError(n)
		}
		pos += n
		if num == fieldAttributes && typ == protowire.BytesType {
			entries++
		}
	}
	var s string
	if entries > 0 {
		// Sized by the entries, but not past what the limiter accepts:
		// entries may repeat one name (the last wins), and a request of a
		// few megabytes of empty entries must not size a map of millions.
		it.Attributes, s = make(map[string]string, min(entries, limiter.MaxAttributes+1)), string(b)
	}
	for pos := 0; pos < len(b); {
		num, typ, n := consumeTag(b[pos:])
		pos += n
		switch {
		case num == fieldAttributes && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b[pos:])
			start, end := pos+n-len(v), pos+n
			k, val, err := decodeEntry(v, s[start:end])
			if err != nil {
				return it, err
			}
			it.Attributes[k] = val
			pos = end
		case num == fieldHits && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b[pos:])
			it.Hits = int64(v)
			pos += n
		default:
			pos += protowire.ConsumeFieldValue(num, typ, b[pos:])
		}
	}
	return it, nil
}

// decodeEntry parses a map entry, b, whose bytes are also s: the key and
// value are cut from s. A missing key or value is "".
func decodeEntry(b []byte, s string) (key, value string, err error) {
	for pos := 0; pos < len(b); {
		num, typ, n := consumeTag(b[pos:])
		if n < 0 {
			return "", "", protowire.ParseError(n)
		}
		pos += n
		if (num == fieldEntryKey || num == fieldEntryValue) && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b[pos:])
			if n < 0 {
				return "", "", protowire.ParseError(n)
			}
			if !utf8.Valid(v) {
				return "", "", errNotUTF8
			}
			start := pos + n - len(v)
			if num == fieldEntryKey {
				key = s[start : start+len(v)]
			} else {
				value = s[start : start+len(v)]
			}
			pos += n
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b[pos:])
		if n < 0 {
			return "", "", protowire.ParseError(n)
		}
		pos += n
	}
	return key, value, nil
}

// checkDecoder is the WireMessage the Check handler decodes into. What
// reads the decoded request as a message instead (a stats handler's
// InPayload, grpc-go's request tracing) sees an empty CheckRequest: the
// request is in req; binary logging records the bytes.
type checkDecoder struct {
	WireMessage
	empty weirv1.CheckRequest
	req   checkRequest
}

// ParseWire implements WireParser.
func (r *checkRequest) ParseWire(b []byte, _ int) error { return r.decode(b) }

// CheckWire answers a weir.v1 Check given and answered in wire form, as
// the server Register sets up does: the request decoded straight into
// limiter items, the answer encoded from the limiter's response. A request
// that does not decode gets codes.InvalidArgument; the other errors are
// Check's.
func (s *Service) CheckWire(ctx context.Context, req []byte) ([]byte, error) {
	var r checkRequest
	if err := r.decode(req); err != nil {
		return nil, status.Error(codes.InvalidArgument, "malformed request: "+err.Error())
	}
	resp, err := s.check(ctx, r.domain, r.items)
	if err != nil {
		return nil, err
	}
	return newCheckEncoder(resp).append(nil), nil
}

// checkHandler serves Check. Without an interceptor it decodes the
// request with checkRequest and encodes the answer with checkEncoder;
// with one (which is handed the request and the answer), it is the
// generated handler.
func checkHandler(generated grpc.MethodHandler) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		if ic != nil {
			return generated(srv, ctx, dec, ic)
		}
		d := &checkDecoder{}
		d.Init(&d.empty, &d.req)
		if err := Decode(dec, &d.WireMessage); err != nil {
			return nil, err
		}
		resp, err := srv.(*Service).check(ctx, d.req.domain, d.req.items)
		if err != nil {
			return nil, err
		}
		return newCheckEncoder(resp), nil
	}
}
