package gpu

import (
	"context"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

const (
	nameFabric = "gpu.fabric"
	// fabricStateFile keeps each GPU's fabric state for the next run.
	fabricStateFile = "gpu-fabric.json"
)

type fabric struct {
	node  *Node
	state statefile.Dir
}

// fabricState is gpu-fabric.json: the fabric state ("completed",
// "in-progress", ...) each GPU, by UUID, had at the last run that read it.
type fabricState struct {
	States map[string]string `json:"states"`
}

// NewFabric checks, on NVSwitch systems, that each GPU finished registering
// with the NVLink fabric (Fabric Manager): state COMPLETED, status SUCCESS,
// and a health mask without degraded bandwidth or unhealthy routes. GPUs
// for which NVML reports no fabric state (PCIe SKUs, pre-Hopper GPUs,
// systems without NVSwitch) SKIP.
//
// Right after boot Fabric Manager is still registering the GPUs (state
// not-started or in-progress) for up to a few minutes, so a registration
// not completed is a WARN the first time and a FAIL only when the next
// run still finds it not completed; st keeps each GPU's state for that
// (never written when st.ReadOnly, as in a dry run). A completed
// registration that failed, or an unhealthy health mask, FAILs at once.
func NewFabric(n *Node, st statefile.Dir) check.Check { return &fabric{node: n, state: st} }

func (c *fabric) Name() string { return nameFabric }

func (c *fabric) Run(ctx context.Context) []check.Result {
	start := time.Now()
	var prev fabricState
	// Unreadable or corrupt: this run's sightings count as first ones.
	if c.state.Load(fabricStateFile, &prev) != nil {
		prev = fabricState{}
	}
	next := fabricState{States: map[string]string{}}
	api, looked := fabricNone, false
	out := Each(ctx, c.node, func(ctx context.Context, g GPU) []check.Result {
		if !looked {
			// Only now is the library loaded (Each initialised NVML).
			api, looked = fabricAPI(c.node.Lib()), true
		}
		info, ret, err := readFabric(ctx, api, g.Device)
		switch {
		case err != nil:
			return []check.Result{Hung(g.Component(), g.IDs(), start)}
		case Unsupported(ret):
			return []check.Result{Result(g, check.Skip, check.ActionNone, "no NVLink fabric state (PCIe, pre-Hopper or no NVSwitch)")}
		case ret != nvml.SUCCESS:
			return []check.Result{Result(g, check.Error, check.ActionNone, "nvmlDeviceGetGpuFabricInfo: %s", nvml.ErrorString(ret))}
		}
		if name, ok := fabricStates[info.State]; ok {
			next.States[g.UUID] = name
		}
		return []check.Result{judgeFabric(g, info, prev.States[g.UUID])}
	})
	if !looked {
		return out // no inventory: keep the record as it is
	}
	carryOver(c.node, prev.States, next.States)
	if err := c.state.Save(fabricStateFile, next); err != nil {
		out = append(out, check.Result{Component: "host", Status: check.Error, Action: check.ActionNone,
			Message: "cannot keep fabric states: " + err.Error()})
	}
	return out
}

// fabricInfo is what every version of NVML's fabric call has in common.
type fabricInfo struct {
	State      uint8
	Status     nvml.Return
	HealthMask uint32
	HasHealth  bool // v1 has no health mask
}

// fabricVersion says which of NVML's fabric calls this driver has.
type fabricVersion int

const (
	fabricNone fabricVersion = iota
	fabricV1                 // nvmlDeviceGetGpuFabricInfo (R525+), no health
	fabricV                  // nvmlDeviceGetGpuFabricInfoV, v3 then v2
	fabricV4                 // nvmlDeviceGetGpuFabricInfo_v4 (newest drivers)
)

// fabricAPI picks the newest fabric call the loaded library has: calling a
// symbol an older libnvidia-ml lacks would crash the process. NVIDIA's mock
// reports every symbol present, so simulations use v4.
func fabricAPI(lib nvml.Interface) (v fabricVersion) {
	defer func() {
		if recover() != nil { // an nvml.Interface without extensions
			v = fabricV1
		}
	}()
	ext := lib.Extensions()
	for _, s := range []struct {
		sym string
		v   fabricVersion
	}{
		{"nvmlDeviceGetGpuFabricInfo_v4", fabricV4},
		{"nvmlDeviceGetGpuFabricInfoV", fabricV},
		{"nvmlDeviceGetGpuFabricInfo", fabricV1},
	} {
		if ext.LookupSymbol(s.sym) == nil {
			return s.v
		}
	}
	return fabricNone
}

// readFabric reads d's fabric info through one hang-safe call.
func readFabric(ctx context.Context, api fabricVersion, d nvml.Device) (fabricInfo, nvml.Return, error) {
	return Call(ctx, func() (fabricInfo, nvml.Return) {
		switch api {
		case fabricV4:
			v, ret := d.GetGpuFabricInfo_v4()
			return fabricInfo{v.State, nvml.Return(v.Status), v.HealthMask, true}, ret
		case fabricV:
			h := d.GetGpuFabricInfoV()
			if v, ret := h.V3(); ret != nvml.ERROR_ARGUMENT_VERSION_MISMATCH {
				return fabricInfo{v.State, nvml.Return(v.Status), v.HealthMask, true}, ret
			}
			v, ret := h.V2()
			return fabricInfo{v.State, nvml.Return(v.Status), v.HealthMask, true}, ret
		case fabricV1:
			v, ret := d.GetGpuFabricInfo()
			return fabricInfo{State: v.State, Status: nvml.Return(v.Status)}, ret
		}
		return fabricInfo{}, nvml.ERROR_FUNCTION_NOT_FOUND
	})
}

var fabricStates = map[uint8]string{
	nvml.GPU_FABRIC_STATE_NOT_SUPPORTED: "not-supported",
	nvml.GPU_FABRIC_STATE_NOT_STARTED:   "not-started",
	nvml.GPU_FABRIC_STATE_IN_PROGRESS:   "in-progress",
	nvml.GPU_FABRIC_STATE_COMPLETED:     "completed",
}

// fabricPending: Fabric Manager has not finished registering the GPU.
func fabricPending(state string) bool {
	return state == fabricStates[nvml.GPU_FABRIC_STATE_NOT_STARTED] || state == fabricStates[nvml.GPU_FABRIC_STATE_IN_PROGRESS]
}

// judgeFabric judges one GPU's fabric info; prev is its state at the last
// run ("" when none was recorded).
func judgeFabric(g GPU, info fabricInfo, prev string) check.Result {
	switch info.State {
	case nvml.GPU_FABRIC_STATE_NOT_SUPPORTED:
		return Result(g, check.Skip, check.ActionNone, "no NVLink fabric state (PCIe, pre-Hopper or no NVSwitch)")
	case nvml.GPU_FABRIC_STATE_NOT_STARTED, nvml.GPU_FABRIC_STATE_IN_PROGRESS:
		// Until Fabric Manager finishes, CUDA cannot use the GPU; but
		// right after boot it is still working.
		if fabricPending(prev) {
			return Result(g, check.Fail, check.ActionDrain, "fabric not initialised (state %s) on two consecutive runs", fabricStates[info.State])
		}
		return Result(g, check.Warn, check.ActionNone, "fabric not initialised yet (state %s, first sighting)", fabricStates[info.State])
	case nvml.GPU_FABRIC_STATE_COMPLETED:
	default:
		return Result(g, check.Error, check.ActionNone, "fabric state %d unknown", info.State)
	}
	if info.Status != nvml.SUCCESS {
		return Result(g, check.Fail, check.ActionDrain, "fabric registration failed: %s", nvml.ErrorString(info.Status))
	}
	if !info.HasHealth {
		return Result(g, check.OK, check.ActionNone, "fabric registration completed (health not reported by this driver)")
	}
	st, problems := fabricHealth(info.HealthMask)
	switch st {
	case check.Fail:
		return Result(g, check.Fail, check.ActionDrain, "fabric health: %s", strings.Join(problems, ", "))
	case check.Warn:
		return Result(g, check.Warn, check.ActionNone, "fabric health: %s", strings.Join(problems, ", "))
	}
	return Result(g, check.OK, check.ActionNone, "fabric registration completed, healthy")
}

// fabricHealthFields are the health-mask fields judged: each is 2 bits,
// 0 not supported, 1 true, 2 false. Degraded bandwidth and an unhealthy
// route cost jobs now; recoveries in progress may heal by themselves, and
// become "route unhealthy" when they do not. The incorrect-configuration
// and partition fields belong to multi-node NVLink domains and are left
// alone, as their "normal" differs between systems.
var fabricHealthFields = []struct {
	shift  uint32
	name   string
	status check.Status
}{
	{nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW, "bandwidth degraded", check.Fail},
	{nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY, "route unhealthy", check.Fail},
	{nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY, "route recovery in progress", check.Warn},
	{nvml.GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY, "access timeout recovery in progress", check.Warn},
}

// fabricHealth names the health problems the mask shows, with the worst
// status among them (OK when none).
func fabricHealth(mask uint32) (check.Status, []string) {
	worst := check.OK
	var problems []string
	for _, f := range fabricHealthFields {
		if (mask>>f.shift)&0x3 == nvml.GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE { // TRUE is 1 for every field
			problems = append(problems, f.name)
			worst = max(worst, f.status)
		}
	}
	return worst, problems
}
