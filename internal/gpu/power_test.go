package gpu

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

func TestPower(t *testing.T) {
	mk := func(n *Node, _ statefile.Dir) check.Check { return NewPower(n) }
	hwTable(t, mk, []hwCase{
		{name: "healthy"},
		{name: "capped", inject: []string{"gpu3:power-limit=300"}, want: func(m sim.Model) []hwWant {
			return []hwWant{hwWarn(3, "power capped at 300 W < default %d W", m.PowerDefaultLimitMW/1000)}
		}},
		// Less than a watt below the default is the same limit.
		{name: "milliwatts below", edit: func(_ *testing.T, m *sim.Machine) {
			lim := m.Model.PowerDefaultLimitMW - 400
			hwDevice(m, 1).GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return lim, nvml.SUCCESS }
		}},
		{name: "not supported", edit: func(_ *testing.T, m *sim.Machine) {
			hwDevice(m, 6).GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		}, want: func(sim.Model) []hwWant { return []hwWant{hwSkip(6, "power limits not reported")} }},
		{name: "lost", inject: []string{"gpu0:lost=late"}, want: func(sim.Model) []hwWant {
			return []hwWant{hwError(0, "nvmlDeviceGetEnforcedPowerLimit: ERROR_GPU_IS_LOST")}
		}},
		{name: "hang", inject: []string{"gpu5:hang=late"}, want: func(sim.Model) []hwWant { return []hwWant{hwHung(5)} }, hang: true},
	})
}
