package limiterd

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/testkit/redistest"
)

// TestWarnEviction: a Redis that deletes keys when full — a maxmemory and
// an evicting policy — is warned of, naming the policy; Redis's default
// (no maxmemory, noeviction), noeviction under a maxmemory, and an
// evicting policy without a maxmemory (it never evicts) are not.
func TestWarnEviction(t *testing.T) {
	const warning = "Redis deletes keys when full"
	for _, tc := range []struct {
		name string
		args []string
		warn bool
	}{
		{"Redis's default", nil, false},
		{"noeviction under a maxmemory", []string{"--maxmemory", "64mb", "--maxmemory-policy", "noeviction"}, false},
		{"allkeys-lru under a maxmemory", []string{"--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"}, true},
		{"volatile-ttl under a maxmemory", []string{"--maxmemory", "64mb", "--maxmemory-policy", "volatile-ttl"}, true},
		{"allkeys-lru without a maxmemory", []string{"--maxmemory-policy", "allkeys-lru"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			warnEviction(context.Background(), redistest.Start(t, tc.args...).Client(t), slog.New(slog.NewTextHandler(&out, nil)))
			if got := strings.Contains(out.String(), warning); got != tc.warn {
				t.Errorf("warned: %v, want %v; log:\n%s", got, tc.warn, out.String())
			}
		})
	}
}
