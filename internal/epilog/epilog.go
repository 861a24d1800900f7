// Package epilog is gpuhc-epilog: slurmd's Epilog. After a job it
//   - records in the event log, with the job id, the XIDs and GPU memory
//     errors that appeared during the job (from the prolog's record, see
//     jobrecord), so that "did my job die of the hardware?" has an
//     answer whatever the health check did meanwhile;
//   - handles GPU processes the job left behind, and GPU memory it did
//     not give back (job.leftover: report, kill or drain);
//   - runs its checks ([epilog] checks), and applies drain-after-job
//     actions now that the job is over;
//   - with [epilog] admin_comment, writes a one-line summary (Summary)
//     to the job's AdminComment, last and within a few seconds.
//
// On a FAIL it drains the node with our reason first, then exits
// [epilog] fail_exit.
package epilog

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/jobrecord"
	"github.com/gpuhc/gpuhc/internal/jobrun"
	"github.com/gpuhc/gpuhc/internal/runenv"
	"github.com/gpuhc/gpuhc/internal/slurm"
	"github.com/gpuhc/gpuhc/internal/xid"
)

// Program is what the process gives the epilog.
type Program struct {
	runenv.Process
	// Controller replaces node control built from the config (tests).
	Controller func(config.Slurm, logrus.FieldLogger) (slurm.Controller, error)
	// Kill replaces SysKiller (tests). Processes are only ever killed on
	// a real node: never in a dry run, a simulation, or with a root other
	// than "/".
	Kill Killer
}

const usage = `Usage: gpuhc-epilog [options]
       gpuhc-epilog --check-config [FILE]

slurmd's Epilog (slurm.conf Epilog=/usr/sbin/gpuhc-epilog). After a job it
records the XIDs and GPU memory errors that appeared during the job in the
event log with the job id, handles GPU processes the job left behind
([epilog] leftover), and runs [epilog] checks. On a FAIL it drains the node
with a "gpuhc: ..." reason first, then exits [epilog] fail_exit. It never
resumes a node.

Options:
`

// Main runs the epilog and returns the exit code (see jobrun.Program.Main).
func (p Program) Main() int {
	jp := jobrun.Program{
		Name: "gpuhc-epilog", By: "epilog", Usage: usage,
		Process: p.Process, Controller: p.Controller,
	}
	budget := func(cfg config.Config) time.Duration { return cfg.Epilog.Budget.Duration }
	return jp.Main(budget, func(r *jobrun.Run) int { return p.run(r, budget(r.Cfg)) })
}

func (p Program) run(r *jobrun.Run, budget time.Duration) int {
	cfg := r.Cfg
	fmt.Fprintf(r.P.Stdout, "gpuhc-epilog: job %s (user %s, uid %s)\n", orUnknown(r.Job.JobID), orUnknown(r.Job.User), uidString(r.Job.UID))
	if r.Opts.Simulate != "" {
		fmt.Fprintf(r.P.Stdout, "SIMULATED %s: GPU results come from NVIDIA's simulated server, not this node's GPUs\n", r.Opts.Simulate)
	}
	names := slices.Clone(cfg.Epilog.Checks)
	var extra []check.Task
	if cfg.Epilog.Leftover != config.LeftoverOff {
		extra = append(extra, check.Task{Check: p.leftover(r), Timeout: budget})
		names = append(names, LeftoverName)
	}
	timed := r.RunChecks(extra, names, budget, false)
	runenv.CommitKernelLog(r.Log, r.Env)
	results := check.Flatten(timed)
	r.PrintResults(results)

	// Drain first: nothing below may delay or prevent it.
	out := r.Apply(results, true, budget)

	evs := append([]events.Event{}, out.Run.Events...)
	evs = append(evs, leftoverEvents(results)...)
	attributed := p.attribute(r, budget)
	evs = append(evs, attributed...)
	r.Append(append(evs, r.Summary(events.KindEpilog, "", results, out))...)
	// Last, bounded, and whatever it does the exit status stays.
	adminComment(r, budget, Summary(attributed, out.Worthy, out.Run.Outcome.Kind))

	fail := out.FailExit(cfg.Policy.DryRun)
	switch {
	case cfg.Policy.DryRun && len(out.Worthy) > 0:
		fmt.Fprintf(r.P.Stdout, "dry run: would exit %d; exiting 0\n", cfg.Epilog.FailExit)
	case fail && cfg.Epilog.FailExit != 0:
		fmt.Fprintf(r.P.Stdout, "exit %d (epilog.fail_exit)\n", cfg.Epilog.FailExit)
		return cfg.Epilog.FailExit
	case len(out.Worthy) > 0 && !fail:
		fmt.Fprintf(r.P.Stdout, "%s: exit 0\n", out.ExitNote(cfg.Policy.DryRun))
	}
	return jobrun.ExitOK
}

// leftover builds the job.leftover check. Killing needs a real node: a
// dry run, a simulation (whose pids are made up) or a fixture root gets
// no killer, and "kill" then says what it would kill.
func (p Program) leftover(r *jobrun.Run) *Leftover {
	var k Killer = SysKiller{}
	if p.Kill != nil {
		k = p.Kill
	}
	if r.Cfg.Policy.DryRun || r.Opts.Simulate != "" || (r.Cfg.Root != "/" && p.Kill == nil) {
		k = nil
	}
	root := r.Cfg.Root
	return &Leftover{
		Node: r.Env.GPU, Job: r.Job, Cfg: r.Cfg.Epilog, Kill: k,
		Proc: func(pid int) (Proc, error) { return ReadProc(root, pid) },
	}
}

// leftoverEvents records what job.leftover found, with what was done.
func leftoverEvents(results []check.Result) []events.Event {
	var out []events.Event
	for _, r := range results {
		if r.Check != LeftoverName || (r.Status != check.Warn && r.Status != check.Fail) {
			continue
		}
		out = append(out, events.Event{
			Kind: events.KindJobLeftover, Check: r.Check, Component: r.Component, Serial: r.IDs.Serial,
			Status: r.Status.String(), Message: r.Message, Action: string(r.Action),
		})
	}
	return out
}

// attribute compares the hardware with the prolog's record of the job's
// start: the XIDs logged since, and the memory error counters that grew.
// The record is removed afterwards (except in a dry run), read or not.
func (p Program) attribute(r *jobrun.Run, budget time.Duration) []events.Event {
	if r.Job.JobID == "" {
		return nil
	}
	store := jobrecord.Store{Dir: jobrecord.Dir(r.Env.State.Path)}
	rec, err := store.Load(r.Job.JobID)
	if !r.Cfg.Policy.DryRun {
		defer func() {
			if err := store.Remove(r.Job.JobID); err != nil {
				r.Log.WithError(err).Warn("job record not removed")
			}
		}()
	}
	switch {
	case errors.Is(err, jobrecord.ErrNoRecord):
		fmt.Fprintf(r.P.Stdout, "job %s: no prolog record; XIDs and memory errors during the job not attributed\n", r.Job.JobID)
		return nil
	case err != nil:
		r.Log.WithError(err).Warn("job record unreadable; XIDs and memory errors during the job not attributed")
		return nil
	}
	ctx, cancel := r.Context(budget)
	defer cancel()
	inv, _ := r.Env.GPU.Inventory(ctx)
	var out []events.Event
	xids, note, err := jobrecord.XIDs(ctx, r.Env.Kernel.Source(), rec)
	if err != nil {
		r.Log.WithError(err).Warn("kernel log unreadable; XIDs during the job not attributed")
	}
	if note != "" {
		fmt.Fprintf(r.P.Stdout, "job %s: %s\n", r.Job.JobID, note)
	}
	verdicts := xid.NewTable(r.Cfg.Checks.GPU.XID).JudgeEach(xids)
	for i, x := range xids {
		comp, serial := name(inv, rec, x.PCI)
		v := verdicts[i]
		// The catalogue's verdict, its decode included (an NVLink5
		// Nonfatal 145 is OK, a 154 names the recovery action).
		ev := events.Event{
			Kind: events.KindJobXID, Check: xid.Name, Component: comp, Serial: serial, XID: x.XID,
			Message: mark(r, fmt.Sprintf("%s during job %s", v.Message, r.Job.JobID)),
			Status:  v.Status.String(),
		}
		if v.Status == check.Fail {
			ev.Action = string(v.Action)
		}
		out = append(out, ev)
	}
	after, err := jobrecord.Snapshot(ctx, r.Env.GPU)
	if err != nil {
		r.Log.WithError(err).Debug("GPU memory error counters not (all) read")
	}
	for _, c := range jobrecord.Diff(rec.GPUs, after) {
		st := check.Warn
		if c.Severe {
			st = check.Fail
		}
		out = append(out, events.Event{
			Kind: events.KindJobMemory, Check: "gpu.memory", Component: fmt.Sprintf("gpu%d", c.Index), Serial: c.Serial,
			Status: st.String(), Message: mark(r, fmt.Sprintf("%s during job %s", c.Message, r.Job.JobID)),
		})
	}
	for _, ev := range out {
		fmt.Fprintf(r.P.Stdout, "job %s: %s: %s: %s\n", r.Job.JobID, ev.Component, ev.Status, ev.Message)
	}
	if len(out) == 0 && len(xids) == 0 {
		fmt.Fprintf(r.P.Stdout, "job %s: no XID and no memory error during the job\n", r.Job.JobID)
	}
	return out
}

// mark tags what a simulation made up.
func mark(r *jobrun.Run, s string) string {
	if r.Opts.Simulate == "" {
		return s
	}
	return s + " [simulated]"
}

// name finds the GPU at a PCI address: in NVML's inventory, else in the
// prolog's record (a GPU that fell off the bus), else by address alone.
func name(inv *gpu.Inventory, rec jobrecord.Record, pci string) (component, serial string) {
	if inv != nil {
		if g, ok := inv.ByPCI(pci); ok {
			return g.Component(), g.Serial
		}
	}
	for _, c := range rec.GPUs {
		if c.PCI == pci {
			return fmt.Sprintf("gpu%d", c.Index), c.Serial
		}
	}
	return pci, ""
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func uidString(uid int) string {
	if uid < 0 {
		return "unknown"
	}
	return fmt.Sprint(uid)
}
