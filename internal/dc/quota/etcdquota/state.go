package etcdquota

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/internal/dc/quota"
	"github.com/weirhq/weir/internal/platform/statefile"
	weirv1 "github.com/weirhq/weir/proto/weir/v1"
)

// restore puts the saved state, if any, in the Table (New calls it).
func (a *Agent) restore() {
	st, err := a.state.load()
	if err != nil {
		a.log.Warn("etcdquota: saved quota state not used: global rules take their static shares until the first listing", "err", err)
		return
	}
	if st == nil {
		return
	}
	n, err := a.table.Restore(assignments(st))
	if err != nil {
		a.log.Warn("etcdquota: saved quota state not used", "file", a.state.path, "err", err)
		return
	}
	a.st.restored.Store(int64(n))
	a.log.Info("etcdquota: restored the DC's saved assignments: until the first listing each rule enforces min(static, saved)",
		"file", a.state.path, "rules", n, "revision", st.GetRevision(), "saved", time.UnixMilli(st.GetSavedMs()).UTC())
}

// applied makes what the Table now holds acknowledgeable — once saved,
// with Config.StateFile — and asks for the acknowledgement to be written.
// The loop's goroutine calls it after each Reset and Apply.
func (a *Agent) applied() {
	epoch, rev := a.table.Applied()
	if a.state != nil && !a.save() {
		return // the record keeps acknowledging what was saved
	}
	a.ackable.Store(&record{epoch, rev})
	a.notify()
}

// save saves the Table's assignments and reports whether the revision
// may be acknowledged: saved, or the file removed after a failed save (a
// restart then restores nothing, as without a state file). When neither
// works the acknowledgement waits for a save that does: the coordinator
// does not count on a decrease a restart of this instance could undo.
func (a *Agent) save() bool {
	err := a.state.save(a.table, a.cfg.Now().UnixMilli())
	if err == nil {
		a.st.saves.Add(1)
		if a.saveErr {
			a.log.Info("etcdquota: quota state saved again", "file", a.state.path)
			a.saveErr = false
		}
		return true
	}
	a.st.saveErrors.Add(1)
	derr := a.state.drop()
	if !a.saveErr {
		a.saveErr = true
		if derr != nil {
			a.log.Error("etcdquota: quota state neither saved nor removed: acknowledgements wait until it is saved", "err", err, "remove", derr)
		} else {
			a.log.Warn("etcdquota: quota state not saved; removed the old one, so a restart before the next save uses static shares", "err", err)
		}
	}
	return derr == nil
}

// stateFile is the Agent's saved state (Config.StateFile): the
// assignments last applied, written before they are acknowledged, read
// once when the Agent is created.
type stateFile struct {
	path string
	dc   string
}

// load reads the saved assignments. A missing file is no error: it returns
// nil. Any other failure (unreadable, too large, not a QuotaState, of
// another DC) is an error naming the file.
func (f stateFile) load() (*weirv1.QuotaState, error) {
	data, err := statefile.Read(f.path)
	if err != nil || data == nil {
		return nil, err
	}
	var st weirv1.QuotaState
	if err := proto.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("decode the saved quota state %s: %w", f.path, err)
	}
	if st.GetDc() != f.dc {
		return nil, fmt.Errorf("saved quota state %s is of dc %q, not %q", f.path, st.GetDc(), f.dc)
	}
	return &st, nil
}

// save replaces the file with the Table's assignments (statefile.Write:
// a crash leaves the old state or the new one).
func (f stateFile) save(t *quota.Table, savedMs int64) error {
	rev, as := t.Assignments()
	st := &weirv1.QuotaState{Dc: f.dc, Revision: rev, SavedMs: savedMs, Assignments: make([]*weirv1.RuleAssignment, len(as))}
	for i, a := range as {
		m := &weirv1.RuleAssignment{Dc: a.DC, Domain: a.Domain, RuleId: a.RuleID, Epoch: a.Epoch,
			Share: a.Share, Limit: a.Limit, GlobalLimit: a.GlobalLimit}
		if len(a.Keys) > 0 {
			m.Keys = make([]*weirv1.KeyShare, len(a.Keys))
			for j, k := range a.Keys {
				m.Keys[j] = &weirv1.KeyShare{Key: k.Key, Share: k.Share, Limit: k.Limit, GlobalLimit: k.GlobalLimit}
			}
		}
		st.Assignments[i] = m
	}
	data, err := proto.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode the quota state: %w", err)
	}
	if err := statefile.Write(f.path, data); err != nil {
		return fmt.Errorf("save the quota state: %w", err)
	}
	return nil
}

// drop removes the file, so that a restart does not restore a state older
// than what the Agent acknowledges. A missing file is no error.
func (f stateFile) drop() error {
	if err := statefile.Remove(f.path); err != nil {
		return fmt.Errorf("remove the stale quota state: %w", err)
	}
	return nil
}

// assignments decodes a saved state's assignments as the Table takes
// them; Restore checks each as it checks a document.
func assignments(st *weirv1.QuotaState) []quota.Assignment {
	as := make([]quota.Assignment, len(st.GetAssignments()))
	for i, m := range st.GetAssignments() {
		as[i] = assignment(m)
	}
	return as
}

// assignment decodes one RuleAssignment, from etcd or a saved state.
func assignment(m *weirv1.RuleAssignment) quota.Assignment {
	a := quota.Assignment{DC: m.GetDc(), Domain: m.GetDomain(), RuleID: m.GetRuleId(), Epoch: m.GetEpoch(),
		Share: m.GetShare(), Limit: m.GetLimit(), GlobalLimit: m.GetGlobalLimit()}
	if n := len(m.GetKeys()); n > 0 {
		a.Keys = make([]quota.KeyShare, n)
		for i, ks := range m.GetKeys() {
			a.Keys[i] = quota.KeyShare{Key: ks.GetKey(), Share: ks.GetShare(), Limit: ks.GetLimit(), GlobalLimit: ks.GetGlobalLimit()}
		}
	}
	return a
}
