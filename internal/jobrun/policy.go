package jobrun

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/policy"
	"github.com/gpuhc/gpuhc/internal/runenv"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

// Outcome is what the policy step of a job run found and did.
type Outcome struct {
	Run policy.Run
	// Worthy are the results the policy drains for.
	Worthy []check.Result
	Err    error
	// Spared says why a run whose drain could not be made exits 0 all
	// the same (see FailExit); "" when it does not.
	Spared string
}

// FailExit reports whether the run must exit non-zero: it found a
// drain-worthy result, this is not a dry run, and neither the storm
// guard nor gpuhc's own setup stands in the way. A non-zero exit makes
// slurmd drain the node itself ("Prolog error", "Epilog error"; it does
// not replace a reason already set) and requeue the prolog's job. The
// rule, by what the policy did (Apply):
//   - drained, or found drained: non-zero. Our reason stays, the job is
//     requeued.
//   - the storm guard refused the drain: 0. Exiting non-zero would have
//     slurmd drain the node anyway, and with it every node of a fleet
//     failing at once for a shared cause.
//   - could not act (policy.Failed), because node control could not be
//     built, Slurm refused our credentials, or a file or program the
//     [slurm] section names could not be used: 0, with a loud error. That
//     is a fault of gpuhc's setup, and a config error never drains
//     (docs/architecture.md#fail-safe): a bad push of [slurm] that also
//     made a check FAIL on every node would otherwise drain the fleet
//     through slurmd, past the storm guard.
//   - could not act because Slurm was unreachable or failed: the storm
//     guard's cached count (storm.json) decides, since the guard could not
//     count afresh. Fresh and at the limit: 0 ("drain suppressed (storm
//     guard, cached count)"). Otherwise non-zero, so that slurmd's own
//     drain keeps jobs off a node that failed a check.
func (o Outcome) FailExit(dry bool) bool {
	return len(o.Worthy) > 0 && !dry && o.Run.Outcome.Kind != policy.DrainSuppressed && o.Spared == ""
}

// ExitNote says why a run with drain-worthy results exits 0 (not a dry
// run); "" when FailExit holds.
func (o Outcome) ExitNote(dry bool) string {
	switch {
	case len(o.Worthy) == 0 || dry || o.FailExit(dry):
		return ""
	case o.Spared != "":
		return o.Spared
	}
	return "drain refused by the storm guard"
}

// ourFault reports whether node control failed for a fault of gpuhc's
// setup rather than of Slurm: credentials refused, a slurmrestd that
// cannot change nodes with backend "rest", a token file that is unsafe
// or unreadable, or a file or program the config names (token file,
// scontrol) that could not be opened or run.
func ourFault(err error) bool {
	var pe *fs.PathError
	var ce *slurm.ConfigError
	return errors.Is(err, slurm.ErrUnauthorized) || errors.Is(err, slurm.ErrNoNodePost) ||
		errors.As(err, &pe) || errors.As(err, &ce)
}

// spare decides, for a drain that could not be made, whether the run
// exits 0 anyway (see FailExit), and says so.
func (r *Run) spare(o *Outcome, eng policy.Engine, setup bool) {
	if len(o.Worthy) == 0 || r.Cfg.Policy.DryRun {
		return
	}
	if setup {
		o.Spared = "node control unusable, a fault of gpuhc's setup ([slurm]): not leaving the drain to slurmd"
	} else if detail, ok := eng.CachedRefusal(policy.Reason(o.Worthy)); ok {
		o.Spared = "drain suppressed (storm guard, cached count): " + detail
	} else {
		return
	}
	// The watchdog, should it fire now, must not exit non-zero either.
	r.failing.Store(false)
	fmt.Fprintf(r.P.Stdout, "policy: %s\n", o.Spared)
	r.Log.WithError(o.Err).Error(o.Spared)
}

// Apply runs the policy for a job run: a drain-worthy result drains the
// node with our reason, through the storm guard, before the run does
// anything else; it never resumes (policy.Job). afterJob makes
// drain-after-job results drain-worthy (the epilog). The policy's own
// record is saved unless the state directory is read-only.
func (r *Run) Apply(results []check.Result, afterJob bool, budget time.Duration) Outcome {
	ctx, cancel := r.Context(budget)
	defer cancel()
	store := policy.NewStore(r.Cfg.StateDir, r.Node)
	prev, loadErr := store.Load()
	if loadErr != nil {
		r.Log.WithError(loadErr).Error("starting from an empty policy state")
	}
	eng := policy.Engine{
		Node: r.Node, Policy: r.Cfg.Policy, DryRun: r.Cfg.Policy.DryRun,
		BootID: r.bootID(), StormFile: policy.StormFile(r.Cfg.StateDir), Now: r.Now,
		Job: &policy.Job{ID: r.Job.JobID, By: r.P.By, AfterJob: afterJob},
	}
	o := Outcome{Worthy: eng.DrainWorthy(results)}
	if len(o.Worthy) > 0 {
		r.Failing()
	}
	ctl, err := r.controller()
	if err != nil {
		// Node control could not even be built: a configuration error.
		o.Err = fmt.Errorf("node control: %w", err)
		o.Run = policy.Run{Outcome: policy.Outcome{Kind: policy.Failed, Detail: o.Err.Error()}}
		runenv.PrintOutcome(r.P.Stdout, o.Run.Outcome, "", 0, r.Cfg.Policy.DryRun)
		r.Log.WithError(o.Err).Error("policy could not act")
		r.spare(&o, eng, true)
		return o
	}
	eng.Ctl = ctl
	o.Run, o.Err = eng.Apply(ctx, results, prev)
	calls := 0
	if c, ok := ctl.(interface{ Calls() int }); ok {
		calls = c.Calls()
	}
	runenv.PrintOutcome(r.P.Stdout, o.Run.Outcome, ctl.Backend(), calls, r.Cfg.Policy.DryRun)
	runenv.LogOutcome(r.Log, o.Run.Outcome, ctl.Backend())
	if o.Err != nil {
		r.Log.WithError(o.Err).Error("policy could not act")
		if o.Run.Outcome.Kind == policy.Failed {
			r.spare(&o, eng, ourFault(o.Err))
		}
	}
	if r.ReadOnly {
		return o
	}
	if loadErr != nil && !errors.Is(loadErr, policy.ErrCorrupt) {
		// Unreadable (EIO, permissions): do not overwrite what we could not read.
		return o
	}
	if !o.Run.State.Equal(prev) {
		if err := store.Save(o.Run.State); err != nil {
			r.Log.WithError(err).Error("policy state not saved")
		}
	}
	return o
}

func (r *Run) controller() (slurm.Controller, error) {
	if r.ctl != nil {
		return r.ctl, nil
	}
	var ctl slurm.Controller
	var err error
	if r.P.Controller != nil {
		ctl, err = r.P.Controller(r.Cfg.Slurm, r.Log)
	} else {
		ctl, err = slurm.New(r.Cfg.Slurm, slurm.WithLogger(r.Log),
			slurm.WithVersionCache(slurm.VersionCacheFile(r.Cfg.StateDir), r.Cfg.Policy.DryRun))
	}
	if err != nil {
		return nil, err
	}
	r.ctl = ctl
	return ctl, nil
}

// Controller is the run's node control, the one Apply used (so a
// slurmrestd found down there is not tried again), built on first use.
func (r *Run) Controller() (slurm.Controller, error) { return r.controller() }

// Append writes events to the event log, each stamped with the run's
// node, job, program and boot id where it has none; nothing in a dry
// run. A failure is logged: the record must never change the outcome.
func (r *Run) Append(evs ...events.Event) {
	if r.Cfg.Policy.DryRun || len(evs) == 0 {
		return
	}
	boot := r.bootID()
	for i := range evs {
		ev := &evs[i]
		if ev.Time.IsZero() {
			ev.Time = r.Now()
		}
		if ev.Node == "" {
			ev.Node = r.Node
		}
		if ev.JobID == "" {
			ev.JobID = r.Job.JobID
		}
		if ev.By == "" {
			ev.By = r.P.By
		}
		if ev.BootID == "" {
			ev.BootID = boot
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := (events.Log{Path: r.Cfg.Events.File}).Append(ctx, evs...); err != nil {
		r.Log.WithError(err).Error("event log")
	}
}

// Summary is the run's own event (kind prolog or epilog): the job, its
// user, the worst status, what the policy did, and how long it all took.
func (r *Run) Summary(kind, mode string, results []check.Result, o Outcome) events.Event {
	count := map[check.Status]int{}
	for _, res := range results {
		count[res.Status]++
	}
	msg := fmt.Sprintf("%d results (%d FAIL, %d ERROR, %d WARN); policy: %s", len(results),
		count[check.Fail], count[check.Error], count[check.Warn], o.Run.Outcome.Kind)
	if r.ReadOnly && !r.Cfg.Policy.DryRun {
		msg += "; state read-only (no lock)"
	}
	if r.Opts.Simulate != "" {
		msg += " [simulated " + r.Opts.Simulate + "]"
	}
	took := time.Since(r.Start)
	return events.Event{
		Kind: kind, Mode: mode, User: r.Job.User, Status: check.Worst(results).String(), Message: msg,
		Seconds: float64(took.Round(time.Millisecond)) / float64(time.Second),
	}
}

// PrintResults prints the table and logs FAILs and ERRORs.
func (r *Run) PrintResults(results []check.Result) {
	runenv.PrintTable(r.P.Stdout, r.Node, results, time.Since(r.Start))
	runenv.LogResults(r.Log, results)
}

// bootID is the run's one read of the boot id, where its environment has
// one.
func (r *Run) bootID() string {
	if r.Env.Boot != nil {
		return r.Env.Boot.ID()
	}
	return events.BootID(r.Cfg.Root)
}
