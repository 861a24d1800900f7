package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// ibNode is one node shape benchIB measures: a sysfsfix tree, the
// simulated GPUs whose PCI addresses match it, and the ib.port values
// --print-inventory writes for it.
type ibNode struct {
	tree, simulate, what string
	exclude              string // checks.ib.exclude, TOML
	hcas                 int
}

// ibNodes: a DGX H100 (9 HCAs: 8 NDR and a management port, no VPD
// files) and an HGX B200 (8 NDR HCAs and 4 NVSwitch management
// functions, every one with a VPD the discovery reads).
var ibNodes = []ibNode{
	{sysfsfix.H100NDR, "dgxh100", "9 HCAs", `["mlx5_8"]`, 8},
	{sysfsfix.B200, "dgxb200", "8 HCAs + 4 SW_MNG, VPD read", `[]`, 8},
}

// benchIB measures what the InfiniBand/RoCE and topology checks add to a
// run: every run sees the node's kernel-layout tree bind-mounted over
// /sys in a private mount namespace (unshare -m; root only), so discovery
// goes through rdmamap's fixed paths as on a node, and the state
// directory is on the same disk as in a real run. Runs with the checks
// off and on alternate, so drift affects both alike; the difference of
// the medians is the cost.
func benchIB(bin string, runs int) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("-ib needs root (unshare -m and a bind mount over /sys)")
	}
	for _, n := range ibNodes {
		if err := benchIBNode(bin, runs, n); err != nil {
			return fmt.Errorf("%s: %w", n.tree, err)
		}
	}
	return nil
}

func benchIBNode(bin string, runs int, n ibNode) error {
	dir, err := os.MkdirTemp("", "gpuhc-bench-ib-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tree := filepath.Join(dir, "tree")
	if err := sysfsfix.Write(tree, n.tree); err != nil {
		return err
	}
	off, err := writeIBConfig(dir, "off", n, false)
	if err != nil {
		return err
	}
	on, err := writeIBConfig(dir, "on", n, true)
	if err != nil {
		return err
	}
	wrap := func(cfg string) []string {
		return []string{"-m", "--propagation", "private", "/bin/sh", "-c",
			`/bin/mount --bind "$0/sys" /sys && exec "$@"`, tree, bin,
			"--config", cfg, "--node", "bench001", "--simulate", n.simulate}
	}
	var offS, onS []sample
	for i := 0; i < runs; i++ {
		for _, c := range []struct {
			cfg string
			out *[]sample
		}{{off, &offS}, {on, &onS}} {
			s, err := runOnce("/usr/bin/unshare", wrap(c.cfg))
			if err != nil {
				return fmt.Errorf("run %d: %w", i+1, err)
			}
			*c.out = append(*c.out, s)
		}
	}
	fmt.Printf("IB checks: %s --simulate %s, %s tree (%s) over /sys, %d runs each, alternating\n", bin, n.simulate, n.tree, n.what, runs)
	fmt.Printf("%-34s %10s %10s\n", "metric (median)", "IB off", "IB on")
	ms := func(s []sample, f func(sample) float64) float64 { return median(pick(s, f)) }
	wall := func(x sample) float64 { return float64(x.wall) / 1e6 }
	cpu := func(x sample) float64 { return float64(x.cpu) / 1e6 }
	rss := func(x sample) float64 { return float64(x.rssKiB) / 1024 }
	fmt.Printf("%-34s %10.1f %10.1f\n", "wall ms", ms(offS, wall), ms(onS, wall))
	fmt.Printf("%-34s %10.1f %10.1f\n", "cpu ms", ms(offS, cpu), ms(onS, cpu))
	fmt.Printf("%-34s %10.1f %10.1f\n", "max RSS MiB", ms(offS, rss), ms(onS, rss))
	fmt.Printf("added by ib.port, ib.counters, ib.gdr, topology: %.1f ms wall, %.1f ms CPU (median)\n\n",
		ms(onS, wall)-ms(offS, wall), ms(onS, cpu)-ms(offS, cpu))
	return nil
}

// writeIBConfig writes a config for node n with the IB and topology
// checks on (as --print-inventory would set them) or off.
func writeIBConfig(dir, name string, n ibNode, on bool) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "state_dir = %q\nlock_file = %q\n[events]\nfile = %q\n[policy]\ndry_run = false\n",
		filepath.Join(dir, name, "state"), filepath.Join(dir, name, "hc.lock"), filepath.Join(dir, name, "events.jsonl"))
	fmt.Fprintf(&b, "[checks.fabric.manager]\nenabled = false\n[checks.ib]\nexclude = %s\n", n.exclude)
	fmt.Fprintf(&b, "[checks.ib.port]\nenabled = %t\nexpected_hcas = %d\nexpected_active_ports = %d\nmin_rate_gbps = 400.0\nlink_layer = \"InfiniBand\"\nfirmware = \"28.39.2048\"\n", on, n.hcas, n.hcas)
	fmt.Fprintf(&b, "[checks.ib.counters]\nenabled = %t\n[checks.ib.gdr]\nenabled = %t\n[checks.topology]\nenabled = %t\nsame_switch = \"fail\"\n", on, on, on)
	p := filepath.Join(dir, name+".toml")
	return p, os.WriteFile(p, []byte(b.String()), 0o644)
}
