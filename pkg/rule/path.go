package rule

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxPathPattern is the longest path_pattern, in bytes.
const maxPathPattern = 1024

// PathMatcher matches request paths against a compiled path pattern. The
// zero value, like the empty pattern, matches every path. A PathMatcher is
// immutable and safe for concurrent use.
type PathMatcher struct {
	pattern string
	segs    []pathSeg
}

type segKind uint8

const (
	segLiteral segKind = iota // the segment itself
	segOne                    // "*": any one segment
	segAny                    // "**": any number of segments, none included
	segGlob                   // a segment with '*' inside: "*.json", "v*-beta"
)

// pathSeg is one segment of a compiled pattern.
type pathSeg struct {
	kind segKind
	lit  string   // segLiteral: the segment
	glob []string // segGlob: the literal parts between the '*'s
}

// CompilePath compiles a path pattern. A pattern is empty (every path) or
// starts with "/" and is made of non-empty segments separated by "/". A
// segment is matched literally and case-sensitively, except that:
//
//   - "*" as a whole segment matches any one segment;
//   - "*" inside a segment matches any run of characters within the segment
//     ("/v1/*.json" matches "/v1/a.json" and "/v1/.json");
//   - "**" as a whole segment matches any number of segments, none
//     included ("/api/**" matches "/api", "/api/" and "/api/v1/users").
//
// Patterns hold no empty, "." or ".." segments, no "**" inside a segment,
// no spaces, control characters, '?' or '#', and at most 1,024 bytes of
// UTF-8. Errors wrap ErrPathPattern.
func CompilePath(pattern string) (PathMatcher, error) {
	m, reason := compilePath(pattern)
	if reason != "" {
		return PathMatcher{}, fmt.Errorf("%w %q: %s", ErrPathPattern, pattern, reason)
	}
	return m, nil
}

// compilePath compiles pattern, or says in reason why it cannot.
func compilePath(pattern string) (m PathMatcher, reason string) {
	switch {
	case pattern == "":
		return PathMatcher{}, ""
	case len(pattern) > maxPathPattern:
		return PathMatcher{}, fmt.Sprintf("longer than %d bytes", maxPathPattern)
	case !utf8.ValidString(pattern):
		return PathMatcher{}, "not valid UTF-8"
	case pattern[0] != '/':
		return PathMatcher{}, `must start with "/"`
	}
	for _, c := range pattern {
		if c <= ' ' || c == 0x7f || c == '?' || c == '#' {
			return PathMatcher{}, fmt.Sprintf("holds %q: patterns match the path alone, without spaces, control characters, query or fragment", c)
		}
	}
	m.pattern = pattern
	if pattern == "/" {
		return m, ""
	}
	for seg := range strings.SplitSeq(pattern[1:], "/") {
		switch {
		case seg == "":
			return PathMatcher{}, `holds an empty segment (a doubled or trailing "/")`
		case seg == "." || seg == "..":
			return PathMatcher{}, `holds a "." or ".." segment`
		case seg == "**":
			m.segs = append(m.segs, pathSeg{kind: segAny})
		case seg == "*":
			m.segs = append(m.segs, pathSeg{kind: segOne})
		case strings.Contains(seg, "**"):
			return PathMatcher{}, fmt.Sprintf(`"**" must be a whole segment, got %q`, seg)
		case strings.Contains(seg, "*"):
			m.segs = append(m.segs, pathSeg{kind: segGlob, glob: strings.Split(seg, "*")})
		default:
			m.segs = append(m.segs, pathSeg{kind: segLiteral, lit: seg})
		}
	}
	return m, ""
}

// String returns the pattern m was compiled from.
func (m PathMatcher) String() string { return m.pattern }

// Match reports whether path matches m. path is the request path alone,
// without query string, as a client sent it after the caller's
// normalisation (percent-decoding, resolving dot segments). Empty segments
// are ignored, so "/a//b/" matches like "/a/b": a doubled or trailing "/"
// cannot slip past a rule. A path that does not start with "/" matches only
// the empty pattern. Match does not allocate.
func (m PathMatcher) Match(path string) bool {
	if m.pattern == "" {
		return true
	}
	if path == "" || path[0] != '/' {
		return false
	}
	// Wildcard matching over segments, with "**" as the star: on a
	// mismatch, the last "**" seen absorbs one more segment and matching
	// resumes after it. Each retry starts further along the path, so the
	// work is at most segments(path) × segments(pattern).
	pi, pos := 0, 0
	star, starPos := -1, 0
	for {
		seg, next, ok := nextSegment(path, pos)
		if !ok {
			break
		}
		if pi < len(m.segs) {
			s := &m.segs[pi]
			if s.kind == segAny {
				star, starPos = pi, pos
				pi++
				continue
			}
			if s.match(seg) {
				pi++
				pos = next
				continue
			}
		}
		if star < 0 {
			return false
		}
		_, starPos, _ = nextSegment(path, starPos)
		pi, pos = star+1, starPos
	}
	for pi < len(m.segs) && m.segs[pi].kind == segAny {
		pi++
	}
	return pi == len(m.segs)
}

// nextSegment returns the first non-empty segment of path at or after byte
// i, and the index just past it; ok is false when none is left.
func nextSegment(path string, i int) (seg string, next int, ok bool) {
	for i < len(path) && path[i] == '/' {
		i++
	}
	if i == len(path) {
		return "", i, false
	}
	j := strings.IndexByte(path[i:], '/')
	if j < 0 {
		return path[i:], len(path), true
	}
	return path[i : i+j], i + j, true
}

// match reports whether the path segment seg matches s (which is not
// segAny).
func (s *pathSeg) match(seg string) bool {
	switch s.kind {
	case segLiteral:
		return seg == s.lit
	case segOne:
		return true
	case segGlob:
		return matchGlob(s.glob, seg)
	}
	return false
}

// matchGlob reports whether seg matches the literal parts of a segment
// pattern that were separated by '*'s (at least two parts). Taking each
// middle part at its leftmost occurrence is enough: '*' matches anything,
// so an earlier match never prevents a later one.
func matchGlob(parts []string, seg string) bool {
	first, last := parts[0], parts[len(parts)-1]
	if len(seg) < len(first)+len(last) || !strings.HasPrefix(seg, first) || !strings.HasSuffix(seg, last) {
		return false
	}
	seg = seg[len(first) : len(seg)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(seg, p)
		if i < 0 {
			return false
		}
		seg = seg[i+len(p):]
	}
	return true
}
