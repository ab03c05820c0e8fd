package limiterd

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/internal/dc/metrics"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/store/memstore"
)

// TestRulesDirectory loads a directory of rule files, each a domain, as
// envoyproxy/ratelimit loads its runtime directory: a bad file is refused
// with its field path while the others serve, and changes are re-read.
func TestRulesDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	write("b.yml", "domain: b\nrules:\n  - {rule_id: r, key_type: user, limit: 5, window_seconds: 60}\n")
	write("notes.txt", "not a rule file")
	lim := newTestLimiter(t)
	met, err := metrics.NewLimiter(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	f := &fileRules{path: dir, lim: lim, met: met, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := f.load(); err != nil {
		t.Fatalf("load: got %v, want none", err)
	}
	for _, d := range []string{"a", "b"} {
		if _, err := lim.Rules(d); err != nil {
			t.Errorf("domain %s: got %v, want its rules", d, err)
		}
	}
	if f.Tree("a") == nil || f.Tree("b") != nil {
		t.Errorf("trees: got a %v, b %v; want a's only (b is a Weir rule file)", f.Tree("a"), f.Tree("b"))
	}

	write("a.yaml", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	write("c.yaml", "domain: c\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2}\n")
	err = f.load()
	if err == nil || !strings.Contains(err.Error(), "a.yaml") || !strings.Contains(err.Error(), "descriptors[0].rate_limit.unit") {
		t.Errorf("reload: got %v, want a.yaml refused with its field path", err)
	}
	for _, d := range []string{"a", "b", "c"} {
		if _, err := lim.Rules(d); err != nil {
			t.Errorf("after reload, domain %s: got %v, want its rules (a's previous ones)", d, err)
		}
	}
	if f.Tree("c") == nil {
		t.Errorf("after reload: got no tree for c, want the new file's")
	}

	write("d.yaml", "domain: c\ndescriptors: []\n")
	if err := f.load(); err == nil || !strings.Contains(err.Error(), `domain "c" is already that of`) {
		t.Errorf("duplicate domain: got %v, want d.yaml refused", err)
	}
	if err := os.Remove(filepath.Join(dir, "b.yml")); err != nil {
		t.Fatal(err)
	}
	_ = f.load()
	if _, err := lim.Rules("b"); err == nil {
		t.Errorf("after removing b.yml: got b's rules, want none")
	}
}

// layout is a directory tree to build under a test's root: files with
// their contents, symbolic links with their targets, FIFOs; a name's
// directories are made as needed.
type layout struct {
	files map[string]string
	links map[string]string // name → target, as written in the link
	fifos []string
}

func (l layout) build(t *testing.T, root string) {
	t.Helper()
	mkdir := func(name string) string {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name, body := range l.files {
		if err := os.WriteFile(mkdir(name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range l.links {
		if err := os.Symlink(target, mkdir(name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range l.fifos {
		if err := syscall.Mkfifo(mkdir(name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestListRules checks which entries of a rules directory are read, at
// any depth, and which are skipped with a reason, and that dot entries
// are neither.
func TestListRules(t *testing.T) {
	tests := []struct {
		name    string
		layout  layout
		files   []string
		skipped map[string]string // name → a part of the reason
	}{
		{"flat", layout{files: map[string]string{"a.yaml": "", "b.yml": "", "notes.txt": "", "c.json": ""}},
			[]string{"a.yaml", "b.yml"}, map[string]string{"notes.txt": "only *.yaml and *.yml", "c.json": "only *.yaml and *.yml"}},
		{"subdirectories at any depth, in path order", layout{files: map[string]string{"x/a.yaml": "", "x/y/b.yml": "", "x/y/README.md": "", "x.yaml": ""}},
			[]string{"x.yaml", "x/a.yaml", "x/y/b.yml"}, map[string]string{"x/y/README.md": "only *.yaml and *.yml"}},
		{"dot files and dot directories at every level, unsaid", layout{files: map[string]string{".a.yaml": "", ".git/b.yaml": "", ".git/HEAD": "", "x/.c.yaml": "", "x/.d/e.yaml": "", "x/f.yaml": ""}},
			[]string{"x/f.yaml"}, map[string]string{}},
		{"a ConfigMap volume: links into ..data, dot directories passed over", layout{
			files: map[string]string{"..2024_01_01_00_00_00.1/a.yaml": "", "..2024_01_01_00_00_00.1/sub/b.yaml": "", "..2024_01_01_00_00_00.1/README.md": ""},
			links: map[string]string{"..data": "..2024_01_01_00_00_00.1", "a.yaml": "..data/a.yaml", "sub": "..data/sub", "README.md": "..data/README.md"},
		}, []string{"a.yaml", "sub/b.yaml"}, map[string]string{"README.md": "only *.yaml and *.yml"}},
		{"a link loop", layout{files: map[string]string{"x/a.yaml": ""}, links: map[string]string{"x/up": "..", "x/self": "."}},
			[]string{"x/a.yaml"}, map[string]string{"x/up": "a directory read already as", "x/self": "a directory read already as"}},
		{"two ways to one directory: the first in name order", layout{files: map[string]string{"real/a.yaml": ""}, links: map[string]string{"alias": "real"}},
			[]string{"alias/a.yaml"}, map[string]string{"real": "a directory read already as"}},
		{"a link outside the directory", layout{files: map[string]string{"../elsewhere/a.yaml": "", "../elsewhere.yaml": ""}, links: map[string]string{"shared": "../elsewhere", "one.yaml": "../elsewhere.yaml"}},
			[]string{"one.yaml", "shared/a.yaml"}, map[string]string{}},
		{"dangling links, judged by name", layout{links: map[string]string{"gone.yaml": "nowhere.yaml", "gone.txt": "nowhere"}},
			[]string{"gone.yaml"}, map[string]string{"gone.txt": "only *.yaml and *.yml"}},
		{"not a regular file", layout{fifos: []string{"pipe.yaml"}, links: map[string]string{"link.yaml": "pipe.yaml"}},
			nil, map[string]string{"pipe.yaml": "not a regular file", "link.yaml": "not a regular file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "rules")
			if err := os.Mkdir(root, 0o700); err != nil {
				t.Fatal(err)
			}
			tt.layout.build(t, root)
			got, err := listRules(root)
			if err != nil {
				t.Fatalf("listRules: got %v, want none", err)
			}
			var files []string
			for _, p := range got.files {
				files = append(files, rel(t, root, p))
			}
			if !slices.Equal(files, tt.files) {
				t.Errorf("files: got %q, want %q", files, tt.files)
			}
			skipped := map[string]string{}
			for p, why := range got.skipped {
				skipped[rel(t, root, p)] = why
			}
			for name, why := range tt.skipped {
				if !strings.Contains(skipped[name], why) {
					t.Errorf("skipped %s: got %q, want a reason with %q", name, skipped[name], why)
				}
			}
			for name, why := range skipped {
				if _, ok := tt.skipped[name]; !ok {
					t.Errorf("skipped %s (%s), want it read or passed over unsaid", name, why)
				}
			}
		})
	}
	t.Run("a file", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "rules.json")
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := listRules(p)
		if err != nil || !slices.Equal(got.files, []string{p}) || len(got.skipped) != 0 {
			t.Errorf("listRules of a file: got %v, %v; want the file alone", got, err)
		}
	})
}

func rel(t *testing.T, root, p string) string {
	t.Helper()
	r, err := filepath.Rel(root, p)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.ToSlash(r)
}

// configMap projects payload into root as the kubelet projects a
// ConfigMap volume: the files in a new ..<version> directory, ..data
// swapped to it by a rename, a link at the top for each top-level entry
// (links of entries gone removed), the previous version's directory
// removed.
func configMap(t *testing.T, root string, version int, payload map[string]string) {
	t.Helper()
	dir := "..2024_01_01_00_00_0" + strconv.Itoa(version)
	top := map[string]bool{}
	files := map[string]string{}
	for name, body := range payload {
		files[dir+"/"+name] = body
		top[strings.SplitN(name, "/", 2)[0]] = true
	}
	layout{files: files, links: map[string]string{"..data_tmp": dir}}.build(t, root)
	if err := os.Rename(filepath.Join(root, "..data_tmp"), filepath.Join(root, "..data")); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, "..2024") && name != dir:
			if err := os.RemoveAll(filepath.Join(root, name)); err != nil {
				t.Fatal(err)
			}
		case e.Type()&os.ModeSymlink != 0 && !strings.HasPrefix(name, ".") && !top[name]:
			if err := os.Remove(filepath.Join(root, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name := range top {
		if _, err := os.Lstat(filepath.Join(root, name)); err != nil {
			layout{links: map[string]string{name: "..data/" + name}}.build(t, root)
		}
	}
}

// TestRulesDirectoryReload follows a rules directory that is a ConfigMap
// volume, with rule files in subdirectories and a plain subdirectory
// beside it, through new versions: files added, changed and removed at
// any depth are put in force; a skipped file is warned of once, and a
// second file of a domain refused and logged once, however many polls.
func TestRulesDirectoryReload(t *testing.T) {
	root := t.TempDir()
	rules := func(domain string, limit int) string {
		return fmt.Sprintf("domain: %s\nrules:\n  - {rule_id: r, key_type: user, limit: %d, window_seconds: 60}\n", domain, limit)
	}
	var logs bytes.Buffer
	lim := newTestLimiter(t)
	met, err := metrics.NewLimiter(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	f := &fileRules{path: root, lim: lim, met: met, log: slog.New(slog.NewTextHandler(&logs, nil))}
	count := func(msg, file string) int {
		n := 0
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, `msg="`+msg) && strings.Contains(line, "file="+filepath.Join(root, file)+" ") {
				n++
			}
		}
		return n
	}
	v1 := map[string]string{"a.yaml": rules("a", 1), "team/b.yaml": rules("b", 1), "README.md": "how to edit these"}
	v2 := map[string]string{"a.yaml": rules("a", 1), "team/b.yaml": rules("b", 2), "team/deep/c.yaml": rules("c", 1), "README.md": "how to edit these"}
	v3 := map[string]string{"team/b.yaml": rules("b", 2), "team/deep/c.yaml": rules("c", 1), "README.md": "how to edit these"}
	v4 := map[string]string{"team/b.yaml": rules("b", 2), "team/b2.yaml": rules("b", 9), "team/deep/c.yaml": rules("c", 1), "README.md": "how to edit these"}
	v5 := map[string]string{"team/b2.yaml": rules("b", 9), "team/deep/c.yaml": rules("c", 1), "README.md": "how to edit these"}
	v6 := map[string]string{"team/b2.yaml": rules("b", 9), "team/bad.yaml": "domain: e\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"}
	steps := []struct {
		name   string
		change func()
		limits map[string]int64 // domain → rule r's limit; 0: no such domain
		err    string           // a part of load's error, "" for none
		logs   []logged         // lines logged so far
	}{
		{"first version", func() { configMap(t, root, 1, v1) },
			map[string]int64{"a": 1, "b": 1}, "",
			[]logged{{"skipped an entry", "README.md", 1}}},
		{"polled again", func() {},
			map[string]int64{"a": 1, "b": 1}, "",
			[]logged{{"skipped an entry", "README.md", 1}, {"rules loaded", "team/b.yaml", 1}}},
		{"a new version: a file changed, one added deeper", func() { configMap(t, root, 2, v2) },
			map[string]int64{"a": 1, "b": 2, "c": 1}, "",
			[]logged{{"skipped an entry", "README.md", 1}, {"rules loaded", "team/b.yaml", 2}, {"rules loaded", "team/deep/c.yaml", 1}}},
		{"a plain subdirectory beside the volume's links", func() {
			layout{files: map[string]string{"local/d.yaml": rules("d", 1), "local/notes.txt": ""}}.build(t, root)
		}, map[string]int64{"a": 1, "b": 2, "c": 1, "d": 1}, "",
			[]logged{{"skipped an entry", "README.md", 1}, {"skipped an entry", "local/notes.txt", 1}}},
		{"removed from the volume and from the subdirectory", func() {
			configMap(t, root, 3, v3)
			if err := os.Remove(filepath.Join(root, "local", "d.yaml")); err != nil {
				t.Fatal(err)
			}
		}, map[string]int64{"a": 0, "b": 2, "c": 1, "d": 0}, "",
			[]logged{{"skipped an entry", "README.md", 1}, {"skipped an entry", "local/notes.txt", 1}}},
		{"a second file of one domain", func() { configMap(t, root, 4, v4) },
			map[string]int64{"b": 2, "c": 1}, `team/b2.yaml: domain "b" is already that of ` + filepath.Join(root, "team", "b.yaml"),
			[]logged{{"refused rules: their domain", "team/b2.yaml", 1}, {"rules loaded", "team/b2.yaml", 1}}},
		{"polled again: refused, not logged again", func() {},
			map[string]int64{"b": 2, "c": 1}, `domain "b" is already that of`,
			[]logged{{"refused rules: their domain", "team/b2.yaml", 1}, {"rules loaded", "team/b2.yaml", 1}}},
		{"the first file of the domain gone: the second in force", func() { configMap(t, root, 5, v5) },
			map[string]int64{"b": 9, "c": 1}, "",
			[]logged{{"refused rules: their domain", "team/b2.yaml", 1}, {"rules loaded", "team/b2.yaml", 1}, {"skipped an entry", "README.md", 1}}},
		{"one file removed as an invalid one is added", func() { configMap(t, root, 6, v6) },
			map[string]int64{"b": 9, "c": 0, "e": 0}, "team/bad.yaml",
			[]logged{{"refused new rules", "team/bad.yaml", 1}}},
	}
	for _, s := range steps {
		s.change()
		checkLoad(t, s.name, f.load(), s.err)
		for d, want := range s.limits {
			var got int64
			if set, err := lim.Rules(d); err == nil {
				if r, ok := set.Rule("r"); ok {
					got = r.Spec.Limit
				}
			}
			if got != want {
				t.Errorf("%s: domain %s: got limit %d, want %d (0: no such domain)", s.name, d, got, want)
			}
		}
		for _, l := range s.logs {
			if got := count(l.msg, filepath.FromSlash(l.file)); got != l.times {
				t.Errorf("%s: %q logged for %s: got %d times, want %d", s.name, l.msg, l.file, got, l.times)
			}
		}
	}
}

// checkLoad fails t, saying step, unless err, what fileRules.load
// returned, is nil when want is "", or holds want.
func checkLoad(t *testing.T, step string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: load: got %v, want none", step, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: load: got %v, want an error with %q", step, err, want)
	}
}

// logged is how many lines were logged with a message starting msg for
// file, a path under the rules directory.
type logged struct {
	msg, file string
	times     int
}

// newTestLimiter returns a limiter on a memory store.
func newTestLimiter(t *testing.T) *limiter.Limiter {
	t.Helper()
	store, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := limiter.New(limiter.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	return lim
}

// A rules directory that cannot be listed at a poll (gone, unreadable)
// keeps the rules in force, and is logged once, not at every poll, and
// once more when it can be read again.
func TestRulesDirectoryUnreadableAtAPoll(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "config")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "a.yaml"), []byte("domain: a\nrules:\n  - {rule_id: r, key_type: user, limit: 3, window_seconds: 60}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	lim := newTestLimiter(t)
	met, err := metrics.NewLimiter(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	f := &fileRules{path: root, lim: lim, met: met, log: slog.New(slog.NewTextHandler(&logs, nil))}
	if err := f.load(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(root, root+".moved"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := f.load(); err == nil {
			t.Fatal("load of a directory that is gone: got no error")
		}
	}
	if set, err := lim.Rules("a"); err != nil || set == nil {
		t.Errorf("domain a while its directory is gone: got %v, %v; want its rules in force", set, err)
	}
	if err := os.Rename(root+".moved", root); err != nil {
		t.Fatal(err)
	}
	if err := f.load(); err != nil {
		t.Fatalf("load once the directory is back: %v", err)
	}
	for msg, want := range map[string]int{"cannot read the rules; the rules in force stay": 1, "the rules can be read again": 1} {
		if got := strings.Count(logs.String(), `msg="`+msg+`"`); got != want {
			t.Errorf("%q logged %d times, want %d; log:\n%s", msg, got, want, logs.String())
		}
	}
}
