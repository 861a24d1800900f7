package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuhc/gpuhc/internal/catalog"
	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/lock"
	"github.com/gpuhc/gpuhc/internal/logging"
	"github.com/gpuhc/gpuhc/internal/policy"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

func (p Program) run(node string, cfg config.Config, o options) int {
	start := time.Now()
	wd := p.watchdog(cfg)
	defer wd.Stop()

	log, closer, err := logging.New(cfg.Log, p.Stderr)
	if err != nil {
		// A full or read-only /var must not stop the checks: stderr still
		// reaches slurmd's log.
		fmt.Fprintf(p.Stderr, "gpuhc-healthcheck: %v; logging to stderr only\n", err)
		cfg.Log.File = ""
		if log, closer, err = logging.New(cfg.Log, p.Stderr); err != nil {
			fmt.Fprintf(p.Stderr, "gpuhc-healthcheck: %v\n", err)
			return ExitInternal
		}
	}
	defer closer.Close()
	entry := log.WithField("node", node)

	l, err := lock.Try(cfg.LockFile)
	if errors.Is(err, lock.ErrHeld) {
		return p.lockHeld(entry, node, cfg, err, start)
	}
	if err != nil {
		entry.WithError(err).Error("cannot take the run lock")
		return ExitInternal
	}
	defer l.Release()

	env, err := checkEnv(cfg, o)
	if err != nil {
		fmt.Fprintf(p.Stderr, "gpuhc-healthcheck: %v\n", err)
		return ExitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Deadline.Duration)
	tasks := catalog.Tasks(cfg, env)
	warmGPUs(ctx, env, tasks, cfg.Deadline.Duration)
	timed := check.Run(ctx, tasks)
	cancel()
	if o.simulate != "" {
		markSimulated(timed)
	}
	results := check.Flatten(timed)
	if o.simulate != "" {
		fmt.Fprintf(p.Stdout, "SIMULATED %s: GPU results come from NVIDIA's simulated server, not this node's GPUs\n", o.simulate)
	}
	printTable(p.Stdout, node, results, time.Since(start))
	logResults(entry, results)

	return p.finish(entry, node, cfg, timed, results, start)
}

// warmGPUs starts NVML before the checks' clocks start, with most of the
// deadline as its budget, and leaves at least 15 s (or half the deadline)
// for the checks themselves.
func warmGPUs(ctx context.Context, env catalog.Env, tasks []check.Task, deadline time.Duration) {
	if env.GPU == nil || !slices.ContainsFunc(tasks, func(t check.Task) bool { return strings.HasPrefix(t.Check.Name(), "gpu.") }) {
		return
	}
	budget := max(deadline-15*time.Second, deadline/2)
	wctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	env.GPU.Warm(wctx)
}

// markSimulated tags the GPU results of a --simulate run, so that the
// table, the events and any drain reason they cause say it was a fire
// drill. Host checks ran for real, and their results stay as they are.
func markSimulated(timed []check.Timed) {
	for i := range timed {
		if !strings.HasPrefix(timed[i].Name, "gpu.") {
			continue
		}
		for j := range timed[i].Results {
			timed[i].Results[j].Message += " [simulated]"
		}
	}
}

// stuckAfter is when a lock holder is no longer slow but stuck: every run
// ends by 58 s, so a holder this old is a process the kernel will not let
// die, blocked in a hung filesystem or driver call.
const stuckAfter = 5 * time.Minute

// lockHeld handles an overlapping run. A run merely in progress is left to
// finish; a stuck one means this node is sick, and nothing else will ever
// check it again while the lock stays held.
func (p Program) lockHeld(log *logrus.Entry, node string, cfg config.Config, held error, start time.Time) int {
	pid, since, err := lock.Holder(cfg.LockFile)
	age := time.Since(since).Round(time.Second)
	if err != nil || age < stuckAfter || !isHealthcheck(cfg.Root, pid) {
		fmt.Fprintf(p.Stderr, "gpuhc-healthcheck: another run is still in progress (%v); exiting without checking\n", held)
		return ExitInternal
	}
	results := []check.Result{{
		Check: "healthcheck", Component: "host", Status: check.Fail, Action: check.ActionReboot,
		Message: fmt.Sprintf("previous run (pid %d) stuck for %s in a kernel call (hung filesystem or driver?)", pid, age),
	}}
	printTable(p.Stdout, node, results, time.Since(start))
	logResults(log, results)
	return p.finish(log, node, cfg, nil, results, start)
}

// isHealthcheck reports whether pid is a gpuhc-healthcheck process. The
// stamp in the lock file is only ours while that process lives: an admin's
// flock(1) on the file, or a recycled pid, must not read as a stuck run.
func isHealthcheck(root string, pid int) bool {
	b, err := os.ReadFile(filepath.Join(root, "proc", strconv.Itoa(pid), "comm"))
	// The kernel keeps the first 15 bytes of the name.
	return err == nil && strings.TrimSpace(string(b)) == "gpuhc-healthcheck"[:15]
}

// finish applies the policy to the results, keeps the books (heartbeat,
// metrics) unless this is a dry run, and returns the exit code.
func (p Program) finish(entry *logrus.Entry, node string, cfg config.Config, timed []check.Timed, results []check.Result, start time.Time) int {
	code := exitCode(results)
	// The Slurm calls get whatever is left before the watchdog: a REST call
	// to a sick slurmctld can take ~10 s before scontrol gets its turn.
	pctx, pcancel := context.WithDeadline(context.Background(), start.Add(hardLimit(cfg)-2*time.Second))
	defer pcancel()
	state, err := p.applyPolicy(pctx, entry, node, cfg, results)
	if err != nil {
		entry.WithError(err).Error("policy could not act; will retry next run")
		if code == ExitHealthy {
			code = ExitInternal
		}
	}
	if !cfg.Policy.DryRun {
		// After the policy, so nothing here can delay or change a drain.
		p.record(pctx, entry, node, cfg, timed, results, state.Drained != nil)
	}
	return code
}

// applyPolicy drains or resumes as the results require. It returns the
// policy state as it now stands (what was known before, if it could not
// act), for the metrics.
func (p Program) applyPolicy(ctx context.Context, log *logrus.Entry, node string, cfg config.Config, results []check.Result) (policy.State, error) {
	store := policy.NewStore(cfg.StateDir, node)
	prev, loadErr := store.Load()
	if loadErr != nil {
		// Draining needs no memory of the past, so a broken state file must
		// not stop it; only a resume depends on the record.
		log.WithError(loadErr).Error("starting from an empty policy state")
	}
	ctl, err := slurm.New(cfg.Slurm, slurm.WithLogger(log))
	if err != nil {
		return prev, fmt.Errorf("node control: %w", err)
	}
	eng := policy.Engine{
		Node: node, Policy: cfg.Policy, DryRun: cfg.Policy.DryRun, Ctl: ctl,
		BootID: events.BootID(cfg.Root), StormFile: policy.StormFile(cfg.StateDir), Now: p.now,
	}
	run, applyErr := eng.Apply(ctx, results, prev)
	p.printOutcome(run.Outcome, ctl, ctl.Calls(), cfg.Policy.DryRun)
	logOutcome(log, run.Outcome, ctl)
	if cfg.Policy.DryRun {
		return run.State, applyErr
	}
	if err := (events.Log{Path: cfg.Events.File}).Append(ctx, run.Events...); err != nil {
		log.WithError(err).Error("event log")
	}
	if loadErr != nil && !errors.Is(loadErr, policy.ErrCorrupt) {
		// Unreadable (EIO, permissions): do not overwrite what we could not read.
		return run.State, errors.Join(applyErr, loadErr)
	}
	if !run.State.Equal(prev) {
		if err := store.Save(run.State); err != nil {
			return run.State, errors.Join(applyErr, err)
		}
	}
	return run.State, applyErr
}

func exitCode(results []check.Result) int {
	switch check.Worst(results) {
	case check.Fail:
		return ExitFail
	case check.Error:
		return ExitInternal
	}
	return ExitHealthy
}

func printTable(w io.Writer, node string, results []check.Result, took time.Duration) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tCOMPONENT\tSTATUS\tMESSAGE")
	count := map[check.Status]int{}
	for _, r := range results {
		count[r.Status]++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Check, r.Component, r.Status, r.Message)
	}
	tw.Flush()
	fmt.Fprintf(w, "%s: %s: %d results (%d FAIL, %d ERROR, %d WARN, %d OK, %d SKIP) in %s\n",
		node, check.Worst(results), len(results), count[check.Fail], count[check.Error],
		count[check.Warn], count[check.OK], count[check.Skip], took.Round(time.Millisecond))
}

func (p Program) printOutcome(out policy.Outcome, ctl slurm.Controller, calls int, dry bool) {
	mode := ""
	if dry {
		mode = " (dry run)"
	}
	line := fmt.Sprintf("policy%s: %s", mode, out.Kind)
	if out.Detail != "" {
		line += ": " + out.Detail
	}
	via := ""
	if calls > 0 && out.Kind != policy.Failed {
		via = " via " + ctl.Backend()
	}
	fmt.Fprintf(p.Stdout, "%s [%d Slurm calls%s]\n", line, calls, via)
}

func logResults(log *logrus.Entry, results []check.Result) {
	for _, r := range results {
		if r.Status != check.Fail && r.Status != check.Error {
			continue
		}
		log.WithFields(logrus.Fields{"check": r.Check, "component": r.Component, "status": r.Status.String(),
			"action": string(r.Action)}).Warn(r.Message)
	}
}

func logOutcome(log *logrus.Entry, out policy.Outcome, ctl slurm.Controller) {
	switch out.Kind {
	case policy.Drained, policy.Resumed:
		log.WithField("backend", ctl.Backend()).Warnf("%s: %s", out.Kind, out.Detail)
	case policy.DrainSuppressed:
		// The storm guard held back a drain: many nodes failing at once
		// point at a shared cause (a config push, a hung NFS server) that
		// an admin must look at.
		log.WithField("backend", ctl.Backend()).Errorf("%s: %s", out.Kind, out.Detail)
	case policy.ForeignDrain, policy.Held, policy.Released:
		log.Infof("%s: %s", out.Kind, out.Detail)
	}
}
