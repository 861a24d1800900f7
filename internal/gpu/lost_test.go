package gpu

import (
	"fmt"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuhc/gpuhc/internal/check"
)

func TestLost(t *testing.T) {
	ok := func(i int) baseWant {
		return baseWant{fmt.Sprintf("gpu%d", i), check.OK, "", "GPU responds", i, i, i}
	}
	oks := func(from, to int) []baseWant {
		var out []baseWant
		for i := from; i < to; i++ {
			out = append(out, ok(i))
		}
		return out
	}
	cat := func(parts ...[]baseWant) []baseWant {
		var out []baseWant
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	fail := func(i int, msg string, ids int, pci int) baseWant {
		act := check.ActionResetGPU
		if msg == "GPU is lost" {
			act = check.ActionReboot // off the bus: only a reboot brings it back
		}
		return baseWant{fmt.Sprintf("gpu%d", i), check.Fail, act, msg, i, ids, pci}
	}
	for _, model := range baseModels {
		for _, tc := range []struct {
			name   string
			inject []string
			want   []baseWant
		}{
			{"healthy", nil, oks(0, 8)},
			// Lost before enumeration: only the index and, from the bus,
			// the PCI address are known; listed first.
			{"lost", []string{"gpu3:lost"}, cat([]baseWant{fail(3, "GPU is lost", -1, 3)}, oks(0, 3), oks(4, 8))},
			{"two lost", []string{"gpu6:lost", "gpu1:lost"}, cat([]baseWant{fail(1, "GPU is lost", -1, 1), fail(6, "GPU is lost", -1, 6)}, oks(0, 1), oks(2, 6), oks(7, 8))},
			{"lost late", []string{"gpu3:lost=late"}, cat(oks(0, 3), []baseWant{fail(3, "GPU is lost", 3, 3)}, oks(4, 8))},
			{"reset required", []string{"gpu7:reset-required"}, cat(oks(0, 7), []baseWant{fail(7, "GPU requires reset", 7, 7)})},
			// The bus and NVML disagree on the count: the lost GPU's address
			// cannot be inferred.
			{"lost and missing", []string{"gpu3:lost", "gpu6:missing"}, cat([]baseWant{fail(3, "GPU is lost", -1, -1)}, oks(0, 3),
				[]baseWant{ok(4), ok(5), {"gpu6", check.OK, "", "GPU responds", 6, 7, 7}})},
			{"hang late", []string{"gpu5:hang=late"}, cat(oks(0, 5), []baseWant{{"gpu5", check.Fail, check.ActionReboot, "NVML did not answer in …", 5, 5, 5}})},
			{"hang", []string{"gpu5:hang"}, []baseWant{{"host", check.Fail, check.ActionReboot, "NVML did not answer in …", -1, -1, -1}}},
			{"nvml init", []string{"gpu0:nvml-init"}, []baseWant{{"host", check.Error, "", "NVML unavailable (see gpu.driver): nvmlInit: ERROR_DRIVER_NOT_LOADED", -1, -1, -1}}},
		} {
			t.Run(model+"/"+tc.name, func(t *testing.T) {
				m, n := baseSimNode(t, model, -1, tc.inject...)
				c := NewLost(n)
				if c.Name() != "gpu.lost" {
					t.Fatal(c.Name())
				}
				baseCheck(t, m, baseRun(c), tc.want)
			})
		}
	}
}

// A GPU that fails enumeration with another error is still reported, with
// NVML's words.
func TestLostOtherError(t *testing.T) {
	lib, orig := baseFakeLib(2, nil), baseFakeLib(2, nil)
	d0, _ := orig.DeviceGetHandleByIndex(0)
	d0.(*mock.Device).GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 40, nvml.SUCCESS }
	lib.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i == 1 {
			return nil, nvml.ERROR_UNKNOWN
		}
		return orig.DeviceGetHandleByIndex(i)
	}
	n := NewNode(lib, "", -1, "x")
	got := baseRun(NewLost(n))
	if len(got) != 2 || got[0].Component != "gpu1" || got[0].Status != check.Fail ||
		got[0].Message != "GPU unreadable: nvmlDeviceGetHandleByIndex(1): ERROR_UNKNOWN" {
		t.Errorf("%+v", got)
	}
}

// TestLostProbeTouchesGPU: the probe asks the GPU itself (its temperature),
// not the persistence mode the driver may answer from its own state.
func TestLostProbeTouchesGPU(t *testing.T) {
	for _, tc := range []struct {
		name        string
		persistence nvml.Return
		temperature nvml.Return
		want        baseWant
	}{
		{"gpu lost", nvml.SUCCESS, nvml.ERROR_GPU_IS_LOST, baseWant{"gpu2", check.Fail, check.ActionReboot, "GPU is lost", 2, 2, 2}},
		{"reset required", nvml.SUCCESS, nvml.ERROR_RESET_REQUIRED, baseWant{"gpu2", check.Fail, check.ActionResetGPU, "GPU requires reset", 2, 2, 2}},
		{"persistence mode lost, GPU answers", nvml.ERROR_GPU_IS_LOST, nvml.SUCCESS, baseWant{"gpu2", check.OK, "", "GPU responds", 2, 2, 2}},
		{"no sensor", nvml.SUCCESS, nvml.ERROR_NOT_SUPPORTED, baseWant{"gpu2", check.OK, "", "GPU responds", 2, 2, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, n := baseSimNode(t, "dgxh100", -1)
			d := m.Devices[2]
			d.GetPersistenceModeFunc = func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_ENABLED, tc.persistence }
			d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 40, tc.temperature }
			var want []baseWant
			for i := range m.Devices {
				w := baseWant{fmt.Sprintf("gpu%d", i), check.OK, "", "GPU responds", i, i, i}
				if i == 2 {
					w = tc.want
				}
				want = append(want, w)
			}
			baseCheck(t, m, baseRun(NewLost(n)), want)
		})
	}
}
