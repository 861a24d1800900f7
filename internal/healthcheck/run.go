package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuhc/gpuhc/internal/bootid"
	"github.com/gpuhc/gpuhc/internal/catalog"
	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/lock"
	"github.com/gpuhc/gpuhc/internal/logging"
	"github.com/gpuhc/gpuhc/internal/policy"
	"github.com/gpuhc/gpuhc/internal/runenv"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

func (p Program) run(node string, cfg config.Config, o options) int {
	start := time.Now()
	b, lim, clamped := p.budget(&cfg)
	wd := p.watchdog(b)
	defer wd.Stop()

	log, closer, err := logging.New(cfg.Log, "gpuhc-healthcheck", p.Stderr)
	if err != nil {
		// A full or read-only /var must not stop the checks: stderr still
		// reaches slurmd's log.
		fmt.Fprintf(p.Stderr, "gpuhc-healthcheck: %v; logging to stderr only\n", err)
		cfg.Log.File = ""
		if log, closer, err = logging.New(cfg.Log, "gpuhc-healthcheck", p.Stderr); err != nil {
			fmt.Fprintf(p.Stderr, "gpuhc-healthcheck: %v\n", err)
			return ExitInternal
		}
	}
	defer closer.Close()
	entry := log.WithField("node", node)
	if clamped != "" {
		// Checking in less time beats being killed every interval.
		entry.Warnf("%s: checking with a %s deadline (%s)", clamped, b.Deadline, lim.source)
	}
	if lim.note != "" {
		entry.Warn(lim.note)
	}
	if h, ok := nodeHealth(p.Getenv); ok {
		entry = entry.WithField("slurm_node_is_healthy", h)
	}

	l, err := lock.Try(cfg.LockFile)
	if errors.Is(err, lock.ErrHeld) {
		return p.lockHeld(entry, node, cfg, b, err, start)
	}
	if err != nil {
		entry.WithError(err).Error("cannot take the run lock")
		return ExitInternal
	}
	defer l.Release()

	p.boot = bootid.New(cfg.Root)
	// Before the checks' world is built and NVML starts: a reset needs
	// the GPUs free of us too, and what it changed is what they see.
	if !o.deep {
		p.remediate(entry, node, cfg, o.Simulate != "", start)
	}
	env, err := checkEnv(cfg, o, p.boot)
	if err != nil {
		fmt.Fprintf(p.Stderr, "gpuhc-healthcheck: %v\n", err)
		return ExitUsage
	}
	p.gpus = env.GPU
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(cfg.Deadline.Duration))
	tasks := catalog.Tasks(cfg, env)
	if o.deep {
		deep := catalog.Deep(cfg, env)
		if len(deep) == 0 {
			fmt.Fprintln(p.Stdout, "--deep: nothing more to run, bandwidth is off ([checks.bandwidth] enabled = false)")
		}
		tasks = append(tasks, deep...)
	}
	tr := newTracker(tasks)
	stopTerm := p.onTerm(entry, node, cfg, tr, start)
	defer stopTerm()
	// NVML gets most of the deadline to start, leaving at least 15 s (or
	// half the deadline) for the checks themselves.
	runenv.WarmGPUs(ctx, env, tasks, max(cfg.Deadline.Duration-15*time.Second, cfg.Deadline.Duration/2))
	early := p.earlyDrainer(entry, node, cfg, b, o, start, tr)
	timed := check.Stream(ctx, tasks, func(i int, t check.Timed) {
		one := []check.Timed{t}
		if o.Simulate != "" {
			runenv.MarkSimulated(one)
		}
		if o.KernelLog != "" {
			runenv.MarkReplayed(one, env.Kernel.Rules())
		}
		tr.finish(i, t)
		early.offer()
	})
	cancel()
	early.wait()
	if !cfg.Policy.DryRun {
		runenv.CommitKernelLog(entry, env)
	}
	results := check.Flatten(timed)
	if o.Simulate != "" {
		fmt.Fprintf(p.Stdout, "SIMULATED %s: GPU results come from NVIDIA's simulated server, not this node's GPUs\n", o.Simulate)
	}
	runenv.PrintTable(p.Stdout, node, results, time.Since(start))
	runenv.LogResults(entry, results)

	return p.finish(entry, node, cfg, b, timed, results, start, o.deep)
}

// stuckAfter is when a lock holder is no longer slow but stuck: every run
// ends by 58 s, so a holder this old is a process the kernel will not let
// die, blocked in a hung filesystem or driver call.
const stuckAfter = 5 * time.Minute

// lockHeld handles an overlapping run. A run merely in progress is left to
// finish; a stuck one means this node is sick, and nothing else will ever
// check it again while the lock stays held.
func (p Program) lockHeld(log *logrus.Entry, node string, cfg config.Config, b config.Budget, held error, start time.Time) int {
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
	runenv.PrintTable(p.Stdout, node, results, time.Since(start))
	runenv.LogResults(log, results)
	return p.finish(log, node, cfg, b, nil, results, start, false)
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
// measurements, metrics) unless this is a dry run, and returns the exit
// code. deep is a --deep run's.
func (p Program) finish(entry *logrus.Entry, node string, cfg config.Config, b config.Budget, timed []check.Timed, results []check.Result, start time.Time, deep bool) int {
	code := exitCode(results)
	// The Slurm calls get whatever is left before the watchdog: a REST call
	// to a sick slurmctld can take ~10 s before scontrol gets its turn.
	pctx, pcancel := context.WithDeadline(context.Background(), start.Add(b.CallsEnd))
	defer pcancel()
	kind := runPlain
	if deep {
		kind = runDeep
	}
	state, err := p.applyPolicy(pctx, entry, node, cfg, results, kind)
	if !cfg.Policy.DryRun && !deep {
		p.judgeRemediation(entry, node, cfg, results, state)
	}
	if err != nil {
		entry.WithError(err).Error(policyFailure(err, "policy could not act; will retry next run"))
		if code == ExitHealthy {
			code = ExitInternal
		}
	}
	if h, ok := nodeHealth(p.Getenv); ok {
		if hint := healthHint(h, state.Drained != nil, code == ExitFail); hint != "" {
			entry.Info(hint)
		}
	}
	if !cfg.Policy.DryRun {
		// After the policy, so nothing here can delay or change a drain.
		by := policy.By
		if deep {
			by = deepBy
		}
		p.record(pctx, entry, node, cfg, timed, results, state.Drained != nil, state.Suppressed != "", by)
	}
	return code
}

// runKind says which policy run applyPolicy makes.
type runKind int

const (
	runPlain runKind = iota
	// runDeep is a --deep run's.
	runDeep
	// runEarly drains from the checks finished so far (policy.Engine.Early).
	runEarly
)

// deepBy is who acts, in events and the policy's drain record, for a
// --deep run.
const deepBy = "healthcheck --deep"

// applyPolicy drains or resumes as the results require. It returns the
// policy state as it now stands (what was known before, if it could not
// act), for the metrics.
//
// A --deep run drains as any run, but as a job run does (policy.Job): it
// never resumes, and its statuses are merged into the plain runs'. Its
// drain is recorded as deepBy's, not the health check's, so that the
// plain runs, which do not measure bandwidth, hold a bandwidth drain
// rather than resume it after resume_after runs that never looked.
func (p Program) applyPolicy(ctx context.Context, log *logrus.Entry, node string, cfg config.Config, results []check.Result, kind runKind) (policy.State, error) {
	store := policy.NewStore(cfg.StateDir, node)
	prev, loadErr := store.Load()
	if loadErr != nil {
		// Draining needs no memory of the past, so a broken state file must
		// not stop it; only a resume depends on the record.
		log.WithError(loadErr).Error("starting from an empty policy state")
	}
	ctl, err := slurm.New(cfg.Slurm, slurm.WithLogger(log),
		slurm.WithVersionCache(slurm.VersionCacheFile(cfg.StateDir), cfg.Policy.DryRun))
	if err != nil {
		return prev, fmt.Errorf("node control: %w", err)
	}
	eng := policy.Engine{
		Node: node, Policy: cfg.Policy, DryRun: cfg.Policy.DryRun, Ctl: ctl,
		BootID: p.bootID(cfg), StormFile: policy.StormFile(cfg.StateDir), Now: p.Clock,
	}
	switch kind {
	case runDeep:
		eng.Job = &policy.Job{By: deepBy}
	case runEarly:
		eng.Early = true
	}
	run, applyErr := eng.Apply(ctx, results, prev)
	if kind == runEarly {
		fmt.Fprint(p.Stdout, "early: ")
	}
	runenv.PrintOutcome(p.Stdout, run.Outcome, ctl.Backend(), ctl.Calls(), cfg.Policy.DryRun)
	runenv.LogOutcome(log, run.Outcome, ctl.Backend())
	if cfg.Policy.DryRun {
		return run.State, applyErr
	}
	if err := (events.Log{Path: cfg.Events.File}).Append(ctx, run.Events...); err != nil {
		log.WithError(err).Error("event log")
	}
	if loadErr != nil && !errors.Is(loadErr, policy.ErrCorrupt) {
		// Unreadable (EIO, permissions): do not overwrite what we could not read.
		return run.State, stateLost(applyErr, fmt.Errorf("unreadable, not overwritten: %w", loadErr))
	}
	if !run.State.Equal(prev) {
		if err := store.Save(run.State); err != nil {
			return run.State, stateLost(applyErr, err)
		}
	}
	return run.State, applyErr
}

// errStateLost marks an applyPolicy error that is only about the policy
// state file: what the policy did in Slurm (its printed and logged
// outcome, a drain included) stands, but the next run starts from the
// state saved before (and adopts a drain it finds on the node). A full or
// read-only state directory must not be logged as a drain not made.
var errStateLost = errors.New("policy state not saved")

// stateLost is the error of a policy run whose state could not be kept:
// marked errStateLost when the policy itself acted, joined to its error
// otherwise.
func stateLost(applyErr, err error) error {
	if applyErr != nil {
		return errors.Join(applyErr, err)
	}
	return fmt.Errorf("%w: %w", errStateLost, err)
}

// policyFailure is the log message for applyPolicy's error: failed, unless
// only the state was lost.
func policyFailure(err error, failed string) string {
	if errors.Is(err, errStateLost) {
		return "policy acted, but its state could not be saved; the next run starts from the state saved before"
	}
	return failed
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
