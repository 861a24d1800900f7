package config

import (
	"fmt"
	"math"
	"path"
	"strings"
	"time"
	"unicode"

	"github.com/gpuhc/gpuhc/internal/lazyre"
)

// IB holds the ib.* checks' settings
// (docs/architecture.md#infiniband-and-roce).
type IB struct {
	// Exclude lists devices ("mlx5_8") or ports ("mlx5_8/1") that no ib.*
	// check (nor topology) judges; path.Match globs ("mlx5_*").
	Exclude  []string   `toml:"exclude"`
	Port     IBPort     `toml:"port"`
	Counters IBCounters `toml:"counters"`
	GDR      IBGDR      `toml:"gdr"`
}

// IBPort judges each InfiniBand/RoCE port's state and speed, and the node's
// HCA and active-port counts. Its defaults require nothing a fresh node
// might lack; gpuhc-healthcheck --print-inventory writes the values a
// node has at bring-up.
type IBPort struct {
	Common
	// ExpectedHCAs is the number of RDMA devices, excluded ones not
	// counted; -1 does not check, 0 means none.
	ExpectedHCAs int `toml:"expected_hcas"`
	// ExpectedActivePorts is the least number of ACTIVE ports; -1 does
	// not check.
	ExpectedActivePorts int `toml:"expected_active_ports"`
	// MinRateGbps is the floor on an active port's rate; 0 for none.
	MinRateGbps float64 `toml:"min_rate_gbps" unit:"Gb/s"`
	// LinkLayer every port must have: "InfiniBand", "Ethernet" or "" (any).
	LinkLayer string `toml:"link_layer"`
	// Firmware pins every HCA's fw_ver exactly; "" for none.
	Firmware string `toml:"firmware"`
	// Inactive is the verdict on a port that is not ACTIVE: "warn" or
	// "fail". An unused, unplugged port looks exactly like a failed one.
	Inactive string `toml:"inactive"`
	// Groups pin rate and active-port count per link layer
	// ([[checks.ib.port.group]]), for a node whose ports are not all
	// alike: eight 400 Gb/s NDR ports beside a 200 Gb/s RoCE storage
	// bond. With groups, every judged port's link layer must be one of
	// theirs; the flat keys above still apply to every port.
	Groups []IBPortGroup `toml:"group"`
}

// IBPortGroup is the pin on the ports of one link layer.
type IBPortGroup struct {
	// LinkLayer selects the ports: "InfiniBand" or "Ethernet".
	LinkLayer string `toml:"link_layer"`
	// MinRateGbps is the floor on an active port's rate; 0 for none.
	MinRateGbps float64 `toml:"min_rate_gbps" unit:"Gb/s"`
	// ExpectedActivePorts is the least number of ACTIVE ports of this
	// link layer; 0 (unset) or -1 does not check.
	ExpectedActivePorts int `toml:"expected_active_ports"`
}

// Group returns the group for link layer ll, if one is configured.
func (p IBPort) Group(ll string) (IBPortGroup, bool) {
	for _, g := range p.Groups {
		if g.LinkLayer == ll {
			return g, true
		}
	}
	return IBPortGroup{}, false
}

// IBCounters caps the growth of each port error counter between two runs;
// -1 leaves a counter unjudged. The kernel shows these counters at their
// IBA PortCounters widths (IBCounterBits), and they stop at all-ones: a
// limit at or above that value could never be exceeded.
type IBCounters struct {
	Common
	SymbolErrorMax                  int64 `toml:"symbol_error_max"`
	LinkDownedMax                   int64 `toml:"link_downed_max"`
	LinkErrorRecoveryMax            int64 `toml:"link_error_recovery_max"`
	PortRcvErrorsMax                int64 `toml:"port_rcv_errors_max"`
	PortRcvRemotePhysicalErrorsMax  int64 `toml:"port_rcv_remote_physical_errors_max"`
	PortXmitDiscardsMax             int64 `toml:"port_xmit_discards_max"`
	LocalLinkIntegrityErrorsMax     int64 `toml:"local_link_integrity_errors_max"`
	ExcessiveBufferOverrunErrorsMax int64 `toml:"excessive_buffer_overrun_errors_max"`
}

// IBGDR checks that a GPUDirect RDMA peer-memory module is loaded.
type IBGDR struct {
	Common
	// Modules are the kernel modules that provide GPUDirect RDMA; any one
	// of them loaded (or built in) is enough. nvidia_peermem ships with
	// the NVIDIA driver; nv_peer_mem is the older MLNX_OFED
	// nvidia-peer-memory package it replaced as a drop-in.
	Modules []string `toml:"modules"`
}

// IBCounterBits gives the width in bits of each judged port error counter
// as drivers/infiniband/core/sysfs.c (PORT_PMA_ATTR) reads it from the
// PortCounters attribute, keyed by its sysfs name. Unlike the data
// counters, these have no 64-bit extended form in sysfs.
func IBCounterBits(name string) int {
	switch name {
	case "symbol_error", "port_rcv_errors", "port_rcv_remote_physical_errors", "port_xmit_discards":
		return 16
	case "link_downed", "link_error_recovery":
		return 8
	case "local_link_integrity_errors", "excessive_buffer_overrun_errors":
		return 4
	}
	return 0
}

func defaultIB() IB {
	on := Common{Enabled: true}
	return IB{
		Exclude: []string{},
		Port: IBPort{
			Common: on, ExpectedHCAs: -1, ExpectedActivePorts: -1, Inactive: "warn",
		},
		// ibcheckerrors' thresholds (there per check, here per run), except
		// link_downed: more than one flap between two runs is a bad link;
		// and the two 4-bit counters, which stop at 15, so that their
		// whole range is 15 errors (reaching 15 fails on its own): 5 lets
		// one run use a third of it unremarked, 10 would let it use two
		// thirds.
		Counters: IBCounters{
			Common:                          on,
			SymbolErrorMax:                  10,
			LinkDownedMax:                   1,
			LinkErrorRecoveryMax:            10,
			PortRcvErrorsMax:                10,
			PortRcvRemotePhysicalErrorsMax:  100,
			PortXmitDiscardsMax:             100,
			LocalLinkIntegrityErrorsMax:     5,
			ExcessiveBufferOverrunErrorsMax: 5,
		},
		GDR: IBGDR{Common: on, Modules: []string{"nvidia_peermem", "nv_peer_mem"}},
	}
}

func (ps *problems) ib(c IB, deadline time.Duration) {
	ps.timeout("checks.ib.port.timeout", c.Port.Timeout.Duration, deadline, true)
	ps.timeout("checks.ib.counters.timeout", c.Counters.Timeout.Duration, deadline, true)
	ps.timeout("checks.ib.gdr.timeout", c.GDR.Timeout.Duration, deadline, true)
	for i, g := range c.Exclude {
		if _, err := path.Match(g, ""); err != nil || g == "" || strings.ContainsAny(g, " \t\n") {
			ps.add(fmt.Sprintf("checks.ib.exclude[%d]", i), "%q is not a device or device/port glob such as \"mlx5_8\" or \"mlx5_*/2\"", g)
		}
	}
	p := c.Port
	if p.ExpectedHCAs < -1 {
		ps.add("checks.ib.port.expected_hcas", "want -1 (do not check), 0 or more, got %d", p.ExpectedHCAs)
	}
	if p.ExpectedActivePorts < -1 {
		ps.add("checks.ib.port.expected_active_ports", "want -1 (do not check), 0 or more, got %d", p.ExpectedActivePorts)
	}
	// !(v >= 0) also refuses NaN.
	if v := p.MinRateGbps; !(v >= 0) || math.IsInf(v, 0) {
		ps.add("checks.ib.port.min_rate_gbps", "must be 0 (no floor) or a rate in Gb/s such as 400, got %v", v)
	}
	ps.oneOf("checks.ib.port.link_layer", p.LinkLayer, "", "InfiniBand", "Ethernet")
	if !printableLine(p.Firmware) {
		ps.add("checks.ib.port.firmware", "%q is not a firmware version such as 28.39.2048", p.Firmware)
	}
	ps.oneOf("checks.ib.port.inactive", p.Inactive, "warn", "fail")
	seen := map[string]bool{}
	for i, g := range p.Groups {
		key := fmt.Sprintf("checks.ib.port.group[%d]", i)
		switch {
		case g.LinkLayer != "InfiniBand" && g.LinkLayer != "Ethernet":
			ps.add(key+".link_layer", "want \"InfiniBand\" or \"Ethernet\", got %q", g.LinkLayer)
		case seen[g.LinkLayer]:
			ps.add(key+".link_layer", "%q has a group already: one group per link layer", g.LinkLayer)
		case p.LinkLayer != "" && p.LinkLayer != g.LinkLayer:
			ps.add(key+".link_layer", "%q contradicts checks.ib.port.link_layer = %q", g.LinkLayer, p.LinkLayer)
		}
		seen[g.LinkLayer] = true
		if v := g.MinRateGbps; !(v >= 0) || math.IsInf(v, 0) {
			ps.add(key+".min_rate_gbps", "must be 0 (no floor) or a rate in Gb/s such as 400, got %v", v)
		}
		if g.ExpectedActivePorts < -1 {
			ps.add(key+".expected_active_ports", "want -1 (do not check), 0 or more, got %d", g.ExpectedActivePorts)
		}
	}
	n := c.Counters
	for name, v := range map[string]int64{
		"symbol_error": n.SymbolErrorMax, "link_downed": n.LinkDownedMax,
		"link_error_recovery": n.LinkErrorRecoveryMax, "port_rcv_errors": n.PortRcvErrorsMax,
		"port_rcv_remote_physical_errors": n.PortRcvRemotePhysicalErrorsMax,
		"port_xmit_discards":              n.PortXmitDiscardsMax,
		"local_link_integrity_errors":     n.LocalLinkIntegrityErrorsMax,
		"excessive_buffer_overrun_errors": n.ExcessiveBufferOverrunErrorsMax,
	} {
		top := int64(1)<<IBCounterBits(name) - 1
		if v < -1 || v >= top {
			ps.add("checks.ib.counters."+name+"_max", "want -1 (not judged) or 0 to %d (the counter is %d bits wide and stops at %d), got %d",
				top-1, IBCounterBits(name), top, v)
		}
	}
	if len(c.GDR.Modules) == 0 {
		ps.add("checks.ib.gdr.modules", "name at least one module, such as \"nvidia_peermem\" (to turn the check off, set enabled = false)")
	}
	for i, m := range c.GDR.Modules {
		if !moduleName.MatchString(m) {
			ps.add(fmt.Sprintf("checks.ib.gdr.modules[%d]", i), "%q is not a kernel module name such as \"nvidia_peermem\"", m)
		}
	}
}

// moduleName is a kernel module name as /proc/modules and /sys/module show
// it (MODULE_NAME_LEN is 56 with the NUL); "-" is accepted as modprobe
// accepts it, and compared as "_". It is also a path component under
// /sys/module, so nothing else may pass.
var moduleName = lazyre.New(`^[A-Za-z0-9_-]{1,55}$`)

// printableLine accepts "" or a short line of printable characters without
// surrounding blanks, as sysfs fw_ver values are once read.
func printableLine(s string) bool {
	if len(s) > 64 || strings.TrimSpace(s) != s {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
