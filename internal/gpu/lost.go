package gpu

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
)

// lost is gpu.lost: a GPU NVML cannot reach (fallen off the bus, or
// waiting for a reset after a fatal XID) is useless to jobs until reset.
type lost struct{ n *Node }

// NewLost builds gpu.lost.
func NewLost(n *Node) check.Check { return lost{n} }

func (lost) Name() string { return "gpu.lost" }

func (c lost) Run(ctx context.Context) []check.Result {
	ctx, cancel := check.FinishEarly(ctx)
	defer cancel()
	start := time.Now()
	inv, err := c.n.Inventory(ctx)
	if err != nil {
		return []check.Result{NodeResult(err, start)}
	}
	var out []check.Result
	for _, i := range lostIndexes(inv) {
		g, hung := recoverLost(ctx, c.n, inv, i)
		if hung {
			return append(out, Hung(g.Component(), g.IDs(), start))
		}
		out = append(out, lostResult(g, inv.Lost[i]))
	}
	for _, g := range inv.GPUs {
		r, hung := probe(ctx, g, start)
		out = append(out, r)
		if hung {
			break
		}
	}
	return out
}

// probe makes one cheap call that needs the GPU itself, reading its
// temperature sensor: NVML answers GPU_IS_LOST or RESET_REQUIRED there
// even for a GPU enumerated earlier. Not the persistence mode, which the
// driver may answer from its own state without reaching the GPU. Any
// other answer (a value, "not supported", another error) came back from
// the GPU or its driver; gpu.thermal judges the temperature itself.
// nvmlDeviceGetTemperature is in every driver (deprecated for
// nvmlDeviceGetTemperatureV by newer drivers, but still exported).
func probe(ctx context.Context, g GPU, start time.Time) (check.Result, bool) {
	_, ret, err := Call(ctx, func() (uint32, nvml.Return) { return g.Device.GetTemperature(nvml.TEMPERATURE_GPU) })
	if err != nil {
		return Hung(g.Component(), g.IDs(), start), true
	}
	if Lost(ret) {
		return lostReturn(g, ret), false
	}
	return Result(g, check.OK, check.ActionNone, "GPU responds"), false
}

func lostResult(g GPU, err error) check.Result {
	var ne *NVMLError
	if errors.As(err, &ne) && Lost(ne.Ret) {
		return lostReturn(g, ne.Ret)
	}
	return Result(g, check.Fail, check.ActionResetGPU, "GPU unreadable: %v", err)
}

func lostReturn(g GPU, ret nvml.Return) check.Result {
	if ret == nvml.ERROR_RESET_REQUIRED {
		return Result(g, check.Fail, check.ActionResetGPU, "GPU requires reset")
	}
	// NVML's "GPU is lost" is a GPU off the bus: nvidia-smi itself says to
	// reboot, and XID 79 asks for the same.
	return Result(g, check.Fail, check.ActionReboot, "GPU is lost")
}

func lostIndexes(inv *Inventory) []int {
	var idx []int
	for i := range inv.Lost {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	return idx
}

// recoverLost gathers what can still be known of lost GPU i: whatever NVML
// still answers, and else its PCI address from the bus, since NVML numbers
// GPUs in PCI order (only when the bus and NVML agree on how many there
// are). hung reports a call that did not return.
func recoverLost(ctx context.Context, n *Node, inv *Inventory, i int) (g GPU, hung bool) {
	g = GPU{Index: i}
	d, ret, err := Call(ctx, func() (nvml.Device, nvml.Return) { return n.Lib().DeviceGetHandleByIndex(i) })
	if err != nil {
		return g, true
	}
	if ret == nvml.SUCCESS && d != nil {
		if hung = identify(ctx, d, &g); hung {
			return g, true
		}
	}
	if g.PCIBusID == "" && len(inv.OnBus) == len(inv.GPUs)+len(inv.Lost) && i < len(inv.OnBus) {
		if _, taken := inv.ByPCI(inv.OnBus[i]); !taken {
			g.PCIBusID = inv.OnBus[i]
		}
	}
	return g, false
}

// identify fills in what each identity call still answers.
func identify(ctx context.Context, d nvml.Device, g *GPU) (hung bool) {
	if v, ret, err := Call(ctx, d.GetUUID); err != nil {
		return true
	} else if ret == nvml.SUCCESS {
		g.UUID = v
	}
	if v, ret, err := Call(ctx, d.GetSerial); err != nil {
		return true
	} else if ret == nvml.SUCCESS {
		g.Serial = v
	}
	if p, ret, err := Call(ctx, d.GetPciInfo); err != nil {
		return true
	} else if ret == nvml.SUCCESS {
		g.PCIBusID = NormalizePCI(cString(p.BusId[:]))
	}
	return false
}
