// Package healthcheck is gpuhc-healthcheck: slurmd's HealthCheckProgram.
// It runs the checks, prints a table, and drains or resumes the node
// through the policy. The main package only hands it the process's world.
package healthcheck

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/slurm"
	"github.com/gpuhc/gpuhc/internal/version"
)

// Exit codes (design.md §9).
const (
	ExitHealthy  = 0
	ExitFail     = 1
	ExitUsage    = 2
	ExitInternal = 3
)

// Program is what the process gives the health check.
type Program struct {
	Args     []string
	Getenv   func(string) string
	Hostname func() (string, error)
	Stdout   io.Writer
	Stderr   io.Writer
	// Exit is called by the watchdog if a run overstays; os.Exit in main.
	Exit func(int)
	// Now is the clock for the policy, events, heartbeats and metrics;
	// time.Now in main, and when nil.
	Now func() time.Time
}

type options struct {
	configPath  string
	explicit    bool
	checkConfig bool
	dryRun      bool
	node        string
	showVersion bool
	inventory   bool
	deep        bool
	simulate    string
	inject      listFlag
}

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

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

Options:
`

func (p Program) parse() (options, int, error) {
	var o options
	fs := flag.NewFlagSet("gpuhc-healthcheck", flag.ContinueOnError)
	fs.SetOutput(p.Stderr)
	fs.StringVar(&o.configPath, "config", config.DefaultPath, "configuration `file`")
	fs.BoolVar(&o.checkConfig, "check-config", false, "validate the configuration (optionally FILE) and exit 0 or 2")
	fs.BoolVar(&o.dryRun, "dry-run", false, "run the checks and print what would be done, changing nothing")
	fs.StringVar(&o.node, "node", "", "node `name` (default $SLURMD_NODENAME, then the short host name)")
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	fs.BoolVar(&o.inventory, "print-inventory", false, "print, for bring-up, the configuration this node satisfies now (GPU count, HCAs and ports, GPU/NIC pairing) and exit")
	fs.BoolVar(&o.deep, "deep", false, "also run the bandwidth measurements (seconds of GPU load; for admins, not for HealthCheckProgram)")
	fs.StringVar(&o.simulate, "simulate", "", "run the GPU checks against NVIDIA's simulated `server`: dgxa100, dgxh100, dgxh200 or dgxb200 (fire drills; results and reasons are marked [simulated])")
	fs.Var(&o.inject, "inject", "with --simulate, inject a fault `gpuN:fault[=value]`, e.g. gpu3:xid=79 (repeatable, or comma-separated)")
	fs.Usage = func() {
		fmt.Fprint(p.Stderr, usage)
		fs.PrintDefaults()
		fmt.Fprint(p.Stderr, "\nExit status: 0 healthy or WARN, 1 FAIL, 2 usage or configuration error,\n3 internal error, a check could not run, or another run is in progress.\n")
	}
	if err := fs.Parse(p.Args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, ExitHealthy, err
		}
		return o, ExitUsage, err
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "config" {
			o.explicit = true
		}
	})
	rest := fs.Args()
	if o.checkConfig && len(rest) == 1 {
		o.configPath, o.explicit, rest = rest[0], true, nil
	}
	if len(rest) > 0 {
		return o, ExitUsage, fmt.Errorf("unexpected argument %q", rest[0])
	}
	if len(o.inject) > 0 && o.simulate == "" {
		return o, ExitUsage, errors.New("--inject needs --simulate")
	}
	return o, 0, nil
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
	o, code, err := p.parse()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(p.Stderr, "gpuhc-healthcheck: %v (see --help)\n", err)
		}
		return code
	}
	if o.showVersion {
		fmt.Fprintln(p.Stdout, version.String("gpuhc-healthcheck"))
		return ExitHealthy
	}
	node, err := p.nodeName(o.node)
	if err != nil {
		fmt.Fprintf(p.Stderr, "gpuhc-healthcheck: %v\n", err)
		return ExitUsage
	}
	cfg, err := config.LoadOrDefault(o.configPath, node, o.explicit)
	if err != nil {
		// A broken config must never drain: say so loudly and stop here.
		fmt.Fprintf(p.Stderr, "gpuhc-healthcheck: configuration error, nothing checked, node left alone: %v\n", err)
		return ExitUsage
	}
	if o.checkConfig {
		fmt.Fprintf(p.Stdout, "configuration OK: %s (node %s)\n", describe(o.configPath, o.explicit), node)
		return ExitHealthy
	}
	if o.inventory {
		return p.printInventory(node, cfg, o)
	}
	if o.dryRun {
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

// nodeName follows slurmd: SLURMD_NODENAME is the Slurm name, which may
// differ from the host name on multi-slurmd test beds.
func (p Program) nodeName(flagNode string) (string, error) {
	name := flagNode
	if name == "" {
		name = p.Getenv("SLURMD_NODENAME")
	}
	if name == "" {
		h, err := p.Hostname()
		if err != nil {
			return "", fmt.Errorf("no --node, no SLURMD_NODENAME and no host name: %w", err)
		}
		name, _, _ = strings.Cut(h, ".")
	}
	if err := slurm.ValidateName(name); err != nil {
		return "", fmt.Errorf("node name: %w", err)
	}
	return name, nil
}

// watchdog ends the process shortly before slurmd's 60 s kill would, so a
// run that overstays (a hung Slurm call past every timeout) exits with a
// message rather than vanishing.
func (p Program) watchdog(cfg config.Config) *time.Timer {
	limit := hardLimit(cfg)
	return time.AfterFunc(limit, func() {
		fmt.Fprintf(p.Stderr, "gpuhc-healthcheck: still running after %s; exiting before slurmd's 60 s kill\n", limit)
		p.Exit(ExitInternal)
	})
}

// hardLimit is how long a run may take in all: the check deadline plus
// time for Slurm calls, and never as long as slurmd's 60 s.
func hardLimit(cfg config.Config) time.Duration {
	return min(cfg.Deadline.Duration+15*time.Second, 58*time.Second)
}
