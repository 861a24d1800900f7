package sim

import (
	"fmt"
	"strconv"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// pciePart: the PCIe link, replay counter and utilisation for gpu.pcie.
//
// Healthy: each GPU works (98 % utilisation, P0) with its link at the
// model's maximum (Model.PCIeMaxGen, Model.PCIeMaxWidth) and its replay
// counter at 0.
//
//	gpuN:pcie-width=W   the link trained to xW
//	gpuN:pcie-gen=G     the link runs at GenG
//	gpuN:pcie-replay=V  the replay counter reads V (a run after a healthy
//	                    one with the same state directory sees growth V)
//	gpuN:idle           the GPU is idle (0 %) and, like an idle H100, has
//	                    trained its link down to Gen1 to save power; its
//	                    width stays at the maximum (with pcie-width=W the
//	                    idle link is narrow too)
var pciePart = part{
	name:     "pcie",
	defaults: pcieDefaults,
	faults: map[string]func(m *Machine, d *server.Device, i int, value string) error{
		"pcie-width":  faultPCIeWidth,
		"pcie-gen":    faultPCIeGen,
		"pcie-replay": faultPCIeReplay,
		"idle":        faultIdle,
	},
}

func pcieDefaults(m *Machine, d *server.Device, i int) {
	gen, width := m.Model.PCIeMaxGen, m.Model.PCIeMaxWidth
	answer := func(v int) func() (int, nvml.Return) { return func() (int, nvml.Return) { return v, nvml.SUCCESS } }
	d.GetCurrPcieLinkGenerationFunc = answer(gen)
	d.GetCurrPcieLinkWidthFunc = answer(width)
	d.GetMaxPcieLinkGenerationFunc = answer(gen)
	d.GetGpuMaxPcieLinkGenerationFunc = answer(gen)
	d.GetMaxPcieLinkWidthFunc = answer(width)
	d.GetPcieReplayCounterFunc = answer(0)
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: 98, Memory: 61}, nvml.SUCCESS
	}
	d.GetPerformanceStateFunc = func() (nvml.Pstates, nvml.Return) { return nvml.PSTATE_0, nvml.SUCCESS }
}

// linkValue parses a fault's link generation or width.
func linkValue(value string, allowed ...int) (int, error) {
	n, err := strconv.Atoi(value)
	for _, a := range allowed {
		if err == nil && n == a {
			return n, nil
		}
	}
	return 0, fmt.Errorf("want one of %v, got %q", allowed, value)
}

func faultPCIeWidth(m *Machine, d *server.Device, i int, value string) error {
	w, err := linkValue(value, 1, 2, 4, 8, 16)
	if err != nil {
		return err
	}
	d.GetCurrPcieLinkWidthFunc = func() (int, nvml.Return) { return w, nvml.SUCCESS }
	return nil
}

func faultPCIeGen(m *Machine, d *server.Device, i int, value string) error {
	g, err := linkValue(value, 1, 2, 3, 4, 5, 6)
	if err != nil {
		return err
	}
	d.GetCurrPcieLinkGenerationFunc = func() (int, nvml.Return) { return g, nvml.SUCCESS }
	return nil
}

func faultPCIeReplay(m *Machine, d *server.Device, i int, value string) error {
	n, err := strconv.Atoi(value)
	if err != nil || n < 0 {
		return fmt.Errorf("want a counter value from 0, got %q", value)
	}
	d.GetPcieReplayCounterFunc = func() (int, nvml.Return) { return n, nvml.SUCCESS }
	return nil
}

func faultIdle(m *Machine, d *server.Device, i int, value string) error {
	if value != "" {
		return fmt.Errorf("takes no value, got %q", value)
	}
	d.GetCurrPcieLinkGenerationFunc = func() (int, nvml.Return) { return 1, nvml.SUCCESS }
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.SUCCESS }
	return nil
}
