package limiterd_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/dc/envoyrls"
	"github.com/weirhq/weir/internal/dc/limiterd"
)

// TestValidateEnvoyHeaders: the Envoy API's response headers are named
// all three or none; Validate refuses some without the others, naming
// the flags missing, rather than start a limiter that would send Envoy
// headers with empty names.
func TestValidateEnvoyHeaders(t *testing.T) {
	const (
		limit     = "--envoy-header-limit"
		remaining = "--envoy-header-remaining"
		reset     = "--envoy-header-reset"
	)
	tests := []struct {
		name        string
		headers     envoyrls.Headers
		wantMissing []string // nil: valid
	}{
		{"none", envoyrls.Headers{}, nil},
		{"all three", envoyrls.PeerHeaders, nil},
		{"limit only", envoyrls.Headers{Limit: "RateLimit-Limit"}, []string{remaining, reset}},
		{"remaining only", envoyrls.Headers{Remaining: "RateLimit-Remaining"}, []string{limit, reset}},
		{"reset only", envoyrls.Headers{Reset: "RateLimit-Reset"}, []string{limit, remaining}},
		{"no reset", envoyrls.Headers{Limit: "RateLimit-Limit", Remaining: "RateLimit-Remaining"}, []string{reset}},
		{"no limit", envoyrls.Headers{Remaining: "RateLimit-Remaining", Reset: "RateLimit-Reset"}, []string{limit}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := limiterd.Config{DC: "local", RulesFile: "rules.yaml", EnvoyHeaders: tt.headers}.Validate()
			if tt.wantMissing == nil {
				if err != nil {
					t.Fatalf("got %v, want none", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got no error, want one naming %s missing", strings.Join(tt.wantMissing, " and "))
			}
			_, missing, _ := strings.Cut(err.Error(), " set, ")
			for _, flag := range []string{limit, remaining, reset} {
				if want := slices.Contains(tt.wantMissing, flag); strings.Contains(missing, flag) != want {
					t.Errorf("got %q, want %s named missing: %v", err, flag, want)
				}
			}
		})
	}
}

// TestValidateMergeDomains: --merge-domains merges the files of --rules;
// with rules from etcd alone it would do nothing, and is refused.
func TestValidateMergeDomains(t *testing.T) {
	tests := []struct {
		name    string
		cfg     limiterd.Config
		wantErr bool
	}{
		{"with a rules directory", limiterd.Config{DC: "local", RulesFile: "rules", MergeDomains: true}, false},
		{"with etcd alone", limiterd.Config{DC: "local", Etcd: []string{"127.0.0.1:2379"}, MergeDomains: true}, true},
		{"off, with etcd alone", limiterd.Config{DC: "local", Etcd: []string{"127.0.0.1:2379"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if got := err != nil && strings.Contains(err.Error(), "--merge-domains"); got != tt.wantErr {
				t.Errorf("got %v, want an error naming --merge-domains: %v", err, tt.wantErr)
			}
		})
	}
}
