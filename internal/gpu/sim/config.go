package sim

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// configPart: persistence, MIG and compute mode for gpu.config.
//
// Healthy: persistence mode on, MIG disabled (NVIDIA's mock keeps the MIG
// mode in Device.MigMode), compute mode default.
//
//	gpuN:persistence=off|on
//	gpuN:mig=on|off
//	gpuN:compute-mode=default|exclusive_process|prohibited|exclusive_thread
var configPart = part{
	name:     "config",
	defaults: configDefaults,
	faults: map[string]func(m *Machine, d *server.Device, i int, value string) error{
		"persistence":  faultPersistence,
		"mig":          faultMIG,
		"compute-mode": faultComputeMode,
	},
}

func configDefaults(m *Machine, d *server.Device, i int) {
	d.GetPersistenceModeFunc = func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_ENABLED, nvml.SUCCESS }
	d.GetComputeModeFunc = func() (nvml.ComputeMode, nvml.Return) { return nvml.COMPUTEMODE_DEFAULT, nvml.SUCCESS }
}

func onOff(value string) (bool, error) {
	switch value {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, fmt.Errorf("want on or off, got %q", value)
}

func faultPersistence(m *Machine, d *server.Device, i int, value string) error {
	on, err := onOff(value)
	if err != nil {
		return err
	}
	st := nvml.FEATURE_DISABLED
	if on {
		st = nvml.FEATURE_ENABLED
	}
	d.GetPersistenceModeFunc = func() (nvml.EnableState, nvml.Return) { return st, nvml.SUCCESS }
	return nil
}

func faultMIG(m *Machine, d *server.Device, i int, value string) error {
	on, err := onOff(value)
	if err != nil {
		return err
	}
	d.Lock()
	defer d.Unlock()
	d.MigMode = nvml.DEVICE_MIG_DISABLE
	if on {
		d.MigMode = nvml.DEVICE_MIG_ENABLE
	}
	return nil
}

var computeModeNames = map[string]nvml.ComputeMode{
	"default":           nvml.COMPUTEMODE_DEFAULT,
	"exclusive_thread":  nvml.COMPUTEMODE_EXCLUSIVE_THREAD,
	"prohibited":        nvml.COMPUTEMODE_PROHIBITED,
	"exclusive_process": nvml.COMPUTEMODE_EXCLUSIVE_PROCESS,
}

func faultComputeMode(m *Machine, d *server.Device, i int, value string) error {
	mode, ok := computeModeNames[value]
	if !ok {
		return fmt.Errorf("want default, exclusive_process, prohibited or exclusive_thread, got %q", value)
	}
	d.GetComputeModeFunc = func() (nvml.ComputeMode, nvml.Return) { return mode, nvml.SUCCESS }
	return nil
}
