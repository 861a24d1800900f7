package ib

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/statefile"
	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// Trees captured from real machines (testdata/real/README.md says from
// where), laid out as the kernel does. Their expected verdicts come from
// what the kernel documents, not from running gpuhc.

// realTree copies testdata/real/<name> into a scratch directory, links
// kept as links, so that a test may change it.
func realTree(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join("testdata", "real", name)
	dst := t.TempDir()
	if err := sysfsfix.CopyTree(src, dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// noWorse fails the test on any result worse than allowed.
func noWorse(t *testing.T, what string, rs []check.Result, allowed check.Status) {
	t.Helper()
	for _, r := range rs {
		if r.Status > allowed && r.Status != check.Skip {
			t.Errorf("%s: %s %v %q", what, r.Component, r.Status, r.Message)
		}
	}
}

// The healthy captures: no FAIL on the first run, and neither FAIL nor
// WARN from the second run on. gpud's H100 has excessive_buffer_overrun_
// errors at 15, the 4-bit top, on every port: WARNed once, on first
// sight, without advice to clear it.
func TestRealCapturesCounters(t *testing.T) {
	tests := []struct {
		tree  string
		first map[string]want
	}{
		// mlx5_1's link_downed reads 255, the 8-bit top: warned once
		// too, with the advice to clear it (255 flaps are history; once
		// cleared, every new flap shows).
		{"gpud-h100", map[string]want{
			"mlx5_1/1": {check.Warn, "link_downed at its top 255 on first sight; further errors on it cannot be seen until cleared (perfquery -R -C mlx5_1 -P 1)"},
			"*":        {check.Warn, "excessive_buffer_overrun_errors at its top 15 on first sight; further errors on it cannot be seen"},
		}},
		{"procfs", map[string]want{"*": {check.OK, "baseline recorded"}}},
		// i40iw is iWARP: no PMA, every counter reads "N/A (no PMA)"
		// (drivers/infiniband/core/sysfs.c, show_pma_counter).
		{"node-exporter", map[string]want{
			"i40iw0/1": {check.Skip, "N/A (no PMA)"},
			"*":        {check.OK, "baseline recorded"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.tree, func(t *testing.T) {
			root := realTree(t, tc.tree)
			st := statefile.Dir{Path: t.TempDir()}
			rs := run(t, NewCounters(root, NewGather(root), defaults(), st))
			expect(t, nameCounters, rs, tc.first)
			// No advice to clear a 4-bit counter found at 15: cleared,
			// it climbs back and that growth FAILs a healthy node.
			for _, r := range rs {
				for _, f := range strings.Split(r.Message, "; ") {
					if strings.Contains(f, "excessive_buffer_overrun_errors") && strings.Contains(f, "perfquery") {
						t.Errorf("%s: advice that turns into a FAIL: %s", r.Component, f)
					}
				}
			}
			for run2 := range 3 {
				rs := run(t, NewCounters(root, NewGather(root), defaults(), st))
				noWorse(t, "run "+string(rune('2'+run2)), rs, check.OK)
			}
		})
	}
}

// ib.port on the captures with the shipped defaults. procfs's mlx5_0
// reads phys_state "4: ACTIVE", which is no kernel value (phys_state_to_str
// names 4 PortConfigurationTraining, and a live link is 5: LinkUp): the
// port is not up as far as the kernel says, which defaults to WARN.
func TestRealCapturesPort(t *testing.T) {
	for _, tc := range []struct {
		tree string
		want map[string]want
	}{
		{"gpud-h100", map[string]want{
			"host":          {check.OK, "9 HCAs, 9 of 9 ports active"},
			"mlx5_bond_0/1": {check.OK, "ACTIVE, 200 Gb/sec (2X NDR), Ethernet"},
			"*":             {check.OK, "ACTIVE, 400 Gb/sec (4X NDR), InfiniBand"},
		}},
		{"procfs", map[string]want{
			"mlx5_0/1": {check.Warn, "state ACTIVE (phys ACTIVE)"},
			"host":     {check.OK, "3 HCAs, 3 of 4 ports active"},
			"*":        {check.OK, "ACTIVE"},
		}},
		{"node-exporter", map[string]want{"*": {check.OK, ""}}},
	} {
		t.Run(tc.tree, func(t *testing.T) {
			expect(t, namePort, run(t, NewPort(NewGather(realTree(t, tc.tree)), defaults())), tc.want)
		})
	}
}

// Bring-up on gpud's H100 (eight NDR ports and a RoCE bond at
// "200 Gb/sec (2X NDR)"): the inventory pins each link layer on its own,
// so that an NDR port later trained at 2X fails, though the bond's 200 is
// the node's lowest rate.
func TestRealFragmentRoCEBesideNDR(t *testing.T) {
	root := realTree(t, "gpud-h100")
	frag, err := Fragment(context.Background(), NewGather(root), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("fragment", []byte(frag), "gpu001")
	if err != nil {
		t.Fatalf("fragment does not load: %v\n%s", err, frag)
	}
	p := cfg.Checks.IB.Port
	ib, okIB := p.Group("InfiniBand")
	eth, okEth := p.Group("Ethernet")
	if !okIB || ib.MinRateGbps != 400 || ib.ExpectedActivePorts != 8 || !okEth || eth.MinRateGbps != 200 || eth.ExpectedActivePorts != 1 ||
		p.ExpectedHCAs != 9 || p.MinRateGbps != 0 || p.LinkLayer != "" {
		t.Fatalf("got %+v\n%s", p, frag)
	}
	if strings.Contains(frag, "ports differ") {
		t.Errorf("rate warning on a node whose ports of each layer agree:\n%s", frag)
	}
	// The bond (fw 32.38.3056) and the NDR HCAs (28.41.1000) differ.
	if !strings.Contains(frag, "# WARNING: the HCAs run different firmware; firmware is not pinned.") {
		t.Errorf("no firmware warning:\n%s", frag)
	}
	expect(t, namePort, run(t, NewPort(NewGather(root), cfg.Checks.IB)), map[string]want{"*": {check.OK, ""}})

	// An NDR port that trained at 2X.
	sysfsfix.Set(t, root, "sys/class/infiniband/mlx5_4/ports/1/rate", "200 Gb/sec (2X NDR)")
	expect(t, namePort, run(t, NewPort(NewGather(root), cfg.Checks.IB)), map[string]want{
		"mlx5_4/1": {check.Fail, "rate 200 Gb/sec < expected 400"},
		"*":        {check.OK, ""},
	})
	// A port gone down fails its layer's count, named as such.
	sysfsfix.Set(t, root, "sys/class/infiniband/mlx5_4/ports/1/rate", "400 Gb/sec (4X NDR)")
	sysfsfix.Set(t, root, "sys/class/infiniband/mlx5_4/ports/1/state", "1: DOWN")
	sysfsfix.Set(t, root, "sys/class/infiniband/mlx5_4/ports/1/phys_state", "3: Disabled")
	expect(t, namePort, run(t, NewPort(NewGather(root), cfg.Checks.IB)), map[string]want{
		"mlx5_4/1": {check.Fail, "state DOWN (phys Disabled)"},
		"host":     {check.Fail, "8 active ports, expected 9 (inactive: mlx5_4/1); 7 active InfiniBand ports, expected 8 (inactive: mlx5_4/1)"},
		"*":        {check.OK, ""},
	})
}

// Taken while one NDR port runs at 2X, the inventory passes the node as it
// is (its contract), but says so in a WARNING comment naming the port.
func TestRealFragmentWarnsWhenGroupDiffers(t *testing.T) {
	root := realTree(t, "gpud-h100")
	sysfsfix.Set(t, root, "sys/class/infiniband/mlx5_4/ports/1/rate", "200 Gb/sec (2X NDR)")
	frag, err := Fragment(context.Background(), NewGather(root), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"# WARNING: InfiniBand ports differ in rate: 200 Gb/sec (2X NDR) on mlx5_4/1; 400 Gb/sec (4X NDR) on mlx5_0/1 mlx5_1/1 mlx5_5/1 mlx5_6/1 mlx5_7/1 mlx5_8/1 mlx5_9/1.",
		"or pin 400.0",
	} {
		if !strings.Contains(frag, w) {
			t.Errorf("no %q in\n%s", w, frag)
		}
	}
	if strings.Contains(frag, "Ethernet ports differ") {
		t.Errorf("the bond's group warned:\n%s", frag)
	}
	cfg, err := config.Parse("fragment", []byte(frag), "gpu001")
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := cfg.Checks.IB.Port.Group("InfiniBand"); g.MinRateGbps != 200 {
		t.Errorf("InfiniBand floor %v, want the lowest seen, 200", g.MinRateGbps)
	}
}
