package auth

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Bounds on token files.
const (
	// MinTokenLen and MaxTokenLen bound a token's length in bytes.
	MinTokenLen = 16
	MaxTokenLen = 4096
	// MaxNameLen bounds a principal's name.
	MaxNameLen = 64
	// MaxFileSize is the largest token file Parse and File read, in bytes.
	MaxFileSize = 1 << 20
	// maxErrors bounds ParseError.Errors.
	maxErrors = 100
)

// Anonymous is the name reserved for requests without a principal; no
// token may take it.
const Anonymous = "anonymous"

// ErrTokenFile is matched (errors.Is) by every *ParseError.
var ErrTokenFile = errors.New("auth: invalid token file")

// Principal is the holder of a token.
type Principal struct {
	// Name names the holder in audit records and logs; it is not secret.
	Name string
	// ReadOnly restricts the holder to GET and HEAD requests.
	ReadOnly bool
}

// LineError is one malformed line of a token file. Reason never quotes the
// line.
type LineError struct {
	Line   int
	Reason string
}

// Error returns "line N: reason".
func (e LineError) Error() string { return "line " + strconv.Itoa(e.Line) + ": " + e.Reason }

// ParseError lists the problems of a token file, in line order. It matches
// ErrTokenFile with errors.Is and holds no token.
type ParseError struct {
	// Errors are the problems, at most 100 of them; Line is 0 for a
	// problem with the file as a whole.
	Errors []LineError
	// Omitted counts the problems found beyond those listed.
	Omitted int
}

// Error lists the problems, separated by "; ".
func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString("auth: invalid token file: ")
	for i, le := range e.Errors {
		if i > 0 {
			b.WriteString("; ")
		}
		if le.Line == 0 {
			b.WriteString(le.Reason)
		} else {
			b.WriteString(le.Error())
		}
	}
	if e.Omitted > 0 {
		fmt.Fprintf(&b, "; and %d more problems", e.Omitted)
	}
	return b.String()
}

// Is reports whether target is ErrTokenFile.
func (e *ParseError) Is(target error) bool { return target == ErrTokenFile }

// Tokens is a parsed token file: an immutable set of tokens, safe for
// concurrent use. The zero Tokens holds no token. It keeps digests of the
// tokens, not the tokens.
type Tokens struct {
	entries []entry
}

type entry struct {
	digest [sha256.Size]byte
	p      Principal
}

// Len returns the number of tokens.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}

// Lookup returns the principal holding token, and whether there is one.
// It compares token with every known token in constant time and does the
// same work whether or not, and wherever, it finds a match, so that its
// timing reveals neither a token nor its length. A nil *Tokens holds no
// token.
func (t *Tokens) Lookup(token string) (Principal, bool) {
	if t == nil {
		return Principal{}, false
	}
	d := sha256.Sum256([]byte(token))
	found := -1
	for i := range t.entries {
		eq := subtle.ConstantTimeCompare(d[:], t.entries[i].digest[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return Principal{}, false
	}
	return t.entries[found].p, true
}

// Parse reads a token file (see the package documentation). It reports
// every malformed line, and a file with no token, in a *ParseError; a file
// with any problem gives no Tokens at all. Nothing in the error quotes the
// file.
func Parse(data []byte) (*Tokens, error) {
	var pe ParseError
	fail := func(line int, format string, args ...any) {
		if len(pe.Errors) >= maxErrors {
			pe.Omitted++
			return
		}
		pe.Errors = append(pe.Errors, LineError{Line: line, Reason: fmt.Sprintf(format, args...)})
	}
	if len(data) > MaxFileSize {
		fail(0, "%d bytes; at most %d", len(data), MaxFileSize)
		return nil, &pe
	}
	t := &Tokens{}
	tokenLine := make(map[[sha256.Size]byte]int)
	nameLine := make(map[string]int)
	for n, line := range bytes.Split(data, []byte{'\n'}) {
		n++ // line numbers start at 1
		line = bytes.TrimSuffix(line, []byte{'\r'})
		fields := strings.Fields(string(line))
		if len(fields) == 0 || fields[0][0] == '#' {
			continue
		}
		if len(fields) > 3 {
			fail(n, "%d fields; want TOKEN [rw|ro] [NAME]", len(fields))
			continue
		}
		ok := true
		token := fields[0]
		switch {
		case len(token) < MinTokenLen:
			fail(n, "token shorter than %d characters", MinTokenLen)
			ok = false
		case len(token) > MaxTokenLen:
			fail(n, "token longer than %d characters", MaxTokenLen)
			ok = false
		case !printable(token):
			fail(n, "token holds a character that is not printable ASCII")
			ok = false
		}
		p := Principal{Name: "token-" + strconv.Itoa(n)}
		if len(fields) > 1 {
			switch fields[1] {
			case "rw":
			case "ro":
				p.ReadOnly = true
			default:
				// Not quoted: a token written in the wrong column
				// would be.
				fail(n, `second field is not "rw" or "ro" (want TOKEN [rw|ro] [NAME])`)
				ok = false
			}
		}
		if len(fields) > 2 {
			p.Name = fields[2]
			if reason := checkName(p.Name); reason != "" {
				fail(n, "%s", reason)
				ok = false
			}
		}
		if !ok {
			continue
		}
		d := sha256.Sum256([]byte(token))
		if prev, dup := tokenLine[d]; dup {
			fail(n, "same token as line %d", prev)
			continue
		}
		if prev, dup := nameLine[p.Name]; dup {
			fail(n, "name already used on line %d", prev)
			continue
		}
		tokenLine[d], nameLine[p.Name] = n, n
		t.entries = append(t.entries, entry{digest: d, p: p})
	}
	if len(pe.Errors) == 0 && len(t.entries) == 0 {
		fail(0, "no tokens")
	}
	if len(pe.Errors) > 0 {
		return nil, &pe
	}
	return t, nil
}

// checkName returns why name is not a valid principal name, or "". The
// reason does not quote the name, which might be a token in the wrong
// column.
func checkName(name string) string {
	if len(name) > MaxNameLen {
		return fmt.Sprintf("name longer than %d characters", MaxNameLen)
	}
	if name == Anonymous {
		return fmt.Sprintf("name %q is reserved", Anonymous)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._-@+", c) >= 0) {
			return "name holds a character other than letters, digits, '.', '_', '-', '@' and '+'"
		}
	}
	return ""
}

// printable reports whether s is made of printable ASCII other than space.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
