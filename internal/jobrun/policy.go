package jobrun

import (
	"context"
	"errors"
	"fmt"
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
}

// FailExit reports whether the run must exit non-zero: it found a
// drain-worthy result, and this is not a dry run. The drain with our
// reason was attempted first (Apply); whether it was made or not (Slurm
// unreachable), a non-zero exit keeps the job off the node: slurmd then
// drains with "Prolog error", which does not replace a reason already
// set. The one exception is a drain the storm guard refused: exiting
// non-zero would have slurmd drain the node anyway, and with it every
// node of a fleet failing at once for a shared cause.
func (o Outcome) FailExit(dry bool) bool {
	return len(o.Worthy) > 0 && !dry && o.Run.Outcome.Kind != policy.DrainSuppressed
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
		BootID: events.BootID(r.Cfg.Root), StormFile: policy.StormFile(r.Cfg.StateDir), Now: r.Now,
		Job: &policy.Job{ID: r.Job.JobID, By: r.P.By, AfterJob: afterJob},
	}
	o := Outcome{Worthy: eng.DrainWorthy(results)}
	if len(o.Worthy) > 0 {
		r.Failing()
	}
	ctl, err := r.controller()
	if err != nil {
		// Without node control a drain cannot be made; the exit code
		// still keeps the job off a failing node.
		o.Err = fmt.Errorf("node control: %w", err)
		o.Run = policy.Run{Outcome: policy.Outcome{Kind: policy.Failed, Detail: o.Err.Error()}}
		runenv.PrintOutcome(r.P.Stdout, o.Run.Outcome, "", 0, r.Cfg.Policy.DryRun)
		r.Log.WithError(o.Err).Error("policy could not act")
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
	if r.P.Controller != nil {
		return r.P.Controller(r.Cfg.Slurm, r.Log)
	}
	return slurm.New(r.Cfg.Slurm, slurm.WithLogger(r.Log))
}

// Append writes events to the event log, each stamped with the run's
// node, job, program and boot id where it has none; nothing in a dry
// run. A failure is logged: the record must never change the outcome.
func (r *Run) Append(evs ...events.Event) {
	if r.Cfg.Policy.DryRun || len(evs) == 0 {
		return
	}
	boot := events.BootID(r.Cfg.Root)
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
