// Package document reads structured documents — rule files, scenarios,
// envoyproxy/ratelimit configurations, JSON request bodies — strictly,
// and words each mistake in them one way, with the field path of
// package fielderr.
//
// A document is first parsed into a tree of *Node (ParseJSON here, or
// yamldoc.Parse for YAML, which reads JSON too). The tree keeps the order
// of each object's fields, records the keys that appear more than once
// instead of silently keeping one, and knows the line of each value where
// the parser gives it (JSON: always; YAML: no).
//
// A decoder then walks the tree with an Object: Open an object at a path,
// read its fields with the typed accessors (String, Int, Float, Bool,
// Duration, Time, Enum, List, Strings, StringMap, ...), and call Done,
// which reports every field nobody asked for. Each mistake goes to the
// decoder's Reporter (a *fielderr.Report) once, at its path, in the one
// wording of this package:
//
//	rules[0].limit: want an integer, got "5"
//	rules[0].limt: unknown field
//	descriptors[0].key: appears more than once
//	traffic[0].steps[1].at: want a duration such as "30s" or "1m30s", got 30
//
// The package imports nothing beyond the standard library and package
// fielderr, so the rule model can use it; YAML lives in package yamldoc.
package document
