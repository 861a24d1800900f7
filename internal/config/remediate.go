package config

import (
	"slices"
	"time"
)

// Remediate configures remediation (docs/remediation.md): gpuhc-healthcheck
// carrying out a drain's suggested action on an idle node it drained, and
// escalating what remediation does not cure to rma. Off by default.
type Remediate struct {
	Enabled bool `toml:"enabled"`
	// DryRun logs and prints what remediation would do and does nothing;
	// policy.dry_run implies it.
	DryRun bool `toml:"dry_run"`
	// Actions are the suggested actions remediation may carry out.
	Actions []string `toml:"actions"`
	// NvidiaSMI is the absolute path of nvidia-smi, run with argv only.
	NvidiaSMI string `toml:"nvidia_smi"`
	// ResetTimeout bounds one `nvidia-smi --gpu-reset`; it comes out of
	// the run's check deadline.
	ResetTimeout Duration `toml:"reset_timeout"`
	// ResetAll resets every GPU together (-i is left out): NVSwitch
	// systems (HGX/DGX A100, H100, H200, B200) cannot reset one GPU alone.
	ResetAll bool `toml:"reset_all"`
	// StopUnits are systemd units that hold the GPUs and are stopped for
	// a reset and started again after it (nvidia-persistenced,
	// nvidia-fabricmanager, nvidia-dcgm, ...), in this order.
	StopUnits []string `toml:"stop_units"`
	// Systemctl is the absolute path of systemctl, for StopUnits.
	Systemctl string `toml:"systemctl"`
	// RebootTimeout is how long a requested reboot may take, from the
	// request to the first run in a new boot, before it counts as failed.
	RebootTimeout Duration `toml:"reboot_timeout"`
	// MaxPerDay caps remediations of this node in any 24 hours.
	MaxPerDay int `toml:"max_per_day"`
	// MaxFraction and MaxNodes cap the nodes remediating at once, counted
	// like the storm guard (0 turns a limit off; one may always start).
	MaxFraction float64 `toml:"max_fraction" unit:"fraction of all nodes, 0 to 1"`
	MaxNodes    int     `toml:"max_nodes"`
	// RMAAfter remediations of the same check on the same part within
	// RMAWindow, and that check failing on it again, make an rma.
	RMAAfter  int      `toml:"rma_after"`
	RMAWindow Duration `toml:"rma_window"`
}

// Remediation actions (check.ActionResetGPU and check.ActionReboot).
const (
	RemedyResetGPU = "reset-gpu"
	RemedyReboot   = "reboot"
)

func defaultRemediate() Remediate {
	return Remediate{
		Actions:       []string{RemedyResetGPU, RemedyReboot},
		NvidiaSMI:     "/usr/bin/nvidia-smi",
		ResetTimeout:  Duration{20 * time.Second},
		Systemctl:     "/usr/bin/systemctl",
		RebootTimeout: Duration{30 * time.Minute},
		MaxPerDay:     2,
		MaxFraction:   0.05,
		RMAAfter:      2,
		RMAWindow:     Duration{7 * 24 * time.Hour},
	}
}

// Allows reports whether action may be carried out.
func (r Remediate) Allows(action string) bool {
	return r.Enabled && slices.Contains(r.Actions, action)
}

func (ps *problems) remediate(r Remediate, deadline time.Duration) {
	for _, a := range r.Actions {
		if a != RemedyResetGPU && a != RemedyReboot {
			ps.add("remediate.actions", "unknown action %q: want %q or %q", a, RemedyResetGPU, RemedyReboot)
		}
	}
	ps.absPath("remediate.nvidia_smi", r.NvidiaSMI, false)
	ps.absPath("remediate.systemctl", r.Systemctl, len(r.StopUnits) == 0)
	for _, u := range r.StopUnits {
		if !validUnit(u) {
			ps.add("remediate.stop_units", "not a systemd unit name: %q", u)
		}
	}
	// The reset and the checks after it share the run's deadline; the
	// bound is only known, and only matters, where resets are on.
	switch d := r.ResetTimeout.Duration; {
	case d < time.Second:
		ps.add("remediate.reset_timeout", "want at least 1s, got %s", d)
	case r.Allows(RemedyResetGPU) && d > deadline/2:
		ps.add("remediate.reset_timeout", "want at most half the deadline (%s) where resets are on, got %s", deadline/2, d)
	}
	if d := r.RebootTimeout.Duration; d < time.Minute {
		ps.add("remediate.reboot_timeout", "want at least 1m, got %s", d)
	}
	if r.MaxPerDay < 1 {
		ps.add("remediate.max_per_day", "must be at least 1, got %d", r.MaxPerDay)
	}
	if f := r.MaxFraction; !(f >= 0 && f <= 1) {
		ps.add("remediate.max_fraction", "must be between 0 and 1 (0 turns this limit off), got %v", f)
	}
	if r.MaxNodes < 0 {
		ps.add("remediate.max_nodes", "must not be negative (0 turns this limit off), got %d", r.MaxNodes)
	}
	if r.RMAAfter < 1 {
		ps.add("remediate.rma_after", "must be at least 1, got %d", r.RMAAfter)
	}
	if r.RMAWindow.Duration < time.Hour {
		ps.add("remediate.rma_window", "want at least 1h, got %s", r.RMAWindow.Duration)
	}
}

// validUnit accepts systemd unit names as systemctl takes them, with a
// suffix: they go to systemctl as argv, never through a shell, but a name
// starting with "-" would read as an option.
func validUnit(u string) bool {
	if u == "" || len(u) > 256 || u[0] == '-' {
		return false
	}
	for _, c := range u {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '@' || c == ':'
		if !ok {
			return false
		}
	}
	return slices.ContainsFunc([]string{".service", ".target", ".socket"}, func(s string) bool { return len(u) > len(s) && u[len(u)-len(s):] == s })
}
