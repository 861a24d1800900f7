package sim

import (
	"fmt"
	"strconv"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// memoryPart: ECC counters, row remapping and page retirement for
// gpu.memory.
//
// Healthy: ECC on, every error counter 0, no row remapped. Ampere and
// later remap rows and answer ERROR_NOT_SUPPORTED to page retirement.
// The SRAM error status call is answered from Hopper on; the A100 answers
// ERROR_NOT_SUPPORTED, and its SRAM count comes from the per-location
// counter, as on a real A100 with a 550 driver. NVIDIA's mock reports
// every NVML symbol present (LookupSymbol); tests override the server's
// LookupSymbolFunc to play an older driver without the status call.
//
// Faults wrap the functions already set, so several compose:
//
//	gpuN:dbe=V            V volatile uncorrected errors in device memory
//	gpuN:sram-ue=V        V volatile uncorrected SRAM errors (SEC-DED)
//	gpuN:correctable=V    V volatile corrected errors in device memory
//	gpuN:remap-pending    a row remap waits for a GPU reset
//	gpuN:remap-failure    a row remap failed (the bank has no spare rows)
//	gpuN:ecc=off          ECC disabled
var memoryPart = part{
	name:     "memory",
	defaults: memoryDefaults,
	faults: map[string]func(m *Machine, d *server.Device, i int, value string) error{
		"dbe":           eccFault(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.MEMORY_LOCATION_DEVICE_MEMORY),
		"sram-ue":       eccFault(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.MEMORY_LOCATION_SRAM),
		"correctable":   eccFault(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.MEMORY_LOCATION_DEVICE_MEMORY),
		"remap-pending": remapFault(func(r *remapState) { r.unc, r.pending = r.unc+1, true }),
		"remap-failure": remapFault(func(r *remapState) { r.unc, r.failed = r.unc+1, true }),
		"ecc":           faultECC,
	},
}

func memoryDefaults(m *Machine, d *server.Device, i int) {
	d.GetEccModeFunc = func() (nvml.EnableState, nvml.EnableState, nvml.Return) {
		return nvml.FEATURE_ENABLED, nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	d.GetDefaultEccModeFunc = func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_ENABLED, nvml.SUCCESS }
	d.GetMemoryErrorCounterFunc = func(t nvml.MemoryErrorType, c nvml.EccCounterType, l nvml.MemoryLocation) (uint64, nvml.Return) {
		if t >= nvml.MEMORY_ERROR_TYPE_COUNT || c >= nvml.ECC_COUNTER_TYPE_COUNT || l >= nvml.MEMORY_LOCATION_COUNT {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return 0, nvml.SUCCESS
	}
	d.GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
		if t >= nvml.MEMORY_ERROR_TYPE_COUNT || c >= nvml.ECC_COUNTER_TYPE_COUNT {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return 0, nvml.SUCCESS
	}
	sramStatus := m.Model.Arch >= nvml.DEVICE_ARCH_HOPPER
	d.GetSramEccErrorStatusFunc = func() (nvml.EccSramErrorStatus, nvml.Return) {
		if !sramStatus {
			return nvml.EccSramErrorStatus{}, nvml.ERROR_NOT_SUPPORTED
		}
		return nvml.EccSramErrorStatus{Version: nvml.STRUCT_VERSION(nvml.EccSramErrorStatus{}, 1)}, nvml.SUCCESS
	}
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, nvml.SUCCESS }
	d.GetRetiredPagesFunc = func(nvml.PageRetirementCause) ([]uint64, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	d.GetRetiredPages_v2Func = func(nvml.PageRetirementCause) ([]uint64, []uint64, nvml.Return) {
		return nil, nil, nvml.ERROR_NOT_SUPPORTED
	}
	d.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) {
		return nvml.FEATURE_DISABLED, nvml.ERROR_NOT_SUPPORTED
	}
}

// eccFault adds V errors of one type at one location to every counter
// that includes them: the per-location counter, the device total (which
// sums all locations) and, for SRAM, the SRAM status; volatile and
// aggregate alike, since both count since before the fault.
func eccFault(t nvml.MemoryErrorType, loc nvml.MemoryLocation) func(*Machine, *server.Device, int, string) error {
	return func(m *Machine, d *server.Device, i int, value string) error {
		n, err := strconv.ParseUint(value, 10, 32)
		if err != nil || n == 0 {
			return fmt.Errorf("want a count of errors from 1, got %q", value)
		}
		counter, total, sram := d.GetMemoryErrorCounterFunc, d.GetTotalEccErrorsFunc, d.GetSramEccErrorStatusFunc
		d.GetMemoryErrorCounterFunc = func(t2 nvml.MemoryErrorType, c nvml.EccCounterType, l nvml.MemoryLocation) (uint64, nvml.Return) {
			v, ret := counter(t2, c, l)
			if ret == nvml.SUCCESS && t2 == t && l == loc {
				v += n
			}
			return v, ret
		}
		d.GetTotalEccErrorsFunc = func(t2 nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
			v, ret := total(t2, c)
			if ret == nvml.SUCCESS && t2 == t {
				v += n
			}
			return v, ret
		}
		if loc != nvml.MEMORY_LOCATION_SRAM {
			return nil
		}
		d.GetSramEccErrorStatusFunc = func() (nvml.EccSramErrorStatus, nvml.Return) {
			s, ret := sram()
			if ret != nvml.SUCCESS {
				return s, ret
			}
			if t == nvml.MEMORY_ERROR_TYPE_UNCORRECTED {
				s.VolatileUncSecDed += n
				s.AggregateUncSecDed += n
			} else {
				s.VolatileCor += n
				s.AggregateCor += n
			}
			return s, ret
		}
		return nil
	}
}

type remapState struct {
	corr, unc       int
	pending, failed bool
}

func remapFault(edit func(*remapState)) func(*Machine, *server.Device, int, string) error {
	return func(m *Machine, d *server.Device, i int, value string) error {
		if value != "" {
			return fmt.Errorf("takes no value, got %q", value)
		}
		prev := d.GetRemappedRowsFunc
		d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
			var r remapState
			var ret nvml.Return
			r.corr, r.unc, r.pending, r.failed, ret = prev()
			if ret != nvml.SUCCESS {
				return r.corr, r.unc, r.pending, r.failed, ret
			}
			edit(&r)
			return r.corr, r.unc, r.pending, r.failed, ret
		}
		return nil
	}
}

// faultECC: "gpuN:ecc=off" — ECC disabled (current and pending), as after
// nvidia-smi -e 0 and a reset; the counters then answer NOT_SUPPORTED.
func faultECC(m *Machine, d *server.Device, i int, value string) error {
	if value != "off" {
		return fmt.Errorf("want off, got %q", value)
	}
	d.GetEccModeFunc = func() (nvml.EnableState, nvml.EnableState, nvml.Return) {
		return nvml.FEATURE_DISABLED, nvml.FEATURE_DISABLED, nvml.SUCCESS
	}
	d.GetMemoryErrorCounterFunc = func(nvml.MemoryErrorType, nvml.EccCounterType, nvml.MemoryLocation) (uint64, nvml.Return) {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	d.GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	d.GetSramEccErrorStatusFunc = func() (nvml.EccSramErrorStatus, nvml.Return) {
		return nvml.EccSramErrorStatus{}, nvml.ERROR_NOT_SUPPORTED
	}
	return nil
}
