package main_test

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"
)

// The global modes of envoyproxy/ratelimit, SHADOW_MODE, QUOTA_MODE and
// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, as their flags or WEIR_
// variables set them, on the limiter's /json endpoint for a domain of its
// configuration format: shadow mode answers 200 to a call over its limit,
// its descriptor still OVER_LIMIT, counts it in
// weir_envoy_shadow_overrides_total and says so at start; quota mode
// answers 429 only when every descriptor is over; with the third, c stops
// counting once a is over.
func TestEnvoyGlobalModes(t *testing.T) {
	skipShort(t)
	rules := filepath.Join(t.TempDir(), "peer.yaml")
	writeFile(t, rules, `
domain: modes
descriptors:
  - key: a
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: c
    rate_limit: {unit: hour, requests_per_unit: 100}
    metadata: {service: checkout}
`)
	base := []string{"--rules", rules, "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"}
	aOnly := `{"domain":"modes","descriptors":[{"entries":[{"key":"a","value":"1"}]}]}`
	aAndC := `{"domain":"modes","descriptors":[{"entries":[{"key":"a","value":"1"}]},{"entries":[{"key":"c","value":"1"}]}]}`
	tests := []struct {
		name      string
		args, env []string
		// the HTTP codes of aOnly, aAndC, aOnly, in that order
		want      []int
		overrides float64
		cLeft     string // c's limit_remaining after aAndC
		metadata  bool   // answers carry dynamic metadata
	}{
		{"none", nil, nil, []int{200, 429, 429}, 0, "99", false},
		{"shadow mode by flag", []string{"--envoy-shadow-mode"}, nil, []int{200, 200, 200}, 2, "99", false},
		{"shadow mode by variable", nil, []string{"WEIR_ENVOY_SHADOW_MODE=true"}, []int{200, 200, 200}, 2, "99", false},
		{"quota mode by flag", []string{"--envoy-quota-mode"}, nil, []int{200, 200, 429}, 0, "99", false},
		{"quota mode by variable", nil, []string{"WEIR_ENVOY_QUOTA_MODE=true"}, []int{200, 200, 429}, 0, "99", false},
		{"stop increment by flag", []string{"--envoy-stop-increment-when-over-limit"}, nil, []int{200, 429, 429}, 0, "100", false},
		{"stop increment by variable", nil, []string{"WEIR_ENVOY_STOP_INCREMENT_WHEN_OVER_LIMIT=true"}, []int{200, 429, 429}, 0, "100", false},
		{"dynamic metadata by flag", []string{"--envoy-response-dynamic-metadata"}, nil, []int{200, 429, 429}, 0, "99", true},
		{"dynamic metadata by variable", nil, []string{"WEIR_ENVOY_RESPONSE_DYNAMIC_METADATA=true"}, []int{200, 429, 429}, 0, "99", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startLimiter(t, append(append([]string(nil), base...), tt.args...), tt.env...)
			for i, body := range []string{aOnly, aAndC, aOnly} {
				r := p.post(t, "/json", body)
				if r.code != tt.want[i] {
					t.Fatalf("call %d: got %d %s, want %d", i+1, r.code, r.body, tt.want[i])
				}
				var resp struct {
					Statuses []struct {
						Code           string
						LimitRemaining int64 `json:"limitRemaining"`
					} `json:"statuses"`
					DynamicMetadata *struct {
						Domain   string         `json:"domain"`
						Metadata map[string]any `json:"metadata"`
					} `json:"dynamicMetadata"`
				}
				if err := json.Unmarshal(r.body, &resp); err != nil {
					t.Fatalf("call %d: body %s: %v", i+1, r.body, err)
				}
				if got, want := resp.Statuses[0].Code, map[bool]string{false: "OK", true: "OVER_LIMIT"}[i > 0]; got != want {
					t.Errorf("call %d: a's code: got %s, want %s (the modes change the overall code alone)", i+1, got, want)
				}
				if got := resp.DynamicMetadata != nil; got != tt.metadata {
					t.Errorf("call %d: got dynamic metadata %v, want %v", i+1, got, tt.metadata)
				} else if got && i == 1 && (resp.DynamicMetadata.Domain != "modes" || resp.DynamicMetadata.Metadata["service"] != "checkout") {
					t.Errorf("call 2: got dynamic metadata %+v, want domain modes and c's service", *resp.DynamicMetadata)
				}
				if i == 1 {
					if got := strconv.FormatInt(resp.Statuses[1].LimitRemaining, 10); got != tt.cLeft {
						t.Errorf("call 2: c's remaining: got %s, want %s", got, tt.cLeft)
					}
				}
			}
			m := p.metrics(t)
			if got := metric(m, "weir_envoy_shadow_overrides_total"); got != tt.overrides {
				t.Errorf("weir_envoy_shadow_overrides_total: got %v, want %v", got, tt.overrides)
			}
			_, warned := p.findLog("the Envoy API answers OK to every call over its limit, decisions counted as ever (--envoy-shadow-mode); weir_envoy_shadow_overrides_total counts them")
			if shadow := tt.overrides > 0; warned != shadow {
				t.Errorf("shadow mode warned of at start: got %v, want %v", warned, shadow)
			}
		})
	}
}
