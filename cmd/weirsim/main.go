// Command weirsim plays a scenario (deploy/multidc/scenarios, format in
// docs/simulation.md) against a whole multi-DC Weir run in this process —
// real limiters, one redis-server per DC when installed, embedded etcd, an
// in-process Kafka-protocol broker, two coordinators — then judges it
// against SPEC §7's accuracy goals and writes a report: Markdown plus SVG
// charts. It exits 1 when a goal is missed, 2 on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/weirhq/weir/pkg/envflag"
	"github.com/weirhq/weir/pkg/logflag"
	"github.com/weirhq/weir/pkg/scenario"
	"github.com/weirhq/weir/pkg/sim"
	"github.com/weirhq/weir/pkg/simreport"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("weirsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("scenario", "", "scenario file (YAML)")
	out := fs.String("out", "", "report directory (default report/<scenario name>)")
	live := fs.Bool("live", false, "print a table per second while the scenario plays")
	memory := fs.Bool("memory", false, "keep every DC's state in memory even when redis-server is installed")
	logs := logflag.Register(fs)
	logFile := fs.String("log-file", "", "write the components' logs here (default: discarded)")
	fs.Usage = envflag.Usage(fs, "WEIR", "usage: weirsim --scenario FILE [--out DIR] [--live]")
	if err := envflag.Parse(fs, "WEIR", args, nil); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
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
	if *live {
		cfg.Live = stdout
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
