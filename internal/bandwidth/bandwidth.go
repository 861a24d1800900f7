// Package bandwidth measures how fast data moves on a GPU node and judges
// the figures against per-model floors (docs/architecture.md#bandwidth-floors):
//
//   - in process, through the CUDA driver API dlopened at run time (cgo;
//     no CUDA toolkit needed): host->device and device->host copies from
//     pinned memory, a device-local copy and GPU->GPU peer copies;
//   - optionally through NVIDIA's nvbandwidth, perftest's ib_write_bw (in
//     loopback between two local HCAs) and nccl-tests' all_reduce_perf,
//     when an administrator configures their paths.
//
// A figure below its floor is a FAIL (drain). A node without the CUDA
// driver, a tool that cannot run and output that cannot be read are
// ERRORs: gpuhc could not check, which never drains by default. A GPU
// model without a floor is reported without a verdict.
//
// Every result of one run has a component of its own, because the policy
// engine remembers statuses by check and component: two results under
// one component would read as a status flapping between them. A figure's
// result, and an ERROR about that one figure, is named "<component>/<kind>"
// after the GPU, GPU pair or HCA pair and the Kind* constant: "gpu0/h2d",
// "gpu0-gpu1/p2p", "gpu0/nvbandwidth.h2d", "mlx5_0-mlx5_1/ib_write".
// Results about a GPU as a whole keep its bare name ("gpu0": no CUDA
// context), those about a run as a whole "host" (the in-process
// measurement), "nvbandwidth", "ib_write_bw" or "all-gpus" (all_reduce_perf,
// one result per run). Figure keeps the bare component and the kind apart.
package bandwidth

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

// Name is the check's name in results and drain reasons.
const Name = "bandwidth"

// Kinds of figure. GB/s are 1e9 bytes per second throughout.
const (
	KindH2D = "h2d" // host to device, pinned host memory
	KindD2H = "d2h" // device to host, pinned host memory
	KindD2D = "d2d" // device-local copy, read+write bytes
	KindP2P = "p2p" // GPU to GPU peer copy

	KindNVBandwidthH2D = "nvbandwidth.h2d"
	KindNVBandwidthD2H = "nvbandwidth.d2h"
	KindNVBandwidthD2D = "nvbandwidth.d2d" // device_local_copy, as read+write bytes
	KindNVBandwidthP2P = "nvbandwidth.p2p" // device_to_device_memcpy_read_ce

	KindIBWrite   = "ib_write"   // ib_write_bw average between two HCAs
	KindAllReduce = "all_reduce" // all_reduce_perf bus bandwidth
)

// Figure is one measurement as Measure returns it. The results carry the
// same figures as check.Figure (name the kind, unit "GB/s", floor 0 when
// not judged), which is what the event log and metrics use. Component is
// the bare GPU, GPU pair or HCA pair ("gpu0", not its result's
// "gpu0/h2d"); GBps is in GB/s (ib_write_bw's Gb/s divided by 8); Floor
// is 0 when not judged.
type Figure struct {
	Component, Kind string
	GBps, Floor     float64
}

// Lookup names the GPU at a PCI address ("0000:4e:00.0") as the other
// checks do ("gpu3", with its identifiers); ok is false for a GPU it does
// not know, which is then called "cuda<ordinal>".
type Lookup func(pci string) (component string, ids check.IDs, ok bool)

type bwCheck struct {
	cfg    config.Bandwidth
	lookup Lookup
}

// New returns the bandwidth check. lookup may be nil.
func New(c config.Bandwidth, lookup func(pci string) (string, check.IDs, bool)) check.Check {
	return &bwCheck{cfg: c, lookup: lookup}
}

func (b *bwCheck) Name() string { return Name }

func (b *bwCheck) Run(ctx context.Context) []check.Result {
	_, rs := Measure(ctx, b.cfg, b.lookup)
	return rs
}

// Component names of results that are about no single GPU or HCA pair.
const (
	componentHost      = "host" // the in-process measurement as a whole
	componentAllReduce = "all-gpus"
)

// figureComponent is the component of the result for one figure (or for
// the failure to measure it): "gpu0/h2d", so that a GPU's H2D, D2H and D2D
// results never share a key in the policy engine's remembered statuses.
// all_reduce_perf gives one result per run, which keeps "all-gpus".
func figureComponent(component, kind string) string {
	if kind == KindAllReduce {
		return component
	}
	return component + "/" + kind
}

// Measure runs every configured measurement within ctx, which must carry
// a deadline (a hung driver call is only ever abandoned at it), and
// returns the raw figures with the results. The in-process copies go first and the
// tools after them, one at a time, so that they never compete for links.
func Measure(ctx context.Context, c config.Bandwidth, lookup func(pci string) (string, check.IDs, bool)) ([]Figure, []check.Result) {
	return measure(ctx, c, lookup, openCUDA)
}

// measure is Measure with the CUDA driver's loader given, so that tests
// can run the whole measurement on a driver written in Go.
func measure(ctx context.Context, c config.Bandwidth, lookup func(pci string) (string, check.IDs, bool), open func(string) (cudaAPI, error)) ([]Figure, []check.Result) {
	// End a little early so a hung copy is reported by name before the
	// runner's generic "timed out".
	ctx, cancel := check.FinishEarly(ctx)
	defer cancel()
	var m measurement
	switch {
	case !c.Enabled:
		m.add(check.Result{Component: componentHost, Status: check.Skip, Message: "disabled in the configuration"})
	case c.Libcuda == "" && c.NVBandwidth == "" && c.IBWriteBW == "" && c.AllReducePerf == "":
		m.add(check.Result{Component: componentHost, Status: check.Skip, Message: "nothing to measure: libcuda and every tool are off"})
	default:
		m.run(ctx, c, Lookup(lookup), open)
	}
	uniqueComponents(m.results)
	for i := range m.results {
		m.results[i].Check = Name
		if m.results[i].Action == "" {
			m.results[i].Action = check.ActionNone
		}
	}
	return m.figures, m.results
}

// measurement collects one run's figures and results.
type measurement struct {
	figures []Figure
	results []check.Result
}

func (m *measurement) add(r check.Result) { m.results = append(m.results, r) }

func (m *measurement) addFigure(f Figure, r check.Result) {
	m.figures = append(m.figures, f)
	m.results = append(m.results, r)
}

func (m *measurement) run(ctx context.Context, c config.Bandwidth, lookup Lookup, open func(string) (cudaAPI, error)) {
	size, err := config.ParseSize(c.Size)
	if err != nil || size == 0 {
		m.add(errorf(componentHost, "checks.bandwidth.size: %q is not a size", c.Size))
		return
	}
	iters := max(c.Iterations, 1)
	gpus := -1 // CUDA devices, when the in-process measurement counted them
	if c.Libcuda != "" {
		s := newSession(c, size, iters, lookup, open)
		figs, rs, n := s.run(ctx)
		m.figures = append(m.figures, figs...)
		m.results = append(m.results, rs...)
		gpus = n
	}
	if c.NVBandwidth != "" {
		m.nvbandwidth(ctx, c, lookup, gpus)
	}
	if c.IBWriteBW != "" {
		m.ibWrite(ctx, c)
	}
	if c.AllReducePerf != "" {
		m.allReduce(ctx, c, gpus)
	}
}

// judged is a measured figure with what it is judged against.
type judged struct {
	component string // bare, as in Figure: "gpu0", "gpu0-gpu1"
	ids       check.IDs
	kind      string
	label     string // "H2D", "nvbandwidth P2P", "ib_write_bw"
	unit      string // "GB/s" or "Gb/s"
	counts    string // how bytes are counted, e.g. "read+write"; "" for plain
	value     float64
	floor     float64 // 0: no verdict
	model     string  // short GPU model for a FAIL, e.g. "H100 80GB HBM3"
	noFloor   string  // why there is no verdict, when floor is 0
	note      string  // appended to a FAIL, e.g. "no peer access"
}

// verdict turns a figure into its result: FAIL below the floor, OK
// otherwise (also when there is no floor).
func (j judged) verdict() (Figure, check.Result) {
	perGB := 1.0
	if j.unit == "Gb/s" {
		perGB = 8
	}
	f := Figure{Component: j.component, Kind: j.kind, GBps: j.value / perGB, Floor: j.floor / perGB}
	v := fmt.Sprintf("%s %.1f %s", j.label, j.value, j.unit)
	if j.counts != "" {
		v += " " + j.counts
	}
	r := check.Result{Component: figureComponent(j.component, j.kind), IDs: j.ids, Status: check.OK, Action: check.ActionNone,
		Figures: []check.Figure{{Name: j.kind, Value: sig6(f.GBps), Unit: "GB/s", Floor: sig6(f.Floor)}}}
	switch {
	case j.floor <= 0:
		r.Message = fmt.Sprintf("%s (%s)", v, j.noFloor)
	case j.value >= j.floor:
		r.Message = fmt.Sprintf("%s >= %g", v, j.floor)
	default:
		why := strings.Join(nonEmpty(j.model, j.note), "; ")
		r.Status, r.Action = check.Fail, check.ActionDrain
		r.Message = fmt.Sprintf("%s < floor %g", v, j.floor)
		if why != "" {
			r.Message += " (" + why + ")"
		}
	}
	return f, r
}

// sig6 keeps six significant digits of a figure for the event log and
// metrics (52.3846, not 52.38461538461539): more than any copy's timing
// supports, and never rounds a small figure to 0.
func sig6(v float64) float64 {
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	if err != nil {
		return v
	}
	return r
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// uniqueComponents makes every result's component unique within the run,
// the last line of defence against output nobody foresaw (a tool listing
// one device twice): a repeat becomes "<component>#2". The policy engine
// remembers statuses by check and component, and two results under one
// key would read as flapping; the numbering follows the (fixed) order of
// the measurements, so it stays the same from run to run.
func uniqueComponents(rs []check.Result) {
	seen := make(map[string]bool, len(rs))
	for i := range rs {
		c := rs[i].Component
		for n := 2; seen[c]; n++ {
			c = rs[i].Component + "#" + strconv.Itoa(n)
		}
		seen[c] = true
		rs[i].Component = c
	}
}

func errorf(component, format string, a ...any) check.Result {
	return check.Result{Component: component, Status: check.Error, Action: check.ActionNone, Message: fmt.Sprintf(format, a...)}
}

// median of positive finite samples; false when there are none or one is
// not a figure at all (a driver or a fake answering garbage).
func median(xs []float64) (float64, bool) {
	if len(xs) == 0 {
		return 0, false
	}
	s := make([]float64, len(xs))
	for i, x := range xs {
		if !(x > 0) || math.IsInf(x, 0) {
			return 0, false
		}
		s[i] = x
	}
	for i := 1; i < len(s); i++ { // a handful of samples: insertion sort
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	n := len(s)
	if n%2 == 1 {
		return s[n/2], true
	}
	return (s[n/2-1] + s[n/2]) / 2, true
}

// maxMessage keeps a message within a drain reason's 256 bytes along with
// "gpuhc: bandwidth: <component> (<ids>): ", e.g. "gpu0/h2d (SN
// 1654922000003, 0000:4e:00.0)".
const maxMessage = 180

// printable makes text from a driver or a tool safe for a one-line
// message: control characters become spaces and the length is capped at
// maxMessage bytes.
func printable(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxMessage {
		// The ellipsis counts within the cap, so that printable of
		// its own output is that output: a message built around
		// printable parts can go through it again whole.
		cut := maxMessage - len("...")
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
