package ib

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/check/checktest"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// The fragment loads as configuration, pins what the node has, and the
// node it came from passes ib.port with it.
func TestFragment(t *testing.T) {
	tests := []struct {
		tree    string
		exclude []string
		want    config.IBPort
	}{
		{sysfsfix.H100NDR, []string{"mlx5_8"}, config.IBPort{ExpectedHCAs: 8, ExpectedActivePorts: 8, MinRateGbps: 400,
			LinkLayer: "InfiniBand", Firmware: "28.39.2048", Inactive: "fail"}},
		// With the management NIC: two link layers, each pinned on its own.
		{sysfsfix.H100NDR, nil, config.IBPort{ExpectedHCAs: 9, ExpectedActivePorts: 9,
			Firmware: "28.39.2048", Inactive: "fail", Groups: []config.IBPortGroup{
				{LinkLayer: "Ethernet", MinRateGbps: 100, ExpectedActivePorts: 1},
				{LinkLayer: "InfiniBand", MinRateGbps: 400, ExpectedActivePorts: 8},
			}}},
		{sysfsfix.A100HDR, nil, config.IBPort{ExpectedHCAs: 8, ExpectedActivePorts: 8, MinRateGbps: 200,
			LinkLayer: "InfiniBand", Firmware: "20.39.1002", Inactive: "fail"}},
		{sysfsfix.RoCE, nil, config.IBPort{ExpectedHCAs: 4, ExpectedActivePorts: 4, MinRateGbps: 200,
			LinkLayer: "Ethernet", Firmware: "22.39.1002", Inactive: "fail"}},
		{"", nil, config.IBPort{ExpectedHCAs: 0, ExpectedActivePorts: 0, Inactive: "fail"}},
	}
	for _, tc := range tests {
		t.Run(tc.tree+strings.Join(tc.exclude, ","), func(t *testing.T) {
			root := t.TempDir()
			if tc.tree != "" {
				root = sysfsfix.Tree(t, tc.tree)
			}
			frag, err := Fragment(context.Background(), NewGather(root), tc.exclude)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Parse("fragment", []byte(frag), "gpu001")
			if err != nil {
				t.Fatalf("fragment does not load: %v\n%s", err, frag)
			}
			got := cfg.Checks.IB
			got.Port.Common = config.IBPort{}.Common
			if !reflect.DeepEqual(got.Port, tc.want) {
				t.Errorf("got  %+v\nwant %+v\n%s", got.Port, tc.want, frag)
			}
			got.Port.Common = config.Default().Checks.IB.Port.Common
			got.Exclude = tc.exclude
			rs := run(t, NewPort(NewGather(root), got))
			for _, r := range rs {
				checktest.Holds(t, r, checktest.WellFormed(namePort))
				if r.Status != check.OK && r.Status != check.Skip {
					t.Errorf("node fails its own inventory: %+v\n%s", r, frag)
				}
			}
			if tc.tree != "" && !strings.Contains(frag, "# mlx5_0 0000:") {
				t.Errorf("no per-HCA comment:\n%s", frag)
			}
		})
	}
}

// A node with a port down at bring-up gets a fragment that still warns
// about it rather than draining, and names it.
func TestFragmentInactivePort(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.A100HDR)
	sysfsfix.Set(t, root, sysfsfix.PortDir("mlx5_7", 1)+"/state", "1: DOWN")
	sysfsfix.Set(t, root, sysfsfix.PortDir("mlx5_7", 1)+"/phys_state", "2: Polling")
	frag, err := Fragment(context.Background(), NewGather(root), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("fragment", []byte(frag), "gpu001")
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Checks.IB.Port
	if p.ExpectedActivePorts != 7 || p.ExpectedHCAs != 8 || p.Inactive != "warn" {
		t.Errorf("got %+v\n%s", p, frag)
	}
	if !strings.Contains(frag, "port 1: DOWN Polling") || !strings.Contains(frag, "# Not ACTIVE: mlx5_7/1.") {
		t.Errorf("down port not shown:\n%s", frag)
	}
	rs := run(t, NewPort(NewGather(root), cfg.Checks.IB))
	expect(t, namePort, rs, map[string]want{"mlx5_7/1": {check.Warn, "state DOWN (phys Polling)"}, "*": {check.OK, ""}})
}

func TestFragmentError(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, classDir, "x")
	if _, err := Fragment(context.Background(), NewGather(root), nil); err == nil {
		t.Error("no error")
	}
	// A device whose ports cannot be listed would be pinned short of them.
	root = sysfsfix.Tree(t, sysfsfix.H100NDR)
	sysfsfix.UnlistPorts(t, root, "mlx5_2")
	if frag, err := Fragment(context.Background(), NewGather(root), nil); err == nil || !strings.Contains(err.Error(), "mlx5_2: cannot list its ports") {
		t.Errorf("got %v and\n%s", err, frag)
	}
}

// A fragment taken while VFs and SFs exist does not require them: they are
// made at run time (sriov_numvfs, devlink) and may not be back after a
// reboot. They are listed, marked as not counted.
func TestFragmentVirtual(t *testing.T) {
	root := withVirtual(t)
	frag, err := Fragment(context.Background(), NewGather(root), []string{"mlx5_8"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("fragment", []byte(frag), "gpu001")
	if err != nil {
		t.Fatalf("fragment does not load: %v\n%s", err, frag)
	}
	p := cfg.Checks.IB.Port
	if p.ExpectedHCAs != 8 || p.ExpectedActivePorts != 8 || p.Inactive != "fail" || p.Firmware != "28.39.2048" {
		t.Errorf("got %+v\n%s", p, frag)
	}
	for _, line := range []string{
		"# mlx5_9 0000:19:00.1 fw 28.39.2048 (virtual function, not counted)\n",
		"# mlx5_11 - fw 28.39.2048 (virtual function, not counted)\n",
		"# mlx5_8 0000:c1:00.0 fw 28.39.2048 (excluded)\n",
	} {
		if !strings.Contains(frag, line) {
			t.Errorf("no %q in\n%s", line, frag)
		}
	}
	c := cfg.Checks.IB
	c.Exclude = []string{"mlx5_8"}
	for _, d := range []string{"mlx5_9", "mlx5_10", "mlx5_11"} {
		removeVirtual(t, root, d)
	}
	expect(t, namePort, run(t, NewPort(NewGather(root), c)), map[string]want{
		"host": {check.OK, "8 HCAs, 8 of 8 ports active (1 excluded)"},
		"*":    {check.OK, ""},
	})
}
