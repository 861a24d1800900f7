package gpu

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

// gpu.recovery per NVIDIA's recovery actions ("GPU Memory Error
// Management", "Error Recovery and Response Flags"), the verdicts XID 154
// shares (docs/architecture.md#xid-classification), on every simulator.
func TestRecovery(t *testing.T) {
	mk := func(n *Node, _ statefile.Dir) check.Check { return NewRecovery(n) }
	one := func(w ...hwWant) func(sim.Model) []hwWant { return func(sim.Model) []hwWant { return w } }
	hwTable(t, mk, []hwCase{
		{name: "healthy"},
		{name: "reset", inject: []string{"gpu2:recovery=reset"}, want: one(hwFail(2, check.ActionResetGPU, "GPU recovery action: GPU Reset Required"))},
		{name: "reboot", inject: []string{"gpu3:recovery=reboot"}, want: one(hwFail(3, check.ActionReboot, "GPU recovery action: Node Reboot Required"))},
		{name: "drain p2p", inject: []string{"gpu4:recovery=drain-p2p"}, want: one(hwFail(4, check.ActionDrain, "GPU recovery action: Drain P2P"))},
		{name: "drain and reset", inject: []string{"gpu5:recovery=drain-and-reset"}, want: one(hwFail(5, check.ActionResetGPU, "GPU recovery action: Drain and Reset"))},
		{name: "explicit none", inject: []string{"gpu5:recovery=none"}},
		// An older driver: the field is not supported. SKIP, never FAIL.
		{name: "unsupported field", inject: []string{"gpu1:recovery=unsupported"}, want: one(hwSkip(1, "recovery action not reported by this driver"))},
		{name: "unknown field id", edit: func(_ *testing.T, m *sim.Machine) {
			hwDevice(m, 6).GetFieldValuesFunc = func(fv []nvml.FieldValue) nvml.Return {
				fv[0].NvmlReturn = uint32(nvml.ERROR_INVALID_ARGUMENT)
				return nvml.SUCCESS
			}
		}, want: one(hwSkip(6, "recovery action not reported by this driver"))},
		{name: "no field values call", edit: func(_ *testing.T, m *sim.Machine) {
			hwDevice(m, 7).GetFieldValuesFunc = func([]nvml.FieldValue) nvml.Return { return nvml.ERROR_FUNCTION_NOT_FOUND }
		}, want: one(hwSkip(7, "recovery action not reported by this driver"))},
		{name: "a value newer than the table", edit: func(_ *testing.T, m *sim.Machine) {
			hwDevice(m, 0).GetFieldValuesFunc = func(fv []nvml.FieldValue) nvml.Return {
				fv[0].NvmlReturn, fv[0].ValueType, fv[0].Value = uint32(nvml.SUCCESS), uint32(nvml.VALUE_TYPE_UNSIGNED_INT), [8]byte{42}
				return nvml.SUCCESS
			}
		}, want: one(hwFail(0, check.ActionDrain, "GPU recovery action: unknown recovery action 0x2a"))},
		{name: "system reboot", edit: func(_ *testing.T, m *sim.Machine) {
			hwDevice(m, 0).GetFieldValuesFunc = func(fv []nvml.FieldValue) nvml.Return {
				fv[0].NvmlReturn, fv[0].ValueType, fv[0].Value = uint32(nvml.SUCCESS), uint32(nvml.VALUE_TYPE_UNSIGNED_INT), [8]byte{byte(nvml.GPU_RECOVERY_ACTION_SYSTEM_REBOOT)}
				return nvml.SUCCESS
			}
		}, want: one(hwFail(0, check.ActionReboot, "GPU recovery action: System Reboot"))},
		{name: "lost", edit: func(_ *testing.T, m *sim.Machine) {
			hwDevice(m, 0).GetFieldValuesFunc = func([]nvml.FieldValue) nvml.Return { return nvml.ERROR_GPU_IS_LOST }
		}, want: one(hwError(0, "nvmlDeviceGetFieldValues(GET_GPU_RECOVERY_ACTION): ERROR_GPU_IS_LOST"))},
		// NVIDIA's generated mock panics on a method nobody set.
		{name: "mock without the call", edit: func(_ *testing.T, m *sim.Machine) { hwDevice(m, 6).GetFieldValuesFunc = nil },
			want: one(hwSkip(6, "recovery action not reported by this driver"))},
		{name: "hang", inject: []string{"gpu5:hang=late"}, want: func(sim.Model) []hwWant { return []hwWant{hwHung(5)} }, hang: true},
	})
}
