package main

import (
	"github.com/spf13/cobra"

	"github.com/weirhq/weir/pkg/adminapi"
	"github.com/weirhq/weir/pkg/adminclient"
)

func (a *app) auditCommand() *cobra.Command {
	var q adminclient.AuditQuery
	cmd := &cobra.Command{
		Use:   "audit [--rule RULE_ID] [--limit N]",
		Short: "Show the latest changes made through the admin API",
		Long: `audit shows who changed what, latest first: rules created, updated and
deleted, and share policies set, with the fields each change touched.`,
		Example: `  weirctl audit --rule api-per-ip --limit 5`,
		Args:    args(false),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q.Limit < 1 {
				return usagef("--limit %d: want 1 or more", q.Limit)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			recs, err := c.Audit(cmd.Context(), q)
			if err != nil {
				return err
			}
			if a.json() {
				if recs == nil {
					recs = []adminapi.AuditRecord{}
				}
				return writeJSON(a.env.stdout, map[string]any{"records": recs})
			}
			t := newTable(a.env.stdout, "TIME", "ACTOR", "ACTION", "DOMAIN", "RULE_ID", "CHANGES")
			for _, r := range recs {
				t.row(timestamp(r.Time), orDash(r.Actor), orDash(r.Action), orDash(r.Domain), orDash(r.RuleID), changes(r))
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVar(&q.RuleID, "rule", "", "only the changes of this rule")
	cmd.Flags().IntVar(&q.Limit, "limit", 20, "the most records to show")
	return cmd
}

// changes summarises what a record changed: the fields that differ, or
// that a rule was created or deleted.
func changes(r adminapi.AuditRecord) string {
	switch r.Action {
	case "create":
		return "(new rule)"
	case "delete":
		return "(deleted)"
	}
	cs, err := diffDeep(r.Before, r.After, bookkeeping)
	switch {
	case err != nil:
		return "?"
	case len(cs) == 0:
		return "-"
	}
	return truncate(summary(cs), 120)
}
