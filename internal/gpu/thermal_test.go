package gpu

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

func TestThermal(t *testing.T) {
	cfg := config.Default().Checks.GPU.Thermal
	mk := func(n *Node, st statefile.Dir) check.Check { return NewThermal(n, cfg, st) }
	one := func(w ...hwWant) func(sim.Model) []hwWant { return func(sim.Model) []hwWant { return w } }
	hwTable(t, mk, []hwCase{
		{name: "healthy"},
		{name: "hot", inject: []string{"gpu0:temp=95"}, want: func(m sim.Model) []hwWant {
			return []hwWant{hwFail(0, check.ActionDrain, "GPU 95°C >= slowdown %d°C", m.TempSlowdownC)}
		}},
		{name: "at slowdown", edit: hwTemp(4, func(m sim.Model) int { return m.TempSlowdownC }), want: func(m sim.Model) []hwWant {
			return []hwWant{hwFail(4, check.ActionDrain, "GPU %d°C >= slowdown %d°C", m.TempSlowdownC, m.TempSlowdownC)}
		}},
		{name: "warm", inject: []string{"gpu3:temp=85"}, want: func(m sim.Model) []hwWant {
			return []hwWant{hwWarn(3, "GPU 85°C within 5°C of slowdown %d°C", m.TempSlowdownC)}
		}},
		{name: "just below margin", edit: hwTemp(4, func(m sim.Model) int { return m.TempSlowdownC - 6 })},
		{name: "memory hot", inject: []string{"gpu5:memtemp=97"}, want: one(hwFail(5, check.ActionDrain, "memory 97°C >= max 95°C"))},
		{name: "memory warm", inject: []string{"gpu5:memtemp=92"}, want: one(hwWarn(5, "memory 92°C within 5°C of max 95°C"))},
		{name: "no slowdown threshold", inject: []string{"gpu2:temp=86"}, edit: func(_ *testing.T, m *sim.Machine) {
			d := hwDevice(m, 2)
			prev := d.GetTemperatureThresholdFunc
			d.GetTemperatureThresholdFunc = func(th nvml.TemperatureThresholds) (uint32, nvml.Return) {
				if th == nvml.TEMPERATURE_THRESHOLD_SLOWDOWN {
					return 0, nvml.ERROR_NOT_SUPPORTED
				}
				return prev(th)
			}
		}, want: func(m sim.Model) []hwWant {
			if 86 >= m.TempGPUMaxC {
				return []hwWant{hwFail(2, check.ActionDrain, "GPU 86°C >= max operating %d°C", m.TempGPUMaxC)}
			}
			return []hwWant{hwWarn(2, "GPU 86°C within 5°C of max operating %d°C", m.TempGPUMaxC)}
		}},
		{name: "hw slowdown", inject: []string{"gpu1:hw-slowdown"}, want: one(hwWarn(1, "HW slowdown (first sighting)"))},
		{name: "hw thermal", inject: []string{"gpu1:hw-thermal"}, want: one(hwWarn(1, "HW thermal slowdown (first sighting)"))},
		{name: "power brake", inject: []string{"gpu1:power-brake"}, want: one(hwWarn(1, "HW power brake (first sighting)"))},
		{name: "hw thermal and power brake", inject: []string{"gpu7:power-brake", "gpu7:hw-thermal"},
			want: one(hwWarn(7, "HW thermal slowdown, HW power brake (first sighting)"))},
		{name: "sw thermal", inject: []string{"gpu6:sw-thermal"}, want: one(hwWarn(6, "SW thermal slowdown"))},
		{name: "hot and slowed", inject: []string{"gpu6:temp=99", "gpu6:sw-thermal", "gpu6:hw-thermal"}, want: func(m sim.Model) []hwWant {
			return []hwWant{hwFail(6, check.ActionDrain, "GPU 99°C >= slowdown %d°C", m.TempSlowdownC),
				hwWarn(6, "HW thermal slowdown (first sighting)"), hwWarn(6, "SW thermal slowdown")}
		}},
		// Reasons that are not thermal or hardware slowdowns: no verdict.
		{name: "idle and power cap", edit: func(_ *testing.T, m *sim.Machine) {
			hwDevice(m, 0).GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) {
				return nvml.ClocksEventReasonGpuIdle | nvml.ClocksEventReasonSwPowerCap, nvml.SUCCESS
			}
		}},
		{name: "no memory sensor", edit: func(_ *testing.T, m *sim.Machine) {
			hwDevice(m, 3).GetFieldValuesFunc = func(fv []nvml.FieldValue) nvml.Return {
				fv[0].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
				return nvml.SUCCESS
			}
			hwDevice(m, 4).GetFieldValuesFunc = func(fv []nvml.FieldValue) nvml.Return {
				fv[0].ValueType, fv[0].NvmlReturn, fv[0].Value = uint32(nvml.VALUE_TYPE_UNSIGNED_INT), 0, [8]byte{}
				return nvml.SUCCESS
			}
		}},
		{name: "not supported", edit: func(_ *testing.T, m *sim.Machine) {
			d := hwDevice(m, 2)
			d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
			d.GetFieldValuesFunc = func([]nvml.FieldValue) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }
			d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		}, want: one(hwSkip(2, "GPU temperature not reported; clock event reasons not reported"))},
		// R470 has only the deprecated name of the clock event reasons
		// call: same bits.
		{name: "clock event reasons missing from driver", inject: []string{"gpu1:hw-thermal", "gpu5:sw-thermal"},
			edit: hwDriverLacks("nvmlDeviceGetCurrentClocksEventReasons"),
			want: one(hwWarn(1, "HW thermal slowdown (first sighting)"), hwWarn(5, "SW thermal slowdown"))},
		{name: "no clock reasons call at all", edit: hwDriverLacks("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
			want: func(m sim.Model) []hwWant {
				var w []hwWant
				for i := range m.PCIBus {
					w = append(w, hwSkip(i, "clock event reasons not reported by this driver"))
				}
				return w
			}},
		{name: "throttle reasons error", edit: func(t *testing.T, m *sim.Machine) {
			hwDriverLacks("nvmlDeviceGetCurrentClocksEventReasons")(t, m)
			hwDevice(m, 2).GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
		}, want: one(hwError(2, "nvmlDeviceGetCurrentClocksThrottleReasons: ERROR_UNKNOWN"))},
		// A driver that does not know a newer threshold keeps the ones it has.
		{name: "gpu max rejected", inject: []string{"gpu3:temp=85"}, edit: hwThreshold(3, nvml.TEMPERATURE_THRESHOLD_GPU_MAX, nvml.ERROR_INVALID_ARGUMENT),
			want: func(m sim.Model) []hwWant {
				return []hwWant{hwWarn(3, "GPU 85°C within 5°C of slowdown %d°C", m.TempSlowdownC)}
			}},
		// With a slowdown threshold, GPU_MAX is not even asked for.
		{name: "gpu max error", edit: hwThreshold(3, nvml.TEMPERATURE_THRESHOLD_GPU_MAX, nvml.ERROR_UNKNOWN)},
		{name: "neither slowdown nor gpu max", inject: []string{"gpu3:temp=120"}, edit: func(t *testing.T, m *sim.Machine) {
			hwThreshold(3, nvml.TEMPERATURE_THRESHOLD_SLOWDOWN, nvml.ERROR_NOT_SUPPORTED)(t, m)
			hwThreshold(3, nvml.TEMPERATURE_THRESHOLD_GPU_MAX, nvml.ERROR_INVALID_ARGUMENT)(t, m)
		}},
		{name: "slowdown missing, gpu max error", edit: func(t *testing.T, m *sim.Machine) {
			hwThreshold(3, nvml.TEMPERATURE_THRESHOLD_SLOWDOWN, nvml.ERROR_NOT_SUPPORTED)(t, m)
			hwThreshold(3, nvml.TEMPERATURE_THRESHOLD_GPU_MAX, nvml.ERROR_UNKNOWN)(t, m)
		}, want: one(hwError(3, "nvmlDeviceGetTemperatureThreshold(GPU_MAX): ERROR_UNKNOWN"))},
		{name: "slowdown error", edit: hwThreshold(3, nvml.TEMPERATURE_THRESHOLD_SLOWDOWN, nvml.ERROR_UNKNOWN),
			want: one(hwError(3, "nvmlDeviceGetTemperatureThreshold(SLOWDOWN): ERROR_UNKNOWN"))},
		{name: "mem max rejected", inject: []string{"gpu5:memtemp=97"}, edit: hwThreshold(5, nvml.TEMPERATURE_THRESHOLD_MEM_MAX, nvml.ERROR_INVALID_ARGUMENT)},
		{name: "lost", inject: []string{"gpu3:reset-required"}, want: one(hwError(3, "nvmlDeviceGetTemperature: ERROR_RESET_REQUIRED"))},
		{name: "hang", inject: []string{"gpu1:hang=late"}, want: one(hwHung(1)), hang: true},
		{name: "hang on clocks", inject: []string{"gpu1:temp=90"}, edit: hwBlock(1, func(d *server.Device, block func()) {
			d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { block(); return 0, nvml.SUCCESS }
		}), want: func(m sim.Model) []hwWant {
			return []hwWant{hwFail(1, check.ActionDrain, "GPU 90°C >= slowdown %d°C", m.TempSlowdownC), hwHung(1)}
		}, hang: true},
	})
}

// hwThreshold makes GPU i answer ret for threshold th.
func hwThreshold(i int, th nvml.TemperatureThresholds, ret nvml.Return) func(*testing.T, *sim.Machine) {
	return func(_ *testing.T, m *sim.Machine) {
		d := hwDevice(m, i)
		prev := d.GetTemperatureThresholdFunc
		d.GetTemperatureThresholdFunc = func(t nvml.TemperatureThresholds) (uint32, nvml.Return) {
			if t == th {
				return 0, ret
			}
			return prev(t)
		}
	}
}

// TestThermalClocksFallbackAcrossRuns: the deprecated call's bits feed the
// same two-run rule, and a lookup is made once per run.
func TestThermalClocksFallbackAcrossRuns(t *testing.T) {
	t.Parallel()
	cfg := config.Default().Checks.GPU.Thermal
	dir := statefile.Dir{Path: t.TempDir()}
	for k, want := range [][]hwWant{
		{hwWarn(2, "HW power brake (first sighting)")},
		{hwFail(2, check.ActionDrain, "HW power brake on two consecutive runs")},
	} {
		m, n := hwNode(t, "dgxa100", hwDriverLacks("nvmlDeviceGetCurrentClocksEventReasons"), "gpu2:power-brake")
		lookups := map[string]int{}
		lookup := m.Server.LookupSymbolFunc
		m.Server.LookupSymbolFunc = func(s string) error { lookups[s]++; return lookup(s) }
		hwExpect(t, m, "gpu.thermal", hwRun(t, NewThermal(n, cfg, dir)), want, len(m.Devices)-1)
		if lookups["nvmlDeviceGetCurrentClocksEventReasons"] != 1 || lookups["nvmlDeviceGetCurrentClocksThrottleReasons"] != 1 {
			t.Errorf("run %d: lookups %v, want one of each", k, lookups)
		}
	}
}

// hwTemp sets GPU i's temperature from the model's thresholds.
func hwTemp(i int, temp func(sim.Model) int) func(*testing.T, *sim.Machine) {
	return func(_ *testing.T, m *sim.Machine) {
		c := uint32(temp(m.Model))
		hwDevice(m, i).GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return c, nvml.SUCCESS }
	}
}

// TestThermalClocksAcrossRuns: a hardware slowdown fails only when two
// runs in a row see it; a dry run remembers nothing.
func TestThermalClocksAcrossRuns(t *testing.T) {
	cfg := config.Default().Checks.GPU.Thermal
	for _, model := range hwModels {
		t.Run(model, func(t *testing.T) {
			t.Parallel()
			dir := statefile.Dir{Path: t.TempDir()}
			run := func(st statefile.Dir, inject []string, want ...hwWant) {
				t.Helper()
				m, n := hwNode(t, model, nil, inject...)
				hwExpect(t, m, "gpu.thermal", hwRun(t, NewThermal(n, cfg, st)), want, len(m.Devices)-1)
			}
			first := func(what string) hwWant { return hwWarn(4, "%s (first sighting)", what) }
			again := func(what string) hwWant { return hwFail(4, check.ActionDrain, "%s on two consecutive runs", what) }
			thermal, brake := []string{"gpu4:hw-thermal"}, []string{"gpu4:hw-thermal", "gpu4:power-brake"}

			run(hwDryRun(dir), thermal, first("HW thermal slowdown"))
			run(hwDryRun(dir), thermal, first("HW thermal slowdown")) // the dry run kept nothing
			run(dir, thermal, first("HW thermal slowdown"))
			run(dir, thermal, again("HW thermal slowdown"))
			run(dir, brake, again("HW thermal slowdown"), first("HW power brake"))
			run(dir, brake, again("HW thermal slowdown, HW power brake"))
			run(dir, nil) // cleared
			run(dir, thermal, first("HW thermal slowdown"))
			run(dir, []string{"gpu4:sw-thermal"}, hwWarn(4, "SW thermal slowdown"))
			run(dir, []string{"gpu4:sw-thermal"}, hwWarn(4, "SW thermal slowdown")) // SW never fails
			run(dir, []string{"gpu4:hw-slowdown"}, first("HW slowdown"))

		})
	}
}

// TestThermalStateKeptThroughHang: a hang keeps the record of the GPU it
// kept from being read.
func TestThermalStateKeptThroughHang(t *testing.T) {
	t.Parallel()
	cfg := config.Default().Checks.GPU.Thermal
	dir := statefile.Dir{Path: t.TempDir()}
	m, n := hwNode(t, "dgxb200", nil, "gpu4:hw-slowdown")
	hwExpect(t, m, "gpu.thermal", hwRun(t, NewThermal(n, cfg, dir)), []hwWant{hwWarn(4, "HW slowdown (first sighting)")}, 7)
	m, n = hwNode(t, "dgxb200", hwBlock(4, func(d *server.Device, block func()) {
		d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { block(); return 0, nvml.SUCCESS }
	}))
	hwExpect(t, m, "gpu.thermal", hwRun(t, NewThermal(n, cfg, dir)), []hwWant{hwHung(4)}, 4)
	m, n = hwNode(t, "dgxb200", nil, "gpu4:hw-slowdown")
	hwExpect(t, m, "gpu.thermal", hwRun(t, NewThermal(n, cfg, dir)),
		[]hwWant{hwFail(4, check.ActionDrain, "HW slowdown on two consecutive runs")}, 7)
}

func TestDecodeFieldValue(t *testing.T) {
	put := func(vt nvml.ValueType, f func(b []byte)) nvml.FieldValue {
		fv := nvml.FieldValue{ValueType: uint32(vt)}
		f(fv.Value[:])
		return fv
	}
	le := binary.LittleEndian
	for _, tc := range []struct {
		fv   nvml.FieldValue
		want float64
	}{
		{put(nvml.VALUE_TYPE_DOUBLE, func(b []byte) { le.PutUint64(b, math.Float64bits(71.5)) }), 71.5},
		{put(nvml.VALUE_TYPE_UNSIGNED_INT, func(b []byte) { le.PutUint32(b, 71) }), 71},
		{put(nvml.VALUE_TYPE_UNSIGNED_LONG, func(b []byte) { le.PutUint64(b, 72) }), 72},
		{put(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, func(b []byte) { le.PutUint64(b, 73) }), 73},
		{put(nvml.VALUE_TYPE_SIGNED_LONG_LONG, func(b []byte) { le.PutUint64(b, uint64(math.MaxUint64)) }), -1},
		{put(nvml.VALUE_TYPE_SIGNED_INT, func(b []byte) { le.PutUint32(b, math.MaxUint32-1) }), -2},
		{put(nvml.VALUE_TYPE_UNSIGNED_SHORT, func(b []byte) { le.PutUint16(b, 74) }), 74},
		{put(nvml.VALUE_TYPE_COUNT, func(b []byte) { le.PutUint16(b, 74) }), 0},
	} {
		if got := decodeFieldValue(tc.fv); got != tc.want {
			t.Errorf("type %d: %g, want %g", tc.fv.ValueType, got, tc.want)
		}
	}
}
