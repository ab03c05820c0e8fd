// Package envoyrls serves Envoy's rate limit API,
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, over a
// limiter.Limiter (SPEC §3.3), so that Envoy, Istio, Contour or Gloo can use
// Weir in place of envoyproxy/ratelimit.
//
// A domain loaded from a configuration of envoyproxy/ratelimit
// (Config.Configs) is answered exactly as envoyproxy/ratelimit answers:
// each descriptor's limit is looked up in the configuration's tree
// (package envoyconf), or is the descriptor's own limit; limits another
// selected limit replaces are dropped; an unlimited one reports
// limit_remaining 4294967295; the others are decided in one limiter Check,
// each item carrying its match (the converted Weir rule, or a rule of its
// unit) and counted as envoyproxy/ratelimit counts: in a fixed window
// aligned to the epoch, hits over the limit counted too, hits_addend 0 a
// check that counts nothing. A limit in shadow_mode reports OK; the
// overall code is OVER_LIMIT when a descriptor not in quota_mode is, or
// every one in quota_mode is; duration_until_reset is whole seconds to
// the window's end. An empty domain or descriptor list is envoyproxy/
// ratelimit's error (codes.Unknown), an unknown domain limits nothing.
// Config.Headers adds its rate limit headers; Config.QuotaMode puts every
// descriptor in quota_mode (the peer's QUOTA_MODE). Config.ShadowMode (the
// peer's SHADOW_MODE) answers OK every call of any domain that would be
// OVER_LIMIT, leaving its statuses and headers as decided;
// Config.StopIncrementWhenOverLimit (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT)
// gives back what a call over its limit took of the limits it was under;
// Config.DynamicMetadata (RESPONSE_DYNAMIC_METADATA) sets the answer's
// dynamic metadata (see dynamicMetadata).
// JSONHandler serves the same calls as envoyproxy/ratelimit's /json
// endpoint: protojson in and out, 200/429/400 as the peer answers.
//
// Other domains (Weir rule files, etcd) are answered as follows.
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
// A malformed or invalid request (too many descriptors, repeated,
// empty or oversized keys, oversized values, hits out of range) gets codes.InvalidArgument
// naming the problem; the limits are the limiter's (limiter.MaxItems,
// MaxAttributes, MaxNameLen, MaxValueLen, MaxHits), those of weir.v1.
//
// What is not supported: a descriptor's limit override (RateLimitDescriptor.limit)
// is ignored, the rules' limits apply; is_negative_hits (a refund) is
// refused with InvalidArgument; no raw_body or quota is set. Matching follows Weir's rules, not envoyproxy/ratelimit's tree walk:
// a rule applies to a descriptor that carries the rule's attributes,
// whatever else it carries (docs/rules.md, "What differs").
package envoyrls
