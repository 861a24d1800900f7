package config

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
)

// Prolog configures gpuhc-prolog (slurmd's Prolog).
type Prolog struct {
	// Budget bounds a quick run's checks. Slurm waits for the Prolog
	// before the job starts, so every second here is a second of every
	// job's start.
	Budget Duration `toml:"budget"`
	// Checks are the checks a quick run runs, by name.
	Checks []string `toml:"checks"`
	// FullChecks are run as well in full mode (SPANK_GPUHC_MODE=full, or
	// a partition in FullPartitions), after Checks, under FullBudget.
	FullChecks []string `toml:"full_checks"`
	// FullPartitions are partitions whose every job gets the full prolog.
	FullPartitions []string `toml:"full_partitions"`
	FullBudget     Duration `toml:"full_budget"`
	// LockWait is how long a run waits for the health check's lock before
	// it goes on with its state directory read-only.
	LockWait Duration `toml:"lock_wait"`
	// MaxJobRecords bounds the per-job start records (state_dir/jobs/)
	// that the epilog reads back; the oldest beyond it are removed.
	MaxJobRecords int `toml:"max_job_records"`
}

// Epilog configures gpuhc-epilog (slurmd's Epilog).
type Epilog struct {
	Budget   Duration `toml:"budget"`
	Checks   []string `toml:"checks"`
	LockWait Duration `toml:"lock_wait"`
	// Leftover is what to do about GPU processes of the job's user that
	// outlived the job: "report" (WARN), "kill" (then FAIL if the GPU is
	// still held), "drain" (FAIL) or "off".
	Leftover string `toml:"leftover"`
	// LeftoverMemoryMiB is the GPU memory in use, with no process of
	// another job on the GPU, above which the job's GPU did not release its
	// memory; 0 does not judge memory.
	LeftoverMemoryMiB int `toml:"leftover_memory_mib" unit:"MiB"`
	// KillGrace is the wait between SIGTERM and SIGKILL in "kill" mode.
	KillGrace Duration `toml:"kill_grace"`
	// FailExit is the exit status after a FAIL (once the node is drained
	// with our reason): 1 makes slurmd drain the node as well ("Epilog
	// error", which does not replace our reason) should our drain fail.
	FailExit int `toml:"fail_exit"`
	// AdminComment makes the epilog also write a one-line summary to the
	// job's AdminComment (scontrol update JobId=N AdminComment=...), last
	// and within a few seconds; a refusal is logged and changes nothing.
	// Slurm 22.05, 24.11 and 26.05 refuse it: the job is completing.
	AdminComment bool `toml:"admin_comment"`
}

// Leftover modes.
const (
	LeftoverReport = "report"
	LeftoverKill   = "kill"
	LeftoverDrain  = "drain"
	LeftoverOff    = "off"
)

// MaxFullBudget bounds the full prolog. Slurm waits for a Prolog for
// PrologEpilogTimeout, which is unlimited by default, so nothing but this
// keeps a hung full run from holding the job forever.
const MaxFullBudget = 10 * time.Minute

// KnownChecks lists the names a [prolog] or [epilog] check list may use:
// every check gpuhc has, as it names itself in results and reasons. A
// build may lack some of them (the list is the config's, not the
// catalog's); a run then reports them as not run.
func KnownChecks() []string {
	return []string{
		"bandwidth",
		"fabric.manager", "fabric.sxid",
		"gpu.config", "gpu.count", "gpu.driver", "gpu.fabric", "gpu.lost", "gpu.memory",
		"gpu.nvlink", "gpu.pcie", "gpu.power", "gpu.recovery", "gpu.thermal", "gpu.xid",
		"host.cpu", "host.kernel", "host.memory", "host.modules", "host.mounts", "host.processes", "host.thermal",
		"ib.counters", "ib.gdr", "ib.port",
		"topology",
	}
}

func defaultProlog() Prolog {
	return Prolog{
		Budget:         Duration{5 * time.Second},
		Checks:         []string{"gpu.count", "gpu.lost", "gpu.xid", "gpu.recovery", "gpu.memory", "gpu.fabric", "host.kernel", "fabric.sxid", "ib.port", "fabric.manager"},
		FullChecks:     []string{"bandwidth"},
		FullPartitions: []string{},
		FullBudget:     Duration{60 * time.Second},
		LockWait:       Duration{time.Second},
		MaxJobRecords:  1000,
	}
}

func defaultEpilog() Epilog {
	return Epilog{
		Budget:            Duration{10 * time.Second},
		Checks:            []string{"gpu.count", "gpu.lost", "gpu.xid", "gpu.recovery", "gpu.memory", "host.kernel", "fabric.sxid"},
		LockWait:          Duration{time.Second},
		Leftover:          LeftoverReport,
		LeftoverMemoryMiB: 1024,
		KillGrace:         Duration{2 * time.Second},
		FailExit:          1,
	}
}

func (ps *problems) prolog(p Prolog) {
	ps.timeout("prolog.budget", p.Budget.Duration, MaxDeadline, false)
	ps.checkNames("prolog.checks", p.Checks)
	ps.checkNames("prolog.full_checks", p.FullChecks)
	for i, name := range p.FullPartitions {
		if name == "" || strings.ContainsFunc(name, func(r rune) bool { return r == ',' || !unicode.IsPrint(r) || unicode.IsSpace(r) }) {
			ps.add(fmt.Sprintf("prolog.full_partitions[%d]", i), "%q is not a partition name", name)
		}
	}
	ps.timeout("prolog.full_budget", p.FullBudget.Duration, MaxFullBudget, false)
	ps.lockWait("prolog.lock_wait", p.LockWait.Duration, p.Budget.Duration)
	if p.MaxJobRecords < 1 {
		ps.add("prolog.max_job_records", "must be at least 1, got %d", p.MaxJobRecords)
	}
}

func (ps *problems) epilog(e Epilog) {
	ps.timeout("epilog.budget", e.Budget.Duration, MaxDeadline, false)
	ps.checkNames("epilog.checks", e.Checks)
	ps.lockWait("epilog.lock_wait", e.LockWait.Duration, e.Budget.Duration)
	ps.oneOf("epilog.leftover", e.Leftover, LeftoverReport, LeftoverKill, LeftoverDrain, LeftoverOff)
	if e.LeftoverMemoryMiB < 0 {
		ps.add("epilog.leftover_memory_mib", "must not be negative (0 does not judge memory), got %d", e.LeftoverMemoryMiB)
	}
	if d := e.KillGrace.Duration; d < 0 || d >= e.Budget.Duration {
		ps.add("epilog.kill_grace", "want 0s or more, below the budget (%s), got %s", e.Budget.Duration, d)
	}
	if e.FailExit != 0 && e.FailExit != 1 {
		ps.add("epilog.fail_exit", "want 0 or 1, got %d", e.FailExit)
	}
}

// checkNames refuses names no check has, listing those that exist, and
// names listed twice.
func (ps *problems) checkNames(key string, names []string) {
	known := KnownChecks()
	for i, n := range names {
		at := fmt.Sprintf("%s[%d]", key, i)
		switch {
		case !slices.Contains(known, n):
			ps.add(at, "%q is not a check; known: %s", n, strings.Join(known, ", "))
		case slices.Index(names, n) < i:
			ps.add(at, "%q is listed twice", n)
		}
	}
}

// lockWait must leave the run time to check: it comes out of the budget.
func (ps *problems) lockWait(key string, d, budget time.Duration) {
	if d < 0 || (budget > 0 && d >= budget) {
		ps.add(key, "want 0s or more, below the budget (%s), got %s", budget, d)
	}
}
