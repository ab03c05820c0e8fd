// Package grpcapi serves the limiter's gRPC API, weir.v1.Limiter, with the
// standard health service and server reflection. Malformed messages and
// invalid requests get codes.InvalidArgument with a message; nothing a
// client sends can crash or hang the server.
package grpcapi

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/runtime/protoiface"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/rule"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// Service implements weirv1.LimiterServer over a limiter.
type Service struct {
	weirv1.UnimplementedLimiterServer
	lim *limiter.Limiter
	// decoders pools the Check handler's checkDecoders: a call reuses an
	// earlier one's item list, attribute maps and domain.
	decoders sync.Pool
}

// NewService returns the service for lim.
func NewService(lim *limiter.Limiter) *Service {
	return &Service{lim: lim, decoders: sync.Pool{New: newCheckDecoder}}
}

// Register adds the Limiter service, health and reflection to s. The
// returned health server reports SERVING for "" and "weir.v1.Limiter";
// callers flip it with SetServingStatus (see Health).
func Register(s *grpc.Server, svc *Service) *health.Server {
	desc := weirv1.Limiter_ServiceDesc
	desc.Methods = append([]grpc.MethodDesc(nil), desc.Methods...)
	for i := range desc.Methods {
		desc.Methods[i].Handler = InvalidArgumentOnDecode(desc.Methods[i].Handler)
		if desc.Methods[i].MethodName == "Check" {
			desc.Methods[i].Handler = checkHandler(desc.Methods[i].Handler)
		}
	}
	s.RegisterService(&desc, svc)
	hs := health.NewServer()
	hs.SetServingStatus(desc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, hs)
	reflection.Register(s)
	return hs
}

// InvalidArgumentOnDecode makes a request that does not unmarshal fail with
// InvalidArgument instead of grpc-go's Internal. grpc-go writes the status
// of a failed RecvMsg itself, whatever the handler returns, so the request
// is unmarshalled through a WireMessage, which keeps the parse error for
// the handler.
func InvalidArgumentOnDecode(h grpc.MethodHandler) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		return h(srv, ctx, func(m any) error {
			pm, ok := m.(proto.Message)
			if !ok {
				return dec(m)
			}
			d := &decoded{p: protoParser{m: pm}}
			d.Init(pm, &d.p)
			return Decode(dec, &d.WireMessage)
		}, ic)
	}
}

// decoded is a WireMessage that unmarshals into a generated message, in
// one allocation.
type decoded struct {
	WireMessage
	p protoParser
}

// protoParser unmarshals into m.
type protoParser struct{ m proto.Message }

func (p *protoParser) ParseWire(b []byte, depth int) error {
	return proto.UnmarshalOptions{RecursionLimit: depth}.Unmarshal(b, p.m)
}

// WireParser parses a request from its wire form.
type WireParser interface {
	// ParseWire parses b; depth is protobuf's recursion limit. b is
	// grpc-go's buffer, reused once ParseWire returns: what is kept of it
	// must be copied. Its error is answered as Decode says.
	ParseWire(b []byte, depth int) error
}

// WireMessage is what a handler hands grpc-go's proto codec to unmarshal
// a request into, so that a request that does not parse is the handler's
// to answer: a proto.Message whose fast-path Unmarshal passes the wire
// bytes to a WireParser and keeps its error. For all else protobuf asks
// of a message (it resets it before unmarshalling), it is the reflection
// of the message given to Init, a message of the method's request type.
// Embed it in a struct with the parser, to allocate both at once.
type WireMessage struct {
	protoreflect.Message
	parser WireParser
	err    error
}

// Init sets w to parse with p, reflecting as m.
func (w *WireMessage) Init(m proto.Message, p WireParser) {
	w.Message, w.parser = m.ProtoReflect(), p
}

// ProtoReflect implements proto.Message.
func (w *WireMessage) ProtoReflect() protoreflect.Message { return w }

// ProtoMethods implements protoreflect.Message.
func (w *WireMessage) ProtoMethods() *protoiface.Methods { return &wireMethods }

var wireMethods = protoiface.Methods{Unmarshal: func(in protoiface.UnmarshalInput) (protoiface.UnmarshalOutput, error) {
	w := in.Message.(*WireMessage)
	w.err = w.parser.ParseWire(in.Buf, in.Depth)
	return protoiface.UnmarshalOutput{Flags: protoiface.UnmarshalInitialized}, nil
}}

// maxReused bounds the strings ReuseString keeps.
const maxReused = 256

// ReuseString returns b as a string: *last when they are equal, else a
// copy, which becomes *last when it is at most 256 bytes long. A pooled
// decoder keeps its last request's domain this way, so that the next
// request in the same domain does not copy it again, and a hostile
// request's megabytes are not kept.
func ReuseString(last *string, b []byte) string {
	if string(b) == *last { // compared without a copy
		return *last
	}
	s := string(b)
	if len(s) <= maxReused {
		*last = s
	}
	return s
}

// Decode has dec (a handler's) unmarshal the request into w: an error
// reading the request is grpc-go's, and a request that does not parse
// gets InvalidArgument. A WireParser that refuses a request while parsing
// it for what it holds, not for its form (too many items, say), returns a
// gRPC status error, answered as it is, or an error wrapping
// limiter.ErrInvalid, answered as Status answers it; any other error is
// "malformed request: " and the error.
func Decode(dec func(any) error, w *WireMessage) error {
	w.err = nil // a pooled w may hold an earlier request's
	if err := dec(w); err != nil {
		return err
	}
	if w.err != nil {
		return parseStatus(w.err)
	}
	return nil
}

// parseStatus is the gRPC status of err, a WireParser's, as Decode
// describes.
func parseStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, limiter.ErrInvalid) {
		return Status(err)
	}
	return status.Error(codes.InvalidArgument, "malformed request: "+err.Error())
}

// ErrorDomain is the domain of the google.rpc.ErrorInfo that Status
// attaches to the errors it maps; its Reason is one of the Reason*
// constants, so that clients (pkg/client) can tell the limiter's errors
// apart without reading messages.
const ErrorDomain = "weir.v1"

// Reasons of the ErrorInfo attached by Status.
const (
	ReasonInvalid       = "INVALID_REQUEST"
	ReasonUnknownDomain = "UNKNOWN_DOMAIN"
	ReasonUnknownRule   = "UNKNOWN_RULE"
	ReasonNoRules       = "NO_RULES"
	ReasonUnavailable   = "STORE_UNAVAILABLE"
)

// Status maps the limiter's errors to gRPC status errors: invalid input
// and unknown domains to InvalidArgument, no rules or no store to
// Unavailable, the caller's cancellation and deadline to theirs, anything
// else to Internal. The limiter's own errors carry a google.rpc.ErrorInfo
// (ErrorDomain, a Reason* constant). Every Weir gRPC service answers with
// it.
func Status(err error) error {
	switch {
	case errors.Is(err, limiter.ErrUnknownDomain):
		return withReason(codes.InvalidArgument, err, ReasonUnknownDomain)
	case errors.Is(err, limiter.ErrInvalid):
		return withReason(codes.InvalidArgument, err, ReasonInvalid)
	case errors.Is(err, limiter.ErrUnknownRule):
		return withReason(codes.NotFound, err, ReasonUnknownRule)
	case errors.Is(err, limiter.ErrNoRules):
		return withReason(codes.Unavailable, err, ReasonNoRules)
	case errors.Is(err, limiter.ErrUnavailable):
		return withReason(codes.Unavailable, err, ReasonUnavailable)
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

func withReason(code codes.Code, err error, reason string) error {
	st := status.New(code, err.Error())
	if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain}); derr == nil {
		st = d
	}
	return st.Err()
}

// Check implements weirv1.LimiterServer. The server registered by
// Register decodes Check requests itself (checkHandler) and calls check.
func (s *Service) Check(ctx context.Context, req *weirv1.CheckRequest) (*weirv1.CheckResponse, error) {
	var buf [8]limiter.Item // most requests fit: no allocation
	items := buf[:0]
	if n := len(req.GetItems()); n > len(buf) {
		items = make([]limiter.Item, 0, n)
	}
	for _, it := range req.GetItems() {
		items = append(items, limiter.Item{Attributes: it.GetAttributes(), Hits: it.GetHits()})
	}
	resp, err := s.check(ctx, limiter.Request{Domain: req.GetDomain(), Items: items, RefundOnReject: req.GetAllOrNothing()})
	if err != nil {
		return nil, err
	}
	return checkResponse(&resp), nil
}

// check decides req; its error is a gRPC status.
func (s *Service) check(ctx context.Context, req limiter.Request) (limiter.Response, error) {
	resp, err := s.lim.Check(ctx, req)
	if err != nil {
		return limiter.Response{}, Status(err)
	}
	return resp, nil
}

// single is the response to a Check of one item with at most one result,
// the most common, in one allocation.
type single struct {
	resp       weirv1.CheckResponse
	items      [1]*weirv1.ItemResult
	item       weirv1.ItemResult
	results    [1]*weirv1.RuleResult
	result     weirv1.RuleResult
	resetAt    timestamppb.Timestamp
	retryAfter durationpb.Duration
}

// checkResponse converts resp to its protobuf form. The messages of each
// type are cut from one array: a few allocations whatever the size.
func checkResponse(resp *limiter.Response) *weirv1.CheckResponse {
	if len(resp.Items) == 1 && len(resp.Items[0].Results) <= 1 {
		m := &single{}
		m.resp.Allowed, m.resp.Items = resp.Allowed, m.items[:]
		it := &resp.Items[0]
		m.items[0] = &m.item
		m.item.Allowed, m.item.Decisive, m.item.Results = it.Allowed, int32(it.Decisive), m.results[:0]
		if len(it.Results) == 1 {
			m.results[0] = &m.result
			m.item.Results = m.results[:]
			fillRuleResult(&m.result, &m.resetAt, &m.retryAfter, &it.Results[0])
		}
		return &m.resp
	}
	n := 0
	for i := range resp.Items {
		n += len(resp.Items[i].Results)
	}
	items := make([]weirv1.ItemResult, len(resp.Items))
	itemPtrs := make([]*weirv1.ItemResult, len(resp.Items))
	results := make([]weirv1.RuleResult, n)
	resultPtrs := make([]*weirv1.RuleResult, n)
	resetAts := make([]timestamppb.Timestamp, n)
	retryAfters := make([]durationpb.Duration, n)
	out := &weirv1.CheckResponse{Allowed: resp.Allowed, Items: itemPtrs}
	k := 0
	for i := range resp.Items {
		it := &resp.Items[i]
		ir := &items[i]
		itemPtrs[i] = ir
		ir.Allowed, ir.Decisive = it.Allowed, int32(it.Decisive)
		ir.Results = resultPtrs[k : k+len(it.Results) : k+len(it.Results)]
		for j := range it.Results {
			ir.Results[j] = &results[k]
			fillRuleResult(&results[k], &resetAts[k], &retryAfters[k], &it.Results[j])
			k++
		}
	}
	return out
}

// Status implements weirv1.LimiterServer.
func (s *Service) Status(ctx context.Context, req *weirv1.StatusRequest) (*weirv1.StatusResponse, error) {
	if req.GetRuleId() == "" {
		return nil, status.Error(codes.InvalidArgument, "rule_id: required")
	}
	res, err := s.lim.Status(ctx, req.GetDomain(), req.GetRuleId(), req.GetKey())
	if err != nil {
		return nil, Status(err)
	}
	return &weirv1.StatusResponse{Result: RuleResult(&res)}, nil
}

// sources maps limiter.Source to weirv1.Source (an array: cheaper than a
// map on every result).
var sources = [...]weirv1.Source{
	limiter.SourceStore:         weirv1.Source_SOURCE_STORE,
	limiter.SourceCache:         weirv1.Source_SOURCE_CACHE,
	limiter.SourceOverrideAllow: weirv1.Source_SOURCE_OVERRIDE_ALLOW,
	limiter.SourceOverrideDeny:  weirv1.Source_SOURCE_OVERRIDE_DENY,
	limiter.SourceUnlimited:     weirv1.Source_SOURCE_UNLIMITED,
	limiter.SourceFailureOpen:   weirv1.Source_SOURCE_FAILURE_OPEN,
	limiter.SourceFailureClosed: weirv1.Source_SOURCE_FAILURE_CLOSED,
	limiter.SourceFailureLocal:  weirv1.Source_SOURCE_FAILURE_LOCAL,
	limiter.SourceDisabled:      weirv1.Source_SOURCE_DISABLED,
}

func source(s limiter.Source) weirv1.Source {
	if int(s) < len(sources) {
		return sources[s]
	}
	return weirv1.Source_SOURCE_UNSPECIFIED
}

func advice(a rule.RetryAdvice) weirv1.RetryAdvice {
	switch a {
	case rule.RetryAfter:
		return weirv1.RetryAdvice_RETRY_ADVICE_RETRY_AFTER
	case rule.ExponentialBackoff:
		return weirv1.RetryAdvice_RETRY_ADVICE_EXPONENTIAL_BACKOFF
	case rule.DailyLimitReached:
		return weirv1.RetryAdvice_RETRY_ADVICE_DAILY_LIMIT_REACHED
	}
	return weirv1.RetryAdvice_RETRY_ADVICE_UNSPECIFIED
}

// RuleResult converts a limiter result to its protobuf form.
func RuleResult(r *limiter.RuleResult) *weirv1.RuleResult {
	out := &weirv1.RuleResult{}
	fillRuleResult(out, &timestamppb.Timestamp{}, &durationpb.Duration{}, r)
	return out
}

// fillRuleResult sets out, a zero message, to r's protobuf form, with
// resetAt and retryAfter, zero messages too, as its times. A result
// without a limit (limiter.RuleResult.Limited) has no_limit set and no
// limit, remaining or times.
func fillRuleResult(out *weirv1.RuleResult, resetAt *timestamppb.Timestamp, retryAfter *durationpb.Duration, r *limiter.RuleResult) {
	f := fieldsOf(r)
	out.RuleId, out.Key, out.Allowed = f.ruleID, f.key, f.allowed
	out.WindowSeconds, out.Shadow, out.Source, out.Refunded = f.windowSeconds, f.shadow, f.source, f.refunded
	if !f.limited {
		out.NoLimit = true
		return
	}
	out.Limit, out.Remaining, out.RetryAdvice, out.Message = f.limit, f.remaining, f.advice, f.message
	resetAt.Seconds, resetAt.Nanos = f.resetSecs, f.resetNanos
	retryAfter.Seconds, retryAfter.Nanos = f.retrySecs, f.retryNano
	out.ResetAt, out.RetryAfter = resetAt, retryAfter
}
