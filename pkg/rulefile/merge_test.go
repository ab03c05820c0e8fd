package rulefile_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/pkg/envoyconf"
	"github.com/weirhq/weir/pkg/rule"
	"github.com/weirhq/weir/pkg/rulefile"
)

// envoyFiles parses each of docs, named by its index ("0.yaml", ...).
func envoyFiles(t *testing.T, docs ...string) []rulefile.EnvoyFile {
	t.Helper()
	files := make([]rulefile.EnvoyFile, len(docs))
	for i, d := range docs {
		e, err := rulefile.ParseConfig([]byte(d))
		if err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
		files[i] = rulefile.EnvoyFile{Name: fmt.Sprintf("%d.yaml", i), Config: e}
	}
	return files
}

// TestMergeEnvoyAsOneFile merges files of one domain and checks that the
// result is the one file that holds their descriptors in order gives:
// the same rules (ids, precedence overrides across files) and the same
// limits found for each descriptor.
func TestMergeEnvoyAsOneFile(t *testing.T) {
	tests := []struct {
		name   string
		header string   // the files' domain line
		parts  []string // each file's descriptors
		lookup [][]envoyconf.Entry
		shared []string          // SharedNames
		want   map[string]uint32 // entries (k=v,...) → requests_per_unit found, 0: none
	}{
		{
			// The peer's TestDomainMerge, in our words: two files, each
			// with a top key/value of its own.
			name:   "a top descriptor from each file",
			header: "domain: shop\n",
			parts: []string{
				"  - key: route\n    value: checkout\n    rate_limit: {unit: minute, requests_per_unit: 10}\n",
				"  - key: route\n    value: search\n    rate_limit: {unit: minute, requests_per_unit: 20}\n",
			},
			want: map[string]uint32{"route=checkout": 10, "route=search": 20, "route=cart": 0, "": 0},
		},
		{
			name:   "a value in the later file takes its requests from a default in the earlier",
			header: "domain: shop\n",
			parts: []string{
				"  - key: tenant\n    descriptors:\n      - key: user\n        rate_limit: {unit: minute, requests_per_unit: 60}\n",
				"  - key: tenant\n    value: acme\n    descriptors:\n      - key: user\n        rate_limit: {unit: minute, requests_per_unit: 600}\n",
			},
			want: map[string]uint32{"tenant=t1,user=u": 60, "tenant=acme,user=u": 600},
		},
		{
			name:   "wildcards tried in file order, and ids wanted twice made unique as in one file",
			header: "domain: shop\n",
			parts: []string{
				"  - key: path\n    value: /api/*\n    rate_limit: {unit: second, requests_per_unit: 5, name: other}\n",
				"  - key: path\n    value: /api/v2/*\n    rate_limit: {unit: second, requests_per_unit: 7}\n  - key: other\n    rate_limit: {unit: hour, requests_per_unit: 3}\n",
			},
			want: map[string]uint32{"path=/api/v2/y": 5, "path=/api/x": 5, "other=o": 3},
		},
		{
			// The peer allows one name in two files; so does one file.
			name:   "one name in two files",
			header: "domain: shop\n",
			parts: []string{
				"  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 1, name: login}\n",
				"  - key: b\n    descriptors:\n      - key: c\n        rate_limit: {unit: minute, requests_per_unit: 2, name: login}\n",
			},
			shared: []string{"login"},
			want:   map[string]uint32{"a=x": 1, "b=y,c=z": 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs := make([]string, len(tt.parts))
			for i, p := range tt.parts {
				docs[i] = tt.header + "descriptors:\n" + p
			}
			got, err := rulefile.MergeEnvoy(envoyFiles(t, docs...)...)
			if err != nil {
				t.Fatalf("MergeEnvoy: got %v, want none", err)
			}
			one, err := rulefile.ParseEnvoyConfig([]byte(tt.header + "descriptors:\n" + strings.Join(tt.parts, "")))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Rules, one.Rules) {
				t.Errorf("rules:\ngot  %+v\nwant %+v (one file's)", got.Rules, one.Rules)
			}
			if !slices.Equal(got.SharedNames, tt.shared) {
				t.Errorf("shared names: got %v, want %v", got.SharedNames, tt.shared)
			}
			for desc, want := range tt.want {
				var entries []envoyconf.Entry
				for kv := range strings.SplitSeq(desc, ",") {
					if k, v, ok := strings.Cut(kv, "="); ok {
						entries = append(entries, envoyconf.Entry{Key: k, Value: v})
					}
				}
				g, o := got.Tree.Lookup(entries).Limit, one.Tree.Lookup(entries).Limit
				if !reflect.DeepEqual(g, o) {
					t.Errorf("%s: got limit %+v, want %+v (one file's)", desc, g, o)
				}
				if n := uint32(0); g != nil {
					n = g.RequestsPerUnit
					if n != want {
						t.Errorf("%s: got %d requests per unit, want %d", desc, n, want)
					}
				} else if want != 0 {
					t.Errorf("%s: got no limit, want %d", desc, want)
				}
			}
		})
	}
}

// TestMergeEnvoyConflicts checks what files do not merge, and that the
// error names both files and the path and key of the conflict.
func TestMergeEnvoyConflicts(t *testing.T) {
	const limit = "    rate_limit: {unit: minute, requests_per_unit: 10}\n"
	var values strings.Builder // more values of k than a rule has overrides
	for i := range rule.MaxOverrides + 1 {
		fmt.Fprintf(&values, "  - key: k\n    value: v%d\n", i)
	}
	tests := []struct {
		name string
		docs []string
		want []string // parts of the error; none: merged
	}{
		{
			// The peer's TestDuplicateKeyDomainMerge, in our words.
			name: "a top key and value in both files",
			docs: []string{
				"domain: shop\ndescriptors:\n  - key: a\n" + limit + "  - key: route\n    value: checkout\n" + limit,
				"domain: shop\ndescriptors:\n  - key: b\n" + limit + "  - key: route\n    value: checkout\n" + limit,
			},
			want: []string{`merge 1.yaml into domain "shop": descriptors[1]: duplicate descriptor composite key 'shop.route_checkout': descriptors[1] of 0.yaml has it`},
		},
		{
			name: "a top key without a value in both files",
			docs: []string{"domain: shop\ndescriptors:\n  - key: user\n" + limit, "domain: shop\ndescriptors:\n  - key: user\n" + limit},
			want: []string{`1.yaml`, `descriptors[0]: duplicate descriptor composite key 'shop.user': descriptors[0] of 0.yaml`},
		},
		{
			name: "the third file repeats the first's",
			docs: []string{"domain: shop\ndescriptors:\n  - key: a\n" + limit, "domain: shop\ndescriptors:\n  - key: b\n" + limit, "domain: shop\ndescriptors:\n  - key: a\n" + limit},
			want: []string{`merge 2.yaml into domain "shop"`, `descriptors[0] of 0.yaml has it`},
		},
		{
			name: "one name twice in one file: made unique, as in one file",
			docs: []string{
				"domain: shop\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 1, name: login}\n  - key: b\n    rate_limit: {unit: minute, requests_per_unit: 1, name: login}\n",
				"domain: shop\ndescriptors:\n  - key: c\n" + limit,
			},
		},
		{
			name: "one key and value below different top descriptors",
			docs: []string{
				"domain: shop\ndescriptors:\n  - key: a\n    descriptors:\n      - key: user\n" + strings.ReplaceAll(limit, "    ", "        "),
				"domain: shop\ndescriptors:\n  - key: b\n    descriptors:\n      - key: user\n" + strings.ReplaceAll(limit, "    ", "        "),
			},
		},
		{
			name: "rules valid in each file, refused together: named by file",
			docs: []string{
				"domain: shop\ndescriptors:\n  - key: k\n" + limit,
				"domain: shop\ndescriptors:\n" + values.String(),
			},
			want: []string{`merge 0.yaml, 1.yaml into domain "shop": 0.yaml: descriptors[0]: as Weir rule "k": overrides: 1001 overrides`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := rulefile.MergeEnvoy(envoyFiles(t, tt.docs...)...)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("got %v, want none", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got no error, want one with %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %v, want it to hold %q", err, w)
				}
			}
			if !errors.Is(err, rule.ErrInvalid) {
				t.Errorf("got %v, want it to match rule.ErrInvalid", err)
			}
		})
	}
}

// TestMergeEnvoyMisuse checks the files MergeEnvoy is not for.
func TestMergeEnvoyMisuse(t *testing.T) {
	weir, err := rulefile.ParseConfig([]byte("domain: shop\nrules:\n  - {rule_id: r, key_type: user, limit: 5, window_seconds: 60}\n"))
	if err != nil {
		t.Fatal(err)
	}
	shop := envoyFiles(t, "domain: shop\ndescriptors: []\n", "domain: other\ndescriptors: []\n")
	tests := []struct {
		name  string
		files []rulefile.EnvoyFile
		want  string
	}{
		{"none", nil, "none given"},
		{"a Weir rule file", []rulefile.EnvoyFile{shop[0], {Name: "w.yaml", Config: weir}}, `merge w.yaml into domain "shop": not a configuration of envoyproxy/ratelimit`},
		{"another domain", shop, `merge 1.yaml into domain "shop": its domain is "other"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := rulefile.MergeEnvoy(tt.files...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
}
