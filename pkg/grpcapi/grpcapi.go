// Package grpcapi serves the limiter's gRPC API, weir.v1.Limiter, with the
// standard health service and server reflection. Malformed messages and
// invalid requests get codes.InvalidArgument with a message; nothing a
// client sends can crash or hang the server.
package grpcapi

import (
	"context"
	"errors"
	"time"

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
}

// NewService returns the service for lim.
func NewService(lim *limiter.Limiter) *Service { return &Service{lim: lim} }

// Register adds the Limiter service, health and reflection to s. The
// returned health server reports SERVING for "" and "weir.v1.Limiter";
// callers flip it with SetServingStatus (see Health).
func Register(s *grpc.Server, svc *Service) *health.Server {
	desc := weirv1.Limiter_ServiceDesc
	desc.Methods = append([]grpc.MethodDesc(nil), desc.Methods...)
	for i := range desc.Methods {
		desc.Methods[i].Handler = invalidArgumentOnDecode(desc.Methods[i].Handler)
	}
	s.RegisterService(&desc, svc)
	hs := health.NewServer()
	hs.SetServingStatus(desc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, hs)
	reflection.Register(s)
	return hs
}

// invalidArgumentOnDecode makes a request that does not unmarshal fail with
// InvalidArgument instead of grpc-go's Internal. grpc-go writes the status
// of a failed RecvMsg itself, whatever the handler returns, so the request
// must not fail there: the handler's decode function is given a decoded,
// which takes the bytes and keeps the parse error for the handler.
func invalidArgumentOnDecode(h grpc.MethodHandler) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		return h(srv, ctx, func(m any) error {
			pm, ok := m.(proto.Message)
			if !ok {
				return dec(m)
			}
			d := &decoded{msg: pm}
			if err := dec(d); err != nil {
				return err
			}
			if d.err != nil {
				return status.Error(codes.InvalidArgument, "malformed request: "+d.err.Error())
			}
			return nil
		}, ic)
	}
}

// decoded is a proto.Message that grpc-go's proto codec unmarshals into
// without failing: its reflection is msg's, except that its fast-path
// Unmarshal parses into msg and records the error in err.
type decoded struct {
	msg proto.Message
	err error
}

// ProtoReflect implements proto.Message.
func (d *decoded) ProtoReflect() protoreflect.Message {
	return decodedReflect{Message: d.msg.ProtoReflect(), d: d}
}

type decodedReflect struct {
	protoreflect.Message
	d *decoded
}

func (r decodedReflect) ProtoMethods() *protoiface.Methods {
	return &protoiface.Methods{Unmarshal: func(in protoiface.UnmarshalInput) (protoiface.UnmarshalOutput, error) {
		r.d.err = proto.UnmarshalOptions{RecursionLimit: in.Depth}.Unmarshal(in.Buf, r.d.msg)
		return protoiface.UnmarshalOutput{Flags: protoiface.UnmarshalInitialized}, nil
	}}
}

func toStatus(err error) error {
	switch {
	case errors.Is(err, limiter.ErrInvalid), errors.Is(err, limiter.ErrUnknownDomain):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, limiter.ErrUnknownRule):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, limiter.ErrNoRules), errors.Is(err, limiter.ErrUnavailable):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// Check implements weirv1.LimiterServer.
func (s *Service) Check(ctx context.Context, req *weirv1.CheckRequest) (*weirv1.CheckResponse, error) {
	items := make([]limiter.Item, len(req.GetItems()))
	for i, it := range req.GetItems() {
		items[i] = limiter.Item{Attributes: it.GetAttributes(), Hits: it.GetHits()}
	}
	resp, err := s.lim.Check(ctx, limiter.Request{Domain: req.GetDomain(), Items: items})
	if err != nil {
		return nil, toStatus(err)
	}
	out := &weirv1.CheckResponse{Allowed: resp.Allowed, Items: make([]*weirv1.ItemResult, len(resp.Items))}
	for i := range resp.Items {
		it := &resp.Items[i]
		ir := &weirv1.ItemResult{Allowed: it.Allowed, Decisive: int32(it.Decisive), Results: make([]*weirv1.RuleResult, len(it.Results))}
		for j := range it.Results {
			ir.Results[j] = RuleResult(&it.Results[j])
		}
		out.Items[i] = ir
	}
	return out, nil
}

// Status implements weirv1.LimiterServer.
func (s *Service) Status(ctx context.Context, req *weirv1.StatusRequest) (*weirv1.StatusResponse, error) {
	if req.GetRuleId() == "" {
		return nil, status.Error(codes.InvalidArgument, "rule_id: required")
	}
	res, err := s.lim.Status(ctx, req.GetDomain(), req.GetRuleId(), req.GetKey())
	if err != nil {
		return nil, toStatus(err)
	}
	return &weirv1.StatusResponse{Result: RuleResult(&res)}, nil
}

var sources = map[limiter.Source]weirv1.Source{
	limiter.SourceStore:         weirv1.Source_SOURCE_STORE,
	limiter.SourceCache:         weirv1.Source_SOURCE_CACHE,
	limiter.SourceOverrideAllow: weirv1.Source_SOURCE_OVERRIDE_ALLOW,
	limiter.SourceOverrideDeny:  weirv1.Source_SOURCE_OVERRIDE_DENY,
	limiter.SourceUnlimited:     weirv1.Source_SOURCE_UNLIMITED,
	limiter.SourceFailureOpen:   weirv1.Source_SOURCE_FAILURE_OPEN,
	limiter.SourceFailureClosed: weirv1.Source_SOURCE_FAILURE_CLOSED,
	limiter.SourceFailureLocal:  weirv1.Source_SOURCE_FAILURE_LOCAL,
}

var advice = map[rule.RetryAdvice]weirv1.RetryAdvice{
	rule.RetryAfter:         weirv1.RetryAdvice_RETRY_ADVICE_RETRY_AFTER,
	rule.ExponentialBackoff: weirv1.RetryAdvice_RETRY_ADVICE_EXPONENTIAL_BACKOFF,
	rule.DailyLimitReached:  weirv1.RetryAdvice_RETRY_ADVICE_DAILY_LIMIT_REACHED,
}

// RuleResult converts a limiter result to its protobuf form.
func RuleResult(r *limiter.RuleResult) *weirv1.RuleResult {
	out := &weirv1.RuleResult{
		RuleId: r.Match.Rule.Spec.ID, Key: r.Match.Key, Allowed: r.Allowed, Limit: r.Limit, Remaining: r.Remaining,
		ResetAt: timestamppb.New(r.ResetAt), WindowSeconds: r.Match.Rule.Spec.WindowSeconds,
		Shadow: r.Shadow(), Source: sources[r.Source], RetryAdvice: advice[r.Match.Rule.Spec.RetryAdvice],
	}
	if r.RetryAfter > 0 {
		out.RetryAfter = durationpb.New(r.RetryAfter)
	} else {
		out.RetryAfter = durationpb.New(time.Duration(0))
	}
	if !r.Allowed {
		out.Message = r.Match.Rule.Spec.RejectionMessage
	}
	return out
}
