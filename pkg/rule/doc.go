// Package rule is Weir's rule model (SPEC §3.1): what a rate-limiting rule
// says, how it is written as a JSON document, and what makes it valid.
//
// A Rule names the requests it applies to (a path glob, HTTP methods and
// attribute conditions), the key dimensions that split those requests into
// counters, and the limit each counter gets: limit, window, algorithm and
// burst. Around the limit it carries the scope (global, shared by every DC,
// or local to each), static DC shares, per-key overrides (a VIP limit, an
// allow-list, a deny-list, by exact key or by CIDR), shadow mode, the
// failure mode for when Redis is down, and what rejected clients are told.
// A Set is a rule file: the rules of one domain.
//
// The document format is that of the seed's admin API, so its documents are
// read verbatim:
//
//	{"rule_id": "api-global-default", "path_pattern": "/api/v1/**",
//	 "key_type": "ip", "limit": 100, "window_seconds": 60,
//	 "algorithm": "SlidingWindowCounter", "enabled": true}
//
// docs/rules.md describes every field. ParseRule and ParseSet read JSON
// strictly and report every problem of a document at once, each with the
// path of the field and the reason, in a *ValidationError; a running system
// can then refuse a bad rule set and say exactly why. Package rulefile reads
// the same documents from YAML.
//
// The package is pure: it imports only the standard library and package
// algorithm, holds no state, and does no I/O. Matching requests against
// rules is the limiter's job; this package provides the path glob
// (CompilePath) it needs.
package rule
