// Package ruleset compiles one domain's rules (a rule.Set) into a Set that
// finds, for a request, every rule that applies to it and the counter
// (key) each charges — the limiter's hot path (SPEC §3.1).
//
// Compile validates the rules, fills in their defaults and compiles
// everything a request needs: path globs, method sets, conditions, key
// dimensions and overrides. A Set is immutable and safe for concurrent use;
// a new rule set is a new Set, swapped in whole.
//
// # Requests
//
// A request is a map of attributes (descriptor entries): "path" is the
// request path, "method" the HTTP method, "ip" the client address, and any
// other attribute the gateway extracts ("user_id", "tenant", ...). An
// attribute that is absent and one whose value is the empty string are the
// same: missing. Weir never counts an empty value as a key, and a gateway
// that extracts an empty header gets the same answer as one that leaves it
// out.
//
// # Which rules apply
//
// A rule applies to a request when all of these hold:
//
//   - the rule is enabled;
//   - its path pattern (rule.CompilePath) matches attrs["path"]; the empty
//     pattern matches every request, a missing path included, and any
//     other pattern does not match a missing path;
//   - its methods include attrs["method"], compared exactly (HTTP methods
//     are case-sensitive: "get" is not "GET"); no methods means any method,
//     a missing method included;
//   - every condition holds: "*" asks for the attribute to be present, any
//     other value for it to be equal;
//   - every key dimension is present. A request that lacks one is not
//     counted by the rule at all (not charged to an "unknown" key);
//
// A request whose key values would make the rule's store key longer than
// algorithm.MaxKeyLen gets a Match marked Oversized, which the limiter
// answers with an invalid-request error: a request must neither share a
// truncated key with others nor slip past the rule.
//
// Set.Match reports the rules in the order of the rule file.
//
// # Keys
//
// The key of a rule without key dimensions is "": one counter for every
// request. With one dimension it is that attribute's value as given. With
// several it is their values in key_type order joined by "|", with each
// "|" and "\" in a value escaped by "\", so no two different value tuples
// share a key: ("a|b", "c") is `a\|b|c` and ("a", "b|c") is `a|b\|c`.
//
// The "ip" dimension is canonicalised when it parses as an address
// (net/netip): IPv6 in lower case with zeros compressed ("2001:DB8:0::1"
// is "2001:db8::1"), IPv4-mapped IPv6 as IPv4 ("::ffff:192.0.2.1" is
// "192.0.2.1"), and without a zone. One client therefore has one counter
// however its address is written, and the exact overrides, which package
// rule requires to be canonical, match it. Conditions on "ip" compare the
// canonical forms too. A value that does not parse is
// used as given: the rule still counts it, under that literal key, and no
// CIDR override matches it.
//
// A Match's StoreKey names the counter across domains and rules:
// domain + "/" + rule_id + "/" + key. Domains and rule ids cannot hold
// "/", so the first two slashes delimit them whatever the key holds.
//
// # Overrides
//
// Of a rule's overrides that select a key, the most specific wins, as
// rule.Override documents: an exact key or match before a CIDR, a match
// naming more dimensions before one naming fewer, a longer CIDR prefix
// before a shorter one, and otherwise the one listed first. A Match carries
// the winner's action, limit and burst; without one, ActionLimit and the
// rule's limit and burst.
//
// # Unlimited rules
//
// An unlimited rule matches like any other, and its Match has Unlimited set
// and Limit and Burst zero: the limiter counts the request and never
// rejects it — unless an allow or deny override selects the key, whose
// Action then says so.
//
// # Cost
//
// Compile indexes the enabled rules by their first literal path segment
// ("/api/**" under "api"), or else by an exact-valued condition, and by
// method, so that Match looks only at rules that can apply; rules with
// neither are looked at for every request. Overrides are found with map
// lookups by key and by CIDR prefix length, not by scanning. Match
// allocates only the keys of the matches it reports: one string per match
// of a rule with key dimensions, none for a rule without.
package ruleset
