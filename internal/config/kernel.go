package config

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Kernel is the host.kernel check: host faults read from the kernel log
// (docs/host-rules.md lists the rules with their defaults).
type Kernel struct {
	Common
	// Disable names rules that are not judged at all.
	Disable []string `toml:"disable"`
	// Override changes a rule's verdict.
	Override []KernelOverride `toml:"override"`
}

// KernelOverride is one [[checks.kernel.override]]: rule's status ("ok",
// "warn" or "fail"; "ok" silences it) and action. Either may be left out.
type KernelOverride struct {
	Rule   string `toml:"rule"`
	Status string `toml:"status"`
	Action string `toml:"action"`
}

// SXid is the fabric.sxid check: NVSwitch SXid errors in the kernel log.
type SXid struct {
	Common
	// Override changes one SXid code's verdict.
	Override []SXidOverride `toml:"override"`
}

// SXidOverride is one [[checks.fabric.sxid.override]].
type SXidOverride struct {
	Code   int    `toml:"code"`
	Status string `toml:"status"`
	Action string `toml:"action"`
}

// KernelRules are the host.kernel rule names, as internal/kernlog's table
// names them (a test there keeps the two equal).
var KernelRules = []string{
	"aer_fatal", "aer_nonfatal", "edac_ue", "mce_ue", "soft_lockup", "rcu_stall", "hung_task",
	"io_error", "nvme_timeout", "nvme_down", "fs_readonly", "journal_abort", "xfs_shutdown",
	"mlx5_fatal", "oom_daemon",
}

// overrideStatuses and overrideActions are what an override may set.
var (
	overrideStatuses = []string{"ok", "warn", "fail"}
	overrideActions  = []string{"none", "drain", "drain-after-job", "reset-gpu", "reboot", "rma"}
)

func (ps *problems) kernel(k Kernel, s SXid, deadline time.Duration) {
	ps.timeout("checks.kernel.timeout", k.Timeout.Duration, deadline, true)
	ps.timeout("checks.fabric.sxid.timeout", s.Timeout.Duration, deadline, true)
	for i, n := range k.Disable {
		if !slices.Contains(KernelRules, n) {
			ps.add(fmt.Sprintf("checks.kernel.disable[%d]", i), "%q is not a rule; known: %s", n, strings.Join(KernelRules, ", "))
		}
	}
	seen := map[string]bool{}
	for i, o := range k.Override {
		key := fmt.Sprintf("checks.kernel.override[%d]", i)
		switch {
		case !slices.Contains(KernelRules, o.Rule):
			ps.add(key+".rule", "%q is not a rule; known: %s", o.Rule, strings.Join(KernelRules, ", "))
		case seen[o.Rule]:
			ps.add(key+".rule", "%q is overridden twice", o.Rule)
		}
		seen[o.Rule] = true
		ps.verdict(key, o.Status, o.Action)
	}
	codes := map[int]bool{}
	for i, o := range s.Override {
		key := fmt.Sprintf("checks.fabric.sxid.override[%d]", i)
		switch {
		case o.Code < 1 || o.Code > 99999:
			ps.add(key+".code", "want an SXid code such as 20034, got %d", o.Code)
		case codes[o.Code]:
			ps.add(key+".code", "SXid %d is overridden twice", o.Code)
		}
		codes[o.Code] = true
		ps.verdict(key, o.Status, o.Action)
	}
}

// verdict checks an override's status and action.
func (ps *problems) verdict(key, status, action string) {
	if status == "" && action == "" {
		ps.add(key, "sets neither status nor action")
	}
	if status != "" && !slices.Contains(overrideStatuses, strings.ToLower(status)) {
		ps.add(key+".status", "%q: want ok, warn or fail", status)
	}
	if action != "" && !slices.Contains(overrideActions, action) {
		ps.add(key+".action", "%q: want one of %s", action, strings.Join(overrideActions, ", "))
	}
	if strings.EqualFold(status, "fail") && action == "none" {
		ps.add(key+".action", "a FAIL needs an action other than none")
	}
}
