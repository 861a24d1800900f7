// Package jobrun is what gpuhc-prolog and gpuhc-epilog share: their
// flags, the configuration, the job's environment, the health check's
// lock, running a named set of checks under a time budget, and the policy
// in job mode (drain with our reason first, never resume).
//
// Exit codes differ from the health check's where slurmd reads them: a
// non-zero Prolog or Epilog makes slurmd drain the node ("Prolog error",
// "Epilog error") and a non-zero Prolog requeues the job. So under Slurm
// only a FAIL exits non-zero; a usage or configuration error, an internal
// error and an ERROR ("could not check") exit 0 with a loud log, since a
// fault of gpuhc's (or a bad config pushed to every node) must not drain
// the fleet or kill jobs. Run by hand (no SLURM_SCRIPT_CONTEXT and no
// SLURM_JOB_ID), they keep the health check's codes 2 and 3
// (docs/architecture.md#exit-codes).
package jobrun

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuhc/gpuhc/internal/catalog"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/jobenv"
	"github.com/gpuhc/gpuhc/internal/lock"
	"github.com/gpuhc/gpuhc/internal/logging"
	"github.com/gpuhc/gpuhc/internal/runenv"
	"github.com/gpuhc/gpuhc/internal/slurm"
	"github.com/gpuhc/gpuhc/internal/version"
)

// Exit codes.
const (
	ExitOK       = 0
	ExitFail     = 1
	ExitUsage    = 2
	ExitInternal = 3
)

// Program is what the process gives a job program.
type Program struct {
	// Name is the binary ("gpuhc-prolog"), By what events call it
	// ("prolog").
	Name string
	By   string
	// Usage is the text --help prints before the options.
	Usage string
	// Flags registers the program's own flags, if any.
	Flags func(*flag.FlagSet)

	runenv.Process
	// Controller builds node control; slurm.New when nil. Tests record
	// calls with a fake.
	Controller func(config.Slurm, logrus.FieldLogger) (slurm.Controller, error)
}

const exitStatus = "\nExit status under slurmd: 1 after a FAIL (the node drained with our reason\nfirst), else 0. By hand: 0 healthy, WARN or ERROR, 1 FAIL, 2 usage or\nconfiguration error, 3 internal error.\n"

func (p Program) parse() (runenv.Flags, error) {
	var o runenv.Flags
	fs := runenv.NewFlagSet(p.Name, p.Stderr, p.Usage, exitStatus)
	o.Register(fs, "run the checks and print what would be done; drain nothing, save nothing, exit 0", "gpu3:xid=79 or gpu2:leftover=4242")
	if p.Flags != nil {
		p.Flags(fs)
	}
	err := o.Parse(fs, p.Args)
	return o, err
}

// Run is one prolog or epilog run in progress.
type Run struct {
	P    Program
	Opts runenv.Flags
	Node string
	Job  jobenv.Env
	Cfg  config.Config
	Log  *logrus.Entry
	// Env is what the checks see; its State is read-only when ReadOnly.
	Env catalog.Env
	// ReadOnly is set in a dry run, and when the health check's lock
	// could not be had: the state directory is then never written.
	ReadOnly bool
	Start    time.Time

	lock    *lock.Lock
	ctl     slurm.Controller // built by controller, then kept
	closer  io.Closer
	wd      *time.Timer
	failing atomic.Bool
}

// Main runs the program, begin then run, and returns the exit code. A
// panic is a bug of ours: reported, and under slurmd never a reason to
// fail the job.
func (p Program) Main(budget func(config.Config) time.Duration, run func(*Run) int) (code int) {
	job := jobenv.Parse(p.Getenv)
	defer func() {
		if v := recover(); v != nil {
			fmt.Fprintf(p.Stderr, "%s: internal error: %v\n%s", p.Name, v, debug.Stack())
			code = p.quiet(job, ExitInternal)
		}
	}()
	r, code, ok := p.begin(budget)
	if !ok {
		return code
	}
	defer r.Close()
	return run(r)
}

// begin parses the flags, the job's environment and the configuration,
// sets up logging and takes the lock. ok false means the program is done
// (--help, --version, --check-config, or an error) and exits with code.
func (p Program) begin(budget func(config.Config) time.Duration) (r *Run, code int, ok bool) {
	start := time.Now()
	job := jobenv.Parse(p.Getenv)
	o, err := p.parse()
	if errors.Is(err, flag.ErrHelp) {
		return nil, ExitOK, false
	}
	if err != nil {
		fmt.Fprintf(p.Stderr, "%s: %v (see --help)\n", p.Name, err)
		return nil, p.quiet(job, ExitUsage), false
	}
	if o.ShowVersion {
		fmt.Fprintln(p.Stdout, version.String(p.Name))
		return nil, ExitOK, false
	}
	node, err := runenv.NodeName(o.Node, job.Node, p.Hostname)
	if err != nil {
		fmt.Fprintf(p.Stderr, "%s: %v; nothing checked, node left alone\n", p.Name, err)
		return nil, p.quiet(job, ExitUsage), false
	}
	cfg, err := config.LoadOrDefault(o.ConfigPath, node, o.Explicit)
	if err != nil {
		// A broken config must never drain, nor fail a job: loud, and
		// exit 0 under slurmd.
		fmt.Fprintf(p.Stderr, "%s: configuration error, nothing checked, node left alone: %v\n", p.Name, err)
		return nil, p.quiet(job, ExitUsage), false
	}
	if o.CheckConfig {
		fmt.Fprintf(p.Stdout, "configuration OK: %s (node %s)\n", o.ConfigPath, node)
		return nil, ExitOK, false
	}
	if o.DryRun {
		cfg.Policy.DryRun = true
	}
	r = &Run{P: p, Opts: o, Node: node, Job: job, Cfg: cfg, Start: start, ReadOnly: cfg.Policy.DryRun}
	r.wd = r.watchdog(budget(cfg))
	log, closer, err := logging.New(cfg.Log, p.Name, p.Stderr)
	if err != nil {
		// A full or read-only /var must not stop the checks: stderr still
		// reaches slurmd's log.
		fmt.Fprintf(p.Stderr, "%s: %v; logging to stderr only\n", p.Name, err)
		cfg.Log.File = ""
		if log, closer, err = logging.New(cfg.Log, p.Name, p.Stderr); err != nil {
			fmt.Fprintf(p.Stderr, "%s: %v\n", p.Name, err)
			r.wd.Stop()
			return nil, p.quiet(job, ExitInternal), false
		}
	}
	r.closer = closer
	r.Log = log.WithFields(logrus.Fields{"node": node, "job_id": job.JobID, "program": p.By})
	for _, pr := range job.Problems {
		r.Log.Warnf("job environment: %s", pr)
	}
	r.Log.WithFields(logrus.Fields{"uid": job.UID, "user": job.User, "partition": job.Partition, "context": job.Context,
		"nodes": job.NodeList, "nodes_from": job.NodeListVar, "gpus": fmt.Sprint(job.GPUs), "mode": job.Mode}).Info("job")
	r.checkNodeList()
	if !r.ReadOnly {
		r.takeLock()
	}
	env, err := runenv.Checks(cfg, o.Simulate, o.Inject, r.ReadOnly)
	if err != nil {
		fmt.Fprintf(p.Stderr, "%s: %v\n", p.Name, err)
		r.Close()
		return nil, p.quiet(job, ExitUsage), false
	}
	r.Env = env
	return r, 0, true
}

// quiet maps usage, configuration and internal errors to 0 under slurmd.
func (p Program) quiet(job jobenv.Env, code int) int {
	if job.Slurm && code != ExitFail {
		return ExitOK
	}
	return code
}

// Quiet is quiet for this run's job.
func (r *Run) Quiet(code int) int { return r.P.quiet(r.Job, code) }

// checkNodeList warns when the job's node list does not name this node:
// a wrapper run by hand with a stale environment, or a --node typo.
func (r *Run) checkNodeList() {
	if r.Job.NodeList == "" {
		return
	}
	hl, err := config.ParseHostList(r.Job.NodeList)
	if err != nil {
		r.Log.Warnf("job environment: %s=%q is not a node list: %v", r.Job.NodeListVar, r.Job.NodeList, err)
		return
	}
	if !hl.Match(r.Node) {
		r.Log.Warnf("job environment: %s=%s does not name this node %s", r.Job.NodeListVar, r.Job.NodeList, r.Node)
	}
}

// lockPoll is how often a waiting run retries the lock.
const lockPoll = 25 * time.Millisecond

// takeLock waits up to lock_wait for the health check's lock. The health
// check, and the prologs and epilogs of jobs starting or ending together,
// share the state directory (XID cursor, counters, the policy's record);
// each of them writes its files atomically, but two runs that both read,
// then both write, would lose one's update. Without the lock the run goes
// on read-only: it still drains on a FAIL, but moves no cursor and keeps
// no record (see config [prolog] lock_wait).
func (r *Run) takeLock() {
	wait := r.lockWait()
	deadline := time.Now().Add(wait)
	for {
		l, err := lock.Try(r.Cfg.LockFile)
		if err == nil {
			r.lock = l
			return
		}
		if !errors.Is(err, lock.ErrHeld) || !time.Now().Add(lockPoll).Before(deadline) {
			r.Log.WithError(err).Warnf("no run lock within %s; checking with the state directory read-only", wait)
			r.ReadOnly = true
			return
		}
		time.Sleep(lockPoll)
	}
}

func (r *Run) lockWait() time.Duration {
	if r.P.By == "epilog" {
		return r.Cfg.Epilog.LockWait.Duration
	}
	return r.Cfg.Prolog.LockWait.Duration
}

// Close releases the lock and the log file and stops the watchdog.
func (r *Run) Close() {
	if r.wd != nil {
		r.wd.Stop()
	}
	if r.lock != nil {
		r.lock.Release()
		r.lock = nil
	}
	if r.closer != nil {
		r.closer.Close()
	}
}

// Failing records that the run found a drain-worthy failure, so that a
// watchdog exit still says so to slurmd.
func (r *Run) Failing() { r.failing.Store(true) }

// slurmTime is what a run allows, on top of the checks' budget, for the
// drain: the storm guard's random wait, then slow Slurm calls (as the
// health check's 15 s).
const slurmTime = 15 * time.Second

// HardLimit is how long the whole run may take: the lock wait, the
// checks' budget, then the drain.
func (r *Run) HardLimit(budget time.Duration) time.Duration {
	return r.lockWait() + budget + r.Cfg.Policy.StormJitter.Duration + slurmTime
}

// watchdog ends a run that overstays (an NVML or Slurm call hung past
// every timeout): Slurm waits for a Prolog as long as PrologEpilogTimeout
// allows, unlimited by default, and the job waits with it.
func (r *Run) watchdog(budget time.Duration) *time.Timer {
	limit := r.HardLimit(budget)
	return time.AfterFunc(limit, func() {
		code := r.Quiet(ExitInternal)
		if r.failing.Load() && !r.Cfg.Policy.DryRun {
			code = ExitFail
		}
		fmt.Fprintf(r.P.Stderr, "%s: still running after %s; exiting %d\n", r.P.Name, limit, code)
		if r.P.Exit != nil {
			r.P.Exit(code)
		} else {
			os.Exit(code)
		}
	})
}

// Now is the run's clock.
func (r *Run) Now() time.Time { return r.P.Clock() }

// Context is a context that ends at the run's hard limit, less a margin
// for the last writes.
func (r *Run) Context(budget time.Duration) (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.Background(), r.Start.Add(r.HardLimit(budget)-2*time.Second))
}
