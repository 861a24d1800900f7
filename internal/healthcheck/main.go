// Package healthcheck is gpuhc-healthcheck: slurmd's HealthCheckProgram.
// It runs the checks, prints a table, and drains or resumes the node
// through the policy. The main package only hands it the process's world.
package healthcheck

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/gpuhc/gpuhc/internal/bootid"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/runenv"
	"github.com/gpuhc/gpuhc/internal/version"
)

// Exit codes (docs/architecture.md#exit-codes).
const (
	ExitHealthy  = 0
	ExitFail     = 1
	ExitUsage    = 2
	ExitInternal = 3
)

// Program is what the process gives the health check. Its Exit is called
// by the watchdog if a run overstays.
type Program struct {
	runenv.Process
	// SlurmConf lists where slurm.conf is looked for under the config's
	// root; nil means slurmconf.Paths.
	SlurmConf []string
	// Term delivers the SIGTERM slurmd sends at HealthCheckTimeout; nil
	// means the process's own signals.
	Term <-chan os.Signal

	boot *bootid.Once // the run's boot id, once its environment is built
	gpus *gpu.Node    // the run's GPUs, once its environment is built
}

// options are the common flags and the health check's own.
type options struct {
	runenv.Flags
	inventory bool
	deep      bool
}

const usage = `Usage: gpuhc-healthcheck [options]
       gpuhc-healthcheck --check-config [FILE]

Runs gpuhc's node health checks (slurmd's HealthCheckProgram). On a failure
it drains the node with a "gpuhc: <check>: <component>: <message>" reason;
once the node is healthy again it resumes drains that are its own.

--deep adds the bandwidth measurements ([checks.bandwidth]), which load the
GPUs for seconds: it is for admins, and slurmd's HealthCheckProgram must
never run it. Its figures go to the event log ("measurement" events) and
the metrics (gpuhc_measurement). A drain it makes for bandwidth is not
resumed by the plain runs, which do not measure: resume it by hand.

--kernel-log FILE judges a saved kernel log (cat /dev/kmsg, dmesg, dmesg -T,
syslog or journalctl -k lines, or bare lines pasted from a bug report) as if
it were this boot's, every line new, and prints the verdicts and exit code a
real run would give: "would gpuhc have drained this node?". It needs
--dry-run (the real GPUs, nothing written) or --simulate MODEL (the
simulated state directory); results from it are marked [replayed].

Options:
`

const exitStatus = "\nExit status: 0 healthy or WARN, 1 FAIL, 2 usage or configuration error,\n3 internal error, a check could not run, or another run is in progress.\n"

func (p Program) parse() (options, error) {
	var o options
	fs := runenv.NewFlagSet("gpuhc-healthcheck", p.Stderr, usage, exitStatus)
	o.Register(fs, "run the checks and print what would be done, changing nothing", "gpu3:xid=79")
	fs.BoolVar(&o.inventory, "print-inventory", false, "print, for bring-up, the configuration this node satisfies now (GPU count, HCAs and ports, GPU/NIC pairing) and exit")
	o.RegisterKernelLog(fs)
	fs.BoolVar(&o.deep, "deep", false, "also run the bandwidth measurements (seconds of GPU load; for admins, not for HealthCheckProgram)")
	err := o.Parse(fs, p.Args)
	return o, err
}

// Main runs the program and returns the exit code. A panic is a bug of
// ours: it is reported and exits 3, and it never drains (the policy acts
// only on results, after the checks).
func (p Program) Main() (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(p.Stderr, "gpuhc-healthcheck: internal error: %v\n%s", r, debug.Stack())
			code = ExitInternal
		}
	}()
	o, err := p.parse()
	if errors.Is(err, flag.ErrHelp) {
		return ExitHealthy
	}
	if err != nil {
		fmt.Fprintf(p.Stderr, "gpuhc-healthcheck: %v (see --help)\n", err)
		return ExitUsage
	}
	if o.ShowVersion {
		fmt.Fprintln(p.Stdout, version.String("gpuhc-healthcheck"))
		return ExitHealthy
	}
	node, err := runenv.NodeName(o.Node, p.Getenv("SLURMD_NODENAME"), p.Hostname)
	if err != nil {
		fmt.Fprintf(p.Stderr, "gpuhc-healthcheck: %v\n", err)
		return ExitUsage
	}
	cfg, err := config.LoadOrDefault(o.ConfigPath, node, o.Explicit)
	if err != nil {
		// A broken config must never drain: say so loudly and stop here.
		fmt.Fprintf(p.Stderr, "gpuhc-healthcheck: configuration error, nothing checked, node left alone: %v\n", err)
		return ExitUsage
	}
	if o.CheckConfig {
		return p.checkConfig(cfg, o, node)
	}
	if o.inventory {
		return p.printInventory(node, cfg, o)
	}
	if o.DryRun {
		cfg.Policy.DryRun = true
	}
	return p.run(node, cfg, o)
}

func describe(path string, explicit bool) string {
	if _, err := os.Stat(path); err != nil && !explicit {
		return path + " absent, built-in defaults"
	}
	return path
}

// checkConfig reports the configuration and the time budget, and refuses
// a deadline the file sets that cannot fit in HealthCheckTimeout.
func (p Program) checkConfig(cfg config.Config, o options, node string) int {
	l := p.limit(cfg)
	if err := config.CheckFit(cfg, l.d); err != nil {
		fmt.Fprintf(p.Stderr, "gpuhc-healthcheck: configuration error: %v (%s)\n", err, l)
		return ExitUsage
	}
	fmt.Fprintf(p.Stdout, "configuration OK: %s (node %s)\n", describe(o.ConfigPath, o.Explicit), node)
	b, _ := config.Fit(l.d, cfg.Deadline.Duration)
	fmt.Fprintf(p.Stdout, "time budget: %s: deadline %s, Slurm calls until %s, watchdog %s\n", l, b.Deadline, b.CallsEnd, b.Watchdog)
	if l.note != "" {
		fmt.Fprintf(p.Stdout, "note: %s\n", l.note)
	}
	return ExitHealthy
}

// watchdog ends the process shortly before slurmd's kill would
// (HealthCheckTimeout: SIGTERM, then SIGKILL 10 ms later), so a run that
// overstays (a hung Slurm call past every timeout) exits with a message
// rather than vanishing, in gpuhc's own time.
func (p Program) watchdog(b config.Budget) *time.Timer {
	return time.AfterFunc(b.Watchdog, func() {
		fmt.Fprintf(p.Stderr, "gpuhc-healthcheck: still running after %s; exiting before slurmd's kill at %s\n", b.Watchdog, b.Limit)
		p.Exit(ExitInternal)
	})
}
