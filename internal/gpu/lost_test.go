package gpu

import (
	"fmt"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

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
		return baseWant{fmt.Sprintf("gpu%d", i), check.Fail, check.ActionResetGPU, msg, i, ids, pci}
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
