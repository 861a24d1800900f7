// Package catalog is the one list of checks gpuhc-healthcheck runs. Checks
// are registered here explicitly (as node_exporter does its collectors), so
// reading this file tells what a node is judged on.
package catalog

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/gpuhc/gpuhc/internal/bandwidth"
	"github.com/gpuhc/gpuhc/internal/bootid"
	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/fabric"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/host"
	"github.com/gpuhc/gpuhc/internal/ib"
	"github.com/gpuhc/gpuhc/internal/kernlog"
	"github.com/gpuhc/gpuhc/internal/kmsg"
	"github.com/gpuhc/gpuhc/internal/pcibus"
	"github.com/gpuhc/gpuhc/internal/statefile"
	"github.com/gpuhc/gpuhc/internal/sxid"
	"github.com/gpuhc/gpuhc/internal/topology"
	"github.com/gpuhc/gpuhc/internal/xid"
)

// Env is what the checks need beyond their configuration: the GPUs (real
// NVML or a simulated server), the run's kernel-log pass and the state
// directory.
type Env struct {
	GPU *gpu.Node
	// Kernel is the run's one read of the kernel log, shared by the rules
	// over it (see kernelRule); the program Commits it after the checks.
	// Nil: a log that cannot be read (the rules report ERROR).
	Kernel *kmsg.Log
	State  statefile.Dir
	// IB is the run's one scan of the RDMA devices, shared by the checks
	// that judge them (see fabricChecks). Nil: each Tasks call gathers
	// its own under cfg.Root.
	IB *ib.Gather
	// PCI is the run's one scan of the PCI bus (the GPUs and NVSwitches
	// on it), shared like IB. Nil: each Tasks call gathers its own.
	PCI *pcibus.Gather
	// Boot is the run's one read of the boot id (the IB counters, the
	// kernel-log cursor and the events share it). Nil: read under
	// cfg.Root by each.
	Boot *bootid.Once
}

type entry struct {
	common config.Common
	build  func() check.Check
}

// Tasks builds every enabled check of a health-check run with its time
// limit.
func Tasks(cfg config.Config, env Env) []check.Task {
	all := append(hostChecks(cfg), gpuChecks(cfg, env)...)
	all = append(all, kernelChecks(cfg, env)...)
	return enabled(cfg, append(all, fabricChecks(cfg, env)...))
}

// Deep builds the checks that load the node for seconds and so run only
// when asked for (gpuhc-healthcheck --deep, the prolog's full mode): the
// bandwidth measurements.
func Deep(cfg config.Config, env Env) []check.Task {
	b := cfg.Checks.Bandwidth
	return enabled(cfg, []entry{
		{b.Common, func() check.Check { return bandwidth.New(b, lookupGPU(env.GPU)) }},
	})
}

// kernelRule is the entry of a rule over the kernel-log pass, registered
// with it under the rule's name when built: the pass's cursor moves only
// once every rule registered has judged the run's lines (kmsg.Log). Each
// rule over the kernel log is one such line, in whichever list it
// belongs to; KernelRules (and the bench) find them all.
func kernelRule(common config.Common, l *kmsg.Log, build func(kmsg.Reader) check.Check) entry {
	return entry{common: common, build: func() check.Check {
		c := build(l)
		l.Register(c.Name())
		return c
	}}
}

// KernelRules builds the enabled rules over env's kernel-log pass, as
// Tasks does: the tasks that registered with it (test/bench -kmsg
// measures them).
func KernelRules(cfg config.Config, env Env) []check.Task {
	var rules []check.Task
	for _, t := range Tasks(cfg, env) {
		if slices.Contains(env.Kernel.Rules(), t.Check.Name()) {
			rules = append(rules, t)
		}
	}
	return rules
}

func enabled(cfg config.Config, entries []entry) []check.Task {
	var tasks []check.Task
	for _, e := range entries {
		if e.common.Enabled {
			tasks = append(tasks, check.Task{Check: e.build(), Timeout: timeout(cfg, e.common)})
		}
	}
	return tasks
}

func hostChecks(cfg config.Config) []entry {
	c, root := cfg.Checks, cfg.Root
	return []entry{
		{c.CPU.Common, func() check.Check { return host.NewCPU(root, c.CPU) }},
		{c.Memory.Common, func() check.Check { return host.NewMemory(root, c.Memory) }},
		{c.Modules.Common, func() check.Check { return host.NewModules(root, c.Modules) }},
		{c.Mounts.Common, func() check.Check { return host.NewMounts(root, c.Mounts) }},
		{c.Processes.Common, func() check.Check { return host.NewProcesses(root, c.Processes) }},
		{c.Thermal.Common, func() check.Check { return host.NewThermal(root, c.Thermal) }},
	}
}

func gpuChecks(cfg config.Config, env Env) []entry {
	if env.GPU == nil {
		return nil
	}
	g, n, st := cfg.Checks.GPU, env.GPU, env.State
	return []entry{
		{g.Count.Common, func() check.Check { return gpu.NewCount(n, g.Count) }},
		{g.Driver.Common, func() check.Check { return gpu.NewDriver(n, g.Driver) }},
		{g.Lost, func() check.Check { return gpu.NewLost(n) }},
		kernelRule(g.XID.Common, env.Kernel, func(k kmsg.Reader) check.Check { return xid.New(n, g.XID, st, k) }),
		{g.Recovery.Common, func() check.Check { return gpu.NewRecovery(n) }},
		{g.Memory.Common, func() check.Check { return gpu.NewMemory(n, g.Memory) }},
		{g.PCIe.Common, func() check.Check { return gpu.NewPCIe(n, g.PCIe, st) }},
		{g.NVLink.Common, func() check.Check { return gpu.NewNVLink(n, g.NVLink, st) }},
		{g.Fabric, func() check.Check { return gpu.NewFabric(n, st) }},
		{g.Thermal.Common, func() check.Check { return gpu.NewThermal(n, g.Thermal, st) }},
		{g.Power, func() check.Check { return gpu.NewPower(n) }},
		{g.Config.Common, func() check.Check { return gpu.NewConfig(n, g.Config) }},
	}
}

// kernelChecks are the rules over the run's one kernel-log pass besides
// gpu.xid: the host faults and the NVSwitch SXids. A device named by an
// AER line is placed on the PCI bus under cfg.Root only when one is seen.
func kernelChecks(cfg config.Config, env Env) []entry {
	c, st := cfg.Checks, env.State
	paths := kernlog.NewPaths(cfg.Root, nil)
	return []entry{
		kernelRule(c.Kernel.Common, env.Kernel, func(k kmsg.Reader) check.Check { return kernlog.New(c.Kernel, paths, st, k) }),
		kernelRule(c.Fabric.SXid.Common, env.Kernel, func(k kmsg.Reader) check.Check { return sxid.New(c.Fabric.SXid, st, k) }),
	}
}

// fabricChecks are the InfiniBand/RoCE, Fabric Manager and GPU<->NIC
// placement checks (docs/architecture.md#checks). They read sysfs under
// cfg.Root and use the GPU node, when there is one, to know which GPUs
// exist. All of them judge one scan of the RDMA devices (env.IB, or one gathered here):
// the RDMA class is walked and each ConnectX function's VPD read once a
// run, whichever of them runs first.
func fabricChecks(cfg config.Config, env Env) []entry {
	c, root, st := cfg.Checks, cfg.Root, env.State
	pci := env.PCI
	if pci == nil {
		pci = pcibus.NewGather(root)
	}
	gpus, count := topology.FromBus(pci), busGPUs(pci)
	if env.GPU != nil {
		gpus, count = topology.FromNode(env.GPU), countGPUs(env.GPU)
	}
	devs := env.IB
	if devs == nil {
		devs = ib.NewGather(root)
	}
	boot := env.Boot
	if boot == nil {
		boot = bootid.New(root)
	}
	return []entry{
		{c.IB.Port.Common, func() check.Check { return ib.NewPort(devs, c.IB) }},
		{c.IB.Counters.Common, func() check.Check { return ib.NewCounters(root, devs, c.IB, st, ib.WithBoot(boot)) }},
		{c.IB.GDR.Common, func() check.Check { return ib.NewGDR(root, devs, c.IB, count) }},
		{c.Fabric.Manager.Common, func() check.Check { return fabric.NewManager(root, devs, pci, c.Fabric.Manager, env.GPU, st) }},
		{c.Topology.Common, func() check.Check { return topology.New(root, devs, c.Topology, c.IB.Exclude, gpus) }},
	}
}

// busGPUs counts the GPUs on the run's PCI bus scan, for ib.gdr on a node
// run without a GPU node.
func busGPUs(pci *pcibus.Gather) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		b, err := pci.Bus(ctx)
		if err != nil {
			return 0, err
		}
		gpus, err := b.GPUs()
		return len(gpus), err
	}
}

// countGPUs counts the node's GPUs for ib.gdr: those NVML (or the
// simulation) shows, or the PCI bus has, whichever is more.
func countGPUs(n *gpu.Node) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		inv, err := n.Inventory(ctx)
		if errors.Is(err, gpu.ErrNoGPUs) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		return max(len(inv.GPUs), len(inv.OnBus)), nil
	}
}

// lookupWait bounds how long the bandwidth check waits for the GPU
// inventory to name a device; NVML is normally up by then.
const lookupWait = 2 * time.Second

// lookupGPU names a CUDA device by its PCI address as the GPU checks do.
func lookupGPU(n *gpu.Node) func(pci string) (string, check.IDs, bool) {
	if n == nil {
		return nil
	}
	return func(pci string) (string, check.IDs, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), lookupWait)
		defer cancel()
		inv, err := n.Inventory(ctx)
		if err != nil {
			return "", check.IDs{}, false
		}
		g, ok := inv.ByPCI(pci)
		if !ok {
			return "", check.IDs{}, false
		}
		return g.Component(), g.IDs(), true
	}
}

func timeout(cfg config.Config, c config.Common) time.Duration {
	t := cfg.CheckTimeout.Duration
	if c.Timeout.Duration > 0 {
		t = c.Timeout.Duration
	}
	return min(t, cfg.Deadline.Duration)
}
