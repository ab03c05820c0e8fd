package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/pkg/sharepolicy"
)

// TestServerWarnings runs weirctl against a real coordinator: a share
// command that drains the last DC not drained is done, prints what it
// did on stdout as any drain does, and prints the coordinator's warning
// on stderr; the other commands print nothing on stderr.
func TestServerWarnings(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, a broker, a coordinator and two limiters")
	}
	s := startSystem(t)
	rules := ordersRule(t, filepath.Join(t.TempDir(), "rules.yaml"), 40, 60)
	s.weirctl(t, "apply", "-f", rules)
	s.planned(t, "orders")

	const warning = "weirctl: warning: every DC is drained or pinned at 0: rule 'orders' in domain 'api' rejects every request in every DC\n"
	// Steps, in order: each starts from the policy the one before left.
	steps := []struct {
		name      string
		args      []string
		stdout    string // the first line of stdout; empty: not checked
		wantWarn  bool
		wantDrain map[string]bool // when set, stdout is a policy's JSON draining these DCs
	}{
		{"read", []string{"shares", "get", "orders"}, "rule orders, etag", false, nil},
		{"drain a", []string{"shares", "drain", "orders", "a"}, "DC a of rule orders: drained", false, nil},
		{"drain b, the last", []string{"shares", "drain", "orders", "b"}, "DC b of rule orders: drained", true, nil},
		{"b again: nothing written", []string{"shares", "drain", "orders", "b"}, "DC b of rule orders: already drained; nothing to change", false, nil},
		{"undrain b", []string{"shares", "drain", "orders", "b", "--undo"}, "DC b of rule orders: no longer drained", false, nil},
		{"drain b, the last, as JSON", []string{"-o", "json", "shares", "drain", "orders", "b"}, "", true, map[string]bool{"a": true, "b": true}},
		{"audit", []string{"audit", "--rule", "orders"}, "", false, nil},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			out, errOut := s.weirctl(t, st.args...)
			want := ""
			if st.wantWarn {
				want = warning
			}
			if errOut != want {
				t.Errorf("stderr: got %q, want %q", errOut, want)
			}
			if strings.Contains(out, "warning") {
				t.Errorf("stdout holds a warning:\n%s", out)
			}
			switch {
			case st.stdout != "":
				if first, _, _ := strings.Cut(out, "\n"); !strings.HasPrefix(first, st.stdout) {
					t.Errorf("stdout: got first line %q, want %q", first, st.stdout)
				}
			case st.wantDrain != nil:
				var p sharepolicy.Policy
				dec := json.NewDecoder(bytes.NewReader([]byte(out)))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&p); err != nil {
					t.Fatalf("stdout is not the policy's JSON: %v\n%s", err, out)
				}
				for dc, drained := range st.wantDrain {
					if p.DCs[dc].Drained != drained {
						t.Errorf("policy of %s: got %+v, want drained %v", dc, p.DCs[dc], drained)
					}
				}
			}
		})
	}
}
