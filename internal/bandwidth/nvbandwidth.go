package bandwidth

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/lazyre"
	"github.com/gpuhc/gpuhc/internal/pciaddr"
)

// nvbandwidth test cases gpuhc runs, and the kind each one measures.
const (
	nvbwH2D   = "host_to_device_memcpy_ce"
	nvbwD2H   = "device_to_host_memcpy_ce"
	nvbwP2P   = "device_to_device_memcpy_read_ce"
	nvbwLocal = "device_local_copy" // parsed when present; newer versions only
)

var nvbwKinds = map[string]string{
	nvbwH2D: KindNVBandwidthH2D, nvbwD2H: KindNVBandwidthD2H,
	nvbwP2P: KindNVBandwidthP2P, nvbwLocal: KindNVBandwidthD2D,
}

// nvbwReport is nvbandwidth's plain-text output, e.g. (v0.8):
//
//	nvbandwidth Version: v0.8
//	...
//	Device 0: NVIDIA H100 80GB HBM3 (00000000:19:00)
//
//	Running host_to_device_memcpy_ce.
//	memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)
//	           0         1
//	 0     55.68     55.63
//
//	SUM host_to_device_memcpy_ce 111.31
type nvbwReport struct {
	devices map[int]nvbwDevice
	tests   map[string]*nvbwTest
}

type nvbwDevice struct{ name, pci string }

// nvbwTest is one test case's result: a matrix, or why there is none.
type nvbwTest struct {
	desc   string // "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)"
	cols   []int
	rows   []nvbwRow
	status string // an "Error: ..." line, or a malformed matrix
}

type nvbwRow struct {
	label int
	cells []float64 // NaN for "N/A"
}

var (
	// "Device 0: NVIDIA H100 80GB HBM3 (00000000:19:00)"; versions before
	// 0.5 print no address.
	nvbwDeviceLine = lazyre.New(`^Device (\d+): (.*?)(?: \(([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)\))?$`)
	nvbwRunning    = lazyre.New(`^Running (\S+?)\.?$`)
	nvbwStatus     = lazyre.New(`^(?i:error|waived)\b:?\s*(.*)$`)
)

// maxNVBWDevices bounds the matrix size a report may claim.
const maxNVBWDevices = 64

// parseNVBandwidth reads nvbandwidth's text output. Lines it does not
// know (notes, warnings, verbose output) are skipped; a matrix that does
// not have the shape its header announces marks its test as malformed.
func parseNVBandwidth(out []byte) (*nvbwReport, error) {
	rep := &nvbwReport{devices: map[int]nvbwDevice{}, tests: map[string]*nvbwTest{}}
	ls := lines(out)
	var cur *nvbwTest
	for i := 0; i < len(ls); i++ {
		l := strings.TrimSpace(ls[i])
		if m := nvbwDeviceLine.FindStringSubmatch(l); m != nil {
			n, err := strconv.Atoi(m[1])
			if err != nil || n >= maxNVBWDevices {
				return nil, fmt.Errorf("device line %q: not a device ordinal", printable(l))
			}
			rep.devices[n] = nvbwDevice{name: strings.TrimSpace(m[2]), pci: m[3]}
			continue
		}
		if m := nvbwRunning.FindStringSubmatch(l); m != nil {
			cur = &nvbwTest{}
			rep.tests[m[1]] = cur
			continue
		}
		if cur == nil {
			continue
		}
		if m := nvbwStatus.FindStringSubmatch(l); m != nil && cur.cols == nil {
			cur.status = printable(l)
			continue
		}
		if strings.HasSuffix(l, "bandwidth (GB/s)") && cur.cols == nil && cur.status == "" {
			cur.desc = l
			i = parseNVBWMatrix(ls, i+1, cur)
		}
	}
	if len(rep.tests) == 0 {
		return nil, fmt.Errorf("no test results (no \"Running <test>.\" line)")
	}
	return rep, nil
}

// parseNVBWMatrix reads the column header and the rows that follow a
// description line, from ls[i]; it returns the index of the last line
// used.
func parseNVBWMatrix(ls []string, i int, t *nvbwTest) int {
	if i >= len(ls) {
		t.fail("matrix missing after %s", t.desc)
		return i
	}
	cols, err := intFields(ls[i])
	if err != nil || len(cols) == 0 || len(cols) > maxNVBWDevices || !slices.IsSorted(cols) {
		t.fail("matrix header %q is not a list of devices", printable(ls[i]))
		return i
	}
	for i+1 < len(ls) {
		f := strings.Fields(ls[i+1])
		if len(f) == 0 || strings.HasPrefix(f[0], "SUM") {
			break
		}
		label, err := strconv.Atoi(f[0])
		if err != nil || len(f) != len(cols)+1 {
			t.fail("matrix row %q does not match its %d columns", printable(ls[i+1]), len(cols))
			return i + 1
		}
		row := nvbwRow{label: label}
		for _, c := range f[1:] {
			v := math.NaN()
			if c != "N/A" {
				v, err = strconv.ParseFloat(c, 64)
				if err != nil || !(v >= 0) || math.IsInf(v, 0) {
					t.fail("matrix cell %q is not a bandwidth", printable(c))
					return i + 1
				}
			}
			row.cells = append(row.cells, v)
		}
		t.rows = append(t.rows, row)
		i++
	}
	if len(t.rows) == 0 {
		t.fail("matrix without rows after %s", t.desc)
		return i
	}
	t.cols = cols
	return i
}

// fail records why a test's matrix was refused, within maxMessage as a
// whole: the quoted line inside is capped too, but the words around it
// would otherwise carry the status past a drain reason's room.
func (t *nvbwTest) fail(format string, args ...any) {
	t.status = printable(fmt.Sprintf(format, args...))
}

func intFields(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Fields(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a device", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// nvbwCell is one figure with the devices it is between.
type nvbwCell struct {
	src, dst int // device ordinals; -1 for the host
	gbps     float64
}

// cells reads a test's matrix as figures between devices. The
// description says which way data moves: "CPU(row) -> GPU(column)" from
// row to column, "GPU(row) <- GPU(column)" from column to row; "local
// GPU(column)" within each column's device.
func (t *nvbwTest) cells() ([]nvbwCell, error) {
	if t.cols == nil {
		if t.status == "" {
			return nil, fmt.Errorf("no result matrix")
		}
		return nil, fmt.Errorf("%s", t.status)
	}
	d := t.desc
	rowIsHost := strings.Contains(d, "CPU(row)")
	var fromRow, local bool
	switch {
	case strings.Contains(d, "local GPU(column)"):
		local = true
	case strings.Contains(d, "(row) -> "):
		fromRow = true
	case strings.Contains(d, "(row) <- "):
	default:
		return nil, fmt.Errorf("matrix %q: direction unknown", printable(d))
	}
	var out []nvbwCell
	for _, r := range t.rows {
		rowDev := r.label
		if rowIsHost {
			rowDev = -1
		}
		for k, v := range r.cells {
			c := nvbwCell{src: t.cols[k], dst: rowDev, gbps: v}
			switch {
			case local:
				c.src, c.dst = t.cols[k], t.cols[k]
			case fromRow:
				c.src, c.dst = rowDev, t.cols[k]
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// nvbandwidth runs the tool and judges its figures with the same floors
// as the in-process copies.
func (m *measurement) nvbandwidth(ctx context.Context, c config.Bandwidth, lookup Lookup, gpus int) {
	const comp = "nvbandwidth"
	tests := []string{nvbwH2D, nvbwD2H}
	wantP2P := c.P2P != "off" && gpus != 0 && gpus != 1
	if wantP2P {
		tests = append(tests, nvbwP2P)
	}
	// Buffer size and samples stay at nvbandwidth's defaults: their flags
	// changed meaning between versions (-b was bytes, is now MiB).
	out, runErr := runTool(ctx, c.NVBandwidth, append([]string{"-t"}, tests...)...)
	rep, err := parseNVBandwidth(out.stdout)
	if err != nil {
		if runErr != nil {
			m.add(errorf(comp, "%s", printable(runErr.Error())))
		} else {
			m.add(errorf(comp, "output not understood: %v", err))
		}
		return
	}
	devName := func(n int) (string, check.IDs, model) {
		d, ok := rep.devices[n]
		comp, ids := "cuda"+strconv.Itoa(n), check.IDs{}
		if ok && d.pci != "" {
			ids.PCIBusID = pciaddr.Normalize(d.pci)
			if lookup != nil {
				if lc, lids, ok := lookup(ids.PCIBusID); ok && lc != "" {
					comp, ids = lc, lids
				}
			}
		}
		return comp, ids, modelFor(floors(c), d.name)
	}
	var problems []string
	for _, test := range append(tests[:len(tests):len(tests)], nvbwLocal) {
		t := rep.tests[test]
		if t == nil {
			if test != nvbwLocal {
				problems = append(problems, test+": no result (waived or not run)")
			}
			continue
		}
		cells, err := t.cells()
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", test, err))
			continue
		}
		kind := nvbwKinds[test]
		for _, cell := range selectCells(kind, cells, c.P2P) {
			dev := cell.dst
			if kind != KindNVBandwidthH2D {
				dev = cell.src
			}
			name, ids, mdl := devName(dev)
			if kind == KindNVBandwidthP2P {
				peer, _, _ := devName(cell.dst)
				name, ids = name+"-"+peer, check.IDs{}
			}
			j := mdl.judge(name, kind, "nvbandwidth "+kindLabel(kind), cell.gbps)
			j.ids = ids
			if kind == KindNVBandwidthD2D {
				// nvbandwidth counts a local copy's bytes once.
				j.value *= 2
				j.counts = "read+write"
			}
			if math.IsNaN(cell.gbps) {
				m.add(nvbwNA(j))
				continue
			}
			m.addFigure(j.verdict())
		}
	}
	if runErr != nil {
		problems = append(problems, runErr.Error())
	}
	if len(problems) > 0 {
		// One result for the whole run: several under one component
		// would read as flapping.
		m.add(errorf(comp, "%s", printable(strings.Join(problems, "; "))))
	}
}

// nvbwNA judges a pair nvbandwidth could not measure ("N/A": no peer
// access). Where the model has a P2P floor its GPUs must reach each
// other, so that is a FAIL; elsewhere it is only reported.
func nvbwNA(j judged) check.Result {
	r := check.Result{Component: figureComponent(j.component, j.kind), IDs: j.ids, Status: check.OK, Action: check.ActionNone,
		Message: j.label + " N/A: no peer access (" + j.noFloor + ")"}
	if j.floor > 0 {
		r.Status, r.Action = check.Fail, check.ActionDrain
		r.Message = fmt.Sprintf("%s N/A: no peer access, floor %g (%s)", j.label, j.floor, j.model)
	}
	return r
}

// selectCells keeps the figures gpuhc judges: every device once for host
// copies and local copies, the configured pairs for peer copies.
func selectCells(kind string, cells []nvbwCell, p2p string) []nvbwCell {
	if kind != KindNVBandwidthP2P {
		return cells
	}
	var devs []int
	by := map[[2]int]nvbwCell{}
	for _, c := range cells {
		if c.src == c.dst {
			continue
		}
		by[[2]int{c.src, c.dst}] = c
		for _, d := range []int{c.src, c.dst} {
			if !slices.Contains(devs, d) {
				devs = append(devs, d)
			}
		}
	}
	sort.Ints(devs)
	var out []nvbwCell
	switch p2p {
	case "off":
	case "all":
		for _, a := range devs {
			for _, b := range devs {
				if c, ok := by[[2]int{a, b}]; ok {
					out = append(out, c)
				}
			}
		}
	default:
		for i, a := range devs {
			if c, ok := by[[2]int{a, devs[(i+1)%len(devs)]}]; ok {
				out = append(out, c)
			}
		}
	}
	return out
}
