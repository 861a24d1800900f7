package catalog

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/evidence"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// wholeNode is a DGX H100 as gpuhc-healthcheck sees it: the simulated GPUs
// of --simulate dgxh100 and, under cfg.Root, the kernel-layout tree of the
// same machine (8 NDR HCAs on the GPUs' PCIe switches, a management
// Ethernet HCA, 4 NVSwitches) plus a running Fabric Manager. The config is
// what a site would write after --print-inventory.
func wholeNode(t *testing.T) config.Config {
	t.Helper()
	cfg := wholeNodeOn(t, sysfsfix.H100NDR)
	cfg.Checks.IB.Exclude = []string{"mlx5_8"}
	cfg.Checks.IB.Port.MinRateGbps = 400
	return cfg
}

// wholeNodeOn is a whole node on the named sysfs tree: 8 GPUs, 8 IB
// ports at least at their rate, Fabric Manager (and nvlsm, which an
// NVLink5 baseboard needs: harmless elsewhere) running in its unit.
func wholeNodeOn(t *testing.T, tree string) config.Config {
	t.Helper()
	root := sysfsfix.Tree(t, tree)
	put := func(rel, content string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Fabric Manager, pid 2116, started 20 s after boot, in its unit.
	const unit = "nvidia-fabricmanager.service"
	put("proc/stat", "cpu  1 2 3 4\nbtime 1700000000\n")
	put("run/systemd/system/.keep", "")
	put("proc/2116/stat", "2116 (nv-fabricmanage) S 1 2116 2116 0 -1 4194624 1000 0 0 0 10 20 0 0 20 0 10 0 2000 123456789 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n")
	put("proc/2116/cmdline", "/usr/bin/nv-fabricmanager\x00-c\x00/usr/share/nvidia/nvswitch/fabricmanager.cfg\x00")
	put("proc/2116/cgroup", "0::/system.slice/"+unit+"\n")
	put("var/log/fabricmanager.log", "[Nov 30 2026 03:00:01] [INFO] [tid 2116] Fabric Manager version 550.54.15 is running\n")
	// nvlsm, started by nvidia-fabricmanager-start.sh in the same unit.
	put("proc/2117/stat", "2117 (nvlsm) S 1 2117 2117 0 -1 4194624 1000 0 0 0 10 20 0 0 20 0 10 0 2100 123456789 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n")
	put("proc/2117/cmdline", "/opt/nvidia/nvlsm/sbin/nvlsm\x00-F\x00/usr/share/nvidia/nvlsm/nvlsm.conf\x00")
	put("proc/2117/cgroup", "0::/system.slice/"+unit+"\n")
	put("sys/fs/cgroup/system.slice/"+unit+"/cgroup.procs", "2116\n2117\n")

	cfg := config.Default()
	cfg.Root = root
	cfg.StateDir = t.TempDir()
	cfg.Policy.DryRun = true
	cfg.Checks.Mounts.Enabled = false
	cfg.Checks.GPU.Count.Expected = 8
	cfg.Checks.Modules.Required = []string{"mlx5_ib", "nvidia_peermem"}
	ib := &cfg.Checks.IB
	ib.Port.ExpectedHCAs, ib.Port.ExpectedActivePorts = 8, 8
	ib.Port.MinRateGbps, ib.Port.LinkLayer, ib.Port.Inactive = 200, "InfiniBand", "fail"
	cfg.Checks.Topology.NUMA = "fail"
	cfg.Checks.Topology.SameSwitch = "fail"
	return cfg
}

func wholeNodeRun(t *testing.T, cfg config.Config, inject ...string) []check.Result {
	t.Helper()
	_, results := simRun(t, cfg, "dgxh100", inject, false)
	return results
}

// TestWholeNodeHealthy: every check on a healthy node is OK (or SKIP where
// it does not apply), and the policy would do nothing: no false drain.
func TestWholeNodeHealthy(t *testing.T) {
	cfg := wholeNode(t)
	results := wholeNodeRun(t, cfg)
	healthyReporting(t, results, "ib.port", "ib.counters", "ib.gdr", "fabric.manager", "topology", "host.thermal", "gpu.fabric")
	for _, r := range results {
		if r.Status == check.Skip && (r.Check == "ib.port" || r.Check == "fabric.manager" || r.Check == "topology" || r.Check == "ib.gdr") {
			t.Errorf("%s skipped on a node it applies to: %q", r.Check, r.Message)
		}
	}
	if out := dryRunPolicy(t, cfg, results); out.Kind != "none" {
		t.Errorf("policy %s %q, want none", out.Kind, out.Detail)
	}
}

// TestWholeNodeFaults: one fault at a time on the healthy node gives the
// exact drain reason an admin reads in sinfo -R. HCA results carry the PCI
// address: mlx5 names follow probe order, so they shift when an HCA fails
// to probe, and the address is what finds the card.
func TestWholeNodeFaults(t *testing.T) {
	tests := []struct {
		name   string
		fault  func(t *testing.T, cfg *config.Config)
		reason string
	}{
		{"NDR port at HDR rate", func(t *testing.T, cfg *config.Config) {
			sysfsfix.Set(t, cfg.Root, sysfsfix.PortDir("mlx5_3", 1)+"/rate", "200 Gb/sec (4X HDR)")
		}, "gpuhc: ib.port: mlx5_3/1 (0000:5e:00.0): rate 200 Gb/sec < expected 400"},
		{"port down", func(t *testing.T, cfg *config.Config) {
			sysfsfix.Set(t, cfg.Root, sysfsfix.PortDir("mlx5_5", 1)+"/state", "1: DOWN")
			sysfsfix.Set(t, cfg.Root, sysfsfix.PortDir("mlx5_5", 1)+"/phys_state", "2: Polling")
		}, "gpuhc: ib.port: host: 7 active ports, expected 8 (inactive: mlx5_5/1)"},
		{"HCA missing", func(t *testing.T, cfg *config.Config) {
			sysfsfix.RemoveHCA(t, cfg.Root, "mlx5_2")
		}, "gpuhc: ib.port: host: 7 HCAs, expected 8 (missing: mlx5_2)"},
		{"nvidia_peermem not loaded", func(t *testing.T, cfg *config.Config) {
			cfg.Checks.Modules.Required = nil
			sysfsfix.Remove(t, cfg.Root, "sys/module/nvidia_peermem")
			p := filepath.Join(cfg.Root, "proc/modules")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var keep []byte
			for _, line := range splitLines(b) {
				if len(line) < 15 || string(line[:15]) != "nvidia_peermem " {
					keep = append(append(keep, line...), '\n')
				}
			}
			if err := os.WriteFile(p, keep, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "gpuhc: ib.gdr: host: nvidia_peermem not loaded"},
		{"Fabric Manager not running", func(t *testing.T, cfg *config.Config) {
			sysfsfix.Remove(t, cfg.Root, "proc/2116")
		}, "gpuhc: fabric.manager: host: nv-fabricmanager not running"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := wholeNode(t)
			tc.fault(t, &cfg)
			results := wholeNodeRun(t, cfg)
			out := dryRunPolicy(t, cfg, results)
			if out.Kind != "would-drain" || len(out.Detail) < len(tc.reason) || out.Detail[:len(tc.reason)] != tc.reason {
				t.Errorf("policy %s %q, want a drain with reason starting %q", out.Kind, out.Detail, tc.reason)
			}
		})
	}
}

// A flapping link is seen only across runs: the first run takes the
// baseline, the second sees link_downed grow.
func TestWholeNodeFlap(t *testing.T) {
	cfg := wholeNode(t)
	if rs := wholeNodeRun(t, cfg); check.Worst(rs) != check.OK {
		t.Fatalf("first run: %v", check.Worst(rs))
	}
	rel := sysfsfix.PortDir("mlx5_6", 1) + "/counters/link_downed"
	b, err := os.ReadFile(filepath.Join(cfg.Root, rel))
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if _, err := fmt.Sscan(string(b), &n); err != nil {
		t.Fatal(err)
	}
	sysfsfix.Set(t, cfg.Root, rel, fmt.Sprint(n+5))
	out := dryRunPolicy(t, cfg, wholeNodeRun(t, cfg))
	if want := "gpuhc: ib.counters: mlx5_6/1 (0000:bb:00.0): link flapped 5 times since last run"; out.Kind != "would-drain" || len(out.Detail) < len(want) || out.Detail[:len(want)] != want {
		t.Errorf("policy %s %q, want a drain with reason starting %q", out.Kind, out.Detail, want)
	}
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	start := 0
	for i, c := range b {
		if c == '\n' {
			out = append(out, b[start:i])
			start = i + 1
		}
	}
	if start < len(b) {
		out = append(out, b[start:])
	}
	return out
}

// wholeNodes are the simulators as whole nodes: each on the sysfs tree
// of its machine (the DGX H200 has the H100's board and buses).
var wholeNodes = []struct {
	model string
	cfg   func(*testing.T) config.Config
}{
	{"dgxa100", func(t *testing.T) config.Config { return wholeNodeOn(t, sysfsfix.A100HDR) }},
	{"dgxh100", wholeNode},
	{"dgxh200", wholeNode},
	{"dgxb200", func(t *testing.T) config.Config {
		cfg := wholeNodeOn(t, sysfsfix.B200)
		cfg.Checks.IB.Port.MinRateGbps = 400
		return cfg
	}},
}

// TestWholeNodeHealthyKernelLogs: every simulator as a healthy whole node
// with every line of its kernel log judged (a replay of the whole log),
// first its own boot, then with each healthy real capture of the evidence
// corpus after it: every check of the catalog is OK or SKIP, and the
// policy would do nothing.
func TestWholeNodeHealthyKernelLogs(t *testing.T) {
	logs, err := evidence.Logs()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]string{"own boot": {}}
	for _, l := range logs {
		if !l.Expect.HealthyOtherwise || len(l.Expect.Verdicts) > 0 {
			continue
		}
		lines, err := l.Lines()
		if err != nil {
			t.Fatal(err)
		}
		cases[l.Name] = lines
	}
	if len(cases) < 3 {
		t.Fatalf("%d healthy logs, want the node's own and at least two real captures", len(cases))
	}
	if len(wholeNodes) != len(sim.Models()) {
		t.Errorf("%d whole nodes, want one per simulator %q", len(wholeNodes), sim.Models())
	}
	for _, node := range wholeNodes {
		for name, lines := range cases {
			t.Run(node.model+"/"+name, func(t *testing.T) {
				cfg := node.cfg(t)
				_, results := simRunKernel(t, cfg, node.model, nil, lines, false)
				healthyReporting(t, results, "gpu.xid", "host.kernel", "fabric.sxid", "ib.port", "fabric.manager", "topology", "host.cpu")
				if out := dryRunPolicy(t, cfg, results); out.Kind != "none" {
					t.Errorf("policy %s %q, want none", out.Kind, out.Detail)
				}
			})
		}
	}
}

// healthyReporting fails the test on any result other than OK or SKIP,
// and on a check of names that reported nothing.
func healthyReporting(t *testing.T, results []check.Result, names ...string) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range results {
		seen[r.Check] = true
		if r.Status != check.OK && r.Status != check.Skip {
			t.Errorf("%s %s: %v %q", r.Check, r.Component, r.Status, r.Message)
		}
	}
	for _, name := range names {
		if !seen[name] {
			t.Errorf("%s did not report", name)
		}
	}
}
