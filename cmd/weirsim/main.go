// Command weirsim plays a scenario (deploy/multidc/scenarios, format in
// docs/simulation.md) against a whole multi-DC Weir run in this process —
// real limiters, one redis-server per DC when installed, embedded etcd, an
// in-process Kafka-protocol broker, two coordinators — then judges it
// against SPEC §7's accuracy goals and writes a report: Markdown plus SVG
// charts. It exits 1 when a goal is missed, 2 on a usage error.
//
// With --wan (root only) each DC's limiter runs as a process of its own in
// a network namespace behind an emulated WAN (package wan): weirsim starts
// its own executable for them, with the hidden first argument
// sim.NodeArg. --wan-cleanup removes what a killed run left behind.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/weirhq/weir/internal/dc/limiterd"
	"github.com/weirhq/weir/internal/platform/envflag"
	"github.com/weirhq/weir/internal/platform/logflag"
	"github.com/weirhq/weir/internal/sim"
	"github.com/weirhq/weir/internal/sim/scenario"
	"github.com/weirhq/weir/internal/sim/simreport"
	"github.com/weirhq/weir/internal/sim/wan"
)

// wanPrefix names the namespaces and the link of weirsim's WAN.
const wanPrefix = "weir"

func main() {
	if len(os.Args) > 1 && os.Args[1] == sim.NodeArg {
		os.Exit(runNode(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// runNode is node mode: one DC's limiter, which weirsim --wan starts in
// the DC's namespace. It stops when its standard input closes or on
// SIGTERM.
func runNode(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "weirsim: node mode takes one argument, the node's JSON")
		return 2
	}
	n, err := sim.ParseNode(args[0])
	if err != nil {
		fmt.Fprintln(stderr, "weirsim:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(stderr, nil))
	limiterd.RouteRedisLog(log)
	if err := sim.RunNode(ctx, n, log, stdin, stdout); err != nil {
		fmt.Fprintln(stderr, "weirsim:", err)
		return 1
	}
	return 0
}

// parseDelays reads --wan-delays: comma-separated A/B=DURATION, A and B
// DCs or "core".
func parseDelays(s string) (map[wan.Pair]time.Duration, error) {
	delays := map[wan.Pair]time.Duration{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		pair, dur, ok := strings.Cut(item, "=")
		a, b, ok2 := strings.Cut(pair, "/")
		if !ok || !ok2 {
			return nil, fmt.Errorf("--wan-delays: %q: want A/B=DURATION", item)
		}
		d, err := time.ParseDuration(dur)
		if err != nil {
			return nil, fmt.Errorf("--wan-delays: %q: %w", item, err)
		}
		delays[wan.Pair{From: a, To: b}] = d
	}
	return delays, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("weirsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("scenario", "", "scenario file (YAML)")
	out := fs.String("out", "", "report directory (default report/<scenario name>)")
	live := fs.Bool("live", false, "print a table per second while the scenario plays")
	consoleAddr := fs.String("console", "", "serve the operators' console (and admin API) of the first coordinator at this address, e.g. 127.0.0.1:0, and print its URL and tokens")
	memory := fs.Bool("memory", false, "keep every DC's state in memory even when redis-server is installed")
	storeTimeout := fs.Duration("store-timeout", sim.DefaultStoreTimeout, "the limiters' Redis call timeout (production's default is 20ms; longer here, where every DC shares one machine)")
	logs := logflag.Register(fs)
	logFile := fs.String("log-file", "", "write the components' logs here (default: discarded)")
	wanOn := fs.Bool("wan", false, "run each DC in its own network namespace behind an emulated WAN (root only)")
	wanDelay := fs.Duration("wan-delay", 40*time.Millisecond, "with --wan: one-way delay between any two DCs, and between a DC and the control plane")
	wanDelays := fs.String("wan-delays", "", "with --wan: one-way delays of some pairs, e.g. us-east/eu-west=70ms,ap-south/core=90ms")
	wanCleanup := fs.Bool("wan-cleanup", false, "remove the namespaces and link a killed --wan run left behind, and exit")
	fs.Usage = envflag.Usage(fs, "WEIR", "usage: weirsim --scenario FILE [--out DIR] [--live]")
	if err := envflag.Parse(fs, "WEIR", args, nil); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *wanCleanup {
		if err := wan.Cleanup(wanPrefix); err != nil {
			fmt.Fprintln(stderr, "weirsim:", err)
			return 1
		}
		return 0
	}
	if *path == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "weirsim: --scenario FILE is required, and nothing else")
		return 2
	}
	sc, err := scenario.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, "weirsim:", err)
		return 2
	}
	cfg := sim.FromScenario(sc)
	cfg.Memory = *memory
	cfg.StoreTimeout = *storeTimeout
	if *wanOn {
		delays, err := parseDelays(*wanDelays)
		if err != nil {
			fmt.Fprintln(stderr, "weirsim:", err)
			return 2
		}
		cfg.WAN = &wan.Config{Prefix: wanPrefix, Delay: *wanDelay, Delays: delays}
		if err := wan.Supported(); err != nil {
			fmt.Fprintln(stderr, "weirsim: --wan:", err)
			return 2
		}
	}
	if *live {
		cfg.Live = stdout
	}
	if *consoleAddr != "" {
		cfg.Console = &sim.ConsoleConfig{Addr: *consoleAddr, Ready: func(url string, t sim.ConsoleTokens) {
			fmt.Fprintf(stdout, "weirsim: console at %s — sign in with %s (read-write) or %s (read-only)\n", url, t.ReadWrite, t.ReadOnly)
		}}
	}
	if *logFile != "" {
		f, err := os.Create(*logFile)
		if err != nil {
			fmt.Fprintln(stderr, "weirsim:", err)
			return 2
		}
		defer f.Close()
		if cfg.Logger, err = logs.Logger(f); err != nil {
			fmt.Fprintln(stderr, "weirsim:", err)
			return 2
		}
		limiterd.RouteRedisLog(cfg.Logger)
	}
	dir := *out
	if dir == "" {
		dir = filepath.Join("report", sc.Name)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stdout, "weirsim: playing %s (%v, DCs %v)\n", sc.Name, sc.Duration, sc.DCs)
	trace, err := sim.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "weirsim:", err)
		if errors.Is(err, wan.ErrExists) {
			fmt.Fprintln(stderr, "weirsim: weirsim --wan-cleanup removes what an earlier run left behind")
		}
		return 1
	}
	rep := simreport.Analyze(trace, sc.Goals)
	if _, err := simreport.WriteTrace(dir, trace); err != nil {
		fmt.Fprintln(stderr, "weirsim:", err)
		return 1
	}
	md, err := simreport.WriteReport(dir, rep)
	if err != nil {
		fmt.Fprintln(stderr, "weirsim:", err)
		return 1
	}
	for _, r := range rep.Rules {
		for _, res := range r.Results {
			mark := "ok  "
			if !res.Passed {
				mark = "MISS"
			}
			fmt.Fprintf(stdout, "  %s %-8s %-22s %s\n", mark, r.RuleID, res.Goal, res.Reason)
		}
	}
	fmt.Fprintf(stdout, "weirsim: report written to %s\n", md)
	if !rep.Passed() {
		fmt.Fprintln(stdout, "weirsim: goals missed")
		return 1
	}
	return 0
}
