package envoyrls_test

import (
	"fmt"
	"testing"

	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/weirhq/weir/internal/dc/envoyrls"
)

// modesDoc limits a once a minute, b once an hour, c five times a minute,
// and leaves free unlimited.
const modesDoc = `
domain: %s
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: b
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: c
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: free
    rate_limit: {unlimited: true}
`

// modeStep is one call of TestGlobalModes: its descriptors (key=1 each),
// the descriptors' own codes (the same in every mode), and the overall
// code and the RateLimit-Reset header without and with the global quota
// mode.
type modeStep struct {
	keys               []string
	over               []bool
	overall, quotaOver bool
	reset, quotaReset  string
}

// modeSteps are the calls of TestGlobalModes, in order; the clock is 50 s
// before a minute's window resets, 3590 s before an hour's.
var modeSteps = []modeStep{
	{[]string{"a"}, []bool{false}, false, false, "50", "50"},
	// a over beside c under: in quota mode, not every descriptor is over.
	{[]string{"a", "c"}, []bool{true, false}, true, false, "50", "50"},
	// b under at 0 remaining, then a over: quota mode does not prefer
	// the over one for the headers, so the first at 0 (b, an hour's).
	{[]string{"b", "a"}, []bool{false, true}, true, false, "50", "3590"},
	// A descriptor without a limit is in quota mode too, and never over.
	{[]string{"a", "x"}, []bool{true, false}, true, false, "50", "50"},
	// An unlimited one is not: a alone decides.
	{[]string{"a", "free"}, []bool{true, false}, true, true, "50", "50"},
	{[]string{"a"}, []bool{true}, true, true, "50", "50"},
}

// TestGlobalModes replays envoyproxy/ratelimit's global SHADOW_MODE and
// QUOTA_MODE on a domain of its configuration: the same calls, on a real
// Redis and on memory, through the decoded and the wire-form request,
// with neither, either and both. Shadow mode answers OK what would be
// OVER_LIMIT and counts it, leaving the descriptors' codes and headers
// as decided; quota mode is OVER_LIMIT only when every descriptor not
// unlimited is.
func TestGlobalModes(t *testing.T) {
	modes := []struct {
		name          string
		shadow, quota bool
	}{
		{"neither", false, false},
		{"quota mode", false, true},
		{"shadow mode", true, false},
		{"both", true, true},
	}
	for _, ps := range peerStores {
		for _, m := range modes {
			t.Run(ps.name+"/"+m.name, func(t *testing.T) {
				cfg := envoyrls.Config{Headers: envoyrls.PeerHeaders, ShadowMode: m.shadow, QuotaMode: m.quota}
				svc, _ := peerServiceWith(t, ps.open(t), cfg, fmt.Sprintf(modesDoc, "modes"))
				var overridden uint64
				for i, s := range modeSteps {
					step := fmt.Sprintf("call %d %v", i+1, s.keys)
					resp := modesCall(t, svc, i%2 == 1, "modes", s.keys)
					over, reset := s.overall, s.reset
					if m.quota {
						over, reset = s.quotaOver, s.quotaReset
					}
					if over && m.shadow {
						over = false
						overridden++
					}
					checkModes(t, step, resp, over, s.over, reset)
				}
				if got := svc.ShadowOverrides(); got != overridden {
					t.Errorf("shadow overrides: got %d, want %d", got, overridden)
				}
			})
		}
	}
	// A domain of Weir rules has no quota_mode; shadow mode applies to it
	// as to any.
	for _, m := range modes {
		t.Run("weir rules/"+m.name, func(t *testing.T) {
			svc := newService(t, envoyrls.Config{ShadowMode: m.shadow, QuotaMode: m.quota}, fmt.Sprintf(modesDoc, "weirmodes"))
			for i, want := range []bool{false, true, true} {
				resp := modesCall(t, svc, i == 1, "weirmodes", []string{"a", "c"})
				overall := want && !m.shadow
				if got := resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT; got != overall {
					t.Errorf("call %d: got overall over-limit %v, want %v", i+1, got, overall)
				}
				if got := resp.GetStatuses()[0].GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT; got != want {
					t.Errorf("call %d: a's status: got over-limit %v, want %v", i+1, got, want)
				}
			}
			want := uint64(0)
			if m.shadow {
				want = 2
			}
			if got := svc.ShadowOverrides(); got != want {
				t.Errorf("shadow overrides: got %d, want %d", got, want)
			}
		})
	}
}

// modesCall asks svc about one descriptor key=1 per key of domain,
// decoded or in wire form.
func modesCall(t *testing.T, svc *envoyrls.Service, wire bool, domain string, keys []string) *rlsv3.RateLimitResponse {
	t.Helper()
	req := &rlsv3.RateLimitRequest{Domain: domain}
	for _, k := range keys {
		req.Descriptors = append(req.Descriptors, &rlcommonv3.RateLimitDescriptor{Entries: []*rlcommonv3.RateLimitDescriptor_Entry{{Key: k, Value: "1"}}})
	}
	return ask(t, svc, wire, req)
}

// checkModes checks one answer of TestGlobalModes.
func checkModes(t *testing.T, step string, resp *rlsv3.RateLimitResponse, overall bool, over []bool, reset string) {
	t.Helper()
	if got := resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT; got != overall {
		t.Errorf("%s: got overall over-limit %v, want %v", step, got, overall)
	}
	if len(resp.GetStatuses()) != len(over) {
		t.Fatalf("%s: got %d statuses, want %d", step, len(resp.GetStatuses()), len(over))
	}
	for i, w := range over {
		if got := resp.GetStatuses()[i].GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT; got != w {
			t.Errorf("%s: status %d: got over-limit %v, want %v", step, i, got, w)
		}
	}
	got := ""
	for _, h := range resp.GetResponseHeadersToAdd() {
		if h.GetKey() == envoyrls.PeerHeaders.Reset {
			got = h.GetValue()
		}
	}
	if got != reset {
		t.Errorf("%s: got %s %q, want %q", step, envoyrls.PeerHeaders.Reset, got, reset)
	}
}
