// Package catalog is the one list of checks gpuhc-healthcheck runs. Checks
// are registered here explicitly (as node_exporter does its collectors), so
// reading this file tells what a node is judged on.
package catalog

import (
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/host"
	"github.com/gpuhc/gpuhc/internal/statefile"
	"github.com/gpuhc/gpuhc/internal/xid"
)

// Env is what the checks need beyond their configuration: the GPUs (real
// NVML or a simulated server), the kernel log and the state directory.
type Env struct {
	GPU   *gpu.Node
	Kmsg  xid.Source
	State statefile.Dir
}

type entry struct {
	common config.Common
	build  func() check.Check
}

// Tasks builds every enabled check with its time limit.
func Tasks(cfg config.Config, env Env) []check.Task {
	var tasks []check.Task
	for _, e := range append(hostChecks(cfg), gpuChecks(cfg, env)...) {
		if !e.common.Enabled {
			continue
		}
		tasks = append(tasks, check.Task{Check: e.build(), Timeout: timeout(cfg, e.common)})
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
		{g.XID.Common, func() check.Check { return xid.New(n, g.XID, st, env.Kmsg) }},
		{g.Memory.Common, func() check.Check { return gpu.NewMemory(n, g.Memory) }},
		{g.PCIe.Common, func() check.Check { return gpu.NewPCIe(n, g.PCIe, st) }},
		{g.NVLink.Common, func() check.Check { return gpu.NewNVLink(n, g.NVLink, st) }},
		{g.Fabric, func() check.Check { return gpu.NewFabric(n, st) }},
		{g.Thermal.Common, func() check.Check { return gpu.NewThermal(n, g.Thermal, st) }},
		{g.Power, func() check.Check { return gpu.NewPower(n) }},
		{g.Config.Common, func() check.Check { return gpu.NewConfig(n, g.Config) }},
	}
}

func timeout(cfg config.Config, c config.Common) time.Duration {
	t := cfg.CheckTimeout.Duration
	if c.Timeout.Duration > 0 {
		t = c.Timeout.Duration
	}
	return min(t, cfg.Deadline.Duration)
}
