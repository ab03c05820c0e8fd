package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/pkg/adminclient"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/rulefile"
)

func (a *app) applyCommand() *cobra.Command {
	var file string
	var dryRun, prune bool
	cmd := &cobra.Command{
		Use:   "apply -f FILE [--dry-run] [--prune]",
		Short: "Make the server's rules of a domain those of a rule file",
		Long: `apply reads a rule file (YAML or JSON: a domain and its rules, see
docs/rules.md), validates it, and compares each rule with the server's:
it creates the rules the server lacks and updates those that differ,
printing each change as "field: old → new". An update is conditional on
the rule being as it was read (If-Match); if it changed meanwhile, apply
reports it and goes on with the other rules.

With --dry-run it only prints the changes. With --prune it also deletes
the server's rules of the domain that the file does not hold.

Each rule is written on its own: apply is not one transaction. If a
rule fails, or apply is interrupted, the rules already written stay
written; running apply again finishes the job.`,
		Example: `  weirctl apply -f rules.yaml --dry-run
  weirctl apply -f rules.yaml --prune
  cat rules.json | weirctl apply -f -`,
		Args: args(false),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usagef("missing -f FILE, the rule file to apply")
			}
			return a.apply(cmd.Context(), file, dryRun, prune)
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "rule file, YAML or JSON; - reads standard input")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the changes without making them")
	cmd.Flags().BoolVar(&prune, "prune", false, "delete the domain's rules that the file does not hold")
	return cmd
}

// applyResult is what apply did, or would do, to one rule.
type applyResult struct {
	RuleID string `json:"rule_id"`
	// Action is create, update, unchanged or delete.
	Action  string   `json:"action"`
	Changes []change `json:"changes,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// applyReport is the JSON output of apply.
type applyReport struct {
	Domain string        `json:"domain"`
	DryRun bool          `json:"dry_run"`
	Rules  []applyResult `json:"rules"`
	// NotInFile are the server's rules of the domain that the file does
	// not hold, kept because --prune was not given.
	NotInFile []string `json:"not_in_file,omitempty"`
}

func (a *app) apply(ctx context.Context, file string, dryRun, prune bool) error {
	set, err := a.loadRules(file)
	if err != nil {
		return err
	}
	if a.domain != "" && a.domain != set.Domain {
		return usagef("%s %q, but the file's domain is %q", a.domainFrom, a.domain, set.Domain)
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	c = c.WithDomain(set.Domain)
	current, err := c.ListRules(ctx)
	if err != nil {
		return err
	}
	onServer := make(map[string]rule.Rule, len(current))
	for _, r := range current {
		if r.Domain == "" || r.Domain == set.Domain { // never prune another domain's rules
			onServer[r.ID] = r
		}
	}

	rep := applyReport{Domain: set.Domain, DryRun: dryRun, Rules: []applyResult{}}
	inFile := make(map[string]bool, len(set.Rules))
	failed := 0
	record := func(res applyResult, err error) {
		if err != nil {
			res.Error = err.Error()
			failed++
			fmt.Fprintln(a.env.stderr, "weirctl:", indent(err.Error()))
		}
		rep.Rules = append(rep.Rules, res)
		if !a.json() {
			printResult(a.env.stdout, res, dryRun)
		}
	}
	for _, r := range set.Rules {
		inFile[r.ID] = true
	}
	for _, r := range set.Rules {
		if ctx.Err() != nil {
			break
		}
		cur, ok := onServer[r.ID]
		record(applyRule(ctx, c, r, cur, ok, dryRun))
	}
	for _, id := range slices.Sorted(maps.Keys(onServer)) {
		switch {
		case ctx.Err() != nil:
		case inFile[id]:
		case !prune:
			rep.NotInFile = append(rep.NotInFile, id)
		case dryRun:
			record(applyResult{RuleID: id, Action: "delete"}, nil)
		default:
			_, err := c.DeleteRule(ctx, id)
			record(applyResult{RuleID: id, Action: "delete"}, err)
		}
	}

	if a.json() {
		if err := writeJSON(a.env.stdout, rep); err != nil {
			return err
		}
	} else {
		printSummary(a.env.stdout, rep)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("apply %s: interrupted (%w); run it again to finish", fileName(file), err)
	}
	if failed > 0 {
		return fmt.Errorf("apply %s: %d of %d changes failed", fileName(file), failed, len(rep.Rules))
	}
	return nil
}

// applyRule creates r, or updates the server's rule cur (when exists) to
// r, or with dryRun only says what it would do.
func applyRule(ctx context.Context, c *adminclient.Client, r, cur rule.Rule, exists, dryRun bool) (applyResult, error) {
	res := applyResult{RuleID: r.ID, Action: "create"}
	if !exists {
		cs, err := diffRules(nil, &r)
		if err != nil {
			return res, err
		}
		res.Changes = cs
		if !dryRun {
			_, err = c.CreateRule(ctx, r)
		}
		return res, err
	}
	res.Action = "update"
	cs, err := diffRules(&cur, &r)
	if err != nil || len(cs) == 0 {
		res.Action = "unchanged"
		return res, err
	}
	res.Changes = cs
	if dryRun {
		return res, nil
	}
	// The list gave no ETag: read the rule again for one, and write only
	// if it is still as read.
	cur, etag, err := c.GetRule(ctx, r.ID)
	if err != nil {
		return res, err
	}
	if res.Changes, err = diffRules(&cur, &r); err != nil || len(res.Changes) == 0 {
		res.Action = "unchanged"
		return res, err
	}
	fields := make(map[string]any, len(res.Changes))
	for _, ch := range res.Changes {
		if ch.New == nil {
			fields[ch.Field] = nil // removed: takes its default
		} else {
			fields[ch.Field] = ch.New
		}
	}
	_, err = c.UpdateRule(ctx, r.ID, fields, etag)
	if errors.Is(err, adminclient.ErrPrecondition) {
		err = fmt.Errorf("%w\n  the rule changed on the server while it was applied; run apply again", err)
	}
	return res, err
}

// diffRules returns the fields of want that differ from got (nil: no rule
// yet), leaving out the bookkeeping fields.
func diffRules(got, want *rule.Rule) ([]change, error) {
	var old []byte
	if got != nil {
		var err error
		if old, err = json.Marshal(got); err != nil {
			return nil, fmt.Errorf("encode rule %q: %w", got.ID, err)
		}
	}
	b, err := json.Marshal(want)
	if err != nil {
		return nil, fmt.Errorf("encode rule %q: %w", want.ID, err)
	}
	return diffJSON(old, b, bookkeeping)
}

// loadRules reads and validates a rule file; "-" is standard input.
func (a *app) loadRules(file string) (rule.Set, error) {
	if file != "-" {
		return rulefile.Load(file)
	}
	data, err := io.ReadAll(io.LimitReader(a.env.stdin, rule.MaxDocumentSize+1))
	if err != nil {
		return rule.Set{}, fmt.Errorf("read standard input: %w", err)
	}
	set, err := rulefile.Parse(data)
	if err != nil {
		return rule.Set{}, fmt.Errorf("standard input: %w", err)
	}
	return set, nil
}

func fileName(file string) string {
	if file == "-" {
		return "standard input"
	}
	return file
}

var (
	resultMarks = map[string]string{"create": "+", "update": "~", "unchanged": "=", "delete": "-"}
	pastTense   = map[string]string{"create": "created", "update": "updated", "unchanged": "unchanged", "delete": "deleted"}
	futureTense = map[string]string{"create": "would create", "update": "would update", "unchanged": "unchanged", "delete": "would delete"}
)

// printResult writes one rule's result: a line with its mark, id and
// action, then its changes.
func printResult(w io.Writer, res applyResult, dryRun bool) {
	verb := pastTense[res.Action]
	if dryRun {
		verb = futureTense[res.Action]
	}
	if res.Error != "" {
		verb = "failed to " + res.Action
	}
	fmt.Fprintf(w, "%s %s: %s\n", resultMarks[res.Action], res.RuleID, verb)
	for _, c := range res.Changes {
		if res.Action == "create" {
			fmt.Fprintf(w, "    %s: %s\n", c.Field, showValue(c.New))
		} else {
			fmt.Fprintf(w, "    %s\n", c)
		}
	}
}

// printSummary writes the counts of each action, and the rules kept
// without --prune.
func printSummary(w io.Writer, rep applyReport) {
	n := map[string]int{}
	failed := 0
	for _, r := range rep.Rules {
		if r.Error != "" {
			failed++
			continue
		}
		n[r.Action]++
	}
	var parts []string
	for _, act := range []string{"create", "update", "unchanged", "delete"} {
		if n[act] == 0 && act != "unchanged" {
			continue
		}
		verb := pastTense[act]
		if rep.DryRun && act != "unchanged" {
			verb = "to " + act
		}
		parts = append(parts, fmt.Sprintf("%d %s", n[act], verb))
	}
	if failed > 0 {
		parts = append(parts, fmt.Sprintf("%d failed", failed))
	}
	fmt.Fprintf(w, "domain %s: %s\n", rep.Domain, strings.Join(parts, ", "))
	if len(rep.NotInFile) > 0 {
		fmt.Fprintf(w, "not in the file, kept (--prune deletes them): %s\n", strings.Join(rep.NotInFile, ", "))
	}
	if rep.DryRun {
		fmt.Fprintln(w, "dry run: nothing was changed")
	}
}
