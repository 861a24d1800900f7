package metrics

import (
	"maps"
	"slices"

	"github.com/gpuhc/gpuhc/internal/check"
)

// Episodes counts FAIL episodes per check, for gpuhc_failures_total. The
// caller keeps it between runs (in the state directory): a Prometheus
// counter must only grow.
//
// An episode of a check (docs/architecture.md#metrics) opens at a run in
// which the check reports FAIL for any component, when no episode of it is
// open, and closes at the first run in which the check reports neither FAIL
// nor ERROR for any component. So a failure seen a hundred runs in a row is
// one episode; a second component failing while the first still fails is
// the same episode; and a run in which the check could not check (ERROR,
// such as a timeout) closes nothing, as it proves nothing healthy. A check
// absent from a run (disabled, or a run that only reports a stuck
// predecessor) leaves its episode as it was.
type Episodes struct {
	// Total is how many episodes each check has opened, ever.
	Total map[string]uint64 `json:"total,omitempty"`
	// Open lists, sorted, the checks whose episode is still open.
	Open []string `json:"open,omitempty"`
}

// Update returns the episodes after a run with these results, and the
// checks whose episode opened in it.
func (e Episodes) Update(results []check.Result) (Episodes, []string) {
	failing, unhealthy := map[string]bool{}, map[string]bool{}
	ran := map[string]bool{}
	for _, r := range results {
		ran[r.Check] = true
		switch r.Status {
		case check.Fail:
			failing[r.Check] = true
			unhealthy[r.Check] = true
		case check.Error:
			unhealthy[r.Check] = true
		}
	}
	next := Episodes{Total: maps.Clone(e.Total)}
	if next.Total == nil {
		next.Total = map[string]uint64{}
	}
	open := map[string]bool{}
	for _, c := range e.Open {
		if !ran[c] || unhealthy[c] {
			open[c] = true
		}
	}
	var opened []string
	for c := range failing {
		if !slices.Contains(e.Open, c) {
			next.Total[c]++
			opened = append(opened, c)
		}
		open[c] = true
	}
	next.Open = slices.Sorted(maps.Keys(open))
	slices.Sort(opened)
	return next, opened
}
