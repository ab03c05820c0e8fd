package etcdlayout

import (
	"errors"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, l := range []Layout{{}, {Prefix: "/t/x/"}} {
		k, err := l.ParseQuota(l.Assignment("eu", "api", "login"))
		if err != nil || k != (QuotaKey{DC: "eu", Domain: "api", RuleID: "login"}) {
			t.Errorf("%q: assignment parsed as %+v, %v", l.Prefix, k, err)
		}
		k, err = l.ParseQuota(l.Lease("eu"))
		if err != nil || k != (QuotaKey{DC: "eu", Lease: true}) {
			t.Errorf("%q: lease parsed as %+v, %v", l.Prefix, k, err)
		}
		dc, inst, err := l.ParseInstance(l.Instance("eu", "i-1"))
		if err != nil || dc != "eu" || inst != "i-1" {
			t.Errorf("%q: instance parsed as %q %q %v", l.Prefix, dc, inst, err)
		}
		d, r, err := l.ParsePolicy(l.Policy("api", "login"))
		if err != nil || d != "api" || r != "login" {
			t.Errorf("%q: policy parsed as %q %q %v", l.Prefix, d, r, err)
		}
	}
}

func TestMalformed(t *testing.T) {
	var l Layout
	for _, key := range []string{"", "/weir/quotas/", "/weir/quotas/eu", "/weir/quotas/eu/api", "/weir/quotas/eu/api/r/x",
		"/weir/quotas//api/r", "/weir/quotas/eu/_other", "/other/quotas/eu/api/r", "/weir/quotas/eu/api/"} {
		if _, err := l.ParseQuota(key); !errors.Is(err, ErrKey) {
			t.Errorf("ParseQuota(%q) = %v, want ErrKey", key, err)
		}
	}
	for _, key := range []string{"/weir/instances/eu", "/weir/instances//i", "/weir/instances/eu/", "/weir/instances/eu/i/j"} {
		if _, _, err := l.ParseInstance(key); !errors.Is(err, ErrKey) {
			t.Errorf("ParseInstance(%q) = %v, want ErrKey", key, err)
		}
	}
	for _, key := range []string{"/weir/policies/api", "/weir/policies/api/", "/weir/policies/api/r/x"} {
		if _, _, err := l.ParsePolicy(key); !errors.Is(err, ErrKey) {
			t.Errorf("ParsePolicy(%q) = %v, want ErrKey", key, err)
		}
	}
}
