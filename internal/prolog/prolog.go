// Package prolog is gpuhc-prolog: slurmd's Prolog. Before a job starts it
// runs the fast checks ([prolog] checks) within a few seconds, and in full
// mode (--gpu-health=full, or a partition in full_partitions) the
// bandwidth checks too. On a FAIL it drains the node with its own reason,
// then exits 1, so that Slurm requeues the job and keeps our reason. It
// also records, for the job's epilog, where the kernel log and the GPUs'
// memory error counters stood (jobrecord).
package prolog

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/jobenv"
	"github.com/gpuhc/gpuhc/internal/jobrecord"
	"github.com/gpuhc/gpuhc/internal/jobrun"
	"github.com/gpuhc/gpuhc/internal/runenv"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

// Program is what the process gives the prolog.
type Program struct {
	runenv.Process
	// Controller replaces node control built from the config (tests).
	Controller func(config.Slurm, logrus.FieldLogger) (slurm.Controller, error)
}

const usage = `Usage: gpuhc-prolog [options]
       gpuhc-prolog --check-config [FILE]

slurmd's Prolog (slurm.conf Prolog=/usr/sbin/gpuhc-prolog). Runs gpuhc's fast
checks ([prolog] checks) before a job starts, and in full mode the bandwidth
checks too. On a FAIL it drains the node with a "gpuhc: <check>: <component>:
<message>" reason, then exits 1: Slurm requeues the job and keeps that reason.
It never resumes a node.

Options:
`

// Main runs the prolog and returns the exit code (see jobrun.Program.Main).
func (p Program) Main() int {
	job := jobenv.Parse(p.Getenv)
	var modeFlag string
	jp := jobrun.Program{
		Name: "gpuhc-prolog", By: "prolog", Usage: usage,
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&modeFlag, "mode", "", "`quick` or full: the mode, instead of $SPANK_GPUHC_MODE and [prolog] full_partitions (by hand)")
		},
		Process: p.Process, Controller: p.Controller,
	}
	// The whole run's time: the checks', and the job record's two parts.
	budget := func(cfg config.Config) time.Duration {
		b := cfg.Prolog.Budget.Duration + 2*recordTime
		if mode(cfg, job, modeFlag) == jobenv.ModeFull {
			b += cfg.Prolog.FullBudget.Duration
		}
		return b
	}
	return jp.Main(budget, func(r *jobrun.Run) int {
		if modeFlag != "" && modeFlag != jobenv.ModeQuick && modeFlag != jobenv.ModeFull {
			fmt.Fprintf(p.Stderr, "gpuhc-prolog: --mode %q: want quick or full\n", modeFlag)
			return r.Quiet(jobrun.ExitUsage)
		}
		return run(r, mode(r.Cfg, r.Job, modeFlag), budget(r.Cfg))
	})
}

// mode is the run's mode: --mode, else full when the job asked for it
// (SPANK_GPUHC_MODE=full) or runs in one of [prolog] full_partitions.
func mode(cfg config.Config, job jobenv.Env, flagMode string) string {
	if flagMode != "" {
		return flagMode
	}
	if job.Mode == jobenv.ModeFull {
		return jobenv.ModeFull
	}
	for _, p := range cfg.Prolog.FullPartitions {
		if job.Partition != "" && job.Partition == p {
			return jobenv.ModeFull
		}
	}
	return jobenv.ModeQuick
}

func run(r *jobrun.Run, mode string, budget time.Duration) int {
	cfg := r.Cfg
	fmt.Fprintf(r.P.Stdout, "gpuhc-prolog: job %s (user %s, partition %s), mode %s\n",
		orUnknown(r.Job.JobID), orUnknown(r.Job.User), orUnknown(r.Job.Partition), mode)
	if r.Opts.Simulate != "" {
		fmt.Fprintf(r.P.Stdout, "SIMULATED %s: GPU results come from NVIDIA's simulated server, not this node's GPUs\n", r.Opts.Simulate)
	}
	rec := jobrecord.Record{JobID: r.Job.JobID, UID: r.Job.UID, User: r.Job.User, Start: r.Now(), BootID: r.Env.Kernel.Source().BootID()}
	keep := r.Job.JobID != "" && !cfg.Policy.DryRun
	if keep {
		// Before the checks: anything the kernel logs from here on is
		// the job's (an XID during the checks included).
		ctx, cancel := context.WithTimeout(context.Background(), min(cfg.Prolog.Budget.Duration, recordTime))
		next, err := jobrecord.Position(ctx, r.Env.Kernel.Source())
		cancel()
		if err != nil {
			r.Log.WithError(err).Warn("kernel log position not recorded; the epilog cannot name this job's XIDs")
		} else {
			rec.KmsgNext, rec.KmsgOK = next, true
		}
	}

	timed := r.RunChecks(nil, cfg.Prolog.Checks, cfg.Prolog.Budget.Duration, false)
	if mode == jobenv.ModeFull {
		if w := failures(check.Flatten(timed)); w > 0 {
			fmt.Fprintf(r.P.Stdout, "full mode: %s skipped, the quick checks failed\n", strings.Join(cfg.Prolog.FullChecks, ", "))
		} else {
			timed = append(timed, r.RunChecks(nil, cfg.Prolog.FullChecks, cfg.Prolog.FullBudget.Duration, true)...)
		}
	}
	runenv.CommitKernelLog(r.Log, r.Env)
	results := check.Flatten(timed)
	r.PrintResults(results)

	// Drain first: nothing below may delay or prevent it.
	out := r.Apply(results, false, budget)

	if keep {
		ctx, cancel := context.WithTimeout(context.Background(), min(cfg.Prolog.Budget.Duration, recordTime))
		gpus, err := jobrecord.Snapshot(ctx, r.Env.GPU)
		cancel()
		if err != nil {
			r.Log.WithError(err).Debug("GPU memory error counters not (all) recorded")
		}
		rec.GPUs = gpus
		store := jobrecord.Store{Dir: jobrecord.Dir(r.Env.State.Path), Max: cfg.Prolog.MaxJobRecords}
		if err := store.Save(rec); err != nil {
			r.Log.WithError(err).Error("job record not saved; the epilog cannot attribute this job's hardware errors")
		}
	}
	evs := append([]events.Event{}, out.Run.Events...)
	// The full checks' figures (bandwidth), after the drain like the rest.
	evs = append(evs, events.Measurements(events.Event{}, results)...)
	r.Append(append(evs, r.Summary(events.KindProlog, mode, results, out))...)

	fail := out.FailExit(cfg.Policy.DryRun)
	switch {
	case cfg.Policy.DryRun && len(out.Worthy) > 0:
		fmt.Fprintln(r.P.Stdout, "dry run: would exit 1 (slurmd would requeue the job); exiting 0")
	case fail:
		fmt.Fprintf(r.P.Stdout, "exit 1: slurmd requeues job %s\n", orUnknown(r.Job.JobID))
		return jobrun.ExitFail
	case len(out.Worthy) > 0:
		fmt.Fprintf(r.P.Stdout, "%s: exit 0, the job runs\n", out.ExitNote(cfg.Policy.DryRun))
	}
	return jobrun.ExitOK
}

// recordTime bounds each part of the job record (the kernel log position,
// the counters): a few NVML calls per GPU and one read of the log.
const recordTime = 2 * time.Second

func failures(results []check.Result) int {
	n := 0
	for _, r := range results {
		if r.Status == check.Fail {
			n++
		}
	}
	return n
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
