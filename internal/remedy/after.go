package remedy

import (
	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/policy"
)

// Part is what the run's GPU inventory says of a drained part, for the
// events and the vendor ticket.
type Part struct {
	Model, Driver string
}

// After takes the run's results, once the policy has applied them (st is
// the state it saved): a finished remediation is judged by its check on
// its part (failed again, or not), and the drained part's model and
// driver are noted. A node that is not drained, or whose drain is not
// remediable, reads and writes nothing.
func (e Engine) After(results []check.Result, st policy.State, p Part) error {
	d := st.Drained
	if !e.Cfg.Enabled || e.dry() || d == nil || d.Check == "" {
		return nil
	}
	rec, err := e.store().load()
	if err != nil {
		return err
	}
	changed := false
	if (p.Model != "" && p.Model != rec.Model) || (p.Driver != "" && p.Driver != rec.Driver) {
		rec.Model, rec.Driver = p.Model, p.Driver
		changed = true
	}
	if a := rec.Current; a != nil && a.DrainAt.Equal(d.At) && a.Outcome == Finished && !a.Judged {
		if st, ok := judged(results, a.Check, a.Component); ok {
			judgedCopy := *a
			judgedCopy.Judged, judgedCopy.Recurred = true, st == check.Fail
			rec.Current = &judgedCopy
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return e.store().save(rec)
}

// judged is the status the run gave check on component, if it judged it:
// an ERROR or a check that did not run says nothing about the fault.
func judged(results []check.Result, chk, component string) (check.Status, bool) {
	for _, r := range results {
		if r.Check == chk && r.Component == component && r.Status != check.Error && r.Status != check.Skip {
			return r.Status, true
		}
	}
	return 0, false
}
