package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/pkg/adminapi"
	"github.com/weirhq/weir/pkg/rule"
)

func (a *app) getCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "get [RULE_ID]",
		Short: "List the rules (of --domain, or of every domain), or show one",
		Example: `  weirctl get --domain shop
  weirctl get api-per-ip -o json`,
		Args: args(true, "RULE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return a.listRules(cmd.Context())
			}
			return a.getRule(cmd.Context(), args[0])
		},
	}
}

func (a *app) listRules(ctx context.Context) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	list, err := c.RuleList(ctx)
	if err != nil {
		return err
	}
	rules := list.Rules
	if a.json() {
		if list.Rules == nil {
			list.Rules = []rule.Rule{}
		}
		return writeJSON(a.env.stdout, list)
	}
	// Corrupt documents first, where an operator looks.
	for _, bad := range list.Invalid {
		what := "NOT ENFORCED by processes started since: no valid version kept"
		switch {
		case bad.InForce && bad.Kept == adminapi.KeptMemory:
			what = "in force where held in memory: its last valid version (updated_at " + bad.UpdatedAt.Format(time.RFC3339) + "), not in etcd until the leader restores its shadow"
		case bad.InForce:
			what = "in force: its last valid version (updated_at " + bad.UpdatedAt.Format(time.RFC3339) + ")"
		}
		fmt.Fprintf(a.env.stdout, "WARNING: rule %s in domain %s: stored document invalid (%s); %s; fix it (weirctl apply or update) or delete it\n",
			bad.RuleID, bad.Domain, oneLine(bad.Error), what)
	}
	if len(rules) == 0 {
		fmt.Fprintln(a.env.stdout, "no rules")
		return nil
	}
	// Without --domain the server may list every domain's rules.
	header := []string{"RULE_ID", "PATH", "METHODS", "KEY", "LIMIT", "WINDOW", "ALGORITHM", "SCOPE", "STATE"}
	if a.domain == "" {
		header = append([]string{"DOMAIN"}, header...)
	}
	t := newTable(a.env.stdout, header...)
	for _, r := range rules {
		limit := count(r.Limit)
		if r.Unlimited {
			limit = "unlimited"
		}
		win := "-"
		switch {
		case r.Calendar != "":
			win = r.Calendar // calendar months: 28 to 31 days, not WindowSeconds
		case r.WindowSeconds > 0:
			win = window(r.WindowSeconds)
		}
		cells := []string{r.ID, orDash(r.PathPattern), orDash(strings.Join(r.Methods, ",")), orDash(strings.Join(r.KeyType, ",")),
			limit, win, r.Algorithm.String(), string(r.Scope), state(r)}
		if a.domain == "" {
			cells = append([]string{orDash(r.Domain)}, cells...)
		}
		t.row(cells...)
	}
	return t.flush()
}

func state(r rule.Rule) string {
	switch {
	case !r.Enabled:
		return "disabled"
	case r.Shadow:
		return "shadow"
	}
	return "enabled"
}

func (a *app) getRule(ctx context.Context, id string) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	sr, err := c.GetStoredRule(ctx, id)
	if err != nil {
		return err
	}
	r, etag := sr.Rule, sr.ETag
	if a.json() {
		if sr.Invalid != "" {
			fmt.Fprintf(a.env.stderr, "weirctl: WARNING: the stored document of rule %s is invalid (%s); shown: its last valid version, in force\n", id, sr.Invalid)
		}
		return writeJSON(a.env.stdout, r)
	}
	if sr.Invalid != "" {
		fmt.Fprintf(a.env.stdout, "WARNING: the stored document of rule %s is invalid (%s); shown: its last valid version, in force until it is fixed or deleted\n", id, sr.Invalid)
	}
	doc, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode rule %q: %w", id, err)
	}
	keys, vals, err := objectFields(doc)
	if err != nil {
		return fmt.Errorf("encode rule %q: %w", id, err)
	}
	t := newTable(a.env.stdout, "FIELD", "VALUE")
	for _, k := range keys {
		t.row(k, cell(vals[k]))
	}
	if etag != "" {
		t.row("etag", etag)
	}
	return t.flush()
}

// oneLine joins the lines of s with "; ".
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ; ")), " ")
}

// cell shows a JSON value in a table: strings without their quotes,
// anything else as compact JSON.
func cell(v json.RawMessage) string {
	if len(v) > 0 && v[0] == '"' {
		if s, err := strconv.Unquote(string(v)); err == nil {
			return s
		}
	}
	return showValue(v)
}

func (a *app) deleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "delete RULE_ID",
		Short:   "Delete a rule",
		Example: `  weirctl delete old-rule --domain shop`,
		Args:    args(false, "RULE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			msg, err := c.DeleteRule(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.json() {
				return writeJSON(a.env.stdout, map[string]string{"message": msg})
			}
			if msg == "" {
				msg = fmt.Sprintf("Rate limit rule '%s' deleted.", args[0])
			}
			_, err = fmt.Fprintln(a.env.stdout, msg)
			return err
		},
	}
}
