package config

import (
	"fmt"
	"math"
	"path"
	"strings"
	"time"
	"unicode"
)

// IB holds the ib.* checks' settings (design.md §6).
type IB struct {
	// Exclude lists devices ("mlx5_8") or ports ("mlx5_8/1") that no ib.*
	// check (nor topology) judges; path.Match globs ("mlx5_*").
	Exclude  []string   `toml:"exclude"`
	Port     IBPort     `toml:"port"`
	Counters IBCounters `toml:"counters"`
	GDR      Common     `toml:"gdr"`
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
	MinRateGbps float64 `toml:"min_rate_gbps"`
	// LinkLayer every port must have: "InfiniBand", "Ethernet" or "" (any).
	LinkLayer string `toml:"link_layer"`
	// Firmware pins every HCA's fw_ver exactly; "" for none.
	Firmware string `toml:"firmware"`
	// Inactive is the verdict on a port that is not ACTIVE: "warn" or
	// "fail". An unused, unplugged port looks exactly like a failed one.
	Inactive string `toml:"inactive"`
}

// IBCounters caps the growth of each port error counter between two runs;
// -1 leaves a counter unjudged.
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

func defaultIB() IB {
	on := Common{Enabled: true}
	return IB{
		Exclude: []string{},
		Port: IBPort{
			Common: on, ExpectedHCAs: -1, ExpectedActivePorts: -1, Inactive: "warn",
		},
		// ibcheckerrors' thresholds (there per check, here per run), except
		// link_downed: more than one flap between two runs is a bad link.
		Counters: IBCounters{
			Common:                          on,
			SymbolErrorMax:                  10,
			LinkDownedMax:                   1,
			LinkErrorRecoveryMax:            10,
			PortRcvErrorsMax:                10,
			PortRcvRemotePhysicalErrorsMax:  100,
			PortXmitDiscardsMax:             100,
			LocalLinkIntegrityErrorsMax:     10,
			ExcessiveBufferOverrunErrorsMax: 10,
		},
		GDR: on,
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
	n := c.Counters
	for key, v := range map[string]int64{
		"symbol_error_max": n.SymbolErrorMax, "link_downed_max": n.LinkDownedMax,
		"link_error_recovery_max": n.LinkErrorRecoveryMax, "port_rcv_errors_max": n.PortRcvErrorsMax,
		"port_rcv_remote_physical_errors_max": n.PortRcvRemotePhysicalErrorsMax,
		"port_xmit_discards_max":              n.PortXmitDiscardsMax,
		"local_link_integrity_errors_max":     n.LocalLinkIntegrityErrorsMax,
		"excessive_buffer_overrun_errors_max": n.ExcessiveBufferOverrunErrorsMax,
	} {
		if v < -1 {
			ps.add("checks.ib.counters."+key, "want -1 (not judged), 0 or more, got %d", v)
		}
	}
}

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
