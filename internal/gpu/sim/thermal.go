package sim

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// thermalPart: temperatures, NVML's thresholds and clock event reasons
// for gpu.thermal.
//
// Healthy: GPU i runs at 45+i °C, its HBM at 50+i °C, well under the
// model's thresholds (Model.TempShutdownC, TempSlowdownC, TempGPUMaxC,
// TempMemMaxC); no clock event reason is active. The GPU temperature is
// also gpu.lost's probe: the lost and reset-required faults make it fail.
//
//	gpuN:temp=C         the GPU reads C °C
//	gpuN:memtemp=C      the HBM reads C °C
//	gpuN:hw-slowdown    clock event reason HW slowdown active
//	gpuN:hw-thermal     HW thermal slowdown active
//	gpuN:power-brake    HW power brake slowdown active
//	gpuN:sw-thermal     SW thermal slowdown active
var thermalPart = part{
	name:     "thermal",
	defaults: thermalDefaults,
	faults: map[string]func(m *Machine, d *server.Device, i int, value string) error{
		"temp":        faultTemp,
		"memtemp":     faultMemTemp,
		"hw-slowdown": clockEventFault(nvml.ClocksThrottleReasonHwSlowdown),
		"hw-thermal":  clockEventFault(nvml.ClocksThrottleReasonHwThermalSlowdown),
		"power-brake": clockEventFault(nvml.ClocksThrottleReasonHwPowerBrakeSlowdown),
		"sw-thermal":  clockEventFault(nvml.ClocksEventReasonSwThermalSlowdown),
	},
}

func thermalDefaults(m *Machine, d *server.Device, i int) {
	mdl := m.Model
	gpuTemp, memTemp := uint32(45+i), uint32(50+i)
	d.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
		if s != nvml.TEMPERATURE_GPU {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return gpuTemp, nvml.SUCCESS
	}
	limits := map[nvml.TemperatureThresholds]int{
		nvml.TEMPERATURE_THRESHOLD_SHUTDOWN: mdl.TempShutdownC,
		nvml.TEMPERATURE_THRESHOLD_SLOWDOWN: mdl.TempSlowdownC,
		nvml.TEMPERATURE_THRESHOLD_GPU_MAX:  mdl.TempGPUMaxC,
		nvml.TEMPERATURE_THRESHOLD_MEM_MAX:  mdl.TempMemMaxC,
	}
	d.GetTemperatureThresholdFunc = func(t nvml.TemperatureThresholds) (uint32, nvml.Return) {
		if v, ok := limits[t]; ok && v > 0 {
			return uint32(v), nvml.SUCCESS
		}
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	d.GetFieldValuesFunc = fieldFunc(d.GetFieldValuesFunc, nvml.FI_DEV_MEMORY_TEMP, memTemp)
	reasons := func() (uint64, nvml.Return) { return nvml.ClocksEventReasonNone, nvml.SUCCESS }
	d.GetCurrentClocksEventReasonsFunc = reasons
	d.GetCurrentClocksThrottleReasonsFunc = reasons
	d.GetSupportedClocksEventReasonsFunc = func() (uint64, nvml.Return) { return nvml.ClocksEventReasonAll, nvml.SUCCESS }
}

// fieldFunc answers field id with value (an unsigned int) and leaves the
// other fields to prev, so parts can share nvmlDeviceGetFieldValues; a
// field nobody answers is ERROR_NOT_SUPPORTED, as NVML reports it.
func fieldFunc(prev func([]nvml.FieldValue) nvml.Return, id uint32, value uint32) func([]nvml.FieldValue) nvml.Return {
	return func(fv []nvml.FieldValue) nvml.Return {
		if len(fv) == 0 {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		if prev != nil {
			if ret := prev(fv); ret != nvml.SUCCESS {
				return ret
			}
		}
		for k := range fv {
			switch {
			case fv[k].FieldId == id:
				fv[k].ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
				fv[k].NvmlReturn = uint32(nvml.SUCCESS)
				fv[k].Value = [8]byte{}
				binary.LittleEndian.PutUint32(fv[k].Value[:], value)
			case prev == nil:
				fv[k].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			}
		}
		return nvml.SUCCESS
	}
}

func celsius(value string) (uint32, error) {
	n, err := strconv.Atoi(value)
	if err != nil || n < 1 || n > 150 {
		return 0, fmt.Errorf("want a temperature from 1 to 150 °C, got %q", value)
	}
	return uint32(n), nil
}

func faultTemp(m *Machine, d *server.Device, i int, value string) error {
	t, err := celsius(value)
	if err != nil {
		return err
	}
	prev := d.GetTemperatureFunc
	d.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
		if s == nvml.TEMPERATURE_GPU {
			return t, nvml.SUCCESS
		}
		return prev(s)
	}
	return nil
}

func faultMemTemp(m *Machine, d *server.Device, i int, value string) error {
	t, err := celsius(value)
	if err != nil {
		return err
	}
	d.GetFieldValuesFunc = fieldFunc(d.GetFieldValuesFunc, nvml.FI_DEV_MEMORY_TEMP, t)
	return nil
}

// clockEventFault adds one reason to those active, under both the current
// and the deprecated (throttle reasons) name of the call.
func clockEventFault(bit uint64) func(*Machine, *server.Device, int, string) error {
	return func(m *Machine, d *server.Device, i int, value string) error {
		if value != "" {
			return fmt.Errorf("takes no value, got %q", value)
		}
		prev := d.GetCurrentClocksEventReasonsFunc
		reasons := func() (uint64, nvml.Return) {
			r, ret := prev()
			return r | bit, ret
		}
		d.GetCurrentClocksEventReasonsFunc = reasons
		d.GetCurrentClocksThrottleReasonsFunc = reasons
		return nil
	}
}
