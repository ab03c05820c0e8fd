// Package envoyconf holds the configuration model of envoyproxy/ratelimit
// and its lookup, so that Weir's Envoy API (internal/dc/envoyrls) selects
// limits exactly as envoyproxy/ratelimit does: a tree of descriptors per
// domain, walked entry by entry in the order of a request's descriptor.
//
// At each level the walk looks for the entry's key and value, then for the
// first wildcard value of that level that matches "key_value" ('*' matches
// any run of characters, anywhere in the value), then for the key alone (a
// default). A limit applies only when the walk reaches it on the
// descriptor's last entry. Package rulefile builds Domains from
// configuration files; this package imports nothing but the standard
// library.
package envoyconf
