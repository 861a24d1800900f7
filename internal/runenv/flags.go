package runenv

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

// Flags are the options every program that runs checks takes; each
// program adds its own (--deep, --mode, ...) to the same flag set.
type Flags struct {
	ConfigPath string
	// Explicit is set when the configuration file was named (--config,
	// or --check-config FILE): it must then exist, where the default
	// path may be absent (built-in defaults).
	Explicit    bool
	CheckConfig bool
	DryRun      bool
	Node        string
	ShowVersion bool
	Simulate    string
	Inject      []string
	// KernelLog is --kernel-log FILE (gpuhc-healthcheck only: see
	// RegisterKernelLog).
	KernelLog string
}

// NewFlagSet returns the flag set of program name, whose errors and
// --help go to stderr: usage, the options, then footer (the exit codes).
func NewFlagSet(name string, stderr io.Writer, usage, footer string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
		fmt.Fprint(stderr, footer)
	}
	return fs
}

// Register adds the common flags to fs. The programs differ in what a
// dry run leaves undone (dryRunHelp is --dry-run's whole help) and in the
// faults worth showing (injectExample, e.g. "gpu3:xid=79").
func (f *Flags) Register(fs *flag.FlagSet, dryRunHelp, injectExample string) {
	fs.StringVar(&f.ConfigPath, "config", config.DefaultPath, "configuration `file`")
	fs.BoolVar(&f.CheckConfig, "check-config", false, "validate the configuration (optionally FILE) and exit 0 or 2")
	fs.BoolVar(&f.DryRun, "dry-run", false, dryRunHelp)
	fs.StringVar(&f.Node, "node", "", "node `name` (default $SLURMD_NODENAME, then the short host name)")
	fs.BoolVar(&f.ShowVersion, "version", false, "print the version and exit")
	fs.StringVar(&f.Simulate, "simulate", "", "run the GPU checks against NVIDIA's simulated `server`: dgxa100, dgxh100, dgxh200 or dgxb200 (fire drills; results and reasons are marked [simulated])")
	fs.Var((*listFlag)(&f.Inject), "inject", "with --simulate, inject a fault `gpuN:fault[=value]`, e.g. "+injectExample+" (repeatable, or comma-separated)")
}

// RegisterKernelLog adds --kernel-log, which judges a saved kernel log as
// if it were the kernel's (a program that runs the kernel-log rules and
// builds its World with it: gpuhc-healthcheck).
func (f *Flags) RegisterKernelLog(fs *flag.FlagSet) {
	fs.StringVar(&f.KernelLog, "kernel-log", "", "judge a saved kernel log `file` as if it were this boot's kernel log, every line new: "+
		"raw /dev/kmsg records, dmesg, dmesg -T, syslog or journalctl -k lines, or bare kernel lines; only with --dry-run or --simulate (--simulate without --dry-run is a fire drill: it drains as any --simulate run does)")
}

// ErrKernelLogLive refuses --kernel-log on a live run: an old or foreign
// log would drain this node, and move its real kernel-log cursor.
var ErrKernelLogLive = errors.New("--kernel-log needs --dry-run or --simulate: a saved log must not be taken for this node's own, nor move its kernel-log cursor (with --simulate and no --dry-run it is a fire drill, which drains as any --simulate run does)")

// Parse parses args with fs (on which Register was called), takes
// --check-config's optional FILE, and refuses what the common flags do
// not allow together. --help is flag.ErrHelp; any other error is a usage
// error.
func (f *Flags) Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "config" {
			f.Explicit = true
		}
	})
	rest := fs.Args()
	if f.CheckConfig && len(rest) == 1 {
		f.ConfigPath, f.Explicit, rest = rest[0], true, nil
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected argument %q", rest[0])
	}
	if len(f.Inject) > 0 && f.Simulate == "" {
		return errors.New("--inject needs --simulate")
	}
	if f.KernelLog != "" && !f.DryRun && f.Simulate == "" {
		return ErrKernelLogLive
	}
	return nil
}

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// NodeName is the node's Slurm name: flagNode (--node), else slurmdName
// (SLURMD_NODENAME, as the caller takes it from the environment), else the
// short host name. It follows slurmd: SLURMD_NODENAME is the Slurm name,
// which may differ from the host name on multi-slurmd test beds.
func NodeName(flagNode, slurmdName string, hostname func() (string, error)) (string, error) {
	name := flagNode
	if name == "" {
		name = slurmdName
	}
	if name == "" {
		h, err := hostname()
		if err != nil {
			return "", fmt.Errorf("no --node, no valid SLURMD_NODENAME and no host name: %w", err)
		}
		name, _, _ = strings.Cut(h, ".")
	}
	if err := slurm.ValidateName(name); err != nil {
		return "", fmt.Errorf("node name: %w", err)
	}
	return name, nil
}
