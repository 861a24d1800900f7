package sim

import (
	"fmt"
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// recoveryPart: the GPU recovery action NVML reports in the field
// NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, for gpu.recovery.
//
// Healthy: every GPU reports NONE, as drivers that have the field do.
//
//	gpuN:recovery=reset            GPU_RESET (the driver's XID 154 "GPU Reset Required")
//	gpuN:recovery=reboot           NODE_REBOOT ("Node Reboot Required")
//	gpuN:recovery=drain-p2p        DRAIN_P2P
//	gpuN:recovery=drain-and-reset  DRAIN_AND_RESET
//	gpuN:recovery=unsupported      the field is not supported (an older driver)
//
// Only NVML changes: the kernel line is a separate fault (gpuN:xid=154),
// so that a lost line can be simulated.
var recoveryPart = part{
	name:     "recovery",
	defaults: recoveryDefaults,
	faults: map[string]func(m *Machine, d *server.Device, i int, value string) error{
		"recovery": faultRecovery,
	},
}

var recoveryValues = map[string]nvml.DeviceGpuRecoveryAction{
	"none":            nvml.GPU_RECOVERY_ACTION_NONE,
	"reset":           nvml.GPU_RECOVERY_ACTION_GPU_RESET,
	"reboot":          nvml.GPU_RECOVERY_ACTION_NODE_REBOOT,
	"drain-p2p":       nvml.GPU_RECOVERY_ACTION_DRAIN_P2P,
	"drain-and-reset": nvml.GPU_RECOVERY_ACTION_DRAIN_AND_RESET,
}

func recoveryDefaults(_ *Machine, d *server.Device, _ int) {
	d.GetFieldValuesFunc = fieldFunc(d.GetFieldValuesFunc, nvml.FI_DEV_GET_GPU_RECOVERY_ACTION, uint32(nvml.GPU_RECOVERY_ACTION_NONE))
}

func faultRecovery(_ *Machine, d *server.Device, _ int, value string) error {
	if value == "unsupported" {
		prev := d.GetFieldValuesFunc
		d.GetFieldValuesFunc = func(fv []nvml.FieldValue) nvml.Return {
			if ret := prev(fv); ret != nvml.SUCCESS {
				return ret
			}
			for k := range fv {
				if fv[k].FieldId == nvml.FI_DEV_GET_GPU_RECOVERY_ACTION {
					fv[k].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
				}
			}
			return nvml.SUCCESS
		}
		return nil
	}
	a, ok := recoveryValues[value]
	if !ok {
		names := append(mapKeys(recoveryValues), "unsupported")
		slices.Sort(names)
		return fmt.Errorf("want one of %q, got %q", names, value)
	}
	d.GetFieldValuesFunc = fieldFunc(d.GetFieldValuesFunc, nvml.FI_DEV_GET_GPU_RECOVERY_ACTION, uint32(a))
	return nil
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
