package envoyrls

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weirhq/weir/internal/dc/grpcapi"
	"github.com/weirhq/weir/pkg/envoyconf"
	"github.com/weirhq/weir/pkg/limiter"
)

// ServiceName is the gRPC name of Envoy's rate limit service, as health
// checks name it.
const ServiceName = "envoy.service.ratelimit.v3.RateLimitService"

// HealthName is the service name envoyproxy/ratelimit reports on gRPC
// health (grpc.health.v1.Health): health checks written for it, Envoy's
// grpc_health_check or a Kubernetes grpc probe, name "ratelimit". A server
// standing in for it reports this name with the same status as
// ServiceName.
const HealthName = "ratelimit"

// Config configures a Service. The zero value works.
type Config struct {
	// Now is the clock duration_until_reset is measured from; it should be
	// the limiter's. Default time.Now.
	Now func() time.Time
	// Configs returns the configuration of envoyproxy/ratelimit loaded for
	// a domain, or nil when there is none. A domain that has one is
	// answered exactly as envoyproxy/ratelimit answers (see the package
	// documentation). Default: no domain has one.
	Configs func(domain string) *envoyconf.Domain
	// Headers names the rate limit headers added to every response that
	// has a limit, as envoyproxy/ratelimit adds them when
	// LIMIT_RESPONSE_HEADERS_ENABLED is set. Default: none.
	Headers Headers
	// ShadowMode answers OK every call that would be answered
	// OVER_LIMIT, on every domain, as envoyproxy/ratelimit's global
	// SHADOW_MODE does: the decisions are made and counted as ever, and
	// the descriptors' statuses and the headers stay as decided; only
	// the overall code is overridden (Service.ShadowOverrides counts
	// those calls). Default off.
	ShadowMode bool
	// QuotaMode puts every descriptor of a domain loaded from a
	// configuration of envoyproxy/ratelimit in quota_mode, as its global
	// QUOTA_MODE does: a call is OVER_LIMIT only when every descriptor
	// that is not unlimited is, and an over-limit descriptor is not
	// preferred for the headers. A domain of Weir rules has no quota_mode
	// and is answered as without it. Default off.
	QuotaMode bool
	// StopIncrementWhenOverLimit gives back what a call's descriptors
	// under their limits took when any descriptor is over its limit, on
	// every domain (envoyproxy/ratelimit's
	// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT; limiter.Request.
	// RefundOnReject): a rejected call spends nothing of the limits it
	// was under, whose limit_remaining (and headers) are then as before
	// the call; the codes are as without it. Default off: every
	// descriptor's hits are counted.
	StopIncrementWhenOverLimit bool
	// DynamicMetadata sets the dynamic metadata of every answer on a
	// domain of envoyproxy/ratelimit's configuration, as its
	// RESPONSE_DYNAMIC_METADATA does (see dynamicMetadata). Default off.
	DynamicMetadata bool
}

// Headers are the names of the headers that report a response's limit to
// the client: all three, or none (the zero value), which adds no headers.
// A partial set is a mistake the Service does not check: it adds all
// three, the unnamed ones with an empty name (limiterd's Config.Validate
// refuses one).
type Headers struct {
	Limit     string // e.g. X-RateLimit-Limit: requests_per_unit
	Remaining string // e.g. X-RateLimit-Remaining: limit_remaining
	Reset     string // e.g. X-RateLimit-Reset: whole seconds until the window resets
}

// PeerHeaders are envoyproxy/ratelimit's default header names.
var PeerHeaders = Headers{Limit: "RateLimit-Limit", Remaining: "RateLimit-Remaining", Reset: "RateLimit-Reset"}

// Service implements rlsv3.RateLimitServiceServer over a limiter. Safe for
// concurrent use; create it with NewService.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer
	lim *limiter.Limiter
	// cfg is the Config given, Now and Configs defaulted.
	cfg      Config
	units    unitRules
	prefixes map[envoyconf.Unit]string
	// decoders pools the ShouldRateLimit handler's requestDecoders: a
	// call reuses an earlier one's buffers.
	decoders sync.Pool
	// overridden counts the calls ShadowMode answered OK.
	overridden atomic.Uint64
}

var _ rlsv3.RateLimitServiceServer = (*Service)(nil)

// NewService returns the service for lim.
func NewService(lim *limiter.Limiter, cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Configs == nil {
		cfg.Configs = func(string) *envoyconf.Domain { return nil }
	}
	s := &Service{lim: lim, cfg: cfg, units: newUnitRules(), prefixes: storePrefixes()}
	s.decoders.New = s.newDecoder
	return s
}

// Register adds svc to s as envoy.service.ratelimit.v3.RateLimitService. A
// request that does not unmarshal gets codes.InvalidArgument, not
// grpc-go's Internal.
func Register(s *grpc.Server, svc *Service) {
	desc := rlsv3.RateLimitService_ServiceDesc
	desc.Methods = append([]grpc.MethodDesc(nil), desc.Methods...)
	for i := range desc.Methods {
		desc.Methods[i].Handler = grpcapi.InvalidArgumentOnDecode(desc.Methods[i].Handler)
		if desc.Methods[i].MethodName == "ShouldRateLimit" {
			desc.Methods[i].Handler = shouldRateLimitHandler(desc.Methods[i].Handler)
		}
	}
	s.RegisterService(&desc, svc)
}

// ShouldRateLimit implements rlsv3.RateLimitServiceServer: it decides every
// descriptor of req in one limiter Check (see the package documentation).
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	// envoyproxy/ratelimit's errors, and its gRPC code (Unknown).
	switch {
	case req.GetDomain() == "":
		return nil, status.Error(codes.Unknown, "rate limit domain must not be empty")
	case len(req.GetDescriptors()) == 0:
		return nil, status.Error(codes.Unknown, "rate limit descriptor list must not be empty")
	}
	if tree := s.cfg.Configs(req.GetDomain()); tree != nil {
		return s.answerPeer(ctx, peerRequestOf(req), tree)
	}
	items, err := toItems(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return s.decideItems(ctx, req.GetDomain(), items)
}

// answerPeer answers req, whose domain has the configuration tree, as
// envoyproxy/ratelimit answers; its errors are gRPC statuses.
func (s *Service) answerPeer(ctx context.Context, req *peerRequest, tree *envoyconf.Domain) (*rlsv3.RateLimitResponse, error) {
	resp, err := s.shouldRateLimitPeer(ctx, req, tree)
	if err != nil {
		if _, ok := status.FromError(err); !ok {
			err = status.Error(codes.InvalidArgument, err.Error())
		}
		return nil, err
	}
	s.shadowOverride(resp)
	return resp, nil
}

// shadowOverride answers out OK, and counts it, when Config.ShadowMode is
// set and out is OVER_LIMIT.
func (s *Service) shadowOverride(out *rlsv3.RateLimitResponse) {
	if s.cfg.ShadowMode && out.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
		out.OverallCode = rlsv3.RateLimitResponse_OK
		s.overridden.Add(1)
	}
}

// ShadowOverrides returns how many calls Config.ShadowMode has answered OK
// that were OVER_LIMIT. Safe for concurrent use.
func (s *Service) ShadowOverrides() uint64 { return s.overridden.Load() }

// decideItems answers the items of a request to a domain of Weir's rules,
// one per descriptor.
func (s *Service) decideItems(ctx context.Context, domain string, items []limiter.Item) (*rlsv3.RateLimitResponse, error) {
	resp, err := s.lim.Check(ctx, limiter.Request{Domain: domain, Items: items, RefundOnReject: s.cfg.StopIncrementWhenOverLimit})
	switch {
	case errors.Is(err, limiter.ErrUnknownDomain):
		// envoyproxy/ratelimit: a domain it has no configuration for
		// limits nothing.
		out := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}
		for range items {
			out.Statuses = append(out.Statuses, &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK})
		}
		return out, nil
	case err != nil:
		return nil, grpcapi.Status(err)
	}
	out := toResponse(&resp, s.cfg.Now())
	s.addHeaders(out, nil, s.cfg.Now().Unix()) // Weir's rules have no quota_mode
	s.shadowOverride(out)
	return out, nil
}

// toItems converts the descriptors of req into limiter items, or says what
// is wrong with them. The limiter checks the items again; checking here
// names the descriptor and entry at fault.
func toItems(req *rlsv3.RateLimitRequest) ([]limiter.Item, error) {
	ds := req.GetDescriptors()
	switch {
	case len(ds) == 0:
		return nil, errors.New("descriptors: at least one is required")
	case len(ds) > limiter.MaxItems:
		return nil, fmt.Errorf("descriptors: %d, at most %d", len(ds), limiter.MaxItems)
	}
	items := make([]limiter.Item, len(ds))
	for i, d := range ds {
		hits, err := descriptorHits(req.GetHitsAddend(), d)
		if err != nil {
			return nil, fmt.Errorf("descriptors[%d]: %w", i, err)
		}
		entries := d.GetEntries()
		if len(entries) > limiter.MaxAttributes {
			return nil, fmt.Errorf("descriptors[%d].entries: %d, at most %d", i, len(entries), limiter.MaxAttributes)
		}
		attrs := make(map[string]string, len(entries))
		for j, e := range entries {
			k, v := e.GetKey(), e.GetValue()
			switch {
			case k == "" || len(k) > limiter.MaxNameLen:
				return nil, fmt.Errorf("descriptors[%d].entries[%d].key: %d bytes, want 1 to %d", i, j, len(k), limiter.MaxNameLen)
			case len(v) > limiter.MaxValueLen:
				return nil, fmt.Errorf("descriptors[%d].entries[%d].value: %d bytes, at most %d", i, j, len(v), limiter.MaxValueLen)
			}
			if attrs[k] = v; len(attrs) != j+1 {
				// A Weir request has one value for each attribute, and no
				// envoyproxy/ratelimit configuration that Weir loads has a
				// key twice on one path.
				return nil, fmt.Errorf("descriptors[%d].entries[%d].key: %q repeated", i, j, k)
			}
		}
		items[i] = limiter.Item{Attributes: attrs, Hits: hits, Exact: true}
	}
	return items, nil
}

// descriptorHits returns the cost of d: its own hits_addend when set, else
// the request's, 0 meaning 1 in either case.
func descriptorHits(reqHits uint32, d *rlcommonv3.RateLimitDescriptor) (int64, error) {
	if d.GetIsNegativeHits() {
		return 0, errors.New("is_negative_hits: not supported (Weir gives back quota only for requests it rejects)")
	}
	hits := uint64(reqHits)
	if h := d.GetHitsAddend(); h != nil {
		hits = h.GetValue()
	}
	if hits > limiter.MaxHits {
		return 0, fmt.Errorf("hits_addend: %d, at most %d", hits, limiter.MaxHits)
	}
	return int64(hits), nil // 0 means 1 to the limiter
}

// toResponse converts the limiter's answer, made at about now, to Envoy's.
// A descriptor's status reports its decisive rule, the most constraining
// enforcing one. Where only shadow rules matched, it reports the most
// constraining of those with code OK, as envoyproxy/ratelimit answers for
// a limit in shadow_mode: a shadow rule never turns a code to OVER_LIMIT.
func toResponse(resp *limiter.Response, now time.Time) *rlsv3.RateLimitResponse {
	n := len(resp.Items)
	out := &rlsv3.RateLimitResponse{
		OverallCode: code(resp.Allowed),
		Statuses:    make([]*rlsv3.RateLimitResponse_DescriptorStatus, n),
	}
	// The messages of each type are cut from one array: a few
	// allocations whatever the number of descriptors.
	statuses := make([]rlsv3.RateLimitResponse_DescriptorStatus, n)
	var limits []rlsv3.RateLimitResponse_RateLimit
	var resets []durationpb.Duration
	for i := range resp.Items {
		it := &resp.Items[i]
		st := &statuses[i]
		st.Code = code(it.Allowed)
		out.Statuses[i] = st
		r := reported(it)
		if r == nil || !r.Limited() {
			continue // no rule, or none with a limit: OK or denied, no limit
		}
		if limits == nil {
			limits, resets = make([]rlsv3.RateLimitResponse_RateLimit, n), make([]durationpb.Duration, n)
		}
		spec := &r.Match.Rule.Spec
		l := &limits[i]
		l.Name, l.RequestsPerUnit, l.Unit = spec.ID, clampUint32(r.Limit), Unit(spec.WindowSeconds)
		st.CurrentLimit = l
		st.LimitRemaining = clampUint32(r.Remaining)
		// As durationpb.New, without its allocation.
		d := max(r.ResetAt.Sub(now), 0)
		resets[i].Seconds, resets[i].Nanos = int64(d/time.Second), int32(d%time.Second)
		st.DurationUntilReset = &resets[i]
	}
	return out
}

// reported returns the result a descriptor's status reports: the decisive
// one, else, when only shadow rules matched, the shadow rule with a limit
// and the least remaining. nil when no rule matched.
func reported(it *limiter.ItemResult) *limiter.RuleResult {
	if it.Decisive >= 0 {
		return &it.Results[it.Decisive]
	}
	var best *limiter.RuleResult
	for j := range it.Results {
		r := &it.Results[j]
		if r.Limited() && (best == nil || r.Remaining < best.Remaining) {
			best = r
		}
	}
	return best
}

func code(allowed bool) rlsv3.RateLimitResponse_Code {
	if allowed {
		return rlsv3.RateLimitResponse_OK
	}
	return rlsv3.RateLimitResponse_OVER_LIMIT
}

func clampUint32(n int64) uint32 {
	return uint32(min(max(n, 0), math.MaxUint32))
}

// envoyUnits are Envoy's units in seconds, as pkg/rulefile reads them from
// envoyproxy/ratelimit configurations (a month is 30 days, a year 365).
var envoyUnits = [...]struct {
	seconds int64
	unit    rlsv3.RateLimitResponse_RateLimit_Unit
}{
	{1, rlsv3.RateLimitResponse_RateLimit_SECOND},
	{60, rlsv3.RateLimitResponse_RateLimit_MINUTE},
	{3600, rlsv3.RateLimitResponse_RateLimit_HOUR},
	{86400, rlsv3.RateLimitResponse_RateLimit_DAY},
	{7 * 86400, rlsv3.RateLimitResponse_RateLimit_WEEK},
	{30 * 86400, rlsv3.RateLimitResponse_RateLimit_MONTH},
	{365 * 86400, rlsv3.RateLimitResponse_RateLimit_YEAR},
}

// Unit returns the Envoy unit of a window of the given seconds: the unit
// itself when the window is one, else the nearest by ratio (a window of 30
// seconds is a MINUTE, one of 20 a SECOND). requests_per_unit stays the
// rule's limit, which then holds for the rule's window, not the unit.
func Unit(windowSeconds int64) rlsv3.RateLimitResponse_RateLimit_Unit {
	if windowSeconds <= 0 {
		return rlsv3.RateLimitResponse_RateLimit_UNKNOWN
	}
	for _, u := range envoyUnits {
		if u.seconds == windowSeconds {
			return u.unit
		}
	}
	best, bestDist := envoyUnits[0].unit, math.Inf(1)
	for _, u := range envoyUnits {
		d := math.Abs(math.Log(float64(windowSeconds) / float64(u.seconds)))
		if d < bestDist {
			best, bestDist = u.unit, d
		}
	}
	return best
}
