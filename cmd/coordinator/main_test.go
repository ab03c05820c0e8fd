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

// A --peer-urls entry that is not a coordinator's admin base URL, given
// as the flag or as WEIR_PEER_URLS, stops the coordinator before it
// starts, naming the entry. (No --etcd: a coordinator that took the
// entry would stop at once for the want of it, naming that instead.)
func TestPeerURLsFlag(t *testing.T) {
	base := []string{"--kafka", "127.0.0.1:1", "--dcs", "a", "--admin-addr", "127.0.0.1:0"}
	tests := []struct {
		name    string
		flag    string // --peer-urls
		env     string // WEIR_PEER_URLS
		wantErr string
	}{
		{"no scheme", "http://c1:8070,c2:8070", "", `--peer-urls: adminserver: invalid peer URL "c2:8070"`},
		{"a path", "https://c1:8070/admin", "", `"https://c1:8070/admin": a path, query or fragment is not allowed`},
		{"another scheme", "ftp://c1", "", `"ftp://c1": not an absolute http(s) URL`},
		{"no host", "https://", "", `"https://": no host`},
		{"from the environment", "", "http://c1:8070,http://c2:8070?x", `"http://c2:8070?x"`},
		{"the flag wins over the environment", "ftp://flag", "http://c1:8070", `"ftp://flag"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("WEIR_PEER_URLS", tt.env)
			args := base
			if tt.flag != "" {
				args = append(append([]string{}, base...), "--peer-urls", tt.flag)
			}
			err := run(args)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}
