package jobrun

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/catalog"
	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/runenv"
)

// Select picks the tasks named, in the order named, each with its own
// time limit capped at budget. A name with no task (a check this build
// does not have yet, or one disabled in its [checks.*] section) is not an
// error: it comes back as a SKIP result, so a list written for a newer
// build, or a check switched off on some hosts, never stops a job.
func Select(all []check.Task, names []string, budget time.Duration) ([]check.Task, []check.Timed) {
	var tasks []check.Task
	var missing []check.Timed
	for _, n := range names {
		i := slices.IndexFunc(all, func(t check.Task) bool { return t.Check.Name() == n })
		if i < 0 {
			missing = append(missing, check.Timed{Name: n, Results: []check.Result{{
				Check: n, Component: "host", Status: check.Skip, Action: check.ActionNone,
				Message: "not run: disabled in its [checks] section, or not in this build",
			}}})
			continue
		}
		t := all[i]
		t.Timeout = min(t.Timeout, budget)
		tasks = append(tasks, t)
	}
	return tasks, missing
}

// RunChecks runs the named checks within budget and returns their
// results, GPU results marked [simulated] in a fire drill and NVML hangs
// softened (see Soften). The names may be any of the catalog's checks,
// its deep ones (bandwidth) included, and extra's; each runs under its
// own [checks.*] time limit, capped at budget, or with whole under all of
// budget (the full prolog's checks: [prolog] full_budget is theirs).
func (r *Run) RunChecks(extra []check.Task, names []string, budget time.Duration, whole bool) []check.Timed {
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	all := append(append(catalog.Tasks(r.Cfg, r.Env), catalog.Deep(r.Cfg, r.Env)...), extra...)
	if whole {
		for i := range all {
			all[i].Timeout = budget
		}
	}
	tasks, missing := Select(all, names, budget)
	// NVML gets most of the budget to start (see gpu.Node.Warm), and the
	// checks at least a second of their own.
	runenv.WarmGPUs(ctx, r.Env, tasks, max(budget-time.Second, budget/2))
	timed := check.Run(ctx, tasks)
	if r.Opts.Simulate != "" {
		runenv.MarkSimulated(timed)
	}
	Soften(timed, r.P.By)
	return append(timed, missing...)
}

// hungPrefix starts the message of gpu.Hung's FAIL.
const hungPrefix = "NVML did not answer"

// Soften turns "NVML did not answer in Ns" FAILs into ERRORs. A job run's
// budget is seconds, and NVML on a node without persistence mode takes
// that long just to start: a slow answer here is no proof of a hang, and
// draining for it would take healthy nodes out at every job start. The
// health check, with its 45 s deadline, judges hangs.
func Soften(timed []check.Timed, by string) {
	for i := range timed {
		for j := range timed[i].Results {
			res := &timed[i].Results[j]
			if res.Status == check.Fail && strings.HasPrefix(res.Message, hungPrefix) {
				res.Status, res.Action = check.Error, check.ActionNone
				res.Message += " (within the " + by + "'s budget; left to the health check)"
			}
		}
	}
}
