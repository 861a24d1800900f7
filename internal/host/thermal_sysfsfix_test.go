package host

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/check/checktest"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// hcaTempInput is the ASIC temperature input of an RDMA device in a
// sysfsfix tree, reached as the kernel links it: through the device's
// PCI function to its hwmon directory.
func hcaTempInput(t *testing.T, root, dev string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(root, "sys/class/infiniband", dev, "device/hwmon/hwmon*/temp1_input"))
	if err != nil || len(m) != 1 {
		t.Fatalf("%s: want one hwmon temp1_input, found %v (%v)", dev, m, err)
	}
	rel, err := filepath.Rel(root, m[0])
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

func TestThermalSysfsfixHealthy(t *testing.T) {
	tests := []struct {
		tree string
		want []string // components that must be there, named by class
	}{
		{sysfsfix.H100NDR, []string{"cpu0", "cpu1", "mlx5_0", "mlx5_3", "mlx5_7", "mlx5_8"}},
		{sysfsfix.A100HDR, []string{"cpu0", "cpu1", "mlx5_0", "mlx5_7"}},
		{sysfsfix.RoCE, []string{"cpu0", "cpu1", "mlx5_0", "mlx5_3"}},
	}
	for _, tc := range tests {
		t.Run(tc.tree, func(t *testing.T) {
			t.Parallel() // copying a tree is most of the time
			root := sysfsfix.Tree(t, tc.tree)
			rs := run(t, NewThermal(root, config.Default().Checks.Thermal))
			got := checktest.ByComponent(t, rs, checktest.WellFormed(nameThermal))
			for c, r := range got {
				if r.Status != check.OK {
					t.Errorf("healthy %s: %s is %v %q", tc.tree, c, r.Status, r.Message)
				}
			}
			for _, c := range tc.want {
				if _, ok := got[c]; !ok {
					t.Errorf("no result for %s; got %v", c, got)
				}
			}
			if r := got["mlx5_0"]; !strings.HasPrefix(r.IDs.PCIBusID, "0000:") {
				t.Errorf("mlx5_0 carries no PCI address: %+v", r)
			}
		})
	}
}

func TestThermalSysfsfixFaults(t *testing.T) {
	tests := []struct {
		name   string
		tree   string
		heat   func(t *testing.T, root string) string // returns the file it heated
		value  string
		comp   string
		status check.Status
		msg    string
	}{
		{"one HCA hot drains naming it", sysfsfix.H100NDR,
			func(t *testing.T, root string) string { return hcaTempInput(t, root, "mlx5_5") },
			"106000", "mlx5_5", check.Fail, "asic 106.0°C >= fail limit 105.0°C"},
		{"one HCA warm warns naming it", sysfsfix.A100HDR,
			func(t *testing.T, root string) string { return hcaTempInput(t, root, "mlx5_2") },
			"96000", "mlx5_2", check.Warn, "asic 96.0°C >= warn limit 95.0°C"},
		{"RoCE port hot drains naming it", sysfsfix.RoCE,
			func(t *testing.T, root string) string { return hcaTempInput(t, root, "mlx5_1") },
			"110000", "mlx5_1", check.Fail, "asic 110.0°C >= fail limit 105.0°C"},
		{"second socket hot drains as cpu1", sysfsfix.H100NDR,
			func(t *testing.T, root string) string {
				return "sys/devices/platform/coretemp.1/hwmon/hwmon1/temp1_input"
			},
			"100000", "cpu1", check.Fail, "package 100.0°C >= fail limit 100.0°C"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := sysfsfix.Tree(t, tc.tree)
			sysfsfix.Set(t, root, tc.heat(t, root), tc.value)
			rs := run(t, NewThermal(root, config.Default().Checks.Thermal))
			got := checktest.ByComponent(t, rs, checktest.WellFormed(nameThermal))
			r, ok := got[tc.comp]
			if !ok || r.Status != tc.status || !strings.Contains(r.Message, tc.msg) {
				t.Errorf("%s: got %v %q, want %v containing %q", tc.comp, r.Status, r.Message, tc.status, tc.msg)
			}
			for c, r := range got {
				if c != tc.comp && r.Status != check.OK {
					t.Errorf("only %s should be hot; %s is %v %q", tc.comp, c, r.Status, r.Message)
				}
			}
		})
	}
}
