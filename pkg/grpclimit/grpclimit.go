package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weirhq/weir/pkg/httplimit"
	"github.com/weirhq/weir/pkg/limiter"
)

// Checker decides requests: *limiter.Limiter, or a remote limiter's
// *client.Client.
type Checker interface {
	Check(ctx context.Context, req limiter.Request) (limiter.Response, error)
}

// Attribute names the interceptors set themselves.
const (
	// AttrPath is the call's full method, "/package.Service/Method".
	AttrPath = "path"
	// AttrIP is the peer's IP address.
	AttrIP = "ip"
)

// Config configures the interceptors. Checker is required.
type Config struct {
	Checker Checker
	// Domain is the rule domain; empty when the checker has one.
	Domain string
	// Metadata maps request metadata keys to attribute names, for example
	// {"x-user-id": "user_id"}. Keys are matched case-insensitively; a
	// key that is absent gives no attribute. Values of a key sent several
	// times are joined with ",".
	Metadata map[string]string
	// Skip, if not nil, exempts the calls whose full method it returns
	// true for (health checks, reflection).
	Skip func(fullMethod string) bool
	// OnError says what happens to a call the checker could not decide
	// (no rules loaded, an unknown domain, a remote checker out of reach
	// and failing by its policy): httplimit.Allow (the default: let
	// through, logged) or httplimit.Reject (answered UNAVAILABLE). Calls
	// that are themselves bad — metadata too large to be an attribute —
	// are answered INVALID_ARGUMENT whatever it says.
	OnError httplimit.OnError
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock for relative fields; use the checker's. Default
	// time.Now.
	Now func() time.Time
}

// Interceptors check calls before their handlers see them. Safe for
// concurrent use.
type Interceptors struct {
	cfg      Config
	metadata []metaAttr
}

type metaAttr struct{ key, attr string }

// New returns the interceptors for cfg.
func New(cfg Config) (*Interceptors, error) {
	if cfg.Checker == nil {
		return nil, errors.New("grpclimit: Config.Checker is required")
	}
	if cfg.OnError != httplimit.Allow && cfg.OnError != httplimit.Reject {
		return nil, fmt.Errorf("grpclimit: unknown OnError %d", cfg.OnError)
	}
	if len(cfg.Metadata) > limiter.MaxAttributes-2 {
		return nil, fmt.Errorf("grpclimit: %d metadata attributes, at most %d", len(cfg.Metadata), limiter.MaxAttributes-2)
	}
	in := &Interceptors{cfg: cfg}
	for k, a := range cfg.Metadata {
		switch {
		case k == "" || a == "" || len(a) > limiter.MaxNameLen:
			return nil, fmt.Errorf("grpclimit: metadata %q to attribute %q: both must be non-empty, the attribute at most %d bytes", k, a, limiter.MaxNameLen)
		case a == AttrPath || a == AttrIP:
			return nil, fmt.Errorf("grpclimit: metadata %q to attribute %q: the interceptors set %q themselves", k, a, a)
		}
		in.metadata = append(in.metadata, metaAttr{strings.ToLower(k), a})
	}
	if in.cfg.Logger == nil {
		in.cfg.Logger = slog.Default()
	}
	if in.cfg.Now == nil {
		in.cfg.Now = time.Now
	}
	return in, nil
}

// Unary returns the unary server interceptor.
func (in *Interceptors) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		trailer, err := in.check(ctx, info.FullMethod)
		if trailer != nil {
			_ = grpc.SetTrailer(ctx, trailer)
		}
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Stream returns the stream server interceptor: a stream is checked once,
// when it opens.
func (in *Interceptors) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		trailer, err := in.check(ss.Context(), info.FullMethod)
		if trailer != nil {
			ss.SetTrailer(trailer)
		}
		if err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// check decides the call to fullMethod: the trailer to send (nil for
// none), and the status error to answer when the call may not go on.
func (in *Interceptors) check(ctx context.Context, fullMethod string) (metadata.MD, error) {
	if in.cfg.Skip != nil && in.cfg.Skip(fullMethod) {
		return nil, nil
	}
	it, err := in.Item(ctx, fullMethod)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	resp, err := in.cfg.Checker.Check(ctx, limiter.Request{Domain: in.cfg.Domain, Items: []limiter.Item{it}})
	switch {
	case errors.Is(err, limiter.ErrInvalid):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case err != nil && ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	case err == nil && len(resp.Items) != 1:
		err = fmt.Errorf("grpclimit: the checker answered %d items for 1", len(resp.Items))
	}
	if err != nil {
		in.cfg.Logger.Warn("rate limit check failed", "err", err, "method", fullMethod, "on_error", in.cfg.OnError.String())
		if in.cfg.OnError == httplimit.Allow {
			return nil, nil
		}
		return nil, status.Error(codes.Unavailable, "rate limit check failed")
	}
	item := &resp.Items[0]
	if item.Decisive < 0 {
		return nil, nil
	}
	d := &item.Results[item.Decisive]
	h := http.Header{}
	httplimit.SetHeaders(h, item, d, in.cfg.Now())
	if item.Allowed {
		return trailer(h), nil
	}
	secs := httplimit.RetryAfterSeconds(d)
	h.Set("Retry-After", fmt.Sprint(secs))
	delay := d.RetryAfter
	if delay <= 0 {
		delay = time.Duration(secs) * time.Second
	}
	msg := httplimit.RejectionMessage(d)
	st := status.New(codes.ResourceExhausted, msg)
	if ds, err := st.WithDetails(
		&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)},
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
			Subject: d.Match.Rule.Spec.ID + ":" + d.Match.Key, Description: msg,
		}}},
	); err == nil {
		st = ds
	}
	return trailer(h), st.Err()
}

// trailer is h as gRPC metadata (keys in lower case); nil when empty.
func trailer(h http.Header) metadata.MD {
	if len(h) == 0 {
		return nil
	}
	md := make(metadata.MD, len(h))
	for k, v := range h {
		md[strings.ToLower(k)] = v
	}
	return md
}

// Item describes the call to fullMethod as a limiter item: path (the full
// method), ip (the peer's, when it has one) and the configured metadata.
// It fails only for metadata longer than an attribute may be.
func (in *Interceptors) Item(ctx context.Context, fullMethod string) (limiter.Item, error) {
	attrs := make(map[string]string, 2+len(in.metadata))
	if len(fullMethod) > limiter.MaxValueLen {
		return limiter.Item{}, fmt.Errorf("method name of %d bytes, at most %d", len(fullMethod), limiter.MaxValueLen)
	}
	attrs[AttrPath] = fullMethod
	if ip := peerIP(ctx); ip.IsValid() {
		attrs[AttrIP] = ip.String()
	}
	md, _ := metadata.FromIncomingContext(ctx)
	for _, m := range in.metadata {
		v := md.Get(m.key)
		if len(v) == 0 {
			continue
		}
		val := strings.Join(v, ",")
		if len(val) > limiter.MaxValueLen {
			return limiter.Item{}, fmt.Errorf("metadata %s of %d bytes, at most %d", m.key, len(val), limiter.MaxValueLen)
		}
		attrs[m.attr] = val
	}
	return limiter.Item{Attributes: attrs}, nil
}

// peerIP is the peer's IP address; invalid for a peer without one (a Unix
// socket, an in-memory connection).
func peerIP(ctx context.Context) netip.Addr {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return netip.Addr{}
	}
	if tcp, ok := p.Addr.(*net.TCPAddr); ok {
		a, _ := netip.AddrFromSlice(tcp.IP)
		return a.Unmap()
	}
	ap, err := netip.ParseAddrPort(p.Addr.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
