package sim

import (
	"fmt"
	"strconv"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// powerPart: power limits and draw for gpu.power.
//
// Healthy: the enforced and management limits are the model's default
// (Model.PowerDefaultLimitMW); a working GPU draws 60 % of it.
//
//	gpuN:power-limit=W  the limit was set to W watts (within the model's
//	                    min and max, as nvidia-smi -pl allows)
var powerPart = part{
	name:     "power",
	defaults: powerDefaults,
	faults: map[string]func(m *Machine, d *server.Device, i int, value string) error{
		"power-limit": faultPowerLimit,
	},
}

func powerDefaults(m *Machine, d *server.Device, i int) {
	mdl := m.Model
	setPowerLimit(d, mdl.PowerDefaultLimitMW)
	d.GetPowerManagementDefaultLimitFunc = func() (uint32, nvml.Return) { return mdl.PowerDefaultLimitMW, nvml.SUCCESS }
	d.GetPowerManagementLimitConstraintsFunc = func() (uint32, uint32, nvml.Return) {
		return mdl.PowerMinLimitMW, mdl.PowerMaxLimitMW, nvml.SUCCESS
	}
	d.GetPowerManagementModeFunc = func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_ENABLED, nvml.SUCCESS }
	draw := mdl.PowerDefaultLimitMW/5*3 + uint32(i)*1000
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return draw, nvml.SUCCESS }
}

func setPowerLimit(d *server.Device, mw uint32) {
	limit := func() (uint32, nvml.Return) { return mw, nvml.SUCCESS }
	d.GetEnforcedPowerLimitFunc = limit
	d.GetPowerManagementLimitFunc = limit
}

func faultPowerLimit(m *Machine, d *server.Device, i int, value string) error {
	lo, hi := m.Model.PowerMinLimitMW/1000, m.Model.PowerMaxLimitMW/1000
	w, err := strconv.ParseUint(value, 10, 32)
	if err != nil || uint32(w) < lo || uint32(w) > hi {
		return fmt.Errorf("want watts from %d to %d, got %q", lo, hi, value)
	}
	setPowerLimit(d, uint32(w)*1000)
	return nil
}
