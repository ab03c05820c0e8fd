package adminserver_test

import (
	"fmt"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weirhq/weir/internal/control/adminserver"
)

func TestConfigValidate(t *testing.T) {
	cli := &clientv3.Client{} // never used: New only checks it is there
	tests := []struct {
		name string
		cfg  adminserver.Config
		want string // "" for valid
	}{
		{"minimal", adminserver.Config{Etcd: cli}, ""},
		{"full", adminserver.Config{Etcd: cli, DefaultDomain: "shop.v2", DCs: []string{"us-east", "eu-west"}, MaxBodyBytes: 10, AuditRetention: 1, Timeout: 1}, ""},
		{"no etcd", adminserver.Config{}, "an etcd client (Etcd) is required"},
		{"bad domain", adminserver.Config{Etcd: cli, DefaultDomain: "a/b"}, `invalid DefaultDomain "a/b": not a valid domain`},
		{"bad DC", adminserver.Config{Etcd: cli, DCs: []string{"US"}}, "DCs[0]: dc: DC name \"US\" must start with a lower-case letter or digit"},
		{"duplicate DC", adminserver.Config{Etcd: cli, DCs: []string{"a", "b", "a"}}, `DCs[2]: "a" listed twice`},
		{"negative body", adminserver.Config{Etcd: cli, MaxBodyBytes: -1}, "negative MaxBodyBytes -1"},
		{"negative retention", adminserver.Config{Etcd: cli, AuditRetention: -1}, "negative AuditRetention -1"},
		{"negative timeout", adminserver.Config{Etcd: cli, Timeout: -1}, "negative Timeout -1ns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := adminserver.New(tt.cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "adminserver: invalid config: ")):
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			case tt.want != "" && srv != nil:
				t.Errorf("got a Server with an invalid config")
			}
		})
	}
}

// TestTooLargeForEtcd checks that a valid rule too large for the limiters
// to read (or for one etcd transaction, with its shadow and audit record)
// is answered 413, not 503, and not stored.
func TestTooLargeForEtcd(t *testing.T) {
	e := newEnv(t)
	var b strings.Builder
	b.WriteString(`{"rule_id": "big", "key_type": "user", "limit": 1, "window_seconds": 1, "overrides": [`)
	for i := range 900 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"key": "%04d%s", "action": "deny"}`, i, strings.Repeat("k", 1000))
	}
	b.WriteString(`]}`)
	wantError(t, e.do("POST", "/rate-limits", b.String()), 413, "larger than limiters read")
}
