package sim

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// fabricPart: the GPU's NVLink fabric registration for gpu.fabric.
//
// Healthy, on an NVSwitch system with Hopper or newer GPUs: state
// COMPLETED, status SUCCESS, every health-mask field "false" (or "none"),
// a zero cluster UUID and clique 0, as a single-node HGX shows. DGX A100
// has NVSwitches, but NVML reports no fabric state before Hopper: every
// call answers ERROR_NOT_SUPPORTED there, as on PCIe SKUs.
//
// The check reads nvmlDeviceGetGpuFabricInfo_v4 (NVIDIA's mock reports
// every symbol present) and v1 as a fallback; both are set, v1 derived
// from v4 at call time so the faults, which wrap v4, reach both.
// GetGpuFabricInfoVFunc is deliberately left unset: its handler calls the
// real library, which a simulation does not have.
//
//	gpuN:fabric=in-progress|not-started   Fabric Manager has not finished
//	gpuN:fabric=failed                    COMPLETED with status ERROR_UNKNOWN
//	gpuN:fabric=unsupported               ERROR_NOT_SUPPORTED (PCIe SKU)
//	gpuN:fabric-degraded-bw               health mask: bandwidth degraded
//	gpuN:fabric-route-unhealthy           health mask: route unhealthy
//	gpuN:fabric-route-recovery            health mask: route recovery in progress
var fabricPart = part{
	name:     "fabric",
	defaults: fabricDefaults,
	faults: map[string]func(m *Machine, d *server.Device, i int, value string) error{
		"fabric":                 faultFabric,
		"fabric-degraded-bw":     healthFault(nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW, nvml.GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE),
		"fabric-route-unhealthy": healthFault(nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY, nvml.GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_TRUE),
		"fabric-route-recovery":  healthFault(nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY, nvml.GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_TRUE),
	},
}

// healthyFabricMask is every health field answering "no problem".
const healthyFabricMask = nvml.GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW |
	nvml.GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_FALSE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY |
	nvml.GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_FALSE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY |
	nvml.GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_FALSE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY |
	nvml.GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE<<nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_INCORRECT_CONFIGURATION

func fabricDefaults(m *Machine, d *server.Device, i int) {
	if !hasFabricState(m.Model) {
		setFabricUnsupported(d)
		return
	}
	info := nvml.GpuFabricInfo_v4{
		Status:        uint32(nvml.SUCCESS),
		State:         nvml.GPU_FABRIC_STATE_COMPLETED,
		HealthMask:    healthyFabricMask,
		HealthSummary: nvml.GPU_FABRIC_HEALTH_SUMMARY_HEALTHY,
		NumCliques:    2,
		Cliques: [nvml.GPU_FABRIC_CLIQUE_MAX]nvml.GpuFabricClique_v1{
			{Type: 0}, {Type: 1}, // unicast and multicast pointer cliques, id 0
		},
	}
	d.GetGpuFabricInfo_v4Func = func() (nvml.GpuFabricInfo_v4, nvml.Return) { return info, nvml.SUCCESS }
	d.GetGpuFabricInfoFunc = func() (nvml.GpuFabricInfo, nvml.Return) {
		v, ret := d.GetGpuFabricInfo_v4()
		return nvml.GpuFabricInfo{ClusterUuid: v.ClusterUuid, Status: v.Status, State: v.State}, ret
	}
}

// hasFabricState: NVML reports fabric state for Hopper and newer GPUs
// joined by NVSwitches.
func hasFabricState(mdl Model) bool {
	switch mdl.Arch {
	case nvml.DEVICE_ARCH_HOPPER, nvml.DEVICE_ARCH_BLACKWELL, nvml.DEVICE_ARCH_RUBIN:
		return mdl.HasNVSwitch
	}
	return false
}

func setFabricUnsupported(d *server.Device) {
	d.GetGpuFabricInfo_v4Func = func() (nvml.GpuFabricInfo_v4, nvml.Return) {
		return nvml.GpuFabricInfo_v4{}, nvml.ERROR_NOT_SUPPORTED
	}
	d.GetGpuFabricInfoFunc = func() (nvml.GpuFabricInfo, nvml.Return) {
		return nvml.GpuFabricInfo{}, nvml.ERROR_NOT_SUPPORTED
	}
}

func faultFabric(m *Machine, d *server.Device, i int, value string) error {
	if value == "unsupported" {
		setFabricUnsupported(d)
		return nil
	}
	states := map[string]uint8{
		"in-progress": nvml.GPU_FABRIC_STATE_IN_PROGRESS,
		"not-started": nvml.GPU_FABRIC_STATE_NOT_STARTED,
		"failed":      nvml.GPU_FABRIC_STATE_COMPLETED,
	}
	st, ok := states[value]
	if !ok {
		return fmt.Errorf("want in-progress, not-started, failed or unsupported, got %q", value)
	}
	if !hasFabricState(m.Model) {
		return fmt.Errorf("%s reports no fabric state (pre-Hopper or no NVSwitch)", m.Model.Name)
	}
	return editFabric(d, func(v *nvml.GpuFabricInfo_v4) {
		v.State = st
		if value == "failed" {
			v.Status = uint32(nvml.ERROR_UNKNOWN)
		}
		if st != nvml.GPU_FABRIC_STATE_COMPLETED {
			// Health is only meaningful once registration completed.
			v.HealthMask, v.HealthSummary = 0, nvml.GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED
		}
	})
}

// healthFault sets one 2-bit field of the health mask.
func healthFault(shift, val uint32) func(m *Machine, d *server.Device, i int, value string) error {
	return func(m *Machine, d *server.Device, i int, value string) error {
		if value != "" {
			return fmt.Errorf("takes no value, got %q", value)
		}
		if !hasFabricState(m.Model) {
			return fmt.Errorf("%s reports no fabric state (pre-Hopper or no NVSwitch)", m.Model.Name)
		}
		return editFabric(d, func(v *nvml.GpuFabricInfo_v4) {
			v.HealthMask = v.HealthMask&^(0x3<<shift) | val<<shift
			v.HealthSummary = nvml.GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY
		})
	}
}

// editFabric wraps the v4 answer (and through it v1's).
func editFabric(d *server.Device, edit func(*nvml.GpuFabricInfo_v4)) error {
	prev := d.GetGpuFabricInfo_v4Func
	d.GetGpuFabricInfo_v4Func = func() (nvml.GpuFabricInfo_v4, nvml.Return) {
		v, ret := prev()
		if ret == nvml.SUCCESS {
			edit(&v)
		}
		return v, ret
	}
	return nil
}
