package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/pkg/adminapi"
)

func (a *app) statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status RULE_ID KEY",
		Short: "Show a key's remaining quota in every DC",
		Long: `status shows a key's limit, remaining quota and reset time in every DC,
consuming nothing. For a composite key, KEY is the values in key_type
order joined by "|" (with "|" and "\" escaped by "\").`,
		Example: `  weirctl status login john_doe
  weirctl status tenant-user 'acme|42' -o json`,
		Args: args(false, "RULE_ID", "KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ks, err := c.KeyStatus(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			if a.json() {
				return writeJSON(a.env.stdout, ks)
			}
			fmt.Fprintf(a.env.stdout, "rule %s, key %s\n", ks.RuleID, ks.Key)
			t := newTable(a.env.stdout, "DC", "LIMIT", "REMAINING", "USED", "WINDOW", "RESET")
			var limit, remaining int64
			failed := false
			for _, d := range ks.DCs {
				if d.Error != "" {
					t.row(d.DC, "-", "-", "-", "-", "unavailable: "+d.Error)
					failed = true
					continue
				}
				limit += d.Limit
				remaining += d.Remaining
				t.row(d.DC, count(d.Limit), count(d.Remaining), ratio(d.Limit-d.Remaining, d.Limit), window(d.WindowSeconds), timestamp(d.ResetTime))
			}
			if len(ks.DCs) > 1 && !failed { // a total of some DCs would mislead
				t.row("all", count(limit), count(remaining), ratio(limit-remaining, limit), "", "")
			}
			return t.flush()
		},
	}
}

func (a *app) topCommand() *cobra.Command {
	var n int
	cmd := &cobra.Command{
		Use:   "top RULE_ID",
		Short: "Show a rule's hot keys, busiest first, and its counts per DC",
		Long: `top shows a rule's requests and rejections, its hot keys sorted by
requests (then rejections), and its counts in each DC. With -o json it
prints the API's statistics, hot keys sorted and cut to --limit.`,
		Example: `  weirctl top api-per-ip --limit 10`,
		Args:    args(false, "RULE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 0 {
				return usagef("--limit %d: want 0 (all) or more", n)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			st, err := c.Stats(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			slices.SortStableFunc(st.HotKeys, func(x, y adminapi.HotKey) int {
				return cmp.Or(cmp.Compare(y.RequestCount, x.RequestCount), cmp.Compare(y.RejectionCount, x.RejectionCount), cmp.Compare(x.Key, y.Key))
			})
			if n > 0 && len(st.HotKeys) > n {
				st.HotKeys = st.HotKeys[:n]
			}
			if a.json() {
				return writeJSON(a.env.stdout, st)
			}
			w := a.env.stdout
			fmt.Fprintf(w, "rule %s: %s requests, %s rejected (%s), as of %s\n", st.RuleID, count(st.TotalRequests),
				count(st.RejectedRequests), percent(st.RejectionRate), timestamp(st.LastUpdated))
			if len(st.HotKeys) == 0 {
				fmt.Fprintln(w, "no hot keys")
			} else {
				t := newTable(w, "KEY", "REQUESTS", "OF ALL", "REJECTED", "REJECTED%")
				for _, k := range st.HotKeys {
					t.row(k.Key, count(k.RequestCount), ratio(k.RequestCount, st.TotalRequests), count(k.RejectionCount), ratio(k.RejectionCount, k.RequestCount))
				}
				if err := t.flush(); err != nil {
					return err
				}
			}
			if len(st.DCs) > 0 {
				fmt.Fprintln(w)
				t := newTable(w, "DC", "REQUESTS", "REJECTED", "REJECTED%")
				for _, dc := range slices.Sorted(maps.Keys(st.DCs)) {
					d := st.DCs[dc]
					t.row(dc, count(d.TotalRequests), count(d.RejectedRequests), ratio(d.RejectedRequests, d.TotalRequests))
				}
				return t.flush()
			}
			return nil
		},
	}
	cmd.Flags().IntVarP(&n, "limit", "n", 0, "show at most N keys (0: all the server reports)")
	return cmd
}
