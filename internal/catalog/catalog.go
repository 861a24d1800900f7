// Package catalog is the one list of checks gpuhc-healthcheck runs. Checks
// are registered here explicitly (as node_exporter does its collectors), so
// reading this file tells what a node is judged on.
package catalog

import (
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/host"
)

// Tasks builds every enabled check with its time limit.
func Tasks(cfg config.Config) []check.Task {
	c := cfg.Checks
	entries := []struct {
		common config.Common
		build  func() check.Check
	}{
		{c.CPU.Common, func() check.Check { return host.NewCPU(cfg.Root, c.CPU) }},
		{c.Memory.Common, func() check.Check { return host.NewMemory(cfg.Root, c.Memory) }},
		{c.Modules.Common, func() check.Check { return host.NewModules(cfg.Root, c.Modules) }},
		{c.Mounts.Common, func() check.Check { return host.NewMounts(cfg.Root, c.Mounts) }},
		{c.Processes.Common, func() check.Check { return host.NewProcesses(cfg.Root, c.Processes) }},
		{c.Thermal.Common, func() check.Check { return host.NewThermal(cfg.Root, c.Thermal) }},
	}
	var tasks []check.Task
	for _, e := range entries {
		if !e.common.Enabled {
			continue
		}
		tasks = append(tasks, check.Task{Check: e.build(), Timeout: timeout(cfg, e.common)})
	}
	return tasks
}

func timeout(cfg config.Config, c config.Common) time.Duration {
	t := cfg.CheckTimeout.Duration
	if c.Timeout.Duration > 0 {
		t = c.Timeout.Duration
	}
	return min(t, cfg.Deadline.Duration)
}
