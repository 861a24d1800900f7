package gpu

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

const (
	nameNVLink = "gpu.nvlink"
	// nvlinkStateFile keeps each link's error counters for the next run.
	nvlinkStateFile = "gpu-nvlink.json"
)

// knownNVLinks is the NVLink count per GPU of the SXM parts gpuhc knows,
// by a substring of NVML's name. With expected_links = -1 a GPU must have
// at least this many links active: a link the driver no longer reports at
// all (ERROR_NOT_SUPPORTED instead of FEATURE_DISABLED) would otherwise go
// unnoticed. GPUs not listed are judged against the most links they were
// seen with active (see activeLinks): a PCIe card reports all its links
// whether or not an NVLink bridge is fitted, so the links it reports say
// nothing about the links it should have. A800/H800 (8 links) and PCIe/NVL
// cards are deliberately absent.
var knownNVLinks = []struct {
	name  string
	links int
}{
	{"A100-SXM", 12},
	{"H100 80GB HBM3", 18},
	{"H100 SXM", 18},
	{"H200 141GB HBM3", 18},
	{"NVIDIA H200", 18}, // the SXM part's whole name; H200 NVL is excluded below
	{"B200", 18},
}

// KnownNVLinks returns the NVLink count gpuhc expects of a GPU named name,
// or 0 when it does not know the part.
func KnownNVLinks(name string) int {
	if strings.Contains(name, " NVL") || strings.Contains(name, "PCIe") || strings.Contains(name, "PCIE") {
		return 0
	}
	for _, k := range knownNVLinks {
		if strings.Contains(name, k.name) {
			return k.links
		}
	}
	return 0
}

// linkCounters is one link's error counters at the end of a run, by kind
// ("crc", "replay", "recovery"); a kind the driver does not offer is absent,
// so that it starts from a baseline if a later driver offers it.
type linkCounters map[string]uint64

// nvlinkState is gpu-nvlink.json: counters by GPU UUID (a GPU may change
// index), then by link number; and by UUID the most links seen active.
type nvlinkState struct {
	GPUs   map[string]map[int]linkCounters `json:"gpus"`
	Active map[string]activeLinks          `json:"active,omitempty"`
}

// activeLinks is the most NVLinks a GPU was seen with active at once, and
// which they were. With expected_links = -1 fewer active links than this
// FAILs, on any GPU: how a link going down is caught on a part the
// knownNVLinks table does not list (a PCIe card with a bridge, an NVL or
// A800/H800 part). It only grows; a GPU replaced by another has another
// UUID and starts afresh. After removing an NVLink bridge on purpose,
// delete the GPU's entry under "active" in <state_dir>/gpu-nvlink.json (or
// the whole file, which costs one run of error-counter baselines).
type activeLinks struct {
	Max   int   `json:"max"`
	Links []int `json:"links,omitempty"` // the links active when Max was last seen
}

type nvlink struct {
	node  *Node
	cfg   config.GPUNVLink
	state statefile.Dir
}

// NewNVLink checks that every expected NVLink of each GPU is active and
// that the CRC, replay and recovery error counters grew by no more than
// the configured deltas since the previous run. GPUs without NVLink (PCIe
// SKUs, or a part gpuhc does not know with no link ever active: a PCIe
// card without a bridge) SKIP, as do error counters the driver does not
// offer; so does the link state of a GPU in MIG mode.
func NewNVLink(n *Node, c config.GPUNVLink, st statefile.Dir) check.Check {
	return &nvlink{node: n, cfg: c, state: st}
}

func (c *nvlink) Name() string { return nameNVLink }

func (c *nvlink) Run(ctx context.Context) []check.Result {
	start := time.Now()
	var prev nvlinkState
	// An unreadable or corrupt record only costs one run of deltas: every
	// link takes a new baseline, and the save below replaces the record.
	if c.state.Load(nvlinkStateFile, &prev) != nil {
		prev = nvlinkState{}
	}
	next := nvlinkState{GPUs: map[string]map[int]linkCounters{}, Active: map[string]activeLinks{}}
	visited := false
	out := Each(ctx, c.node, func(ctx context.Context, g GPU) []check.Result {
		visited = true
		v := &gpuVerdict{g: g}
		rec, err := c.judge(ctx, v, prev.GPUs[g.UUID], prev.Active[g.UUID])
		if rec.active != nil {
			next.Active[g.UUID] = *rec.active
		}
		if err != nil {
			return v.abort(err, start)
		}
		if rec.counters != nil {
			next.GPUs[g.UUID] = rec.counters
		}
		return v.results()
	})
	if !visited {
		return out // no inventory: keep the record as it is
	}
	carryOver(c.node, prev.GPUs, next.GPUs)
	carryOver(c.node, prev.Active, next.Active)
	if err := c.state.Save(nvlinkStateFile, next); err != nil {
		out = append(out, check.Result{Component: "host", Status: check.Error, Action: check.ActionNone,
			Message: "cannot keep NVLink error counters: " + err.Error()})
	}
	return out
}

// nvlinkRecord is what one GPU leaves for the next run; a nil part keeps
// the previous record's.
type nvlinkRecord struct {
	counters map[int]linkCounters
	active   *activeLinks
}

// judge reads one GPU's links into v. It returns what to keep for the next
// run, and ErrHung when NVML did not answer.
func (c *nvlink) judge(ctx context.Context, v *gpuVerdict, prev map[int]linkCounters, seen activeLinks) (nvlinkRecord, error) {
	var rec nvlinkRecord
	ls, ok, err := scanNVLinks(ctx, v)
	if err != nil || !ok {
		return rec, err
	}
	if len(ls.exist) == 0 {
		// No link answers at all. A PCIe part has none; an SXM part, or
		// one seen with active links before, has lost them all.
		want := c.cfg.ExpectedLinks
		if want < 0 {
			want = max(KnownNVLinks(v.g.Name), seen.Max)
		}
		if want > 0 {
			v.fail(check.ActionDrain, "no NVLink reported (%d expected)", want)
			rec.active = &seen
			return rec, nil
		}
		v.skip("no NVLink (PCIe GPU)")
		return rec, nil
	}
	mig, err := migEnabled(ctx, v.g)
	switch {
	case err != nil:
		return rec, err
	case mig:
		// A GPU in MIG mode has no GPU-to-GPU traffic over NVLink, and
		// its links need not be up: their state says nothing. The most
		// links seen active is kept for when MIG is turned off.
		v.skip("MIG enabled: NVLink state not judged")
	default:
		var connected bool
		rec.active, connected = c.judgeNVLinkState(v, ls, seen)
		if !connected {
			return rec, nil
		}
	}
	now, ok, err := readNVLinkCounters(ctx, v, ls.exist)
	switch {
	case err != nil || !ok:
		return rec, err
	case len(now) == 0:
		v.skip("NVLink error counters not supported")
		return rec, nil
	}
	c.judgeNVLinkCounters(v, now, prev)
	rec.counters = now
	return rec, nil
}

// migEnabled reports whether the GPU is in MIG mode now. A GPU that cannot
// say (pre-Ampere: NOT_SUPPORTED; any other answer) is taken as not: its
// links are judged as usual, and gpu.config reports the MIG mode.
func migEnabled(ctx context.Context, g GPU) (bool, error) {
	type mode struct{ current, pending int }
	m, ret, err := Call(ctx, func() (mode, nvml.Return) {
		cur, pending, ret := g.Device.GetMigMode()
		return mode{cur, pending}, ret
	})
	return ret == nvml.SUCCESS && m.current == nvml.DEVICE_MIG_ENABLE, err
}

// linkScan is what GetNvLinkState showed for links 0..NVLINK_MAX_LINKS-1.
type linkScan struct {
	exist  []int        // answered, active or not
	active map[int]bool // FEATURE_ENABLED
}

// scanNVLinks asks every possible link index: NVML answers NOT_SUPPORTED
// or INVALID_ARGUMENT for an index the GPU does not have, and
// FEATURE_DISABLED for a link it has that is down. ok is false when NVML
// answered an error, already put in v.
func scanNVLinks(ctx context.Context, v *gpuVerdict) (linkScan, bool, error) {
	ls := linkScan{active: map[int]bool{}}
	for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
		st, ret, err := Call(ctx, func() (nvml.EnableState, nvml.Return) { return v.g.Device.GetNvLinkState(l) })
		switch {
		case err != nil:
			return ls, false, err
		case ret == nvml.SUCCESS:
			ls.exist = append(ls.exist, l)
			ls.active[l] = st == nvml.FEATURE_ENABLED
		case Unsupported(ret) || ret == nvml.ERROR_INVALID_ARGUMENT:
		default:
			v.nvmlErr(fmt.Sprintf("nvmlDeviceGetNvLinkState(link %d)", l), ret)
			return ls, false, nil
		}
	}
	return ls, true, nil
}

// judgeNVLinkState passes, or fails naming the links that are not active.
// With expected_links set, that many links must be active. With -1 a GPU
// must have at least as many active as its part has (knownNVLinks), and
// as many as it was ever seen with (seen); a part gpuhc does not know
// that has no link active and never had one has no NVLink connected (a
// PCIe card without a bridge) and SKIPs, connected false. It returns the
// record of the most links seen active to keep for the next run.
func (c *nvlink) judgeNVLinkState(v *gpuVerdict, ls linkScan, seen activeLinks) (rec *activeLinks, connected bool) {
	var active []int
	for _, l := range ls.exist {
		if ls.active[l] {
			active = append(active, l)
		}
	}
	rec = &seen
	if len(active) >= seen.Max {
		rec = &activeLinks{Max: len(active), Links: active}
	}
	if c.cfg.ExpectedLinks >= 0 {
		c.judgeLinkCount(v, ls, len(active), c.cfg.ExpectedLinks, nil)
		return rec, true
	}
	known := KnownNVLinks(v.g.Name)
	want := max(known, seen.Max)
	if len(active) == 0 && want == 0 {
		v.skip("no NVLink connected")
		return nil, false
	}
	if len(active) >= want {
		v.pass("%d of %d NVLinks active", len(active), len(ls.exist))
		return rec, true
	}
	var before []int
	if seen.Max > known {
		before = seen.Links
	}
	c.judgeLinkCount(v, ls, len(active), want, before)
	return rec, true
}

// judgeLinkCount passes with at least want links active, or fails naming
// the links that are down: those of before that are no longer active
// (the links of the most ever seen active), else every link up to want or
// the last link NVML reports that is not active.
func (c *nvlink) judgeLinkCount(v *gpuVerdict, ls linkScan, active, want int, before []int) {
	switch {
	case active == want:
		v.pass("%d of %d NVLinks active", active, want)
		return
	case active > want:
		v.pass("%d NVLinks active (%d expected)", active, want)
		return
	}
	var down []int
	for _, l := range before {
		if !ls.active[l] {
			down = append(down, l)
		}
	}
	if len(down) == 0 {
		// Links past the last one NVML reports are missing, not merely down.
		top := max(want, ls.exist[len(ls.exist)-1]+1)
		for l := 0; l < top; l++ {
			if !ls.active[l] {
				down = append(down, l)
			}
		}
	}
	noun := "NVLink"
	if len(down) > 1 {
		noun = "NVLinks"
	}
	if before != nil {
		v.fail(check.ActionDrain, "%s %s inactive (%d active, %d seen before)", noun, linkRanges(down), active, want)
		return
	}
	v.fail(check.ActionDrain, "%s %s inactive (%d of %d active)", noun, linkRanges(down), active, want)
}

// linkRanges writes sorted link numbers compactly: "3", "3, 5", "0-17".
func linkRanges(ns []int) string {
	var parts []string
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, strconv.Itoa(ns[i]))
		case j == i+1:
			parts = append(parts, strconv.Itoa(ns[i]), strconv.Itoa(ns[j]))
		default:
			parts = append(parts, fmt.Sprintf("%d-%d", ns[i], ns[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// nvlinkCounter is one of the three NVLink error counters judged.
type nvlinkCounter struct {
	key     string // in the state file
	name    string // in messages
	counter nvml.NvLinkErrorCounter
	max     func(config.GPUNVLink) uint64
}

var nvlinkCounters = []nvlinkCounter{
	{"crc", "CRC", nvml.NVLINK_ERROR_DL_CRC_FLIT, func(c config.GPUNVLink) uint64 { return c.CRCDeltaMax }},
	{"replay", "replay", nvml.NVLINK_ERROR_DL_REPLAY, func(c config.GPUNVLink) uint64 { return c.ReplayDeltaMax }},
	{"recovery", "recovery", nvml.NVLINK_ERROR_DL_RECOVERY, func(c config.GPUNVLink) uint64 { return c.RecoveryDeltaMax }},
}

// readNVLinkCounters reads every counter kind of every link. A kind the
// driver answers NOT_SUPPORTED for (newer drivers and Blackwell move them
// to field values) is not asked again on the GPU's other links. ok is false
// when NVML answered an error, already put in v.
func readNVLinkCounters(ctx context.Context, v *gpuVerdict, exist []int) (map[int]linkCounters, bool, error) {
	out := map[int]linkCounters{}
	unsupported := map[string]bool{}
	for _, l := range exist {
		lc := linkCounters{}
		for _, kind := range nvlinkCounters {
			if unsupported[kind.key] {
				continue
			}
			n, ret, err := Call(ctx, func() (uint64, nvml.Return) { return v.g.Device.GetNvLinkErrorCounter(l, kind.counter) })
			switch {
			case err != nil:
				return nil, false, err
			case Unsupported(ret):
				unsupported[kind.key] = true
			case ret != nvml.SUCCESS:
				v.nvmlErr(fmt.Sprintf("nvmlDeviceGetNvLinkErrorCounter(link %d, %s)", l, kind.name), ret)
				return nil, false, nil
			default:
				lc[kind.key] = n
			}
		}
		if len(lc) > 0 {
			out[l] = lc
		}
	}
	return out, true, nil
}

// judgeNVLinkCounters compares with the previous run. A counter without a
// previous value, or one that went down (driver reload, GPU reset,
// reboot), starts a new baseline rather than reporting a huge growth.
func (c *nvlink) judgeNVLinkCounters(v *gpuVerdict, now, prev map[int]linkCounters) {
	compared, reset, bad := 0, false, false
	for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
		for _, kind := range nvlinkCounters {
			b, ok := now[l][kind.key]
			a, had := prev[l][kind.key]
			switch {
			case !ok || !had:
				continue
			case b < a:
				reset = true
				continue
			}
			compared++
			if d, limit := b-a, kind.max(c.cfg); d > limit {
				v.fail(check.ActionDrain, "NVLink %d %s delta %d > %d", l, kind.name, d, limit)
				bad = true
			}
		}
	}
	switch {
	case bad:
	case reset:
		v.pass("error counters reset, new baseline")
	case compared == 0:
		v.pass("error counter baseline recorded")
	default:
		v.pass("error deltas within limits")
	}
}
