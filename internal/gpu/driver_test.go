package gpu

import (
	"os"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"550.54.15", "550.54.15", 0},
		{"550.54.15", "550.100", -1}, // numeric, not text
		{"550.100", "550.54.15", 1},
		{"560.28.03", "560.28.3", 0},
		{"570", "570.0.0", 0},
		{"535.183.01", "550.54.15", -1},
		{"550.54.15", "550.54", 1},
	} {
		if got := compareVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("compareVersions(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestDriver(t *testing.T) {
	host := func(st check.Status, act check.Action, msg string) []baseWant {
		return []baseWant{{"host", st, act, msg, -1, -1, -1}}
	}
	for _, model := range baseModels {
		m, _ := baseSimNode(t, model, -1)
		v := m.Model.DriverVersion
		newer := compareVersions(v, "560") > 0 // dgxb200's R570
		for _, tc := range []struct {
			name     string
			min, eq  string
			expected int
			inject   []string
			want     []baseWant
		}{
			{"healthy", "", "", -1, nil, host(check.OK, "", "driver "+v)},
			{"min met", "535.183.01", "", -1, nil, host(check.OK, "", "driver "+v)},
			{"exact met", "", v, -1, nil, host(check.OK, "", "driver "+v)},
			{"exact missed", "", "550.90.07", -1, nil, host(check.Fail, check.ActionDrain, "driver "+v+" != required 550.90.07")},
			{"min", "560.35.03", "", -1, nil, map[bool][]baseWant{
				false: host(check.Fail, check.ActionDrain, "driver "+v+" < minimum 560.35.03"),
				true:  host(check.OK, "", "driver "+v)}[newer]},
			{"nvml init", "", "", -1, []string{"gpu0:nvml-init"},
				host(check.Fail, check.ActionDrain, "NVML failed (8 GPUs on the PCI bus): nvmlInit: ERROR_DRIVER_NOT_LOADED")},
			{"nvml library", "", "", -1, []string{"gpu3:nvml-init=library-not-found"},
				host(check.Fail, check.ActionDrain, "NVML failed (8 GPUs on the PCI bus): nvmlInit: ERROR_LIBRARY_NOT_FOUND")},
			{"GPU faults are not the driver's", "", "", -1, []string{"gpu3:lost", "gpu4:missing", "gpu5:reset-required"}, host(check.OK, "", "driver "+v)},
			{"hang", "", "", -1, []string{"gpu0:hang"}, host(check.Fail, check.ActionReboot, "NVML did not answer in …")},
		} {
			t.Run(model+"/"+tc.name, func(t *testing.T) {
				m, n := baseSimNode(t, model, tc.expected, tc.inject...)
				c := NewDriver(n, config.GPUDriver{Common: config.Common{Enabled: true}, MinVersion: tc.min, ExactVersion: tc.eq})
				if c.Name() != "gpu.driver" {
					t.Fatal(c.Name())
				}
				baseCheck(t, m, baseRun(c), tc.want)
			})
		}
	}
}

func TestDriverNVMLFailsWithGPUsExpected(t *testing.T) {
	n := NewNode(baseFakeLib(0, failInit(nvml.ERROR_LIBRARY_NOT_FOUND)), t.TempDir(), 8, "")
	got := baseRun(NewDriver(n, config.GPUDriver{}))
	if len(got) != 1 || got[0].Status != check.Fail || got[0].Message != "NVML failed (NVIDIA GPUs expected): nvmlInit: ERROR_LIBRARY_NOT_FOUND" {
		t.Errorf("%+v", got)
	}
}

// TestRealNVMLWithoutDriver runs the real go-nvml against this machine. On
// a node without the NVIDIA driver (no libnvidia-ml.so.1, no NVIDIA PCI
// device) every gpu check must SKIP cleanly, neither FAIL nor ERROR.
func TestRealNVMLWithoutDriver(t *testing.T) {
	if bus, _ := NVIDIAOnBus("/"); len(bus) > 0 {
		t.Skipf("this machine has NVIDIA GPUs: %v", bus)
	}
	lib := nvml.New()
	if ret := lib.Init(); ret == nvml.SUCCESS {
		lib.Shutdown()
		t.Skip("NVML initialises here")
	}
	n := NewNode(nvml.New(), "/", -1, "")
	for _, c := range []check.Check{
		NewCount(n, config.GPUCount{Expected: -1}), NewDriver(n, config.GPUDriver{MinVersion: "550"}), NewLost(n),
	} {
		got := baseRun(c)
		if len(got) != 1 || got[0].Status != check.Skip || got[0].Message != "no NVIDIA GPU on this node" || got[0].Component != "host" {
			t.Errorf("%s: %+v", c.Name(), got)
		}
	}
}

// TestRealNVMLOnGPUs runs the real go-nvml on a GPU node when asked
// (GPUHC_REAL_NVML=1): a healthy node gives no FAIL, ERROR or WARN.
func TestRealNVMLOnGPUs(t *testing.T) {
	if os.Getenv("GPUHC_REAL_NVML") != "1" {
		t.Skip("set GPUHC_REAL_NVML=1 on a GPU node")
	}
	n := NewNode(nvml.New(), "/", -1, "")
	for _, c := range []check.Check{NewCount(n, config.GPUCount{Expected: -1}), NewDriver(n, config.GPUDriver{}), NewLost(n)} {
		for _, r := range baseRun(c) {
			t.Logf("%s %s %v %q %+v", c.Name(), r.Component, r.Status, r.Message, r.IDs)
			if r.Status != check.OK {
				t.Errorf("%s: %s %v %q", c.Name(), r.Component, r.Status, r.Message)
			}
		}
	}
}
