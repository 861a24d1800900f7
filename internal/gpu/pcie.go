package gpu

import (
	"context"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

// pcieStateFile keeps each GPU's replay counter for the next run's delta,
// and its link width for the next run's verdict.
const pcieStateFile = "gpu-pcie.json"

// pcieBusyUtil is the GPU utilisation (percent of the last sample period
// with a kernel running) at which the link is judged at once. Idle GPUs
// train their link down to save power (an idle H100 reports Gen1) and
// back up under load, and NVML says the current width too "may be reduced
// when the GPU is not in use". Under load both must be at their maximum:
// a shortfall FAILs. An idle GPU's generation is not judged: Gen1 at idle
// is the norm. Its width is judged across runs: a narrow link seen for the
// first time is a WARN, and a FAIL when the previous run saw this GPU's
// link narrow too (under load or not). Judging the width only under load
// would let a GPU whose link trained to x8 (a bad riser or slot) pass on
// every idle run, and take jobs, until a run happens to catch it busy;
// health checks run every few minutes, so two idle runs in a row cost a
// real x8 link one interval, while a width that dips at idle and is back
// at the next run never drains the node. The cost: a GPU that keeps its
// link narrow for as long as it idles is drained too. Datacenter GPUs
// (the simulator's idle fault models them) keep x16 at idle and lower only
// the generation; if a SKU is seen doing otherwise, judge the width only
// under load, like the generation.
const pcieBusyUtil = 50

type pcie struct {
	node  *Node
	cfg   config.GPUPCIe
	state statefile.Dir
}

// NewPCIe judges each GPU's PCIe link against its maximum, and the growth
// of its replay counter since the previous run (kept in st).
func NewPCIe(n *Node, c config.GPUPCIe, st statefile.Dir) check.Check {
	return &pcie{node: n, cfg: c, state: st}
}

func (c *pcie) Name() string { return "gpu.pcie" }

// pcieState is the state file, keyed by GPU UUID (an index may change
// when a GPU falls off the bus): replay counters, and the link width each
// GPU had (records written before widths were kept have none: every GPU's
// narrow link is then a first sighting).
type pcieState struct {
	Replay map[string]int64 `json:"replay"`
	Width  map[string]int   `json:"width,omitempty"`
}

func (c *pcie) Run(ctx context.Context) []check.Result {
	start := time.Now()
	var prev pcieState
	// An unreadable or corrupt record only costs the deltas of one run:
	// every GPU takes a new baseline, and the save below replaces it.
	_ = c.state.Load(pcieStateFile, &prev)
	next := pcieState{Replay: map[string]int64{}, Width: map[string]int{}}
	visited := false
	out := Each(ctx, c.node, func(ctx context.Context, g GPU) []check.Result {
		visited = true
		v := &gpuVerdict{g: g}
		if err := c.link(ctx, v, prev, next); err != nil {
			return v.abort(err, start)
		}
		if err := c.replay(ctx, v, prev, next); err != nil {
			return v.abort(err, start)
		}
		return v.results()
	})
	if !visited {
		return out // no inventory: keep the record as it is
	}
	carryOver(c.node, prev.Replay, next.Replay)
	carryOver(c.node, prev.Width, next.Width)
	if err := c.state.Save(pcieStateFile, next); err != nil {
		out = append(out, check.Result{Component: "host", Status: check.Error, Action: check.ActionNone,
			Message: "cannot keep PCIe replay counters: " + err.Error()})
	}
	return out
}

// carryOver copies into next the entries of prev (keyed by GPU UUID) that
// next lacks, for GPUs still in the inventory: a GPU a hang kept from
// being read keeps its record, a GPU gone from the node loses it. Call it
// only after Each visited a GPU: the inventory is then known and this
// does not wait.
func carryOver[T any](n *Node, prev, next map[string]T) {
	inv, err := n.Inventory(context.Background())
	if err != nil {
		return
	}
	for _, g := range inv.GPUs {
		if old, ok := prev[g.UUID]; ok {
			if _, ok := next[g.UUID]; !ok {
				next[g.UUID] = old
			}
		}
	}
}

type pcieLink struct{ gen, width, maxGen, maxWidth int }

func readPCIeLink(d nvml.Device) (pcieLink, nvml.Return) {
	var l pcieLink
	// The maximum NVML reports for both the GPU and the system, not
	// GetGpuMaxPcieLinkGeneration (the GPU's alone): a Gen6 B200 in a Gen5
	// server is at its best at Gen5.
	for _, get := range []struct {
		dst *int
		f   func() (int, nvml.Return)
	}{{&l.gen, d.GetCurrPcieLinkGeneration}, {&l.width, d.GetCurrPcieLinkWidth},
		{&l.maxGen, d.GetMaxPcieLinkGeneration}, {&l.maxWidth, d.GetMaxPcieLinkWidth}} {
		v, ret := get.f()
		if ret != nvml.SUCCESS {
			return l, ret
		}
		*get.dst = v
	}
	return l, nvml.SUCCESS
}

func (c *pcie) link(ctx context.Context, v *gpuVerdict, prev, next pcieState) error {
	d := v.g.Device
	util, uret, err := Call(ctx, d.GetUtilizationRates)
	if err != nil {
		return err
	}
	l, ret, err := Call(ctx, func() (pcieLink, nvml.Return) { return readPCIeLink(d) })
	switch {
	case err != nil:
		return err
	case Unsupported(ret):
		v.skip("PCIe link not reported")
		return nil
	case ret != nvml.SUCCESS:
		return v.nvmlErr("nvmlDeviceGetCurrPcieLink", ret)
	}
	next.Width[v.g.UUID] = l.width
	// Unknown utilisation counts as idle.
	busy := uret == nvml.SUCCESS && util.Gpu >= pcieBusyUtil
	before, seen := prev.Width[v.g.UUID]
	narrowBefore := seen && before < l.maxWidth
	switch {
	case busy && (l.width < l.maxWidth || l.gen < l.maxGen):
		v.fail(check.ActionDrain, "PCIe Gen%d x%d < max Gen%d x%d", l.gen, l.width, l.maxGen, l.maxWidth)
	case l.width < l.maxWidth && narrowBefore:
		v.fail(check.ActionDrain, "PCIe x%d < max x%d on two consecutive runs", l.width, l.maxWidth)
	case l.width < l.maxWidth:
		v.warn("PCIe x%d < max x%d at idle (first sighting)", l.width, l.maxWidth)
	case busy || l.gen >= l.maxGen:
		v.pass("PCIe Gen%d x%d", l.gen, l.width)
	default:
		v.pass("PCIe Gen%d x%d, max Gen%d (generation judged only under load)", l.gen, l.width, l.maxGen)
	}
	return nil
}

// replay judges the replay counter's growth: link-level retransmissions
// that precede a link going bad. The counter restarts at 0 when the driver
// loads or the GPU is reset; after that all it holds is new.
func (c *pcie) replay(ctx context.Context, v *gpuVerdict, prev, next pcieState) error {
	n, ret, err := Call(ctx, v.g.Device.GetPcieReplayCounter)
	switch {
	case err != nil:
		return err
	case Unsupported(ret):
		v.skip("PCIe replay counter not supported")
		return nil
	case ret != nvml.SUCCESS:
		return v.nvmlErr("nvmlDeviceGetPcieReplayCounter", ret)
	}
	cur := int64(n)
	next.Replay[v.g.UUID] = cur
	old, seen := prev.Replay[v.g.UUID]
	if !seen {
		v.pass("replay counter %d (first run)", cur)
		return nil
	}
	delta := cur - old
	if cur < old {
		delta = cur
	}
	if uint64(delta) > c.cfg.ReplayWarnDelta {
		v.warn("PCIe replay counter +%d since last run > %d", delta, c.cfg.ReplayWarnDelta)
		return nil
	}
	v.pass("replay counter +%d since last run", delta)
	return nil
}
