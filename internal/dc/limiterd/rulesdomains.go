package limiterd

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/weirhq/weir/pkg/rulefile"
	"github.com/weirhq/weir/pkg/ruleset"
)

// domains returns the rules to put in force, a domain's each, from the
// files read and valid (next, by path; paths in path order), in the
// order of each domain's first file, and why each file not in force was
// refused, each refusal logged once. Which rules are a domain's:
//
//   - Without merge, its first file's. A later file of the domain is
//     refused for as long as the first holds it, as envoyproxy/ratelimit
//     refuses a repeated domain by default.
//   - With merge, when its first file is a configuration of
//     envoyproxy/ratelimit, those of all its configurations of
//     envoyproxy/ratelimit merged, as envoyproxy/ratelimit merges them
//     with MERGE_DOMAIN_CONFIG=true (rulefile.MergeEnvoy), in path order.
//     A Weir rule file merges with no other: when it is the domain's
//     first file, the others are refused, else it is.
//
// Files that do not merge (a top descriptor in two of them) are all
// refused, and the domain keeps what was in force for it (f.inForce): a
// change that breaks the merge never makes the limiter enforce less than
// it did. A domain that had nothing in force
// has nothing until its files merge; at start the error stops the
// limiter.
func (f *fileRules) domains(paths []string, next map[string]loadedFile) ([]loadedFile, []error) {
	var order []string
	files := map[string][]string{}
	for _, p := range paths {
		lf, ok := next[p]
		if !ok {
			continue
		}
		d := lf.set.Domain()
		if files[d] == nil {
			order = append(order, d)
		}
		files[d] = append(files[d], p)
	}
	dups, merges := map[string]string{}, map[string]domainMerge{}
	inForce := make([]loadedFile, 0, len(order))
	var errs []error
	for _, d := range order {
		first := files[d][0]
		merged, refused := files[d][:1], files[d][1:]
		if f.merge && next[first].conf.Tree != nil {
			merged, refused = nil, nil
			for _, p := range files[d] {
				if next[p].conf.Tree != nil {
					merged = append(merged, p)
				} else {
					refused = append(refused, p)
				}
			}
		}
		for _, p := range refused {
			errs = append(errs, f.refuseDup(p, d, first))
			dups[p] = first
		}
		if len(merged) == 1 {
			inForce = append(inForce, next[first])
			continue
		}
		m := f.mergeDomain(d, merged, next)
		merges[d] = m
		if m.err != nil {
			errs = append(errs, m.err)
			if old, ok := f.inForce[d]; ok {
				inForce = append(inForce, old)
			}
			continue
		}
		inForce = append(inForce, m.lf)
	}
	f.dups, f.merges = dups, merges
	return inForce, errs
}

// refuseDup returns why the file at p is refused, its domain d being
// that of the earlier file first, and logs it unless it did at the last
// poll.
func (f *fileRules) refuseDup(p, d, first string) error {
	err := fmt.Errorf("load rules from %s: domain %q is already that of %s", p, d, first)
	if f.merge {
		err = fmt.Errorf("%w; only configurations of envoyproxy/ratelimit merge (--merge-domains), and a Weir rule file shares its domain with no other file", err)
	}
	if f.dups[p] != first {
		f.met.RulesRejected()
		f.log.Error("refused rules: their domain is an earlier file's", "file", p, "domain", d, "err", err)
	}
	return err
}

// domainMerge is one merge of a domain's files, kept until they change.
type domainMerge struct {
	key string     // the files merged, and their digests, in path order
	lf  loadedFile // the merged rules, when err is nil
	err error      // why the files do not merge
}

// mergeDomain merges the files at paths (next's), all configurations of
// envoyproxy/ratelimit of domain d, and logs the outcome; the last merge
// of d is reused, and not logged again, while the files are as they were.
// The merge's digest is one of the files' paths and digests.
func (f *fileRules) mergeDomain(d string, paths []string, next map[string]loadedFile) domainMerge {
	var key strings.Builder
	parts := make([]rulefile.EnvoyFile, len(paths))
	for i, p := range paths {
		fmt.Fprintf(&key, "%s\x00%s\x00", p, next[p].digest)
		parts[i] = rulefile.EnvoyFile{Name: p, Config: next[p].conf}
	}
	if m, ok := f.merges[d]; ok && m.key == key.String() {
		return m
	}
	m := domainMerge{key: key.String()}
	conf, err := rulefile.MergeEnvoy(parts...)
	var set *ruleset.Set
	if err == nil {
		if set, err = ruleset.Compile(conf.Rules); err != nil {
			err = fmt.Errorf("compile the merged rules of domain %q: %w", d, err)
		}
	}
	if err != nil {
		f.met.RulesRejected()
		f.log.Error("refused the files of a domain: they do not merge; the domain's rules in force stay", "domain", d, "files", paths, "err", err)
		m.err = err
		return m
	}
	sum := sha256.Sum256([]byte(m.key))
	m.lf = loadedFile{digest: hex.EncodeToString(sum[:8]), conf: conf, set: set}
	f.log.Info("rules merged", "domain", d, "files", paths, "rules", len(conf.Rules.Rules), "version", m.lf.digest)
	if len(conf.SharedNames) > 0 {
		f.log.Warn("a rate_limit.name is given in several files of a domain: its rules' ids are the name and the name with a suffix, in path order, and change as files come and go (weirctl, the metrics and the DC shares know rules by id)",
			"domain", d, "names", conf.SharedNames)
	}
	return m
}
