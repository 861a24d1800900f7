package bandwidth

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The tools' output is judged against floors and can drain a node, so
// whatever a tool version prints is read as a figure or refused: never a
// negative, infinite or made-up bandwidth, never a wrong-value count
// lost. Seeds: the outputs in testdata, from real runs.
func addOutputs(f *testing.F, tool string) {
	paths, _ := filepath.Glob(filepath.Join("testdata", tool, "*.txt"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
}

// bandwidthOK is a figure a floor may be compared with.
func bandwidthOK(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }

func FuzzParseNVBandwidth(f *testing.F) {
	addOutputs(f, "nvbandwidth")
	f.Add([]byte("Device 64: x\nRunning t.\nmemcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)\n 1 0\n 0 1 2\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		rep, err := parseNVBandwidth(out)
		if err != nil {
			return
		}
		for n := range rep.devices {
			if n < 0 || n >= maxNVBWDevices {
				t.Fatalf("device %d", n)
			}
		}
		for name, test := range rep.tests {
			if test.cols != nil && (test.status != "" || len(test.cols) > maxNVBWDevices || !slices.IsSorted(test.cols) || len(test.rows) == 0) ||
				len(test.status) > maxMessage || printable(test.status) != test.status {
				t.Fatalf("%s: %+v", name, test)
			}
			cells, err := test.cells()
			for _, c := range cells {
				if !math.IsNaN(c.gbps) && !bandwidthOK(c.gbps) || !slices.Contains(test.cols, c.src) && !slices.Contains(test.cols, c.dst) {
					t.Fatalf("%s: cell %+v of %+v", name, c, test)
				}
			}
			if err == nil && test.cols == nil {
				t.Fatalf("%s: cells without a matrix", name)
			}
		}
	})
}

func FuzzParseIBWriteBW(f *testing.F) {
	addOutputs(f, "ib_write_bw")
	f.Add([]byte(" #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n 65536 5000 1 1e309 1\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		if v, err := parseIBWriteBW(out); err == nil && !bandwidthOK(v) {
			t.Fatalf("parseIBWriteBW(%q) = %v", out, v)
		}
	})
}

func FuzzParseAllReduce(f *testing.F) {
	addOutputs(f, "all_reduce_perf")
	f.Add([]byte("# size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n" +
		"1 1 float sum -1 1 1 1 9223372036854775807 1 1 1 9223372036854775807\n# Avg bus bandwidth : 1\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		r, err := parseAllReduce(out)
		if err == nil && (!bandwidthOK(r.busbw) || !bandwidthOK(r.avg) || r.wrong < -1 || r.oob < -1 || r.size < 0) {
			t.Fatalf("parseAllReduce(%q) = %+v", out, r)
		}
	})
}
