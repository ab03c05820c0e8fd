package rulefile

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/weirhq/weir/pkg/rule"
)

// EnvoyFile is one of the files of a domain that MergeEnvoy merges.
type EnvoyFile struct {
	// Name is what errors call the file: its path.
	Name string
	// Config is the file's configuration of envoyproxy/ratelimit, as
	// ParseConfig or ParseEnvoyConfig read it.
	Config Envoy
}

// MergeEnvoy merges configurations of envoyproxy/ratelimit that name one
// domain into one, as envoyproxy/ratelimit merges a domain's files with
// MERGE_DOMAIN_CONFIG=true: the top descriptors of each file, in the
// order of files, are added to the domain's. The result is what one file
// holding all of them in that order would give (ParseEnvoyConfig): the
// same tree, so that Weir's Envoy API answers as for that file, and the
// same rules, ids and overrides — a descriptor with a value takes its
// requests away from a sibling without one in another file, and an id
// wanted twice is made unique as in one file (rate_limit.name served
// first, then the paths, in order).
//
// Two files conflict when a top descriptor of the later one has the
// composite key (key, or key_value) of a top descriptor of an earlier one,
// which envoyproxy/ratelimit refuses too ("duplicate descriptor composite
// key"). Deeper descriptors never conflict: each file's lie below its own
// top ones. A rate_limit.name given in two files, which the peer allows,
// merges as one file holding both gives it: the first rule takes the name
// as its id, the others a suffix. Those ids change as files come and go,
// so the merged Envoy lists such names in SharedNames, for the loader to
// warn of.
//
// The error of conflicting files joins, for each later file of a
// conflict, "merge NAME into domain D: " and a *rule.ValidationError with
// the paths in that file and the earlier file named in the reasons. An
// error wrapping a *rule.ValidationError also comes of rules that the
// files give together but that validation refuses (more than
// rule.MaxRules, say), at the descriptors named by file. Files that are
// not configurations of envoyproxy/ratelimit (Tree nil), that name other
// domains than the first, or none at all, are an error of the caller.
//
// The merged Envoy's Ignored lists each file's, prefixed with its name
// and ": "; SharedNames lists the names given in more than one file, in
// the order first met.
func MergeEnvoy(files ...EnvoyFile) (Envoy, error) {
	if len(files) == 0 {
		return Envoy{}, errors.New("merge configurations of envoyproxy/ratelimit: none given")
	}
	domain := files[0].Config.Rules.Domain
	for _, f := range files {
		switch {
		case f.Config.Tree == nil:
			return Envoy{}, fmt.Errorf("merge %s into domain %q: not a configuration of envoyproxy/ratelimit; only those merge", f.Name, domain)
		case f.Config.Rules.Domain != domain:
			return Envoy{}, fmt.Errorf("merge %s into domain %q: its domain is %q", f.Name, domain, f.Config.Rules.Domain)
		}
	}
	if err := mergeConflicts(domain, files); err != nil {
		return Envoy{}, err
	}
	var nodes []*envoyNode
	var ignored, shared []string
	fileOf := map[*envoyNode]string{}
	nameFile := map[string]int{} // the file that first gives each rate_limit.name
	names := make([]string, len(files))
	for i, f := range files {
		nodes = append(nodes, f.Config.nodes...)
		for _, p := range f.Config.Ignored {
			ignored = append(ignored, f.Name+": "+p)
		}
		walkEnvoy(f.Config.nodes, func(n *envoyNode) {
			fileOf[n] = f.Name
			if n.limit == nil || n.limit.name == "" {
				return
			}
			if first, seen := nameFile[n.limit.name]; !seen {
				nameFile[n.limit.name] = i
			} else if first != i && !slices.Contains(shared, n.limit.name) {
				shared = append(shared, n.limit.name)
			}
		})
		names[i] = f.Name
	}
	var c envoyConverter
	e, err := c.build(domain, nodes, func(n *envoyNode) string { return fileOf[n] + ": " + n.path })
	if err != nil {
		return Envoy{}, fmt.Errorf("merge %s into domain %q: %w", strings.Join(names, ", "), domain, err)
	}
	e.Ignored, e.SharedNames = ignored, shared
	return e, nil
}

// mergeConflicts returns the conflicts of files (MergeEnvoy), or nil.
func mergeConflicts(domain string, files []EnvoyFile) error {
	type at struct {
		file int
		path string
	}
	keys := map[string]at{}
	var errs []error
	for i, f := range files {
		var rep rule.Report
		for _, n := range f.Config.nodes {
			key := n.key
			if n.value != "" {
				key += "_" + n.value
			}
			if first, dup := keys[key]; dup {
				rep.Fail(n.path, "duplicate descriptor composite key '%s.%s': %s of %s has it", domain, key, first.path, files[first.file].Name)
			} else {
				keys[key] = at{i, n.path}
			}
		}
		if err := rep.Err(); err != nil {
			errs = append(errs, fmt.Errorf("merge %s into domain %q: %w", f.Name, domain, err))
		}
	}
	return errors.Join(errs...)
}

// walkEnvoy calls fn for each of nodes and the descriptors below them,
// each before those below it.
func walkEnvoy(nodes []*envoyNode, fn func(*envoyNode)) {
	for _, n := range nodes {
		fn(n)
		walkEnvoy(n.children, fn)
	}
}
