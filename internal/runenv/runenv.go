// Package runenv is what gpuhc's programs that run checks share
// (gpuhc-healthcheck, gpuhc-prolog, gpuhc-epilog): what the process gives
// them, their common flags and the node's name, the world the checks see
// (real NVML and /dev/kmsg or one of NVIDIA's simulated servers), and how
// a run's results and policy outcome are printed and logged.
package runenv

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/sirupsen/logrus"

	"github.com/gpuhc/gpuhc/internal/bootid"
	"github.com/gpuhc/gpuhc/internal/catalog"
	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
	"github.com/gpuhc/gpuhc/internal/kmsg"
	"github.com/gpuhc/gpuhc/internal/pcibus"
	"github.com/gpuhc/gpuhc/internal/policy"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

// Checks gives the checks the real NVML library and /dev/kmsg, or, with
// simulate set (--simulate), one of NVIDIA's simulated servers with the
// inject faults. Nothing is loaded here: NVML is opened by the first GPU
// check that asks. A readOnly state directory (a dry run, or a job run
// without the health check's lock) is read but never written.
func Checks(cfg config.Config, simulate string, inject []string, readOnly bool) (catalog.Env, error) {
	return World{Simulate: simulate, Inject: inject, ReadOnly: readOnly}.Env(cfg)
}

// World is what a run's checks see beyond the configuration.
type World struct {
	Simulate string   // --simulate MODEL: NVIDIA's simulated server
	Inject   []string // --inject faults, with Simulate
	// KernelLog (--kernel-log FILE) is a saved kernel log judged in place
	// of the kernel's (kmsg.Replay): every line of it is new. Only with
	// Simulate or a read-only (dry) run, which Flags.Parse enforces.
	KernelLog string
	ReadOnly  bool
	// Boot is the run's boot id when the program read it already (nil:
	// read here, once, under cfg.Root).
	Boot *bootid.Once
}

// Env builds the checks' environment, its kernel-log pass included (the
// program Commits it after the checks).
func (w World) Env(cfg config.Config) (catalog.Env, error) {
	st := statefile.Dir{Path: cfg.StateDir, ReadOnly: w.ReadOnly}
	g := cfg.Checks.GPU
	pci, boot := pcibus.NewGather(cfg.Root), w.Boot
	if boot == nil {
		boot = bootid.New(cfg.Root)
	}
	var replay kmsg.Source
	if w.KernelLog != "" {
		src, err := kmsg.Replay(w.KernelLog)
		if err != nil {
			return catalog.Env{}, fmt.Errorf("--kernel-log: %w", err)
		}
		replay = src
	}
	if w.Simulate == "" {
		src := kmsg.KmsgSource(cfg.Root, g.XID.Kmsg, boot)
		if replay != nil {
			src = replay
		}
		return catalog.Env{
			GPU:    gpu.NewNode(nvml.New(), cfg.Root, g.Count.Expected, "", gpu.WithBus(pci.GPUs)),
			Kernel: kmsg.NewLog(src, st),
			State:  st,
			PCI:    pci,
			Boot:   boot,
		}, nil
	}
	m, err := sim.Build(w.Simulate, w.Inject)
	if err != nil {
		return catalog.Env{}, err
	}
	// A fire drill's counters and kernel-log cursor must not mix with the
	// real GPUs' (a simulated boot id would reset the real cursor).
	st.Path = SimulatedStateDir(cfg.StateDir)
	if id := boot.ID(); id != "" {
		// The simulated kernel boots with the host: a reboot starts a new
		// simulated boot too, as remediation's reboot expects.
		m.BootID = id
	}
	src := kmsg.SimulatedSource(m.Kmsg, m.BootID, m.KmsgWatchedFrom())
	if replay != nil {
		src = replay
	}
	return catalog.Env{
		GPU:    gpu.NewNode(m.Server, cfg.Root, g.Count.Expected, w.Simulate, gpu.WithBus(m.OnBus)),
		Kernel: kmsg.NewLog(src, st),
		State:  st,
		PCI:    pci,  // the host's bus, for the NVSwitches: the simulation has none of its own
		Boot:   boot, // the host's, for events; the simulated log has its own
	}, nil
}

// CommitKernelLog moves the kernel-log cursor past this run's lines, if
// every rule over them judged them (kmsg.Log.Commit); a rule that did not
// (it timed out) sees them again next run. A read-only state directory
// (a dry run) is never written.
func CommitKernelLog(log logrus.FieldLogger, env catalog.Env) {
	saved, err := env.Kernel.Commit()
	switch {
	case err != nil:
		log.WithError(err).Error("kernel log cursor not saved; the next run judges these lines again")
	case !saved:
		if p := env.Kernel.Pending(); len(p) > 0 {
			log.WithField("rules", strings.Join(p, ",")).Info("kernel log cursor kept: not every rule judged this run's lines; the next run reads them again")
		}
	}
}

// SimulatedStateDir is where --simulate runs keep their state.
func SimulatedStateDir(stateDir string) string { return filepath.Join(stateDir, "simulated") }

// WarmGPUs starts NVML before the checks' clocks start, within budget, if
// any of tasks is a GPU check (see gpu.Node.Warm).
func WarmGPUs(ctx context.Context, env catalog.Env, tasks []check.Task, budget time.Duration) {
	if env.GPU == nil || !slices.ContainsFunc(tasks, func(t check.Task) bool { return strings.HasPrefix(t.Check.Name(), "gpu.") }) {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	env.GPU.Warm(wctx)
}

// MarkSimulated tags the GPU results of a --simulate run, so that the
// table, the events and any drain reason they cause say it was a fire
// drill. Host checks ran for real, and their results stay as they are.
func MarkSimulated(timed []check.Timed) {
	for i := range timed {
		if !strings.HasPrefix(timed[i].Name, "gpu.") {
			continue
		}
		for j := range timed[i].Results {
			timed[i].Results[j].Message += " [simulated]"
		}
	}
}

// MarkReplayed tags the results of the rules over a replayed kernel log
// (--kernel-log), so that the table, the events and any drain reason they
// cause say the lines came from a file. Results a fire drill already
// marked [simulated] stay as they are.
func MarkReplayed(timed []check.Timed, rules []string) {
	for i := range timed {
		if !slices.Contains(rules, timed[i].Name) {
			continue
		}
		for j := range timed[i].Results {
			if m := &timed[i].Results[j].Message; !strings.HasSuffix(*m, " [simulated]") {
				*m += " [replayed]"
			}
		}
	}
}

// PrintTable writes the results and a summary line.
func PrintTable(w io.Writer, node string, results []check.Result, took time.Duration) {
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

// PrintOutcome writes the policy line: "policy: drained: gpuhc: ...
// [2 Slurm calls via scontrol]".
func PrintOutcome(w io.Writer, out policy.Outcome, backend string, calls int, dry bool) {
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
		via = " via " + backend
	}
	fmt.Fprintf(w, "%s [%d Slurm calls%s]\n", line, calls, via)
}

// LogResults logs the FAIL and ERROR results.
func LogResults(log *logrus.Entry, results []check.Result) {
	for _, r := range results {
		if r.Status != check.Fail && r.Status != check.Error {
			continue
		}
		log.WithFields(logrus.Fields{"check": r.Check, "component": r.Component, "status": r.Status.String(),
			"action": string(r.Action)}).Warn(r.Message)
	}
}

// LogOutcome logs what the policy did, when it did anything.
func LogOutcome(log *logrus.Entry, out policy.Outcome, backend string) {
	switch out.Kind {
	case policy.Drained, policy.Resumed:
		log.WithField("backend", backend).Warnf("%s: %s", out.Kind, out.Detail)
	case policy.DrainSuppressed:
		// The storm guard held back a drain: many nodes failing at once
		// point at a shared cause (a config push, a hung NFS server) that
		// an admin must look at.
		log.WithField("backend", backend).Errorf("%s: %s", out.Kind, out.Detail)
	case policy.ForeignDrain, policy.Held, policy.Released:
		log.Infof("%s: %s", out.Kind, out.Detail)
	}
}
