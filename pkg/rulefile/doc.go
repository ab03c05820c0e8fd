// Package rulefile reads rule files: the rules of one domain, written in
// YAML or JSON, as operators keep them in version control and as weirctl
// applies them.
//
// A rule file is one document with a domain and a list of rules:
//
//	domain: shop
//	rules:
//	  - rule_id: user-login-attempt
//	    path_pattern: /auth/login
//	    key_type: username
//	    limit: 5
//	    window_seconds: 300
//	    algorithm: SlidingWindowLog
//
// YAML is parsed by package document/yamldoc into the same tree as JSON
// and decoded by package rule, which owns the format, the defaults and the
// validation; see docs/rules.md. This package adds only the YAML syntax,
// the conversion of envoyproxy/ratelimit configurations (and the merging
// of several of one domain, MergeEnvoy) and file access, and keeps YAML's
// dependency out of the domain package.
package rulefile
