package gpu

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
)

// RecoveryAction is the driver's verdict on what a GPU needs after an
// uncorrectable error: NVML's nvmlDeviceGpuRecoveryAction_t, read from
// the field NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, and the value XID 154
// reports in the kernel log ("GPU recovery action changed from 0x0
// (None) to 0x2 (Node Reboot Required)").
type RecoveryAction uint32

// recoveryVerdicts is the verdict on each recovery action, for gpu.recovery
// and XID 154 alike (docs/architecture.md#xid-classification). Names and
// meanings after NVIDIA's "GPU Memory Error Management", "Error Recovery
// and Response Flags"
// (https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/) and go-nvml's
// GPU_RECOVERY_ACTION_* (pkg/nvml/const.go, v0.13.4-1). The last three are
// newer than that page: an IMEX domain to recover is the fabric's (drain
// the node meanwhile); a bus reset is what `nvidia-smi -r` does; a system
// reboot is a reboot.
var recoveryVerdicts = map[RecoveryAction]struct {
	name   string
	status check.Status
	action check.Action
}{
	RecoveryAction(nvml.GPU_RECOVERY_ACTION_NONE):                {"None", check.OK, check.ActionNone},
	RecoveryAction(nvml.GPU_RECOVERY_ACTION_GPU_RESET):           {"GPU Reset Required", check.Fail, check.ActionResetGPU},
	RecoveryAction(nvml.GPU_RECOVERY_ACTION_NODE_REBOOT):         {"Node Reboot Required", check.Fail, check.ActionReboot},
	RecoveryAction(nvml.GPU_RECOVERY_ACTION_DRAIN_P2P):           {"Drain P2P", check.Fail, check.ActionDrain},
	RecoveryAction(nvml.GPU_RECOVERY_ACTION_DRAIN_AND_RESET):     {"Drain and Reset", check.Fail, check.ActionResetGPU},
	RecoveryAction(nvml.GPU_RECOVERY_ACTION_RECOVER_IMEX_DOMAIN): {"Recover IMEX Domain", check.Fail, check.ActionDrain},
	RecoveryAction(nvml.GPU_RECOVERY_ACTION_BUS_RESET):           {"Bus Reset", check.Fail, check.ActionResetGPU},
	RecoveryAction(nvml.GPU_RECOVERY_ACTION_SYSTEM_REBOOT):       {"System Reboot", check.Fail, check.ActionReboot},
}

// Judge is the action's status, gpuhc action and name ("Node Reboot
// Required"). A value the table does not know FAILs with drain: the
// driver asks for something.
func (a RecoveryAction) Judge() (check.Status, check.Action, string) {
	if v, ok := recoveryVerdicts[a]; ok {
		return v.status, v.action, v.name
	}
	return check.Fail, check.ActionDrain, fmt.Sprintf("unknown recovery action 0x%x", uint32(a))
}

type recovery struct{ node *Node }

// NewRecovery is gpu.recovery: the recovery action NVML reports for each
// GPU, so that a driver asking for a reset or a reboot drains the node
// even when its XID 154 line never reached (or was lost from) the kernel
// log. Drivers without the field (older than the XID 154 they would log)
// SKIP: never a FAIL.
func NewRecovery(n *Node) check.Check { return &recovery{node: n} }

func (c *recovery) Name() string { return "gpu.recovery" }

func (c *recovery) Run(ctx context.Context) []check.Result {
	start := time.Now()
	return Each(ctx, c.node, func(ctx context.Context, g GPU) []check.Result {
		v := &gpuVerdict{g: g}
		a, ret, err := Call(ctx, func() (RecoveryAction, nvml.Return) { return recoveryAction(g.Device) })
		switch {
		case err != nil:
			return v.abort(err, start)
		case Unsupported(ret) || ret == nvml.ERROR_INVALID_ARGUMENT:
			// An older driver answers an unknown field id with
			// "invalid argument".
			v.skip("recovery action not reported by this driver")
		case ret != nvml.SUCCESS:
			v.nvmlErr("nvmlDeviceGetFieldValues(GET_GPU_RECOVERY_ACTION)", ret)
		default:
			judgeRecovery(v, a)
		}
		return v.results()
	})
}

// recoveryAction reads the field. NVIDIA's mock devices have no
// nvmlDeviceGetFieldValues unless a test or the simulator gives them one
// (the generated mock panics), which reads as "not supported".
func recoveryAction(d nvml.Device) (a RecoveryAction, ret nvml.Return) {
	defer func() {
		if recover() != nil {
			a, ret = 0, nvml.ERROR_NOT_SUPPORTED
		}
	}()
	fv := []nvml.FieldValue{{FieldId: nvml.FI_DEV_GET_GPU_RECOVERY_ACTION}}
	if ret := d.GetFieldValues(fv); ret != nvml.SUCCESS {
		return 0, ret
	}
	if ret := nvml.Return(fv[0].NvmlReturn); ret != nvml.SUCCESS {
		return 0, ret
	}
	return RecoveryAction(binary.LittleEndian.Uint32(fv[0].Value[:4])), nvml.SUCCESS
}

func judgeRecovery(v *gpuVerdict, a RecoveryAction) {
	st, act, name := a.Judge()
	if st == check.Fail {
		v.fail(act, "GPU recovery action: %s", name)
		return
	}
	v.pass("GPU recovery action: %s", name)
}
