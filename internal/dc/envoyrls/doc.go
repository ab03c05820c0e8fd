// Package envoyrls serves Envoy's rate limit API,
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, over a
// limiter.Limiter (SPEC §3.3), so that Envoy, Istio, Contour or Gloo can use
// Weir in place of envoyproxy/ratelimit.
//
// It is a translation layer and decides nothing itself: each Envoy
// descriptor becomes one limiter.Item whose attributes are the descriptor's
// entries (key → value) and whose hits are its hits_addend, or the
// request's; the request's domain names the rule set. The limiter decides
// every item in one Check, and each item's result becomes one
// DescriptorStatus, in the order of the descriptors:
//
//   - code: OK when the limiter allowed the item (shadow rules never
//     reject), else OVER_LIMIT; the overall code is OVER_LIMIT when any
//     descriptor is;
//   - current_limit, limit_remaining and duration_until_reset: those of the
//     item's decisive (most constraining) enforcing rule, the window given
//     as the nearest Envoy unit (see Unit);
//   - a descriptor that only shadow rules match reports the most
//     constraining of them with code OK, as envoyproxy/ratelimit reports a
//     limit in shadow_mode: a shadow rule never makes a code OVER_LIMIT;
//   - a descriptor that no rule limits (none matches, or the rules that do
//     are unlimited or bypassed by an allow override) is OK with no
//     current_limit, as envoyproxy/ratelimit answers it; one a deny
//     override rejects is OVER_LIMIT with no current_limit.
//
// A malformed or invalid request (no descriptors, too many, repeated,
// empty or oversized keys, oversized values, hits out of range, an unknown
// domain, no domain while several are loaded) gets codes.InvalidArgument
// naming the problem; the limits are the limiter's (limiter.MaxItems,
// MaxAttributes, MaxNameLen, MaxValueLen, MaxHits), those of weir.v1.
//
// What is not supported: a descriptor's limit override (RateLimitDescriptor.limit)
// is ignored, the rules' limits apply; is_negative_hits (a refund) is
// refused with InvalidArgument; no response headers, raw_body or quota are
// set. Matching follows Weir's rules, not envoyproxy/ratelimit's tree walk:
// a rule applies to a descriptor that carries the rule's attributes,
// whatever else it carries (docs/rules.md, "What differs").
package envoyrls
