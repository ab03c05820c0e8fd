package envflag_test

import (
	"flag"
	"io"
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
