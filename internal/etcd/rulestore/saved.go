package rulestore

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/platform/statefile"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// ErrListed is returned by Restore once the Watcher has applied a
// listing: the rules in etcd are newer than any saved ones.
var ErrListed = errors.New("rulestore: rules already listed")

// Restore applies the rules saved in Config.StateFile, when the Watcher
// has applied no listing yet: a process that cannot reach etcd at start
// calls it to serve the rules it had in force before it stopped rather
// than none. Every saved rule is read with Decode, as a document in etcd
// is; one that fails is logged, counted (Stats.Invalid) and left out. The
// first listing replaces them all. Restore returns how many rules it
// applied and the revision they were saved at; (0, 0, nil) without a
// state file or with none saved yet; ErrListed after a listing; an error
// naming the file when it cannot be read, and Apply's error.
func (w *Watcher) Restore() (int, int64, error) {
	if w.cfg.StateFile == "" {
		return 0, 0, nil
	}
	data, err := statefile.Read(w.cfg.StateFile)
	if err != nil || data == nil {
		return 0, 0, err
	}
	var st weirv1.RuleState
	if err := proto.Unmarshal(data, &st); err != nil {
		return 0, 0, fmt.Errorf("decode the saved rules %s: %w", w.cfg.StateFile, err)
	}
	rules := map[ref]version{}
	for _, s := range st.GetRules() {
		r := ref{s.GetDomain(), s.GetRuleId()}
		x, err := Decode(r.domain, r.id, s.GetDocument())
		if err == nil && r.domain == "" {
			err = fmt.Errorf("%w: saved without a domain", ErrInvalid)
		}
		if _, dup := rules[r]; err == nil && dup {
			err = fmt.Errorf("%w: saved twice", ErrInvalid)
		}
		if err != nil {
			w.invalid.Add(1)
			w.log.Error("rulestore: saved rule skipped", "file", w.cfg.StateFile, "domain", r.domain, "rule", r.id, "err", err)
			continue
		}
		rules[r] = version{r: x, doc: s.GetDocument()}
	}
	w.applyMu.Lock()
	defer w.applyMu.Unlock()
	if w.listed {
		return 0, 0, ErrListed
	}
	w.applied.Add(1)
	if err := w.cfg.Apply(0, bySet(rules)); err != nil {
		return 0, 0, fmt.Errorf("rulestore: saved rules refused: %w", err)
	}
	return len(rules), st.GetRevision(), nil
}

// save writes the rules in force to Config.StateFile. A rule Encode
// refuses (none should: it was decoded) is left out and logged; a failed
// write is logged, and the next change tries again.
func (w *Watcher) save(rev int64) {
	st := &weirv1.RuleState{Revision: rev, SavedMs: time.Now().UnixMilli()}
	for r, x := range w.inForce {
		doc, err := Encode(x.r)
		if err != nil {
			w.log.Error("rulestore: rule not saved", "domain", r.domain, "rule", r.id, "err", err)
			continue
		}
		st.Rules = append(st.Rules, &weirv1.SavedRule{Domain: r.domain, RuleId: r.id, Document: doc})
	}
	data, err := proto.Marshal(st)
	if err == nil {
		err = statefile.Write(w.cfg.StateFile, data)
	}
	if err != nil {
		w.saveErrors.Add(1)
		w.log.Warn("rulestore: rules not saved; a restart without etcd serves the last ones saved", "err", err)
		return
	}
	w.saves.Add(1)
}
