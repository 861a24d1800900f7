package config

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestValidateIB(t *testing.T) {
	tests := []struct {
		name string
		set  func(c *IB)
		key  string // "" when the change is valid
		msg  string
	}{
		{"exclude globs", func(c *IB) { c.Exclude = []string{"mlx5_8", "mlx5_*/2", "bnxt_re?"} }, "", ""},
		{"exclude bad glob", func(c *IB) { c.Exclude = []string{"mlx5_["} }, "checks.ib.exclude", "not a device or device/port glob"},
		{"exclude empty", func(c *IB) { c.Exclude = []string{""} }, "checks.ib.exclude", "glob"},
		{"exclude blank", func(c *IB) { c.Exclude = []string{"mlx5_8 mlx5_9"} }, "checks.ib.exclude", "glob"},
		{"expected_hcas none", func(c *IB) { c.Port.ExpectedHCAs = 0 }, "", ""},
		{"expected_hcas -2", func(c *IB) { c.Port.ExpectedHCAs = -2 }, "checks.ib.port.expected_hcas", "want -1"},
		{"expected_active_ports 8", func(c *IB) { c.Port.ExpectedActivePorts = 8 }, "", ""},
		{"expected_active_ports -2", func(c *IB) { c.Port.ExpectedActivePorts = -2 }, "checks.ib.port.expected_active_ports", "want -1"},
		{"min_rate_gbps 400", func(c *IB) { c.Port.MinRateGbps = 400 }, "", ""},
		{"min_rate_gbps negative", func(c *IB) { c.Port.MinRateGbps = -1 }, "checks.ib.port.min_rate_gbps", "rate in Gb/s"},
		{"min_rate_gbps NaN", func(c *IB) { c.Port.MinRateGbps = math.NaN() }, "checks.ib.port.min_rate_gbps", "rate in Gb/s"},
		{"min_rate_gbps Inf", func(c *IB) { c.Port.MinRateGbps = math.Inf(1) }, "checks.ib.port.min_rate_gbps", "rate in Gb/s"},
		{"link_layer InfiniBand", func(c *IB) { c.Port.LinkLayer = "InfiniBand" }, "", ""},
		{"link_layer Ethernet", func(c *IB) { c.Port.LinkLayer = "Ethernet" }, "", ""},
		{"link_layer case", func(c *IB) { c.Port.LinkLayer = "infiniband" }, "checks.ib.port.link_layer", "want one of"},
		{"link_layer RoCE", func(c *IB) { c.Port.LinkLayer = "RoCE" }, "checks.ib.port.link_layer", "want one of"},
		{"firmware", func(c *IB) { c.Port.Firmware = "28.39.2048" }, "", ""},
		{"firmware control character", func(c *IB) { c.Port.Firmware = "28.39\n2048" }, "checks.ib.port.firmware", "not a firmware version"},
		{"firmware padded", func(c *IB) { c.Port.Firmware = " 28.39.2048" }, "checks.ib.port.firmware", "not a firmware version"},
		{"inactive fail", func(c *IB) { c.Port.Inactive = "fail" }, "", ""},
		{"inactive drain", func(c *IB) { c.Port.Inactive = "drain" }, "checks.ib.port.inactive", "want one of"},
		{"groups per link layer", func(c *IB) {
			c.Port.Groups = []IBPortGroup{{LinkLayer: "InfiniBand", MinRateGbps: 400, ExpectedActivePorts: 8}, {LinkLayer: "Ethernet", MinRateGbps: 200, ExpectedActivePorts: -1}}
		}, "", ""},
		{"group without link layer", func(c *IB) { c.Port.Groups = []IBPortGroup{{MinRateGbps: 400}} },
			"checks.ib.port.group.link_layer", `want "InfiniBand" or "Ethernet", got ""`},
		{"two groups of one layer", func(c *IB) {
			c.Port.Groups = []IBPortGroup{{LinkLayer: "InfiniBand"}, {LinkLayer: "InfiniBand", MinRateGbps: 200}}
		}, "checks.ib.port.group.link_layer", "one group per link layer"},
		{"group against the flat link layer", func(c *IB) {
			c.Port.LinkLayer = "InfiniBand"
			c.Port.Groups = []IBPortGroup{{LinkLayer: "Ethernet"}}
		}, "checks.ib.port.group.link_layer", `contradicts checks.ib.port.link_layer = "InfiniBand"`},
		{"group rate NaN", func(c *IB) { c.Port.Groups = []IBPortGroup{{LinkLayer: "Ethernet", MinRateGbps: math.NaN()}} },
			"checks.ib.port.group.min_rate_gbps", "rate in Gb/s"},
		{"group count -2", func(c *IB) { c.Port.Groups = []IBPortGroup{{LinkLayer: "Ethernet", ExpectedActivePorts: -2}} },
			"checks.ib.port.group.expected_active_ports", "want -1"},
		{"counter disabled", func(c *IB) { c.Counters.SymbolErrorMax = -1 }, "", ""},
		{"counter zero", func(c *IB) { c.Counters.LinkDownedMax = 0 }, "", ""},
		{"counter -2", func(c *IB) { c.Counters.PortXmitDiscardsMax = -2 }, "checks.ib.counters.port_xmit_discards_max", "want -1"},
		{"4-bit counter below its top", func(c *IB) { c.Counters.LocalLinkIntegrityErrorsMax = 14 }, "", ""},
		{"4-bit counter at its top", func(c *IB) { c.Counters.ExcessiveBufferOverrunErrorsMax = 15 },
			"checks.ib.counters.excessive_buffer_overrun_errors_max", "0 to 14 (the counter is 4 bits wide and stops at 15), got 15"},
		{"8-bit counter at its top", func(c *IB) { c.Counters.LinkDownedMax = 255 }, "checks.ib.counters.link_downed_max", "8 bits wide"},
		{"16-bit counter below its top", func(c *IB) { c.Counters.SymbolErrorMax = 65534 }, "", ""},
		{"16-bit counter past its top", func(c *IB) { c.Counters.SymbolErrorMax = 100000 }, "checks.ib.counters.symbol_error_max", "stops at 65535"},
		{"gdr one module", func(c *IB) { c.GDR.Modules = []string{"nvidia_peermem"} }, "", ""},
		{"gdr module with dashes", func(c *IB) { c.GDR.Modules = []string{"nv-peer-mem"} }, "", ""},
		{"gdr no module", func(c *IB) { c.GDR.Modules = nil }, "checks.ib.gdr.modules", "at least one module"},
		{"gdr module path", func(c *IB) { c.GDR.Modules = []string{"nvidia_peermem", "../nvidia"} }, "checks.ib.gdr.modules", `"../nvidia" is not a kernel module name`},
		{"gdr module blank", func(c *IB) { c.GDR.Modules = []string{""} }, "checks.ib.gdr.modules", `"" is not a kernel module name`},
		{"gdr timeout negative", func(c *IB) { c.GDR.Timeout.Duration = -1 }, "checks.ib.gdr.timeout", "above 0s"},
		{"counters timeout over deadline", func(c *IB) { c.Counters.Timeout.Duration = 1 << 40 }, "checks.ib.counters.timeout", "deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.set(&c.Checks.IB)
			wantValidation(t, c, tt.key, tt.msg)
		})
	}
}

// The ib sections load strictly like every other: a typo or a wrong type
// is an error with its line.
func TestLoadIB(t *testing.T) {
	good := "[checks.ib]\nexclude = [\"mlx5_8\"]\n[checks.ib.port]\nexpected_hcas = 8\nmin_rate_gbps = 400.0\ninactive = \"fail\"\n" +
		"[checks.ib.counters]\nsymbol_error_max = -1\n[checks.ib.gdr]\nenabled = false\nmodules = [\"nv_peer_mem\"]\n"
	c, err := Parse("ib.toml", []byte(good), "gpu001")
	if err != nil {
		t.Fatal(err)
	}
	ib := c.Checks.IB
	if ib.Exclude[0] != "mlx5_8" || ib.Port.ExpectedHCAs != 8 || ib.Port.MinRateGbps != 400 || ib.Port.Inactive != "fail" ||
		ib.Counters.SymbolErrorMax != -1 || ib.Counters.LinkDownedMax != 1 || ib.GDR.Enabled || !ib.Port.Enabled ||
		len(ib.GDR.Modules) != 1 || ib.GDR.Modules[0] != "nv_peer_mem" {
		t.Errorf("got %+v", ib)
	}
	// Groups load as a table array; a host section's groups replace the
	// base's, as every array does.
	groups := "[[checks.ib.port.group]]\nlink_layer = \"InfiniBand\"\nmin_rate_gbps = 400.0\nexpected_active_ports = 8\n" +
		"[[checks.ib.port.group]]\nlink_layer = \"Ethernet\"\nmin_rate_gbps = 200.0\n" +
		"[[host]]\nmatch = \"gpu[100-199]\"\n[[host.checks.ib.port.group]]\nlink_layer = \"InfiniBand\"\nmin_rate_gbps = 200.0\n"
	for node, want := range map[string][]IBPortGroup{
		"gpu001": {{LinkLayer: "InfiniBand", MinRateGbps: 400, ExpectedActivePorts: 8}, {LinkLayer: "Ethernet", MinRateGbps: 200}},
		"gpu150": {{LinkLayer: "InfiniBand", MinRateGbps: 200}},
	} {
		c, err := Parse("ib.toml", []byte(groups), node)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Checks.IB.Port.Groups; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: groups %+v, want %+v", node, got, want)
		}
	}
	for _, tc := range []struct{ src, msg string }{
		{"[checks.ib.port]\nexpected_hca = 8\n", "ib.toml:2:"},
		{"[[checks.ib.port.group]]\nlink_layer = \"InfiniBand\"\nmin_rate = 400.0\n", "ib.toml:3:"},
		{"[checks.ib.port]\nexpected_hcas = \"8\"\n", "ib.toml:2:"},
		{"[checks.ib.port]\nlink_layer = \"IB\"\n", "ib.toml:2: checks.ib.port.link_layer"},
		{"[checks.ib]\nexclude = \"mlx5_8\"\n", "ib.toml:2:"},
		{"[checks.ib.gdr]\nmodules = \"nv_peer_mem\"\n", "ib.toml:2:"},
		{"[checks.ib.gdr]\nmodules = []\n", "checks.ib.gdr.modules"},
	} {
		if _, err := Parse("ib.toml", []byte(tc.src), "gpu001"); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: got %v, want an error containing %q", tc.src, err, tc.msg)
		}
	}
}
