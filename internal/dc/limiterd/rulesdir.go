package limiterd

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ruleListing is what --rules names: the rule files to read, and the
// entries of a rules directory passed over with a warning.
type ruleListing struct {
	files   []string          // in path order
	skipped map[string]string // path → why it is not read
}

// listRules lists the rule files at path. A file is itself. A directory
// is walked at any depth, as envoyproxy/ratelimit walks its runtime
// directory, with these differences:
//
//   - an entry whose name starts with a dot is passed over, file or
//     directory, at every level, without a word (envoyproxy/ratelimit's
//     RUNTIME_IGNOREDOTFILES=true; a Kubernetes ConfigMap volume keeps
//     its files in ..data and ..<timestamp> directories);
//   - only *.yaml and *.yml files are rule files; any other file, or
//     anything that is not a regular file, is listed in skipped with why;
//   - symbolic links are followed, to files (a ConfigMap's visible
//     entries link into ..data) and to directories; a directory reached a
//     second way, by a link back up the tree (a loop) or to one walked
//     already, is walked once, by the way met first (depth first, each
//     directory's entries in name order), and the other is listed in
//     skipped. A link that leads nowhere is judged by
//     its name: a *.yaml one is listed, and refused when read.
//
// Which domain a file holds is its own `domain:`, never its path. An
// error, from listing the path or any directory below it, lists nothing.
func listRules(path string) (ruleListing, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return ruleListing{}, fmt.Errorf("read rules from %s: %w", path, err)
	}
	if !fi.IsDir() {
		return ruleListing{files: []string{path}}, nil
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ruleListing{}, fmt.Errorf("read rules from %s: %w", path, err)
	}
	w := rulesWalk{walked: map[string]string{real: path}, skipped: map[string]string{}}
	if err := w.dir(path, real); err != nil {
		return ruleListing{}, err
	}
	slices.Sort(w.files)
	return ruleListing{files: w.files, skipped: w.skipped}, nil
}

// rulesWalk is one walk of a rules directory (listRules).
type rulesWalk struct {
	walked  map[string]string // the directories walked: real path → path walked by
	files   []string
	skipped map[string]string
}

// dir walks the directory at path, whose real path (no links) is real.
func (w *rulesWalk) dir(path, real string) error {
	entries, err := os.ReadDir(path)
	if err != nil {
		return fmt.Errorf("read rules from %s: %w", path, err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		p := filepath.Join(path, name)
		link := e.Type()&fs.ModeSymlink != 0
		mode := e.Type()
		if link {
			mode = 0 // a dangling link: judged as a file by its name
			if fi, err := os.Stat(p); err == nil {
				mode = fi.Mode().Type()
			}
		}
		switch ext := filepath.Ext(name); {
		case mode.IsDir():
			sub := filepath.Join(real, name)
			if link {
				if sub, err = filepath.EvalSymlinks(p); err != nil {
					return fmt.Errorf("read rules from %s: %w", p, err)
				}
			}
			if by, ok := w.walked[sub]; ok {
				w.skipped[p] = "a directory read already as " + by
				continue
			}
			w.walked[sub] = p
			if err := w.dir(p, sub); err != nil {
				return err
			}
		case !mode.IsRegular():
			w.skipped[p] = "not a regular file"
		case ext == ".yaml" || ext == ".yml":
			w.files = append(w.files, p)
		default:
			w.skipped[p] = "only *.yaml and *.yml files of a rules directory are read"
		}
	}
	return nil
}
