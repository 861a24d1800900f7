package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/lazyre"
)

// Topology checks how GPUs and HCAs sit on the PCI hierarchy: each GPU's
// nearest active HCA (excluding checks.ib.exclude) and how far it is.
type Topology struct {
	Common
	// NUMA is the verdict when a GPU's nearest active HCA is on another
	// socket, or it has none: "fail", "warn" or "off". Warn by default:
	// a healthy node may well be built that way (one NIC for GPUs on two
	// sockets), and an HCA that went down on a DGX/HGX node is a FAIL of
	// ib.port already. Where the socket of a NUMA node cannot be told it
	// is at most a WARN.
	NUMA string `toml:"numa"`
	// NUMASameSocket is the verdict when the nearest active HCA is on
	// another NUMA node of the GPU's own socket (AMD NPS2/NPS4, Intel
	// sub-NUMA clustering): "fail", "warn" or "off". Off by default: such
	// nodes are commonly built with one NIC per socket, not per node.
	NUMASameSocket string `toml:"numa_same_socket"`
	// SameSwitch is the verdict when a GPU's nearest active HCA is not
	// under the same PCIe switch: "fail", "warn" or "off".
	SameSwitch string `toml:"same_switch"`
	// Funnel is the verdict when every GPU's nearest active HCA is one
	// NIC that some GPUs reach across sockets: "warn", "fail" or "off".
	Funnel string `toml:"funnel"`
	// Pairs pins GPUs to HCAs for bring-up: "0000:18:00.0=mlx5_0" means
	// that GPU's nearest active HCA must be mlx5_0.
	Pairs []string `toml:"pairs"`
}

func defaultTopology() Topology {
	return Topology{Common: Common{Enabled: true}, NUMA: "warn", NUMASameSocket: "off", SameSwitch: "off", Funnel: "warn"}
}

// pciAddr is a PCI address as sysfs ("0000:18:00.0", "10000:01:00.0" in a
// VMD domain) or NVML ("00000000:18:00.0") writes it.
var pciAddr = lazyre.New(`^([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])$`)

// ParsePair splits a checks.topology.pairs entry into the GPU's PCI
// address, written as sysfs does ("0000:18:00.0"), and the HCA's name.
func ParsePair(s string) (gpu, hca string, err error) {
	addr, name, ok := strings.Cut(s, "=")
	addr, name = strings.TrimSpace(addr), strings.TrimSpace(name)
	m := pciAddr.FindStringSubmatch(addr)
	switch {
	case !ok:
		return "", "", errorf("%q: want \"<GPU PCI address>=<HCA>\", e.g. \"0000:18:00.0=mlx5_0\"", s)
	case m == nil:
		return "", "", errorf("%q: %q is not a PCI address such as 0000:18:00.0", s, addr)
	case name == "" || strings.ContainsAny(name, "/= \t\n*?["):
		return "", "", errorf("%q: %q is not an HCA name such as mlx5_0", s, name)
	}
	// The domain is a number: NVML pads it to 8 digits, sysfs to 4, so a
	// VMD domain is "00010000" to one and "10000" to the other.
	dom, err := strconv.ParseUint(m[1], 16, 32)
	if err != nil {
		return "", "", errorf("%q: %q is not a PCI domain: %w", s, m[1], err)
	}
	return fmt.Sprintf("%04x:%s", dom, strings.ToLower(m[2])), name, nil
}

func (ps *problems) topology(c Topology, deadline time.Duration) {
	ps.timeout("checks.topology.timeout", c.Timeout.Duration, deadline, true)
	ps.oneOf("checks.topology.numa", c.NUMA, "fail", "warn", "off")
	ps.oneOf("checks.topology.numa_same_socket", c.NUMASameSocket, "fail", "warn", "off")
	ps.oneOf("checks.topology.same_switch", c.SameSwitch, "fail", "warn", "off")
	ps.oneOf("checks.topology.funnel", c.Funnel, "warn", "fail", "off")
	seen := map[string]bool{}
	for i, p := range c.Pairs {
		key := fmt.Sprintf("checks.topology.pairs[%d]", i)
		addr, _, err := ParsePair(p)
		if err != nil {
			ps.add(key, "%v", err)
			continue
		}
		if seen[addr] {
			ps.add(key, "GPU %s is pinned twice", addr)
		}
		seen[addr] = true
	}
}
