package limiterd

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/testkit/redistest"
)

// TestWarnReplica: a replica named by --redis is warned of, with the
// primary it follows; a primary is not.
func TestWarnReplica(t *testing.T) {
	primary := redistest.Start(t)
	host, port, _ := strings.Cut(primary.Addr, ":")
	replica := redistest.Start(t, "--replicaof", host, port)
	for _, tc := range []struct {
		name string
		node *redistest.Server
		want string // "" for no warning
	}{
		{"primary", primary, ""},
		{"replica", replica, "primary=" + primary.Addr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			warnReplica(context.Background(), tc.node.Client(t), slog.New(slog.NewTextHandler(&out, nil)))
			warned := strings.Contains(out.String(), "is a replica")
			if warned != (tc.want != "") || !strings.Contains(out.String(), tc.want) {
				t.Errorf("log:\n%s\nwant a warning: %v, naming %q", out.String(), tc.want != "", tc.want)
			}
		})
	}
}
