package main

import (
	"strings"
	"testing"
)

// The etcd client's flags given in part stop the coordinator before it
// starts, naming what is missing.
func TestEtcdAuthFlags(t *testing.T) {
	base := []string{"--etcd", "https://127.0.0.1:1", "--kafka", "127.0.0.1:1", "--dcs", "a", "--admin-addr", "127.0.0.1:0"}
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"certificate without its key", []string{"--etcd-cert", "c.pem"}, "needs both --etcd-cert and --etcd-key"},
		{"password file without a user", []string{"--etcd-password-file", "pw"}, "needs both --etcd-user and --etcd-password-file"},
		{"unreadable CA", []string{"--etcd-ca", "/nonexistent/ca.pem"}, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(append(base, tt.args...))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}
