package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/weirhq/weir/pkg/adminapi"
	"github.com/weirhq/weir/pkg/adminclient"
	"github.com/weirhq/weir/pkg/allocate"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/sharepolicy"
)

// page is what every template gets.
type page struct {
	Title   string
	Nav     string // "overview", "cluster", or "" (a rule's pages)
	Who     string
	RO      bool
	CSRF    string
	Refresh float64 // seconds; 0: no refresh
	Next    string
	Error   string
	// Leader is the leader's console when this coordinator does not lead
	// and the admin API named it; Standby is true when it does not lead.
	Leader  string
	Standby bool
	// PeerRefused is true when the leader's advertised URL is not among
	// the coordinator's --peer-urls (Config.PeerAllowed): Leader is then
	// empty, and the page says why.
	PeerRefused bool
	// Warnings are the admin API's warnings (adminapi.HeaderWarning) of
	// the session's writes, shown once: those of this request's write, and
	// those kept in the session for its next page (render adds them).
	Warnings []string
	Data     any

	// notices is the id of the session whose kept warnings render takes
	// and shows; "" for none (sign-in, and the pages' own refreshes).
	notices string
	// linked is Console.linked, for noteLive.
	linked func(adminURL string) bool
}

func (c *Console) base(s sess, title, nav string) page {
	p := page{Title: title, Nav: nav, Who: s.who.Name, RO: s.who.ReadOnly, CSRF: s.csrf, linked: c.linked}
	if !s.refresh {
		p.notices = s.id
	}
	return p
}

// noteLive records in p what an error of a live endpoint says: a standby
// (and where the leader is), or a failure. Only the admin API's explicit
// answer that this coordinator does not lead makes a standby; any other
// error, a deadline or etcd unavailable included (also 503), is shown as
// one.
//
// The leader's URL comes from its election key in etcd; it is linked only
// when p.linked allows it (Config.PeerAllowed). A URL the admin API left
// out because it is not among --peer-urls, or one the API names but
// p.linked refuses, makes PeerRefused.
func (p *page) noteLive(err error) {
	switch {
	case err == nil:
	case errors.Is(err, adminclient.ErrNotFound):
	default:
		if leader, refused, ok := notLeader(err); ok {
			p.Standby = true
			switch {
			case refused || leader != "" && p.linked != nil && !p.linked(leader):
				p.PeerRefused = true
			case leader != "":
				p.Leader = strings.TrimSuffix(leader, "/") + Prefix
			}
			return
		}
		if p.Error == "" {
			p.Error = err.Error()
		}
	}
}

// notLeader reports whether err is the admin API's answer that this
// coordinator does not lead (a 503 naming the leader, or saying it does
// not lead when it does not know the leader), and the leader's admin URL
// if named. refused is true when the answer leaves the URL out because it
// is not among the coordinator's --peer-urls (adminserver says so in the
// message).
func notLeader(err error) (leader string, refused, ok bool) {
	ae, isAPI := errors.AsType[*adminclient.APIError](err)
	if !isAPI || ae.Status != http.StatusServiceUnavailable {
		return "", false, false
	}
	if ae.Leader != "" {
		return ae.Leader, false, true
	}
	ok = strings.Contains(ae.Message, "does not lead") || strings.Contains(ae.Message, "not the leader")
	return "", ok && strings.Contains(ae.Message, "--peer-urls"), ok
}

// render writes page name with p. When p is a session's page (not a
// refresh), the warnings the session kept are taken and shown, first.
func (c *Console) render(w http.ResponseWriter, code int, name string, p page) {
	if p.notices != "" {
		if kept := c.sessions.takeNotices(p.notices); len(kept) > 0 {
			p.Warnings = append(kept, p.Warnings...)
		}
	}
	var b bytes.Buffer
	if err := c.tmpl.ExecuteTemplate(&b, name, p); err != nil {
		c.log.Error("console: render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(b.Bytes())
}

func (c *Console) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), c.cfg.PageTimeout)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func limitText(r rule.Rule) string {
	if r.Unlimited {
		return "unlimited"
	}
	return fmt.Sprintf("%d per %ds", r.Limit, r.WindowSeconds)
}

func refreshOf(interval float64) float64 {
	if interval <= 0 {
		return DefaultRefresh.Seconds()
	}
	return interval
}

// rulePage is the Rule page's data.
type rulePage struct {
	Domain, ID string
	Global     bool
	Definition string
	// Invalid, when not empty, says why the stored document is invalid
	// (in whole: the overview's marker quotes the start); Definition is
	// then the last valid version, the one in force.
	Invalid string
	Charts  []chartView
	Latest  string
	Keys    []keyView
	HotKeys []adminapi.HotKey
	Audit   []auditView
	DCs     []string
}

type keyView struct {
	Key    string
	Limit  int64
	Shares []string // per DC, in DCs order
}

type auditView struct {
	Time, Actor, Action, Change string
}

func (c *Console) rulePage(w http.ResponseWriter, r *http.Request, s sess) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	domain, id := r.PathValue("domain"), r.PathValue("rule")
	cl := c.client(s, domain)
	sr, err := cl.GetStoredRule(ctx, id)
	if err != nil {
		c.failPage(w, s, err)
		return
	}
	ru := sr.Rule
	p := c.base(s, id, "")
	def, _ := json.MarshalIndent(ru, "", "  ")
	d := rulePage{Domain: domain, ID: id, Global: ru.Scope == rule.ScopeGlobal, Definition: string(def), Invalid: sr.Invalid}
	if d.Global {
		ser, err := cl.Series(ctx, id)
		p.noteLive(err)
		p.Refresh = refreshOf(ser.IntervalSeconds)
		if err == nil {
			d.Charts, d.Latest = charts(ser)
			for _, dc := range ser.DCs {
				d.DCs = append(d.DCs, dc.DC)
			}
		}
		d.Keys = c.keyShares(ctx, s, domain, id, d.DCs)
	}
	if st, err := cl.Stats(ctx, id); err == nil {
		d.HotKeys = st.HotKeys
	} else {
		p.noteLive(err)
	}
	if recs, err := cl.Audit(ctx, adminclient.AuditQuery{RuleID: id, Limit: 20}); err == nil {
		for _, a := range recs {
			d.Audit = append(d.Audit, auditView{Time: a.Time.UTC().Format("2006-01-02 15:04:05 UTC"), Actor: a.Actor, Action: a.Action, Change: string(a.After)})
		}
	}
	p.Data = d
	c.render(w, http.StatusOK, "rule", p)
}

// keyShares returns the rule's keys with shares of their own, from the
// coordinator's GET /v1/shares/{domain}/{rule}.
func (c *Console) keyShares(ctx context.Context, s sess, domain, id string, dcs []string) []keyView {
	resp, err := c.getJSON(ctx, s, "/v1/shares/"+domain+"/"+id)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	var body struct {
		Keys []struct {
			Key   string `json:"key"`
			Limit int64  `json:"limit"`
			DCs   []struct {
				DC    string  `json:"dc"`
				Share float64 `json:"share"`
			} `json:"dcs"`
		} `json:"keys"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&body); err != nil {
		return nil
	}
	var out []keyView
	for _, k := range body.Keys {
		kv := keyView{Key: k.Key, Limit: k.Limit}
		for _, dc := range dcs {
			v := "–"
			for _, x := range k.DCs {
				if x.DC == dc {
					v = pct(x.Share)
				}
			}
			kv.Shares = append(kv.Shares, v)
		}
		out = append(out, kv)
	}
	return out
}

// failPage answers a page whose rule could not be read.
func (c *Console) failPage(w http.ResponseWriter, s sess, err error) {
	p := c.base(s, "Error", "")
	code := http.StatusBadGateway
	if errors.Is(err, adminclient.ErrNotFound) {
		code = http.StatusNotFound
	}
	p.Error = err.Error()
	c.render(w, code, "error", p)
}

// sharesPage is the Shares page's data.
type sharesPage struct {
	Domain, ID string
	ETag       string
	Rows       []shareRow
	Preview    bool
	Notes      []string
	Applied    bool
}

type shareRow struct {
	DC                    string
	Demand, Share, Target string
	Pin, Floor, Ceiling   string // the form's values, in percent
	Drained               bool
	PreviewShare          string
	PreviewChanged        bool
}

func (c *Console) sharesPage(w http.ResponseWriter, r *http.Request, s sess) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	domain, id := r.PathValue("domain"), r.PathValue("rule")
	sh, err := c.client(s, domain).Shares(ctx, id)
	p := c.base(s, "Shares of "+id, "")
	if err != nil {
		p.noteLive(err)
		if !p.Standby {
			c.failPage(w, s, err)
			return
		}
	}
	d := sharesPage{Domain: domain, ID: id, ETag: sh.ETag, Applied: r.URL.Query().Get("applied") == "1"}
	pol := sh.Policy()
	for _, dc := range sh.DCs {
		row := shareRow{DC: dc.DC, Demand: pct(dc.Demand), Share: pct(dc.Share), Target: pct(dc.Target)}
		fillForm(&row, pol.DCs[dc.DC])
		d.Rows = append(d.Rows, row)
	}
	p.Data = d
	c.render(w, http.StatusOK, "shares", p)
}

func fillForm(row *shareRow, d sharepolicy.DCPolicy) {
	if d.Pin != nil {
		row.Pin = num(*d.Pin * 100)
	}
	if d.Floor > 0 {
		row.Floor = num(d.Floor * 100)
	}
	if d.Ceiling > 0 {
		row.Ceiling = num(d.Ceiling * 100)
	}
	row.Drained = d.Drained
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// postShares previews (action=preview) or applies (action=apply) the
// policy in the form.
func (c *Console) postShares(w http.ResponseWriter, r *http.Request, s sess) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	domain, id := r.PathValue("domain"), r.PathValue("rule")
	p := c.base(s, "Shares of "+id, "")
	if s.who.ReadOnly {
		p.Error = "Your token is read-only: it may look at shares but not change them."
		c.render(w, http.StatusForbidden, "error", p)
		return
	}
	cl := c.client(s, domain)
	sh, err := cl.Shares(ctx, id)
	if err != nil {
		c.failPage(w, s, err)
		return
	}
	dcs := make([]string, len(sh.DCs))
	for i, d := range sh.DCs {
		dcs[i] = d.DC
	}
	pol, formErr := policyFromForm(r, dcs)
	d := sharesPage{Domain: domain, ID: id, ETag: sh.ETag}
	var settings []allocate.DC
	if formErr == nil {
		settings, formErr = pol.Settings(dcs)
	}
	if formErr == nil && r.PostForm.Get("action") == "apply" {
		var warns []string
		if _, err := c.writeClient(s, domain, &warns).SetShares(ctx, id, pol, r.PostForm.Get("etag")); err != nil {
			formErr = err
			p.Warnings = warns
		} else {
			c.redirectAfterWrite(w, r, s, Prefix+"rules/"+domain+"/"+id+"/shares?applied=1", warns)
			return
		}
	}
	var preview []float64
	if formErr == nil {
		for i := range settings {
			settings[i].Name, settings[i].Demand = dcs[i], sh.DCs[i].Demand
		}
		preview = make([]float64, len(settings))
		res := allocate.Allocate(settings, preview)
		d.Preview = true
		if res.PinsScaled {
			d.Notes = append(d.Notes, "The pins add up to more than the limit: they are scaled down.")
		}
		if res.FloorsScaled {
			d.Notes = append(d.Notes, "The floors add up to more than the limit: they are scaled down.")
		}
		if res.Congested {
			d.Notes = append(d.Notes, "Demand exceeds the limit: every DC gets less than it asks for.")
		}
	}
	for i, dc := range sh.DCs {
		row := shareRow{DC: dc.DC, Demand: pct(dc.Demand), Share: pct(dc.Share), Target: pct(dc.Target),
			Pin: r.PostForm.Get("pin-" + dc.DC), Floor: r.PostForm.Get("floor-" + dc.DC), Ceiling: r.PostForm.Get("ceiling-" + dc.DC),
			Drained: r.PostForm.Get("drained-"+dc.DC) != ""}
		if preview != nil {
			row.PreviewShare = pct(preview[i])
			row.PreviewChanged = pct(preview[i]) != row.Target
		}
		d.Rows = append(d.Rows, row)
	}
	code := http.StatusOK
	if formErr != nil {
		p.Error = formErr.Error()
		code = http.StatusUnprocessableEntity
		if errors.Is(formErr, adminclient.ErrForbidden) {
			code = http.StatusForbidden
		}
	}
	p.Data = d
	c.render(w, code, "shares", p)
}

// policyFromForm reads the policy of the form, whose values are percent.
func policyFromForm(r *http.Request, dcs []string) (sharepolicy.Policy, error) {
	pol := sharepolicy.Policy{DCs: map[string]sharepolicy.DCPolicy{}}
	frac := func(field, dc string) (float64, bool, error) {
		v := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(r.PostForm.Get(field+"-"+dc)), "%"))
		if v == "" {
			return 0, false, nil
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 100 {
			return 0, false, fmt.Errorf("%s of %s: %q is not a percentage from 0 to 100", field, dc, v)
		}
		return f / 100, true, nil
	}
	for _, dc := range dcs {
		var d sharepolicy.DCPolicy
		pin, ok, err := frac("pin", dc)
		if err != nil {
			return pol, err
		}
		if ok {
			d.Pin = &pin
		}
		if d.Floor, _, err = frac("floor", dc); err != nil {
			return pol, err
		}
		if d.Ceiling, _, err = frac("ceiling", dc); err != nil {
			return pol, err
		}
		d.Drained = r.PostForm.Get("drained-"+dc) != ""
		if d.Pin != nil || d.Floor != 0 || d.Ceiling != 0 || d.Drained {
			pol.DCs[dc] = d
		}
	}
	return pol, nil
}

func (c *Console) cluster(w http.ResponseWriter, r *http.Request, s sess) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	p := c.base(s, "Cluster", "cluster")
	cl, err := c.client(s, "").Cluster(ctx)
	p.noteLive(err)
	p.Refresh = refreshOf(cl.IntervalSeconds)
	p.Data = cl
	c.render(w, http.StatusOK, "cluster", p)
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"pct":      pct,
	"shareBar": shareBar,
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		d := time.Since(t).Round(100 * time.Millisecond)
		return d.String() + " ago"
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("15:04:05.0 UTC")
	},
	"safeSVG":    func(s string) template.HTML { return template.HTML(s) }, // svgchart escapes all text
	"hasBadRune": func(s string) bool { return strings.ContainsRune(s, utf8.RuneError) },
	"keyDir":     func(key string) string { return key[:strings.LastIndex(key, "/")+1] },
}

func pct(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + "%" }
