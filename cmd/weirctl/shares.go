package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/pkg/adminclient"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/sharepolicy"
)

func (a *app) sharesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shares",
		Short: "Show a global rule's per-DC shares; pin, bound or drain a DC's share",
		Long: `shares shows a global rule's live per-DC demand and shares, and sets the
operator's policy of its shares: a pin (the DC's share whatever its
demand), a floor, a ceiling, or a drain (a share of 0). Precedence:
drained, then pinned, then floors, then ceilings, then demand.

Each setting command reads the rule's policy, changes one DC's setting and
writes the whole policy back, conditional on it being as read (If-Match);
if another operator changed it meanwhile, it reads it again and retries
once. SHARE is a fraction of the rule's limit, 0 to 1 (0.25) or a
percentage (25%).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return usagef("missing a subcommand: get, pin, unpin, floor, ceiling or drain")
		},
	}
	cmd.AddCommand(a.sharesGetCommand())
	cmd.AddCommand(a.shareSetting("pin RULE_ID DC SHARE", "Pin a DC's share: it gets SHARE whatever its demand",
		func(p *sharepolicy.DCPolicy, v float64) string {
			p.Pin = &v
			return "pinned at " + percent(v)
		}))
	cmd.AddCommand(a.shareSetting("unpin RULE_ID DC", "Remove a DC's pin: its share follows its demand again",
		func(p *sharepolicy.DCPolicy, _ float64) string {
			p.Pin = nil
			return "unpinned"
		}))
	cmd.AddCommand(a.shareSetting("floor RULE_ID DC SHARE", "Set the share a DC keeps whatever its demand (0 removes it)",
		func(p *sharepolicy.DCPolicy, v float64) string {
			p.Floor = v
			if v == 0 {
				return "floor removed"
			}
			return "floor at " + percent(v)
		}))
	cmd.AddCommand(a.shareSetting("ceiling RULE_ID DC SHARE", "Cap a DC's share (0 removes the cap)",
		func(p *sharepolicy.DCPolicy, v float64) string {
			p.Ceiling = v
			if v == 0 {
				return "ceiling removed"
			}
			return "ceiling at " + percent(v)
		}))
	var undo bool
	drain := a.shareSetting("drain RULE_ID DC", "Give a DC a share of 0 (--undo gives it back)",
		func(p *sharepolicy.DCPolicy, _ float64) string {
			p.Drained = !undo
			if undo {
				return "no longer drained"
			}
			return "drained"
		})
	drain.Flags().BoolVar(&undo, "undo", false, "stop draining the DC")
	cmd.AddCommand(drain)
	return cmd
}

func (a *app) sharesGetCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "get RULE_ID",
		Short:   "Show a global rule's per-DC demand, shares and settings",
		Example: `  weirctl shares get search-per-region`,
		Args:    args(false, "RULE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			sh, err := c.Shares(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.json() {
				return writeJSON(a.env.stdout, sh)
			}
			fmt.Fprintf(a.env.stdout, "rule %s, etag %s\n", sh.RuleID, orDash(sh.ETag))
			t := newTable(a.env.stdout, "DC", "DEMAND", "TARGET", "SHARE", "ADMITTED", "PIN", "FLOOR", "CEILING", "DRAINED")
			for _, d := range sh.DCs {
				pin := "-"
				if d.Pin != nil {
					pin = percent(*d.Pin)
				}
				t.row(d.DC, percent(d.Demand), percent(d.Target), percent(d.Share), percent(d.Admitted),
					pin, setting(d.Floor), setting(d.Ceiling), yesNo(d.Drained))
			}
			return t.flush()
		},
	}
}

// shareSetting returns a command that changes one setting of one DC with
// set, which returns what it did, for people to read. use names the
// arguments; a third is the share given to set.
func (a *app) shareSetting(use, short string, set func(p *sharepolicy.DCPolicy, share float64) string) *cobra.Command {
	names := strings.Fields(use)[1:]
	name := strings.Fields(use)[0]
	return &cobra.Command{
		Use:     use,
		Short:   short,
		Example: "  weirctl shares " + strings.NewReplacer("RULE_ID", "search-per-region", "DC", "us-east", "SHARE", "60%").Replace(use),
		Args:    args(false, names...),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, dc := args[0], args[1]
			if err := rule.CheckDC(dc); err != nil {
				return usagef("DC %q: %v", dc, err)
			}
			var share float64
			if len(args) > 2 {
				var err error
				if share, err = parseShare(args[2]); err != nil {
					return usageError{err}
				}
			}
			return a.changeShares(cmd.Context(), id, dc, name, func(p *sharepolicy.DCPolicy) string { return set(p, share) })
		},
	}
}

// changeShares reads the policy of rule id, changes dc's settings with
// change and writes the policy back if it changed, conditional on the
// ETag read; on ErrPrecondition it starts again once.
func (a *app) changeShares(ctx context.Context, id, dc, verb string, change func(*sharepolicy.DCPolicy) string) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		sh, err := c.Shares(ctx, id)
		if err != nil {
			return err
		}
		var known []string
		for _, d := range sh.DCs {
			known = append(known, d.DC)
		}
		if len(known) > 0 && !slices.Contains(known, dc) {
			return fmt.Errorf("%s: rule %q has no DC %q (its DCs: %s)", verb, id, dc, strings.Join(known, ", "))
		}
		p := sh.Policy()
		before := p.DCs[dc]
		after := before
		did := change(&after)
		if samePolicy(before, after) {
			if a.json() {
				return writeJSON(a.env.stdout, p)
			}
			fmt.Fprintf(a.env.stdout, "DC %s of rule %s: already %s; nothing to change\n", dc, id, did)
			return printPolicy(a, known, p)
		}
		if after == (sharepolicy.DCPolicy{}) {
			delete(p.DCs, dc)
		} else {
			p.DCs[dc] = after
		}
		stored, err := c.SetShares(ctx, id, p, sh.ETag)
		if errors.Is(err, adminclient.ErrPrecondition) && attempt == 1 {
			continue // another operator wrote meanwhile: read their policy and apply the change to it
		}
		if err != nil {
			return err
		}
		if a.json() {
			return writeJSON(a.env.stdout, stored)
		}
		fmt.Fprintf(a.env.stdout, "DC %s of rule %s: %s\n", dc, id, did)
		return printPolicy(a, known, stored)
	}
}

func samePolicy(x, y sharepolicy.DCPolicy) bool {
	samePin := (x.Pin == nil) == (y.Pin == nil) && (x.Pin == nil || *x.Pin == *y.Pin)
	return samePin && x.Floor == y.Floor && x.Ceiling == y.Ceiling && x.Drained == y.Drained
}

// printPolicy writes the settings of the DCs dcs and of any other DC p
// names.
func printPolicy(a *app, dcs []string, p sharepolicy.Policy) error {
	for dc := range p.DCs {
		if !slices.Contains(dcs, dc) {
			dcs = append(dcs, dc)
		}
	}
	t := newTable(a.env.stdout, "DC", "PIN", "FLOOR", "CEILING", "DRAINED")
	for _, dc := range dcs {
		s := p.DCs[dc]
		pin := "-"
		if s.Pin != nil {
			pin = percent(*s.Pin)
		}
		t.row(dc, pin, setting(s.Floor), setting(s.Ceiling), yesNo(s.Drained))
	}
	return t.flush()
}

// parseShare reads a share: a fraction from 0 to 1 ("0.25") or a
// percentage ("25%").
func parseShare(s string) (float64, error) {
	num, pct := strings.CutSuffix(strings.TrimSpace(s), "%")
	v, err := strconv.ParseFloat(num, 64)
	if err == nil && pct {
		v /= 100
	}
	if err != nil || math.IsNaN(v) || v < 0 || v > 1 {
		return 0, fmt.Errorf("share %q: want a fraction from 0 to 1 (0.25) or a percentage (25%%)", s)
	}
	return v, nil
}

// setting shows a floor or ceiling, "-" for none.
func setting(v float64) string {
	if v == 0 {
		return "-"
	}
	return percent(v)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
