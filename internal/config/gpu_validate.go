package config

import (
	"fmt"
	"slices"
	"time"

	"github.com/gpuhc/gpuhc/internal/lazyre"
)

var driverVersion = lazyre.New(`^[0-9]+(\.[0-9]+){0,2}$`)

func (ps *problems) gpu(g GPU, deadline time.Duration) {
	for name, c := range map[string]Common{
		"count": g.Count.Common, "driver": g.Driver.Common, "lost": g.Lost, "xid": g.XID.Common, "recovery": g.Recovery.Common,
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
	ps.xid(g.XID)
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
	seen := map[int]bool{}
	for i, x := range xs {
		at := fmt.Sprintf("%s[%d]", key, i)
		if x < 1 || x > 999 {
			ps.add(at, "XID %d is out of range 1 to 999", x)
		}
		if seen[x] {
			ps.add(at, "XID %d is listed twice", x)
		}
		seen[x] = true
	}
}

// xidStatuses and xidActions are what a [[checks.gpu.xid.override]] may say.
var (
	xidStatuses = []string{"ok", "warn", "fail"}
	xidActions  = []string{"drain", "drain-after-job", "reset-gpu", "reboot", "rma"}
)

// xid checks the site's overrides of NVIDIA's XID catalogue: each XID
// once, in range, with a status and action gpuhc knows.
func (ps *problems) xid(c XID) {
	ps.xids("checks.gpu.xid.drain", c.Drain)
	ps.xids("checks.gpu.xid.warn", c.Warn)
	for i, x := range c.Warn {
		if slices.Contains(c.Drain, x) {
			ps.add(fmt.Sprintf("checks.gpu.xid.warn[%d]", i), "XID %d is also in checks.gpu.xid.drain", x)
		}
	}
	if c.EscalateAfter < 0 || c.EscalateAfter > 100 {
		ps.add("checks.gpu.xid.escalate_after", "want 0 (never) to 100 boots, got %d", c.EscalateAfter)
	}
	seen := map[int]bool{}
	for i, o := range c.Override {
		at := fmt.Sprintf("checks.gpu.xid.override[%d]", i)
		switch {
		case o.XID < 1 || o.XID > 999:
			ps.add(at+".xid", "XID %d is out of range 1 to 999", o.XID)
		case seen[o.XID]:
			ps.add(at+".xid", "XID %d has an override already", o.XID)
		case slices.Contains(c.Drain, o.XID) || slices.Contains(c.Warn, o.XID):
			ps.add(at+".xid", "XID %d is also in checks.gpu.xid.drain or warn", o.XID)
		}
		seen[o.XID] = true
		if !slices.Contains(xidStatuses, o.Status) {
			ps.add(at+".status", "%q: want one of %q", o.Status, xidStatuses)
		}
		switch {
		case o.Status == "fail" && o.Action != "" && !slices.Contains(xidActions, o.Action):
			ps.add(at+".action", "%q: want one of %q, or none for the catalogue's", o.Action, xidActions)
		case o.Status != "fail" && o.Action != "" && o.Action != "none":
			ps.add(at+".action", "%q: only a \"fail\" has an action", o.Action)
		}
		if o.EscalateAfter < -1 || o.EscalateAfter > 100 {
			ps.add(at+".escalate_after", "want -1 (never), 0 (checks.gpu.xid.escalate_after) or 1 to 100 boots, got %d", o.EscalateAfter)
		}
	}
}

func (ps *problems) oneOf(key, v string, allowed ...string) {
	if !slices.Contains(allowed, v) {
		ps.add(key, "%q: want one of %q", v, allowed)
	}
}
