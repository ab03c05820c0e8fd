package sim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/sim/scenario"
	"github.com/weirhq/weir/internal/sim/wan"
)

// TestMain lets the test binary serve as a WAN-mode node: WAN mode starts
// this process's executable with NodeArg, as weirsim's main does.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == NodeArg {
		os.Exit(testNode(os.Args[2]))
	}
	os.Exit(m.Run())
}

func testNode(arg string) int {
	n, err := ParseNode(arg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := RunNode(ctx, n, slog.New(slog.NewTextHandler(os.Stderr, nil)), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// wanScenario: DC a wants more than the limit, b a little; b is cut off
// from 5 s to 7 s.
const wanScenario = `
name: wan
duration: 9s
interval: 500ms
seed: 3
dcs: [a, b]
rules:
  domain: api
  rules:
    - {rule_id: total, path_pattern: /total, limit: 100, window_seconds: 1, algorithm: SlidingWindowLog}
traffic:
  - {dc: a, rule: total, attributes: {path: /total}, rate: 150}
  - {dc: b, rule: total, attributes: {path: /total}, rate: 20}
faults:
  - {at: 5s, kind: partition, dc: b, for: 2s}
`

// A short run behind the emulated WAN, with DC b cut off for a while:
// traffic flows in both DCs, the shares move, the limit holds, and
// nothing of the network is left afterwards.
func TestRunOverWAN(t *testing.T) {
	if testing.Short() {
		t.Skip("plays a 9 s scenario in network namespaces")
	}
	if err := wan.Supported(); err != nil {
		t.Skipf("WAN emulation not possible here: %v", err)
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	prefix := "ws" + hex.EncodeToString(b)
	sc, err := scenario.Parse([]byte(wanScenario))
	if err != nil {
		t.Fatal(err)
	}
	cfg := FromScenario(sc)
	cfg.Memory = true
	cfg.WAN = &wan.Config{Prefix: prefix, Delay: 20 * time.Millisecond}
	trace, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rt := trace.Rules[0]
	admitted := map[string]int{}
	for _, s := range rt.Seconds {
		total := 0
		for dc, n := range s.Admitted {
			admitted[dc] += n
			total += n
		}
		if total > int(rt.Limit) {
			t.Errorf("second %v: admitted %d, above L=%d", s.At, total, rt.Limit)
		}
	}
	for _, dc := range cfg.DCs {
		if admitted[dc] == 0 {
			t.Errorf("DC %s admitted nothing", dc)
		}
	}
	// a, which wants more than L, must have been granted more than the
	// static half at some point.
	grown := false
	for _, s := range rt.Shares {
		if s.Share["a"] > 0.6 {
			grown = true
		}
	}
	if !grown {
		t.Errorf("a's share never grew above 0.6 in %d samples", len(rt.Shares))
	}
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), prefix+"-") {
		t.Errorf("namespaces left:\n%s", out)
		_ = wan.Cleanup(prefix)
	}
}
