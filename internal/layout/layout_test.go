package layout

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/weirhq/weir/"

// rule forbids packages under from to depend, directly or not, on packages
// under to. A prefix names a directory and everything below it.
type rule struct {
	from, to []string
	why      string
}

var rules = []rule{
	{
		from: []string{"internal/dc", "cmd/limiter"},
		to:   []string{"internal/control", "cmd/coordinator"},
		why:  "the limiter side meets the control plane only in proto/, pkg/ and internal/etcd",
	},
	{
		from: []string{"internal/control", "cmd/coordinator"},
		to:   []string{"internal/dc", "cmd/limiter"},
		why:  "the control plane meets the limiter side only in proto/, pkg/ and internal/etcd",
	},
	{
		from: []string{"internal/kafka", "internal/etcd"},
		to:   []string{"internal/dc", "internal/control", "cmd"},
		why:  "packages shared by both sides import neither",
	},
	{
		from: []string{"pkg"},
		to:   []string{"internal"},
		why:  "the public Go API cannot hand its users types they cannot import",
	},
	{
		from: []string{"cmd", "pkg", "internal/dc", "internal/control", "internal/etcd", "internal/platform", "internal/sim", "internal/e2e"},
		to:   []string{"internal/testkit"},
		why:  "product code never imports a test kit",
	},
}

// TestImportRules lists every package of the module with its dependencies
// (without tests: a test may wire both sides together) and checks each rule.
func TestImportRules(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the whole module")
	}
	deps := listDeps(t)
	if len(deps) < 20 {
		t.Fatalf("go list found %d packages; want the whole module", len(deps))
	}
	pkgs := make([]string, 0, len(deps))
	for pkg := range deps {
		pkgs = append(pkgs, pkg)
	}
	sort.Strings(pkgs)
	for _, r := range rules {
		for _, pkg := range pkgs {
			if !under(pkg, r.from) {
				continue
			}
			for _, d := range deps[pkg] {
				if under(d, r.to) {
					t.Errorf("%s depends on %s: %s", pkg, d, r.why)
				}
			}
		}
	}
}

// TestRulesCatchAViolation makes sure the checker itself can fail: a made-up
// dependency of the limiter side on the coordinator must be reported.
func TestRulesCatchAViolation(t *testing.T) {
	for _, tc := range []struct {
		pkg, dep string
		want     bool
	}{
		{"internal/dc/limiterd", "internal/control/coordinator", true},
		{"internal/control/coordinatord", "internal/dc/quota", true},
		{"pkg/limiter", "internal/platform/backoff", true},
		{"internal/dc/limiterd", "internal/testkit/redistest", true},
		{"internal/dc/limiterd", "internal/etcd/etcdlayout", false},
		{"internal/sim", "internal/control/coordinator", false},
		{"internal/testkit/etcdtest", "internal/platform/embedetcd", false},
		{"internal/dcx", "internal/control", false},
		{"internal/kafka/usagetopic", "internal/dc/usage", true},
		{"internal/dc/limiterd", "internal/kafka/usagetopic", false},
		{"internal/control/coordinator", "internal/kafka/usagetopic", false},
	} {
		got := false
		for _, r := range rules {
			if under(tc.pkg, r.from) && under(tc.dep, r.to) {
				got = true
			}
		}
		if got != tc.want {
			t.Errorf("%s → %s forbidden = %v, want %v", tc.pkg, tc.dep, got, tc.want)
		}
	}
}

// listDeps returns each package of the module (relative to the module
// path) with its transitive dependencies inside the module.
func listDeps(t *testing.T) map[string][]string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	deps := make(map[string][]string)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<24)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || !strings.HasPrefix(fields[0], module) {
			continue
		}
		pkg := strings.TrimPrefix(fields[0], module)
		var own []string
		for _, d := range fields[1:] {
			if strings.HasPrefix(d, module) {
				own = append(own, strings.TrimPrefix(d, module))
			}
		}
		deps[pkg] = own
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return deps
}

// under reports whether pkg is one of dirs or below one of them.
func under(pkg string, dirs []string) bool {
	for _, d := range dirs {
		if pkg == d || strings.HasPrefix(pkg, d+"/") {
			return true
		}
	}
	return false
}
