package config

import (
	"regexp"
	"slices"
	"time"
)

var driverVersion = regexp.MustCompile(`^[0-9]+(\.[0-9]+){0,2}$`)

func (ps *problems) gpu(g GPU, deadline time.Duration) {
	for name, c := range map[string]Common{
		"count": g.Count.Common, "driver": g.Driver.Common, "lost": g.Lost, "xid": g.XID.Common,
		"memory": g.Memory.Common, "pcie": g.PCIe.Common, "nvlink": g.NVLink.Common, "fabric": g.Fabric,
		"thermal": g.Thermal.Common, "power": g.Power, "config": g.Config.Common,
	} {
		ps.timeout("checks.gpu."+name+".timeout", c.Timeout.Duration, deadline, true)
	}
	if g.Count.Expected < -1 {
		ps.add("checks.gpu.count.expected", "want -1 (count the PCI bus), 0 or more, got %d", g.Count.Expected)
	}
	for key, v := range map[string]string{"min_version": g.Driver.MinVersion, "exact_version": g.Driver.ExactVersion} {
		if v != "" && !driverVersion.MatchString(v) {
			ps.add("checks.gpu.driver."+key, "%q is not a driver version such as 550.54.15", v)
		}
	}
	ps.absPath("checks.gpu.xid.kmsg", g.XID.Kmsg, false)
	ps.xids("checks.gpu.xid.drain", g.XID.Drain)
	ps.xids("checks.gpu.xid.warn", g.XID.Warn)
	for _, x := range g.XID.Drain {
		if slices.Contains(g.XID.Warn, x) {
			ps.add("checks.gpu.xid.warn", "XID %d is also in checks.gpu.xid.drain", x)
		}
	}
	if g.Memory.RetiredPagesFail < 1 {
		ps.add("checks.gpu.memory.retired_pages_fail", "must be at least 1, got %d", g.Memory.RetiredPagesFail)
	}
	if g.NVLink.ExpectedLinks < -1 {
		ps.add("checks.gpu.nvlink.expected_links", "want -1 (every link the GPU has), 0 or more, got %d", g.NVLink.ExpectedLinks)
	}
	if g.Thermal.MarginCelsius < 0 || g.Thermal.MarginCelsius > 50 {
		ps.add("checks.gpu.thermal.margin_celsius", "want 0 to 50, got %g", g.Thermal.MarginCelsius)
	}
	ps.oneOf("checks.gpu.config.persistence", g.Config.Persistence, "warn", "fail", "off")
	ps.oneOf("checks.gpu.config.mig", g.Config.MIG, "enabled", "disabled", "any")
	ps.oneOf("checks.gpu.config.compute_mode", g.Config.ComputeMode, "default", "exclusive_process", "prohibited", "any")
}

func (ps *problems) xids(key string, xs []int) {
	for _, x := range xs {
		if x < 1 || x > 999 {
			ps.add(key, "XID %d is out of range 1 to 999", x)
		}
	}
}

func (ps *problems) oneOf(key, v string, allowed ...string) {
	if !slices.Contains(allowed, v) {
		ps.add(key, "%q: want one of %q", v, allowed)
	}
}
