package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/weirhq/weir/pkg/adminapi"
	"github.com/weirhq/weir/pkg/adminclient"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/sharepolicy"
)

// policyWorkers is how many share policies the overview reads at once.
// The admin API has no endpoint that returns every rule's policy, so the
// overview asks GET /rate-limits/{rule_id}/shares of each global rule: one
// after the other, 2,000 rules took longer than a page may; all at once,
// one page would hold as many etcd reads in flight.
const policyWorkers = 8

// maxMarkerReason is how much of an invalid document's reason a marker
// quotes; the rule's page, and the marker's title, give more.
const maxMarkerReason = 160

// maxTitle bounds the text of a title attribute (the reason's fuller
// form, on hovering a marker).
const maxTitle = 2000

// overviewRow is one rule on the overview.
type overviewRow struct {
	Domain, ID, Scope string
	// Addressable: the admin API can address the rule (its id is valid),
	// so the row links to its page. Key is the etcd key to delete when
	// not.
	Addressable     bool
	Key             string
	Limit           string
	DCs             []adminapi.DCOverview
	Last, Recent    adminapi.Counts
	RejectRate      string
	Markers         []marker
	Global, Planned bool
	Disabled        bool
}

// marker is one setting or state shown beside a rule: Text, and Title,
// when not empty, the longer text it was cut from.
type marker struct {
	Text, Title string
	Bad         bool
}

// clip cuts s to at most n bytes, on a rune boundary, marking the cut.
func clip(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…", true
}

// reasonMarker is a marker that quotes an invalid document's reason,
// cut to maxMarkerReason.
func reasonMarker(prefix, reason string) marker {
	short, cut := clip(reason, maxMarkerReason)
	m := marker{Text: prefix + short, Bad: true}
	if cut {
		m.Text += " (the rule's page gives the whole reason)"
		m.Title, _ = clip(prefix+reason, maxTitle)
	}
	return m
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, s sess) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	p := c.base(s, "Overview", "overview")
	var problems []string
	ov, err := c.client(s, "").Overview(ctx)
	if err != nil {
		p.noteLive(err)
		if !p.Standby && !errors.Is(err, adminclient.ErrNotFound) {
			problems = append(problems, "the live figures could not be read: "+err.Error())
		}
		p.Error = ""
	}
	p.Refresh = refreshOf(ov.IntervalSeconds)
	byRule := map[[2]string]adminapi.RuleOverview{}
	domains := []string{c.cfg.DefaultDomain}
	for _, ro := range ov.Rules {
		byRule[[2]string{ro.Domain, ro.RuleID}] = ro
		if !slices.Contains(domains, ro.Domain) {
			domains = append(domains, ro.Domain)
		}
	}
	var rows []overviewRow
	var globals []int // indexes in rows of the global rules
	for _, d := range domains {
		list, err := c.client(s, d).RuleList(ctx)
		if err != nil {
			problems = append(problems, fmt.Sprintf("the rules of domain %s could not be listed, so none of them is shown: %v", d, err))
			continue
		}
		// A rule whose stored document is invalid is listed at its last
		// valid version (the one every process enforces), and marked.
		invalid := map[string]adminapi.InvalidRule{}
		for _, in := range list.Invalid {
			invalid[in.RuleID] = in
		}
		for _, ru := range list.Rules {
			row := overviewRow{Domain: d, ID: ru.ID, Scope: string(ru.Scope), Limit: limitText(ru), Global: ru.Scope == rule.ScopeGlobal, Disabled: !ru.Enabled}
			c.address(&row)
			if ro, ok := byRule[[2]string{d, ru.ID}]; ok {
				row.Planned, row.DCs = true, ro.DCs
				for _, dc := range ro.DCs {
					row.Last, row.Recent = row.Last.Add(dc.Last), row.Recent.Add(dc.Recent)
				}
				if row.Recent.Offered > 0 {
					row.RejectRate = fmt.Sprintf("%.1f%%", 100*float64(row.Recent.Rejected)/float64(row.Recent.Offered))
				}
			}
			if row.Global && !row.Planned && !p.Standby {
				row.Markers = append(row.Markers, marker{Text: "not planned (static shares)"})
			}
			if row.Disabled {
				row.Markers = append(row.Markers, marker{Text: "disabled"})
			}
			if in, ok := invalid[ru.ID]; ok {
				row.Markers = append(row.Markers, invalidMarker(in))
			}
			if row.Global {
				globals = append(globals, len(rows))
			}
			rows = append(rows, row)
		}
		for _, in := range list.Invalid {
			if !in.InForce {
				row := overviewRow{Domain: d, ID: in.RuleID}
				c.address(&row)
				row.Markers = []marker{reasonMarker("stored document invalid and no valid version kept: not enforced by processes started since: ", in.Error)}
				rows = append(rows, row)
			}
		}
	}
	// The settings are read from the leader (a standby that does not
	// forward has none to give).
	if !p.Standby && len(globals) > 0 {
		failed, first := c.policyMarkers(ctx, s, rows, globals)
		if failed > 0 {
			problems = append(problems, fmt.Sprintf("the share settings of %d of %d global rules could not be read, so their rows lack them: %v", failed, len(globals), first))
		}
	}
	if len(problems) > 0 {
		p.Error = "This overview is incomplete: " + strings.Join(problems, "; ")
	}
	p.Data = rows
	c.render(w, http.StatusOK, "overview", p)
}

// address fills in whether the admin API can address row's rule, and the
// etcd key to delete when it cannot.
func (c *Console) address(row *overviewRow) {
	row.Addressable = rule.ValidID(row.Domain) && rule.ValidID(row.ID)
	if !row.Addressable {
		row.Key = c.cfg.layout().Rule(row.Domain, row.ID)
	}
}

// policyMarkers reads the share policies of the rows at globals, with
// policyWorkers workers it starts and waits for, and puts each policy's
// markers first among its row's. It returns how many could not be read,
// and the first error. A rule deleted meanwhile is no failure.
func (c *Console) policyMarkers(ctx context.Context, s sess, rows []overviewRow, globals []int) (failed int, first error) {
	type result struct {
		i   int
		pol sharepolicy.Policy
		err error
	}
	jobs := make(chan int)
	results := make(chan result, len(globals))
	var wg sync.WaitGroup
	for range min(policyWorkers, len(globals)) {
		wg.Go(func() {
			for i := range jobs {
				if err := ctx.Err(); err != nil {
					results <- result{i: i, err: fmt.Errorf("get shares of rule %q: %w", rows[i].ID, err)}
					continue
				}
				sh, err := c.client(s, rows[i].Domain).Shares(ctx, rows[i].ID)
				results <- result{i: i, pol: sh.Policy(), err: err}
			}
		})
	}
	for _, i := range globals {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(results)
	for res := range results {
		switch {
		case res.err == nil:
			rows[res.i].Markers = append(markers(res.pol), rows[res.i].Markers...)
		case errors.Is(res.err, adminclient.ErrNotFound):
		default:
			failed++
			if first == nil {
				first = res.err
			}
		}
	}
	return failed, first
}

// invalidMarker says of a rule whose stored document is invalid, listed
// at its last valid version, where that version is kept: in its shadow,
// which every process reads, or only in the answering coordinator's
// memory, which processes started since the corruption lack until the
// leader puts it back.
func invalidMarker(in adminapi.InvalidRule) marker {
	if in.Kept == adminapi.KeptMemory {
		return reasonMarker("stored document and its last valid copy invalid, last valid version held in memory only (in force where already loaded; the leader restores the copy): ", in.Error)
	}
	return reasonMarker("stored document invalid, last valid version in force: ", in.Error)
}

// markers names a policy's settings, one per DC setting.
func markers(pol sharepolicy.Policy) []marker {
	var out []marker
	add := func(format string, args ...any) { out = append(out, marker{Text: fmt.Sprintf(format, args...)}) }
	for _, dc := range sortedKeys(pol.DCs) {
		d := pol.DCs[dc]
		switch {
		case d.Drained:
			add("%s drained", dc)
		case d.Pin != nil:
			add("%s pinned at %s", dc, pct(*d.Pin))
		}
		if d.Floor > 0 {
			add("%s floor %s", dc, pct(d.Floor))
		}
		if d.Ceiling > 0 {
			add("%s ceiling %s", dc, pct(d.Ceiling))
		}
	}
	return out
}
