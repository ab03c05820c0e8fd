package limiterd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/internal/dc/metrics"
	"github.com/weirhq/weir/pkg/envoyconf"
	"github.com/weirhq/weir/pkg/limiter"
	"github.com/weirhq/weir/pkg/rulefile"
	"github.com/weirhq/weir/pkg/ruleset"
)

// fileRules keeps the limiter's rules in step with a rule file, or with
// a directory of them: every *.yaml and *.yml file below it, each a
// domain, as envoyproxy/ratelimit reads its runtime directory (listRules
// says exactly which), or with merge, envoyproxy/ratelimit's files of a
// domain merged into it (rulesdomains.go). Not safe for concurrent use,
// but for Tree.
type fileRules struct {
	path  string
	merge bool // Config.MergeDomains
	lim   *limiter.Limiter
	met   *metrics.Limiter
	log   *slog.Logger

	files   map[string]loadedFile  // read and valid, by path (domains says which are in force, and how)
	inForce map[string]loadedFile  // by domain: what is in force, a file's rules or files' merged
	bad     map[string]string      // digest of each refused file, logged once
	skipped map[string]string      // why each entry of the directory is skipped, logged once
	dups    map[string]string      // each file refused for an earlier file's domain: that file, logged once
	merges  map[string]domainMerge // by domain of several files, with merge: the last merge tried, logged once
	listErr string                 // why the rules could not be listed at the last poll, logged once; "" when they could
	trees   atomic.Pointer[map[string]*envoyconf.Domain]
}

// loadedFile is one file's rules, read and valid, or the rules of a
// domain's files merged.
type loadedFile struct {
	digest string
	conf   rulefile.Envoy // Tree nil for a Weir rule file
	set    *ruleset.Set   // conf.Rules compiled
}

// Tree returns the configuration of envoyproxy/ratelimit in force for
// domain, or nil; safe for concurrent use.
func (f *fileRules) Tree(domain string) *envoyconf.Domain {
	if m := f.trees.Load(); m != nil {
		return (*m)[domain]
	}
	return nil
}

// load lists the rule files (listRules), warns once of each entry it
// skips, and puts in force the files' rules when what is in force for a
// domain changes. A file that is invalid is refused: its previous
// version, if any, stays in force, and so do the other files. Which
// file's rules, or which files' merged, are a domain's is up to domains.
// The error names every refused file; an error listing the files leaves
// everything as it was.
func (f *fileRules) load() error {
	listing, err := listRules(f.path)
	switch {
	case err != nil && f.files != nil:
		// At a poll (at start the error stops the limiter): the rules
		// in force stay, and the operator hears of it once.
		if msg := err.Error(); msg != f.listErr {
			f.met.RulesRejected()
			f.log.Error("cannot read the rules; the rules in force stay", "path", f.path, "err", err)
			f.listErr = msg
		}
		return err
	case err != nil:
		return err
	case f.listErr != "":
		f.log.Info("the rules can be read again", "path", f.path)
		f.listErr = ""
	}
	if f.files == nil {
		f.files, f.bad = map[string]loadedFile{}, map[string]string{}
	}
	for p, why := range listing.skipped {
		if f.skipped[p] != why {
			f.log.Warn("skipped an entry of the rules directory", "file", p, "reason", why)
		}
	}
	f.skipped = listing.skipped
	paths := listing.files
	next := make(map[string]loadedFile, len(paths))
	var errs []error
	for _, p := range paths {
		old, had := f.files[p]
		lf, err := f.loadFile(p, old)
		if err != nil {
			errs = append(errs, err)
			if had {
				next[p] = old
			}
			continue
		}
		next[p] = lf
	}
	inForce, derrs := f.domains(paths, next)
	errs = append(errs, derrs...)
	changed := len(inForce) != len(f.inForce)
	for _, lf := range inForce {
		if old, had := f.inForce[lf.set.Domain()]; !had || lf.digest != old.digest {
			changed = true
		}
	}
	if changed || f.trees.Load() == nil {
		sets := make([]*ruleset.Set, len(inForce))
		trees := map[string]*envoyconf.Domain{}
		byDomain := make(map[string]loadedFile, len(inForce))
		versions := make(map[string]string, len(inForce))
		for i, lf := range inForce {
			sets[i] = lf.set
			if lf.conf.Tree != nil {
				trees[lf.set.Domain()] = lf.conf.Tree
			}
			byDomain[lf.set.Domain()] = lf
			versions[lf.set.Domain()] = lf.digest
		}
		if err := f.lim.SetRules(sets...); err != nil {
			return fmt.Errorf("load rules from %s: %w", f.path, err)
		}
		f.inForce = byDomain
		f.trees.Store(&trees)
		f.met.RulesLoaded(versions, time.Now())
	}
	f.files = next
	return errors.Join(errs...)
}

// loadFile reads and compiles the file at p; old is the version of it
// read before, returned as it is when the file has not changed.
func (f *fileRules) loadFile(p string, old loadedFile) (loadedFile, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return loadedFile{}, fmt.Errorf("read rules from %s: %w", p, err)
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:8])
	if digest == old.digest {
		return old, nil
	}
	cfg, err := rulefile.ParseConfig(data)
	var set *ruleset.Set
	if err == nil {
		set, err = ruleset.Compile(cfg.Rules)
	}
	if err != nil {
		if f.bad[p] != digest {
			f.met.RulesRejected()
			f.log.Error("refused new rules; the previous rules stay in force", "file", p, "err", err)
			f.bad[p] = digest
		}
		return loadedFile{}, fmt.Errorf("load rules from %s: %w", p, err)
	}
	delete(f.bad, p)
	f.log.Info("rules loaded", "file", p, "domain", cfg.Rules.Domain, "rules", len(cfg.Rules.Rules), "version", digest)
	if len(cfg.Ignored) > 0 {
		f.log.Warn("fields ignored, as envoyproxy/ratelimit ignores them: they mean nothing where the file puts them", "file", p, "fields", cfg.Ignored)
	}
	return loadedFile{digest: digest, conf: cfg, set: set}, nil
}

func (f *fileRules) poll(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = f.load()
		}
	}
}
