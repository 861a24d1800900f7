package gpu

import (
	"context"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// FabricReport is one GPU's NVLink fabric registration as NVML reports it,
// for checks outside this package (fabric.manager) that judge Fabric
// Manager by it.
type FabricReport struct {
	GPU GPU
	// Ret is the fabric call's own answer; ERROR_NOT_SUPPORTED (or
	// FUNCTION_NOT_FOUND) on PCIe and pre-Hopper GPUs.
	Ret nvml.Return
	// State is "not-supported", "not-started", "in-progress" or
	// "completed" when Ret is SUCCESS and the state is known, else "".
	State string
	// Status is the registration's outcome once State is "completed".
	Status nvml.Return
	// Hung: the call did not return before ctx ended.
	Hung bool
}

// Pending says that Fabric Manager has not finished registering the GPU.
func (r FabricReport) Pending() bool { return fabricPending(r.State) }

// Supported says that NVML reports a fabric state for the GPU at all.
func (r FabricReport) Supported() bool {
	return !r.Hung && !Unsupported(r.Ret) && r.State != fabricStates[nvml.GPU_FABRIC_STATE_NOT_SUPPORTED]
}

// FabricReports reads every GPU's fabric registration with the newest call
// the loaded library has, each under ctx. err is the inventory's error
// (ErrNoGPUs, *NVMLError, *HungError), and then there are no reports. A
// call that hangs ends the walk: the next one would hang too.
func FabricReports(ctx context.Context, n *Node) ([]FabricReport, error) {
	inv, err := n.Inventory(ctx)
	if err != nil {
		return nil, err
	}
	api := fabricAPI(n.Lib())
	out := make([]FabricReport, 0, len(inv.GPUs))
	for _, g := range inv.GPUs {
		info, ret, err := readFabric(ctx, api, g.Device)
		r := FabricReport{GPU: g, Ret: ret}
		if err != nil {
			r.Hung = true
			out = append(out, r)
			break
		}
		if ret == nvml.SUCCESS {
			r.State = fabricStates[info.State]
			r.Status = info.Status
		}
		out = append(out, r)
	}
	return out, nil
}
