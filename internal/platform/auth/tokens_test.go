package auth_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/platform/auth"
)

const (
	tokA = "aaaaaaaaaaaaaaaa-secret-A"
	tokB = "bbbbbbbbbbbbbbbb-secret-B"
	tokC = "cccccccccccccccc-secret-C"
)

func TestParse(t *testing.T) {
	type lookup struct {
		token string
		want  auth.Principal
	}
	tests := []struct {
		name string
		file string
		want []lookup
	}{
		{"bare token is read-write, named by line",
			tokA + "\n",
			[]lookup{{tokA, auth.Principal{Name: "token-1"}}}},
		{"modes and names",
			tokA + " rw deploy-bot\n" + tokB + " ro grafana\n" + tokC + " ro\n",
			[]lookup{
				{tokA, auth.Principal{Name: "deploy-bot"}},
				{tokB, auth.Principal{Name: "grafana", ReadOnly: true}},
				{tokC, auth.Principal{Name: "token-3", ReadOnly: true}},
			}},
		{"comments, blank lines, CRLF and spacing",
			"# admin tokens\r\n\r\n   \t\n  # indented comment\n\t" + tokA + "\t ro \t ops@example.com \r\n" + tokB,
			[]lookup{
				{tokA, auth.Principal{Name: "ops@example.com", ReadOnly: true}},
				{tokB, auth.Principal{Name: "token-6"}},
			}},
		{"hash inside a token is part of it",
			"abc#defghijklmnopq rw\n",
			[]lookup{{"abc#defghijklmnopq", auth.Principal{Name: "token-1"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			toks, err := auth.Parse([]byte(tt.file))
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if got, want := toks.Len(), len(tt.want); got != want {
				t.Errorf("got %d tokens, want %d", got, want)
			}
			for _, l := range tt.want {
				got, ok := toks.Lookup(l.token)
				if !ok || got != l.want {
					t.Errorf("Lookup(token of %s): got %+v, %v, want %+v, true", l.want.Name, got, ok, l.want)
				}
			}
			for _, bad := range []string{"", tokA[:16], tokA + "x", strings.ToUpper(tokA), "Bearer " + tokA} {
				if p, ok := toks.Lookup(bad); ok {
					t.Errorf("Lookup(%q): got %+v, want no principal", bad, p)
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []auth.LineError
	}{
		{"empty file", "", []auth.LineError{{0, "no tokens"}}},
		{"only comments", "# nothing\n\n", []auth.LineError{{0, "no tokens"}}},
		{"short token", "short rw\n", []auth.LineError{{1, "token shorter than 16 characters"}}},
		{"long token", strings.Repeat("x", 4097), []auth.LineError{{1, "token longer than 4096 characters"}}},
		{"control character", tokA + "\x01\n", []auth.LineError{{1, "token holds a character that is not printable ASCII"}}},
		{"non-ASCII", tokA + "é\n", []auth.LineError{{1, "token holds a character that is not printable ASCII"}}},
		{"bad mode", "\n" + tokA + " admin\n", []auth.LineError{{2, `second field is not "rw" or "ro" (want TOKEN [rw|ro] [NAME])`}}},
		{"upper-case mode", tokA + " RW\n", []auth.LineError{{1, `second field is not "rw" or "ro" (want TOKEN [rw|ro] [NAME])`}}},
		{"too many fields", tokA + " rw a b\n", []auth.LineError{{1, "4 fields; want TOKEN [rw|ro] [NAME]"}}},
		{"bad name", tokA + " rw bad/name\n", []auth.LineError{{1, "name holds a character other than letters, digits, '.', '_', '-', '@' and '+'"}}},
		{"long name", tokA + " rw " + strings.Repeat("n", 65) + "\n", []auth.LineError{{1, "name longer than 64 characters"}}},
		{"reserved name", tokA + " rw anonymous\n", []auth.LineError{{1, `name "anonymous" is reserved`}}},
		{"duplicate token", tokA + " rw a\n" + tokA + " ro b\n", []auth.LineError{{2, "same token as line 1"}}},
		{"duplicate name", tokA + " rw a\n" + tokB + " ro a\n", []auth.LineError{{2, "name already used on line 1"}}},
		{"explicit name clashes with a default", tokA + "\n" + tokB + " rw token-1\n", []auth.LineError{{2, "name already used on line 1"}}},
		{"every bad line is reported; good lines do not save the file",
			tokA + "\nx\n" + tokB + " rx\n" + tokC + "\n",
			[]auth.LineError{{2, "token shorter than 16 characters"}, {3, `second field is not "rw" or "ro" (want TOKEN [rw|ro] [NAME])`}}},
		{"too large", strings.Repeat("#\n", auth.MaxFileSize/2+1), []auth.LineError{{0, "1048578 bytes; at most 1048576"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			toks, err := auth.Parse([]byte(tt.file))
			if toks != nil {
				t.Errorf("got %d tokens, want none", toks.Len())
			}
			var pe *auth.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("got error %v, want a *ParseError", err)
			}
			if !errors.Is(err, auth.ErrTokenFile) {
				t.Errorf("errors.Is(%v, ErrTokenFile) = false, want true", err)
			}
			if !reflect.DeepEqual(pe.Errors, tt.want) {
				t.Errorf("got %q, want %q", pe.Errors, tt.want)
			}
		})
	}
}

func TestParseErrorsCapped(t *testing.T) {
	_, err := auth.Parse([]byte(strings.Repeat("bad\n", 150)))
	var pe *auth.ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("got %v, want a *ParseError", err)
	}
	if len(pe.Errors) != 100 || pe.Omitted != 50 {
		t.Errorf("got %d errors and %d omitted, want 100 and 50", len(pe.Errors), pe.Omitted)
	}
	if !strings.HasSuffix(err.Error(), "; and 50 more problems") {
		t.Errorf("got %q, want it to end with the number omitted", err)
	}
}

// TestErrorsHoldNoToken checks that no error quotes a secret, wherever in
// the line the secret was written.
func TestErrorsHoldNoToken(t *testing.T) {
	const secret = "s3cr3t-s3cr3t-s3cr3t"
	files := []string{
		secret + " admin\n",                // token then a bad mode
		"rw " + secret + "\n",              // columns swapped
		"rw rw " + secret + "\n",           // secret as name... of a bad token
		secret + " rw " + secret + "/x\n",  // secret in a bad name
		secret + " rw a\n" + secret + "\n", // duplicate
		secret + "\x00\n",                  // bad character
		secret + " rw a b\n",               // too many fields
		secret + " rw " + secret + "\n" + secret + "x rw " + secret + "\n", // duplicate name that is a token
	}
	for i, f := range files {
		_, err := auth.Parse([]byte(f))
		if err == nil {
			t.Errorf("file %d: got no error, want one", i)
			continue
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("file %d: error %q quotes the secret", i, err)
		}
	}
}
