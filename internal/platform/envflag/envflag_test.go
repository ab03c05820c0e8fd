package envflag_test

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/platform/envflag"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		args      []string
		wantAddr  string
		wantDelay time.Duration
		wantErr   bool
	}{
		{"defaults", nil, nil, "127.0.0.1:1", time.Second, false},
		{"environment", map[string]string{"WEIR_HTTP_ADDR": ":2", "WEIR_DELAY": "5s"}, nil, ":2", 5 * time.Second, false},
		{"flag beats environment", map[string]string{"WEIR_HTTP_ADDR": ":2"}, []string{"--http-addr", ":3"}, ":3", time.Second, false},
		{"bad environment value", map[string]string{"WEIR_DELAY": "soon"}, nil, "", 0, true},
		{"unknown flag", nil, []string{"--nope"}, "", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			addr := fs.String("http-addr", "127.0.0.1:1", "")
			delay := fs.Duration("delay", time.Second, "")
			err := envflag.Parse(fs, "WEIR", tt.args, func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error %v", err, tt.wantErr)
			}
			if err == nil && (*addr != tt.wantAddr || *delay != tt.wantDelay) {
				t.Fatalf("got %q %v, want %q %v", *addr, *delay, tt.wantAddr, tt.wantDelay)
			}
		})
	}
}

func TestUsagePrintsEachDefaultOnce(t *testing.T) {
	tests := []struct {
		name string
		add  func(fs *flag.FlagSet)
		want string // the flag's help line after the tab
	}{
		{"default stated in the usage", func(fs *flag.FlagSet) { fs.Int64("keys", 0, "cache size (default 100000)") }, "cache size (default 100000)"},
		{"zero int", func(fs *flag.FlagSet) { fs.Int("keys", 0, "cache size") }, "cache size"},
		{"zero duration", func(fs *flag.FlagSet) { fs.Duration("keys", 0, "wait (default 1s)") }, "wait (default 1s)"},
		{"empty string", func(fs *flag.FlagSet) { fs.String("keys", "", "a name") }, "a name"},
		{"false", func(fs *flag.FlagSet) { fs.Bool("keys", false, "switch") }, "switch"},
		{"string default", func(fs *flag.FlagSet) { fs.String("keys", "local", "a name") }, `a name (default "local")`},
		{"int default", func(fs *flag.FlagSet) { fs.Int("keys", 5, "a count") }, `a count (default "5")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			var out strings.Builder
			fs.SetOutput(&out)
			tt.add(fs)
			envflag.Usage(fs, "WEIR", "usage: x")()
			want := "usage: x\n\n  --keys (env WEIR_KEYS)\n    \t" + tt.want + "\n"
			if got := out.String(); got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		})
	}
}
