package limiterd

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/internal/dc/envoyrls"
	"github.com/weirhq/weir/internal/dc/metrics"
	"github.com/weirhq/weir/internal/testkit/syncbuf"
	"github.com/weirhq/weir/pkg/envoyconf"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/store/memstore"
)

// Configurations of envoyproxy/ratelimit for the merge tests: the shop
// domain's routes, each limited in a file of its own.
const (
	shopCheckout = "domain: shop\ndescriptors:\n  - key: route\n    value: checkout\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"
	shopSearch   = "domain: shop\ndescriptors:\n  - key: route\n    value: search\n    rate_limit: {unit: minute, requests_per_unit: 3}\n"
	shopBoth     = "domain: shop\ndescriptors:\n  - key: route\n    value: checkout\n    rate_limit: {unit: minute, requests_per_unit: 2}\n  - key: route\n    value: search\n    rate_limit: {unit: minute, requests_per_unit: 3}\n"
)

// newRulesDir writes files (name → contents) into a new directory and
// returns fileRules of it, with merge, on a limiter of the memory store
// whose clock stands still, and the Envoy API over them as limiterd
// serves it.
func newRulesDir(t *testing.T, merge bool, files map[string]string, logs io.Writer) (*fileRules, *envoyrls.Service, string) {
	t.Helper()
	dir := t.TempDir()
	layout{files: files}.build(t, dir)
	now := func() time.Time { return time.Unix(1_700_000_000, 0) }
	store, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := limiter.New(limiter.Config{Store: store, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	met, err := metrics.NewLimiter(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if logs == nil {
		logs = io.Discard
	}
	f := &fileRules{path: dir, merge: merge, lim: lim, met: met, log: slog.New(slog.NewTextHandler(logs, nil))}
	return f, envoyrls.NewService(lim, envoyrls.Config{Now: now, Configs: f.Tree}), dir
}

// envoyAnswer is what the Envoy API answered for one descriptor: its
// code, and its current limit and remaining when it has a limit.
type envoyAnswer struct {
	code      rlsv3.RateLimitResponse_Code
	limit     uint32 // requests_per_unit; 0: none
	remaining uint32
}

// envoyStep is one request of a sequence on the Envoy API: a descriptor
// of entries "k=v,…" and the answer wanted.
type envoyStep struct {
	entries string
	want    envoyAnswer
}

func (a envoyAnswer) String() string {
	return fmt.Sprintf("%v limit %d remaining %d", a.code, a.limit, a.remaining)
}

// askEnvoy asks svc about one descriptor of domain, its entries "k=v,…".
func askEnvoy(t *testing.T, svc *envoyrls.Service, domain, entries string) envoyAnswer {
	t.Helper()
	d := &rlcommonv3.RateLimitDescriptor{}
	for kv := range strings.SplitSeq(entries, ",") {
		k, v, _ := strings.Cut(kv, "=")
		d.Entries = append(d.Entries, &rlcommonv3.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	resp, err := svc.ShouldRateLimit(t.Context(), &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*rlcommonv3.RateLimitDescriptor{d}})
	if err != nil {
		t.Fatalf("ShouldRateLimit %s %s: %v", domain, entries, err)
	}
	st := resp.GetStatuses()[0]
	return envoyAnswer{code: st.GetCode(), limit: st.GetCurrentLimit().GetRequestsPerUnit(), remaining: st.GetLimitRemaining()}
}

// TestMergeDomainsEnvoyAPI replays, in our own files, what
// envoyproxy/ratelimit's TestDomainMerge checks: two files of one domain,
// each with a top descriptor of its own, merged, answer on the Envoy API
// exactly as one file holding both descriptors; without merge the second
// file is refused and its descriptor has no limit.
func TestMergeDomainsEnvoyAPI(t *testing.T) {
	const (
		ok   = rlsv3.RateLimitResponse_OK
		over = rlsv3.RateLimitResponse_OVER_LIMIT
	)
	both := []envoyStep{
		{"route=checkout", envoyAnswer{ok, 2, 1}},
		{"route=search", envoyAnswer{ok, 3, 2}},
		{"route=checkout", envoyAnswer{ok, 2, 0}},
		{"route=checkout", envoyAnswer{over, 2, 0}},
		{"route=search", envoyAnswer{ok, 3, 1}},
		{"route=search", envoyAnswer{ok, 3, 0}},
		{"route=search", envoyAnswer{over, 3, 0}},
		{"route=cart", envoyAnswer{ok, 0, 0}},
		{"user=u", envoyAnswer{ok, 0, 0}},
	}
	checkoutOnly := []envoyStep{
		{"route=checkout", envoyAnswer{ok, 2, 1}},
		{"route=search", envoyAnswer{ok, 0, 0}},
		{"route=checkout", envoyAnswer{ok, 2, 0}},
		{"route=checkout", envoyAnswer{over, 2, 0}},
	}
	tests := []struct {
		name    string
		merge   bool
		files   map[string]string
		wantErr string // a part of load's error; "" for none
		steps   []envoyStep
	}{
		{"one file holding both: the reference", false, map[string]string{"shop.yaml": shopBoth}, "", both},
		{"two files merged", true, map[string]string{"a.yaml": shopCheckout, "b.yaml": shopSearch}, "", both},
		{"two files merged, in subdirectories", true, map[string]string{"team1/a.yaml": shopCheckout, "team2/deep/b.yaml": shopSearch}, "", both},
		{"two files without merge: the second refused", false, map[string]string{"a.yaml": shopCheckout, "b.yaml": shopSearch}, `domain "shop" is already that of`, checkoutOnly},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, svc, _ := newRulesDir(t, tt.merge, tt.files, nil)
			checkLoad(t, "start", f.load(), tt.wantErr)
			for i, s := range tt.steps {
				if got := askEnvoy(t, svc, "shop", s.entries); got != s.want {
					t.Errorf("request %d, %s: got %v, want %v", i+1, s.entries, got, s.want)
				}
			}
			if got := askEnvoy(t, svc, "other", "route=checkout"); got.limit != 0 {
				t.Errorf("a domain no file names: got %v, want no limit", got)
			}
		})
	}
}

// TestMergeDomainsRefused checks, at start (the first load), the files
// that do not merge: a top descriptor of one repeated in another (as
// envoyproxy/ratelimit's TestDuplicateKeyDomainMerge), and a Weir rule
// file beside a configuration of envoyproxy/ratelimit. The error names both files and
// what they share; none of a refused merge's rules is in force.
func TestMergeDomainsRefused(t *testing.T) {
	const weir = "domain: shop\nrules:\n  - {rule_id: r, key_type: user, limit: 5, window_seconds: 60}\n"
	tests := []struct {
		name    string
		files   map[string]string
		want    []string // parts of the error, "{dir}" standing for the directory
		inForce string   // the file whose rules shop has, "" for none
	}{
		{"one top descriptor in two files", map[string]string{"a.yaml": shopCheckout, "b.yaml": shopBoth},
			[]string{`merge {dir}/b.yaml into domain "shop": descriptors[0]: duplicate descriptor composite key 'shop.route_checkout': descriptors[0] of {dir}/a.yaml has it`}, ""},
		{"a Weir rule file after", map[string]string{"a.yaml": shopCheckout, "b.yaml": weir},
			[]string{`load rules from {dir}/b.yaml: domain "shop" is already that of {dir}/a.yaml; only configurations of envoyproxy/ratelimit merge`}, "a.yaml"},
		{"a Weir rule file first", map[string]string{"a.yaml": weir, "b.yaml": shopCheckout, "c.yaml": shopSearch},
			[]string{`load rules from {dir}/b.yaml: domain "shop" is already that of {dir}/a.yaml`, `load rules from {dir}/c.yaml: domain "shop" is already that of {dir}/a.yaml`}, "a.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _, dir := newRulesDir(t, true, tt.files, nil)
			err := f.load()
			for _, w := range tt.want {
				w = strings.ReplaceAll(w, "{dir}", dir)
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("load: got %v, want an error with %q", err, w)
				}
			}
			set, rerr := f.lim.Rules("shop")
			switch {
			case tt.inForce == "" && rerr == nil:
				t.Errorf("shop: got rules %v in force, want none", set.Rules())
			case tt.inForce != "" && (rerr != nil || f.inForce["shop"].digest != f.files[filepath.Join(dir, tt.inForce)].digest):
				t.Errorf("shop: got %v in force (%v), want %s's rules", f.inForce["shop"].digest, rerr, tt.inForce)
			}
		})
	}
}

// TestMergeDomainsSharedName: one rate_limit.name in two files, which
// envoyproxy/ratelimit loads, merges as one file holding both would: the
// rules are in force, their ids the name and the name with a suffix, and
// the limiter warns that those ids follow the files' order.
func TestMergeDomainsSharedName(t *testing.T) {
	named := func(body string) string {
		return strings.Replace(body, "requests_per_unit: ", "name: orders, requests_per_unit: ", 1)
	}
	var logs syncbuf.Buffer
	f, _, _ := newRulesDir(t, true, map[string]string{"a.yaml": named(shopCheckout), "b.yaml": named(shopSearch)}, &logs)
	if err := f.load(); err != nil {
		t.Fatalf("load: got %v, want none", err)
	}
	set, err := f.lim.Rules("shop")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range set.Rules() {
		ids = append(ids, r.Spec.ID)
	}
	if len(ids) != 2 || ids[0] != "orders" || !strings.HasPrefix(ids[1], "orders") || ids[1] == "orders" {
		t.Errorf("rule ids: got %v, want orders and orders with a suffix", ids)
	}
	if !strings.Contains(logs.String(), "a rate_limit.name is given in several files of a domain") || !strings.Contains(logs.String(), "orders") {
		t.Errorf("logs: got\n%s\nwant a warning naming orders", logs.String())
	}
}

// TestMergeDomainsReload follows a domain merged from two files through
// changes at polls: a change to one file re-merges, a change that makes
// the files conflict is refused, logged once, and leaves the previous
// merged domain in force (tree and rules) until it is mended, and a file
// removed leaves the other alone.
func TestMergeDomainsReload(t *testing.T) {
	var logs bytes.Buffer
	f, _, dir := newRulesDir(t, true, nil, &logs)
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	limit := func(route string, n int) string {
		return fmt.Sprintf("  - key: route\n    value: %s\n    rate_limit: {unit: minute, requests_per_unit: %d}\n", route, n)
	}
	steps := []struct {
		name   string
		change func()
		limits map[string]uint32 // route → requests_per_unit in force, in the tree and as a Weir rule; 0: none
		err    string            // a part of load's error, "" for none
		logged map[string]int    // message → lines logged so far
	}{
		{"two files merged", func() {
			write("a.yaml", "domain: shop\ndescriptors:\n"+limit("checkout", 2))
			write("b.yaml", "domain: shop\ndescriptors:\n"+limit("search", 3))
		}, map[string]uint32{"checkout": 2, "search": 3}, "",
			map[string]int{"rules merged": 1}},
		{"one file changed: merged again", func() {
			write("b.yaml", "domain: shop\ndescriptors:\n"+limit("search", 5)+limit("cart", 7))
		}, map[string]uint32{"checkout": 2, "search": 5, "cart": 7}, "",
			map[string]int{"rules merged": 2}},
		{"a change that repeats the other file's descriptor: the previous merge stays", func() {
			write("b.yaml", "domain: shop\ndescriptors:\n"+limit("search", 9)+limit("checkout", 9))
		}, map[string]uint32{"checkout": 2, "search": 5, "cart": 7}, "duplicate descriptor composite key 'shop.route_checkout'",
			map[string]int{"rules merged": 2, "refused the files of a domain": 1}},
		{"polled again: refused, not logged again", func() {},
			map[string]uint32{"checkout": 2, "search": 5, "cart": 7}, "duplicate descriptor composite key 'shop.route_checkout'",
			map[string]int{"rules merged": 2, "refused the files of a domain": 1}},
		{"the earlier file changed too, still conflicting: the previous merge stays", func() {
			write("a.yaml", "domain: shop\ndescriptors:\n"+limit("checkout", 4))
		}, map[string]uint32{"checkout": 2, "search": 5, "cart": 7}, "duplicate descriptor composite key 'shop.route_checkout'",
			map[string]int{"rules merged": 2, "refused the files of a domain": 2}},
		{"mended", func() {
			write("b.yaml", "domain: shop\ndescriptors:\n"+limit("search", 9))
		}, map[string]uint32{"checkout": 4, "search": 9, "cart": 0}, "",
			map[string]int{"rules merged": 3, "refused the files of a domain": 2}},
		{"one file removed: the other alone", func() {
			if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
				t.Fatal(err)
			}
		}, map[string]uint32{"checkout": 0, "search": 9}, "",
			map[string]int{"rules merged": 3}},
		{"a new file that conflicts: the one in force stays", func() {
			write("c.yaml", "domain: shop\ndescriptors:\n"+limit("search", 1))
		}, map[string]uint32{"search": 9}, "merge " + filepath.Join(dir, "c.yaml") + ` into domain "shop"`,
			map[string]int{"rules merged": 3, "refused the files of a domain": 3}},
	}
	for _, s := range steps {
		s.change()
		checkLoad(t, s.name, f.load(), s.err)
		set, _ := f.lim.Rules("shop")
		for route, want := range s.limits {
			var got uint32
			if tree := f.Tree("shop"); tree != nil {
				if l := tree.Lookup([]envoyconf.Entry{{Key: "route", Value: route}}).Limit; l != nil {
					got = l.RequestsPerUnit
					if r, ok := set.Rule(l.RuleID); !ok || r.Spec.Limit != int64(got) {
						t.Errorf("%s: route %s: the tree's limit %d names rule %q, not in force with that limit", s.name, route, got, l.RuleID)
					}
				}
			}
			if got != want {
				t.Errorf("%s: route %s: got limit %d, want %d (0: none)", s.name, route, got, want)
			}
		}
		for msg, want := range s.logged {
			if got := strings.Count(logs.String(), `msg="`+msg); got != want {
				t.Errorf("%s: %q logged %d times, want %d", s.name, msg, got, want)
			}
		}
	}
}
