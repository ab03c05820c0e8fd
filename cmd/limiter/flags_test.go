package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A --store-pause (or WEIR_STORE_PAUSE) that is not a duration of zero or
// more stops the limiter before it starts, naming the flag, or the
// variable when the environment set it.
func TestStorePauseFlag(t *testing.T) {
	for _, v := range []string{"-1ms", "soon", ""} {
		t.Run("flag "+v, func(t *testing.T) {
			err := run([]string{"--store-pause", v})
			if err == nil || !strings.Contains(err.Error(), "store-pause") {
				t.Errorf("--store-pause %q: got %v, want an error naming the flag", v, err)
			}
		})
	}
	for _, tt := range []struct{ value, want string }{
		{"soon", "WEIR_STORE_PAUSE"},
		{"", "WEIR_STORE_PAUSE"},
		{"-1ms", "store-pause"}, // a duration, refused by the config's validation
	} {
		t.Run("environment "+tt.value, func(t *testing.T) {
			t.Setenv("WEIR_STORE_PAUSE", tt.value)
			err := run(nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("WEIR_STORE_PAUSE=%q: got %v, want an error naming %s", tt.value, err, tt.want)
			}
		})
	}
}

// Envoy response headers named in part, by flags or WEIR_ variables, stop
// the limiter before it starts, with an error naming the flags missing.
func TestEnvoyHeaderFlagsAllOrNone(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		env         map[string]string
		wantMissing string
	}{
		{"limit flag only", []string{"--envoy-header-limit", "RateLimit-Limit"}, nil, "--envoy-header-remaining and --envoy-header-reset missing"},
		{"no reset flag", []string{"--envoy-header-limit", "RateLimit-Limit", "--envoy-header-remaining", "RateLimit-Remaining"}, nil, "--envoy-header-reset missing"},
		{"reset variable only", nil, map[string]string{"WEIR_ENVOY_HEADER_RESET": "RateLimit-Reset"}, "--envoy-header-limit and --envoy-header-remaining missing"},
		{"a variable and a flag", []string{"--envoy-header-remaining", "RateLimit-Remaining"}, map[string]string{"WEIR_ENVOY_HEADER_LIMIT": "RateLimit-Limit"}, "--envoy-header-reset missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			// A rules file that does not exist: were the headers let
			// through, the limiter would stop at reading it rather than
			// listen on the default ports.
			err := run(append([]string{"--rules", filepath.Join(t.TempDir(), "absent.yaml")}, tt.args...))
			if err == nil || !strings.Contains(err.Error(), tt.wantMissing) {
				t.Errorf("got %v, want an error with %q", err, tt.wantMissing)
			}
		})
	}
}

// The etcd client's flags, or their WEIR_ variables, given in part stop
// the limiter before it starts, naming what is missing.
func TestEtcdAuthFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{"certificate without its key", []string{"--etcd-cert", "c.pem"}, nil, "needs both --etcd-cert and --etcd-key"},
		{"key variable without a certificate", nil, map[string]string{"WEIR_ETCD_KEY": "k.pem"}, "needs both --etcd-cert and --etcd-key"},
		{"user without a password file", []string{"--etcd-user", "weir"}, nil, "needs both --etcd-user and --etcd-password-file"},
		{"TLS with a plain endpoint", []string{"--etcd", "http://127.0.0.1:1", "--etcd-ca", "ca.pem"}, nil, "use https://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			args := tt.args
			if tt.env != nil || !strings.Contains(strings.Join(args, " "), "--etcd ") {
				args = append([]string{"--etcd", "https://127.0.0.1:1"}, args...)
			}
			// A rules file that does not exist: were the settings let
			// through, the limiter would stop at reading it rather than
			// wait for etcd.
			err := run(append([]string{"--rules", filepath.Join(t.TempDir(), "absent.yaml")}, args...))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}

// --merge-domains, or WEIR_MERGE_DOMAINS, merges the configurations of
// envoyproxy/ratelimit of one domain: two files that repeat a descriptor
// stop the limiter, at start, with the merge's error rather than with the
// refusal of a domain repeated across files, which it gives without.
func TestMergeDomainsFlag(t *testing.T) {
	const (
		merged   = "duplicate descriptor composite key 'shop.route_checkout'"
		repeated = `domain "shop" is already that of`
	)
	tests := []struct {
		name string
		args []string
		env  string // WEIR_MERGE_DOMAINS, "" for unset
		want string
	}{
		{"off by default", nil, "", repeated},
		{"flag", []string{"--merge-domains"}, "", merged},
		{"environment", nil, "true", merged},
		{"flag off over the environment", []string{"--merge-domains=false"}, "true", repeated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv("WEIR_MERGE_DOMAINS", tt.env)
			}
			dir := t.TempDir()
			for _, name := range []string{"a.yaml", "b.yaml"} {
				body := "domain: shop\ndescriptors:\n  - key: route\n    value: checkout\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			// Both ways the rules stop the limiter before it listens.
			err := run(append([]string{"--rules", dir, "--log-level", "error"}, tt.args...))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
}
