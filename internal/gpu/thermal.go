package gpu

import (
	"context"
	"encoding/binary"
	"math"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

// thermalStateFile keeps each GPU's hardware clock event reasons for the
// next run.
const thermalStateFile = "gpu-thermal.json"

// hwClockEvents are the clock event reasons that mean the hardware itself
// cut the clocks. Each also shows briefly during a P-state or clock
// change, so one sighting is a WARN and only two runs in a row a FAIL.
var hwClockEvents = []struct {
	bit  uint64
	name string
}{
	{nvml.ClocksThrottleReasonHwSlowdown, "HW slowdown"},
	{nvml.ClocksThrottleReasonHwThermalSlowdown, "HW thermal slowdown"},
	{nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, "HW power brake"},
}

type thermal struct {
	node  *Node
	cfg   config.GPUThermal
	state statefile.Dir
}

// NewThermal compares each GPU's core and memory temperature with NVML's
// own thresholds for that GPU, and judges the clock event reasons that
// mean the GPU is being slowed down (the previous run's kept in st).
func NewThermal(n *Node, c config.GPUThermal, st statefile.Dir) check.Check {
	return &thermal{node: n, cfg: c, state: st}
}

func (c *thermal) Name() string { return "gpu.thermal" }

// thermalState is the state file: the hardware clock event bits each GPU
// (by UUID) showed in the last run.
type thermalState struct {
	HW map[string]uint64 `json:"hw_clock_events"`
}

func (c *thermal) Run(ctx context.Context) []check.Result {
	start := time.Now()
	var prev thermalState
	// Unreadable or corrupt: this run's sightings count as first ones.
	_ = c.state.Load(thermalStateFile, &prev)
	next := thermalState{HW: map[string]uint64{}}
	visited := false
	var api clockReasonsAPI
	out := Each(ctx, c.node, func(ctx context.Context, g GPU) []check.Result {
		if !visited {
			// Only now is the library loaded (Each initialised NVML).
			api = clockReasons(c.node.Lib())
		}
		visited = true
		v := &gpuVerdict{g: g}
		for _, part := range []func(context.Context, *gpuVerdict) error{
			c.core, c.memory,
			func(ctx context.Context, v *gpuVerdict) error { return c.clocks(ctx, v, api, prev, next) },
		} {
			if err := part(ctx, v); err != nil {
				return v.abort(err, start)
			}
		}
		return v.results()
	})
	if !visited {
		return out
	}
	carryOver(c.node, prev.HW, next.HW)
	if err := c.state.Save(thermalStateFile, next); err != nil {
		out = append(out, check.Result{Component: "host", Status: check.Error, Action: check.ActionNone,
			Message: "cannot keep clock event reasons: " + err.Error()})
	}
	return out
}

// tempThreshold reads one of the GPU's limits; a limit NVML does not
// report is 0. INVALID_ARGUMENT counts as not reported: it is how a driver
// older than the limit (GPU_MAX, MEM_MAX) rejects it.
func tempThreshold(d nvml.Device, which nvml.TemperatureThresholds) (uint32, nvml.Return) {
	t, ret := d.GetTemperatureThreshold(which)
	if Unsupported(ret) || ret == nvml.ERROR_INVALID_ARGUMENT {
		return 0, nvml.SUCCESS
	}
	return t, ret
}

// core judges the GPU temperature against the slowdown threshold (the GPU
// max operating temperature where no slowdown is reported).
func (c *thermal) core(ctx context.Context, v *gpuVerdict) error {
	d := v.g.Device
	t, ret, err := Call(ctx, func() (uint32, nvml.Return) { return d.GetTemperature(nvml.TEMPERATURE_GPU) })
	switch {
	case err != nil:
		return err
	case Unsupported(ret):
		v.skip("GPU temperature not reported")
		return nil
	case ret != nvml.SUCCESS:
		return v.nvmlErr("nvmlDeviceGetTemperature", ret)
	}
	// The max operating temperature is asked for only where no slowdown
	// threshold is reported: an older driver's answer to it must not cost
	// a valid slowdown threshold.
	type limit struct {
		c          uint32
		name, enum string
	}
	lim, ret, err := Call(ctx, func() (limit, nvml.Return) {
		if c, ret := tempThreshold(d, nvml.TEMPERATURE_THRESHOLD_SLOWDOWN); ret != nvml.SUCCESS || c > 0 {
			return limit{c, "slowdown", "SLOWDOWN"}, ret
		}
		c, ret := tempThreshold(d, nvml.TEMPERATURE_THRESHOLD_GPU_MAX)
		return limit{c, "max operating", "GPU_MAX"}, ret
	})
	switch {
	case err != nil:
		return err
	case ret != nvml.SUCCESS:
		return v.nvmlErr("nvmlDeviceGetTemperatureThreshold("+lim.enum+")", ret)
	}
	c.judge(v, "GPU", float64(t), float64(lim.c), lim.name)
	return nil
}

// memory judges the HBM temperature against the memory's max operating
// temperature. GPUs without a memory sensor answer "not supported" or 0.
func (c *thermal) memory(ctx context.Context, v *gpuVerdict) error {
	d := v.g.Device
	t, ret, err := Call(ctx, func() (float64, nvml.Return) {
		fv := []nvml.FieldValue{{FieldId: nvml.FI_DEV_MEMORY_TEMP}}
		if ret := d.GetFieldValues(fv); ret != nvml.SUCCESS {
			return 0, ret
		}
		if ret := nvml.Return(fv[0].NvmlReturn); ret != nvml.SUCCESS {
			return 0, ret
		}
		return decodeFieldValue(fv[0]), nvml.SUCCESS
	})
	switch {
	case err != nil:
		return err
	case Unsupported(ret) || (ret == nvml.SUCCESS && t <= 0):
		return nil // no memory sensor: nothing to say on every run
	case ret != nvml.SUCCESS:
		return v.nvmlErr("nvmlDeviceGetFieldValues(MEMORY_TEMP)", ret)
	}
	lim, ret, err := Call(ctx, func() (uint32, nvml.Return) {
		return tempThreshold(d, nvml.TEMPERATURE_THRESHOLD_MEM_MAX)
	})
	if err != nil {
		return err
	}
	if ret != nvml.SUCCESS {
		return v.nvmlErr("nvmlDeviceGetTemperatureThreshold(MEM_MAX)", ret)
	}
	c.judge(v, "memory", t, float64(lim), "max")
	return nil
}

// judge compares one temperature with one limit (0: none reported).
func (c *thermal) judge(v *gpuVerdict, what string, t, limit float64, name string) {
	switch {
	case limit <= 0:
		v.pass("%s %g°C", what, t)
	case t >= limit:
		v.fail(check.ActionDrain, "%s %g°C >= %s %g°C", what, t, name, limit)
	case t >= limit-c.cfg.MarginCelsius:
		v.warn("%s %g°C within %g°C of %s %g°C", what, t, c.cfg.MarginCelsius, name, limit)
	default:
		v.pass("%s %g°C < %s %g°C", what, t, name, limit)
	}
}

// decodeFieldValue decodes a field value of any numeric type; NVML fills Value
// in the host's byte order, little-endian on every platform it supports.
func decodeFieldValue(f nvml.FieldValue) float64 {
	b := f.Value[:]
	le := binary.LittleEndian
	switch nvml.ValueType(f.ValueType) {
	case nvml.VALUE_TYPE_DOUBLE:
		return math.Float64frombits(le.Uint64(b))
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return float64(le.Uint32(b))
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return float64(le.Uint64(b))
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return float64(int64(le.Uint64(b)))
	case nvml.VALUE_TYPE_SIGNED_INT:
		return float64(int32(le.Uint32(b)))
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return float64(le.Uint16(b))
	}
	return 0
}

// clockReasonsAPI says which of NVML's two names for the clock event
// reasons call the loaded library has.
type clockReasonsAPI int

const (
	clockReasonsNone     clockReasonsAPI = iota
	clockReasonsThrottle                 // nvmlDeviceGetCurrentClocksThrottleReasons (deprecated, R470 has only it)
	clockReasonsEvent                    // nvmlDeviceGetCurrentClocksEventReasons (R535+)
)

var clockReasonsSymbols = map[clockReasonsAPI]string{
	clockReasonsThrottle: "nvmlDeviceGetCurrentClocksThrottleReasons",
	clockReasonsEvent:    "nvmlDeviceGetCurrentClocksEventReasons",
}

// clockReasons picks the newest name of the call the library exports (see
// hasSymbol): both answer the same bits.
func clockReasons(lib nvml.Interface) clockReasonsAPI {
	for _, api := range []clockReasonsAPI{clockReasonsEvent, clockReasonsThrottle} {
		if hasSymbol(lib, clockReasonsSymbols[api]) {
			return api
		}
	}
	return clockReasonsNone
}

// clocks judges the clock event reasons: a hardware slowdown seen in the
// previous run too is a FAIL, a first sighting a WARN; the driver's own
// (software) thermal slowdown is a WARN.
func (c *thermal) clocks(ctx context.Context, v *gpuVerdict, api clockReasonsAPI, prev, next thermalState) error {
	var get func() (uint64, nvml.Return)
	switch api {
	case clockReasonsEvent:
		get = v.g.Device.GetCurrentClocksEventReasons
	case clockReasonsThrottle:
		get = v.g.Device.GetCurrentClocksThrottleReasons
	default:
		v.skip("clock event reasons not reported by this driver")
		return nil
	}
	bits, ret, err := Call(ctx, get)
	switch {
	case err != nil:
		return err
	case Unsupported(ret):
		v.skip("clock event reasons not reported")
		return nil
	case ret != nvml.SUCCESS:
		return v.nvmlErr(clockReasonsSymbols[api], ret)
	}
	var hw uint64
	var again, first []string
	for _, e := range hwClockEvents {
		if bits&e.bit == 0 {
			continue
		}
		hw |= e.bit
		if prev.HW[v.g.UUID]&e.bit != 0 {
			again = append(again, e.name)
		} else {
			first = append(first, e.name)
		}
	}
	next.HW[v.g.UUID] = hw
	if len(again) > 0 {
		v.fail(check.ActionDrain, "%s on two consecutive runs", strings.Join(again, ", "))
	}
	if len(first) > 0 {
		v.warn("%s (first sighting)", strings.Join(first, ", "))
	}
	if bits&nvml.ClocksEventReasonSwThermalSlowdown != 0 {
		v.warn("SW thermal slowdown")
	}
	if hw == 0 && bits&nvml.ClocksEventReasonSwThermalSlowdown == 0 {
		v.pass("no thermal or HW slowdown")
	}
	return nil
}
