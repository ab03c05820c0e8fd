package grpcapi

import (
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/runtime/protoiface"

	"github.com/weirhq/weir/pkg/limiter"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// The answer to a Check is encoded straight from the limiter's response,
// without the generated messages in between (six arrays of them a call,
// walked again by protobuf's encoder). The bytes are those proto.Marshal
// makes of checkResponse's message, fields in number order
// (TestEncodeCheck compares them); the values of a rule's fields come from
// ruleFields, which fillRuleResult uses too.

// ruleFields are the values of a weir.v1 RuleResult's fields for r.
type ruleFields struct {
	ruleID, key, message  string
	allowed, shadow       bool
	refunded              bool
	windowSeconds         int64
	source                weirv1.Source
	limited               bool // else no_limit, and none of the fields below
	limit, remaining      int64
	advice                weirv1.RetryAdvice
	resetSecs, retrySecs  int64
	resetNanos, retryNano int32
}

func fieldsOf(r *limiter.RuleResult) ruleFields {
	spec := &r.Match.Rule.Spec
	f := ruleFields{
		ruleID: spec.ID, key: r.Match.Key, allowed: r.Allowed,
		windowSeconds: spec.WindowSeconds, shadow: r.Shadow(), source: source(r.Source),
		limited: r.Limited(), refunded: r.Refunded,
	}
	if !f.limited {
		return f
	}
	f.limit, f.remaining, f.advice = r.Limit, r.Remaining, advice(spec.RetryAdvice)
	f.resetSecs, f.resetNanos = r.ResetAt.Unix(), int32(r.ResetAt.Nanosecond())
	if d := r.RetryAfter; d > 0 {
		f.retrySecs, f.retryNano = int64(d/time.Second), int32(d%time.Second)
	}
	if !r.Allowed {
		f.message = spec.RejectionMessage
	}
	return f
}

// Field numbers of weir.v1 CheckResponse, ItemResult, RuleResult and of
// google.protobuf.Timestamp and Duration.
const (
	respAllowed protowire.Number = 1
	respItems   protowire.Number = 2

	itemAllowed  protowire.Number = 1
	itemDecisive protowire.Number = 2
	itemResults  protowire.Number = 3

	ruleID            protowire.Number = 1
	ruleKey           protowire.Number = 2
	ruleAllowed       protowire.Number = 3
	ruleLimit         protowire.Number = 4
	ruleRemaining     protowire.Number = 5
	ruleResetAt       protowire.Number = 6
	ruleRetryAfter    protowire.Number = 7
	ruleWindowSeconds protowire.Number = 8
	ruleShadow        protowire.Number = 9
	ruleSource        protowire.Number = 10
	ruleMessage       protowire.Number = 11
	ruleRetryAdvice   protowire.Number = 12
	ruleNoLimit       protowire.Number = 13
	ruleRefunded      protowire.Number = 14

	timeSeconds protowire.Number = 1
	timeNanos   protowire.Number = 2
)

// An encoding is a sequence of fields, each sized and appended by the
// same few helpers; proto3 leaves out a scalar field at its zero value.

func sizeVarint(v uint64) int {
	if v == 0 {
		return 0
	}
	return 1 + protowire.SizeVarint(v) // every tag here is one byte
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func sizeString(s string) int {
	if s == "" {
		return 0
	}
	return 1 + protowire.SizeBytes(len(s))
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

// sizeMessage is the size of a message field whose content is n bytes:
// present even when empty.
func sizeMessage(n int) int { return 1 + protowire.SizeBytes(n) }

func appendMessageHeader(b []byte, num protowire.Number, n int) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.BytesType), uint64(n))
}

func boolVarint(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

// intVarint is an int64 (or int32, or enum) field's varint: negative
// numbers take ten bytes.
func intVarint(v int64) uint64 { return uint64(v) }

func sizeTime(secs int64, nanos int32) int {
	return sizeVarint(intVarint(secs)) + sizeVarint(intVarint(int64(nanos)))
}

func appendTime(b []byte, num protowire.Number, secs int64, nanos int32) []byte {
	b = appendMessageHeader(b, num, sizeTime(secs, nanos))
	b = appendVarint(b, timeSeconds, intVarint(secs))
	return appendVarint(b, timeNanos, intVarint(int64(nanos)))
}

func (f *ruleFields) size() int {
	n := sizeString(f.ruleID) + sizeString(f.key) + sizeVarint(boolVarint(f.allowed))
	if f.limited {
		n += sizeVarint(intVarint(f.limit)) + sizeVarint(intVarint(f.remaining)) +
			sizeMessage(sizeTime(f.resetSecs, f.resetNanos)) + sizeMessage(sizeTime(f.retrySecs, f.retryNano))
	}
	n += sizeVarint(intVarint(f.windowSeconds)) + sizeVarint(boolVarint(f.shadow)) + sizeVarint(intVarint(int64(f.source)))
	if f.limited {
		n += sizeString(f.message) + sizeVarint(intVarint(int64(f.advice)))
	} else {
		n += sizeVarint(1)
	}
	return n + sizeVarint(boolVarint(f.refunded))
}

func (f *ruleFields) append(b []byte) []byte {
	b = appendString(b, ruleID, f.ruleID)
	b = appendString(b, ruleKey, f.key)
	b = appendVarint(b, ruleAllowed, boolVarint(f.allowed))
	if f.limited {
		b = appendVarint(b, ruleLimit, intVarint(f.limit))
		b = appendVarint(b, ruleRemaining, intVarint(f.remaining))
		b = appendTime(b, ruleResetAt, f.resetSecs, f.resetNanos)
		b = appendTime(b, ruleRetryAfter, f.retrySecs, f.retryNano)
	}
	b = appendVarint(b, ruleWindowSeconds, intVarint(f.windowSeconds))
	b = appendVarint(b, ruleShadow, boolVarint(f.shadow))
	b = appendVarint(b, ruleSource, intVarint(int64(f.source)))
	if f.limited {
		b = appendString(b, ruleMessage, f.message)
		b = appendVarint(b, ruleRetryAdvice, intVarint(int64(f.advice)))
	} else {
		b = appendVarint(b, ruleNoLimit, 1)
	}
	return appendVarint(b, ruleRefunded, boolVarint(f.refunded))
}

// itemSize is the size of it's ItemResult; sizes gets the size of each of
// its RuleResults.
func itemSize(it *limiter.ItemResult, sizes []int) ([]int, int) {
	n := sizeVarint(boolVarint(it.Allowed)) + sizeVarint(intVarint(int64(int32(it.Decisive))))
	for j := range it.Results {
		f := fieldsOf(&it.Results[j])
		s := f.size()
		sizes = append(sizes, s)
		n += sizeMessage(s)
	}
	return sizes, n
}

// checkEncoder is a Check's answer as the handler returns it to grpc-go,
// whose codec encodes it: a proto.Message whose fast-path Size and Marshal
// encode resp. It is its own reflection, an empty CheckResponse's
// otherwise. The codec asks its size, then its bytes: the sizes of its
// nested messages are computed once, for both.
type checkEncoder struct {
	protoreflect.Message
	empty weirv1.CheckResponse
	resp  limiter.Response

	sized                bool
	itemSizes, ruleSizes []int // of each ItemResult and RuleResult, in order
	total                int
	itemBuf              [16]int // room for the common answers, of up to 16 items of a rule each
	ruleBuf              [16]int
}

func newCheckEncoder(resp limiter.Response) *checkEncoder {
	e := &checkEncoder{resp: resp}
	e.Message = e.empty.ProtoReflect()
	return e
}

// ProtoReflect implements proto.Message.
func (e *checkEncoder) ProtoReflect() protoreflect.Message { return e }

// ProtoMethods implements protoreflect.Message.
func (e *checkEncoder) ProtoMethods() *protoiface.Methods { return &checkEncoderMethods }

// size computes the sizes of the nested messages, once, and returns the
// whole's.
func (e *checkEncoder) size() int {
	if e.sized {
		return e.total
	}
	e.sized = true
	e.itemSizes, e.ruleSizes = e.itemBuf[:0], e.ruleBuf[:0]
	e.total = sizeVarint(boolVarint(e.resp.Allowed))
	for i := range e.resp.Items {
		var n int
		e.ruleSizes, n = itemSize(&e.resp.Items[i], e.ruleSizes)
		e.itemSizes = append(e.itemSizes, n)
		e.total += sizeMessage(n)
	}
	return e.total
}

func (e *checkEncoder) append(b []byte) []byte {
	e.size()
	b = appendVarint(b, respAllowed, boolVarint(e.resp.Allowed))
	k := 0
	for i := range e.resp.Items {
		it := &e.resp.Items[i]
		b = appendMessageHeader(b, respItems, e.itemSizes[i])
		b = appendVarint(b, itemAllowed, boolVarint(it.Allowed))
		b = appendVarint(b, itemDecisive, intVarint(int64(int32(it.Decisive))))
		for j := range it.Results {
			f := fieldsOf(&it.Results[j])
			b = appendMessageHeader(b, itemResults, e.ruleSizes[k])
			b = f.append(b)
			k++
		}
	}
	return b
}

var checkEncoderMethods = protoiface.Methods{
	Flags: protoiface.SupportMarshalDeterministic,
	Size: func(in protoiface.SizeInput) protoiface.SizeOutput {
		return protoiface.SizeOutput{Size: in.Message.(*checkEncoder).size()}
	},
	Marshal: func(in protoiface.MarshalInput) (protoiface.MarshalOutput, error) {
		return protoiface.MarshalOutput{Buf: in.Message.(*checkEncoder).append(in.Buf)}, nil
	},
	CheckInitialized: func(protoiface.CheckInitializedInput) (protoiface.CheckInitializedOutput, error) {
		return protoiface.CheckInitializedOutput{}, nil
	},
}
