// Package fielderr reports the problems of a structured document (a rule
// file, a scenario) field by field, each with the path of the field it
// concerns.
//
// A decoder collects problems in a Report as it reads and checks a
// document, and returns Report.Err: nil, or a *List of every problem found,
// each a FieldError. Paths are built with Field, Index and Key, so that
// every package that uses fielderr writes them the same way, e.g.
// rules[2].overrides[0].cidr or conditions["x.y"].
//
// List and Report take a Kind, an empty struct type that names the
// package's own sentinel error: package rule's *rule.ValidationError, an
// alias of List[K] for rule's K, matches rule.ErrInvalid and not
// scenario.ErrInvalid, and is a different type from scenario's, so
// errors.As tells them apart too.
//
// The package imports nothing beyond the standard library.
package fielderr
