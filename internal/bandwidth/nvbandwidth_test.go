package bandwidth

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

func readSample(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The samples are nvbandwidth's output as its issues show it (v0.2, v0.7,
// v0.8), and H100 runs in the v0.8 layout of output.cpp.
func TestParseNVBandwidth(t *testing.T) {
	tests := []struct {
		sample  string
		devices int
		pci0    string
		name0   string
		tests   map[string]string // test -> "N cells" or the error
	}{
		{"h100x8-v0.8.txt", 8, "00000000:19:00", "NVIDIA H100 80GB HBM3", map[string]string{
			nvbwH2D: "8 cells", nvbwD2H: "8 cells", nvbwP2P: "64 cells"}},
		{"rtx4090x8-v0.2.txt", 8, "", "NVIDIA GeForce RTX 4090", map[string]string{
			nvbwH2D: "8 cells", nvbwD2H: "8 cells"}},
		{"a100x8-assert-v0.7.txt", 8, "00000000:34:00", "NVIDIA A100-SXM4-80GB", map[string]string{
			nvbwH2D: "8 cells", nvbwD2H: "8 cells", nvbwP2P: "no result matrix"}},
		{"h20-3e-local-copy-v0.8.txt", 8, "00000000:18:00", "NVIDIA H20-3e", map[string]string{
			nvbwLocal: "8 cells"}},
		{"a6000x6-read-v0.8.txt", 6, "00000000:01:00", "NVIDIA RTX A6000", map[string]string{
			nvbwP2P: "36 cells"}},
		{"nvbandwidth/h100x8-truncated.txt", 8, "00000000:19:00", "NVIDIA H100 80GB HBM3", map[string]string{
			nvbwH2D: "8 cells", nvbwD2H: "8 cells",
			nvbwP2P: `matrix row "2 389.92 389.12 N/A" does not match its 8 columns`}},
		{"nvbandwidth/negative.txt", 0, "", "", map[string]string{nvbwH2D: `matrix cell "-3.10" is not a bandwidth`}},
	}
	for _, tt := range tests {
		t.Run(tt.sample, func(t *testing.T) {
			name := tt.sample
			if !strings.Contains(name, "/") {
				name = "nvbandwidth/" + name
			}
			rep, err := parseNVBandwidth(readSample(t, name))
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.devices) != tt.devices || rep.devices[0].pci != tt.pci0 || rep.devices[0].name != tt.name0 {
				t.Errorf("devices %+v", rep.devices)
			}
			if len(rep.tests) != len(tt.tests) {
				t.Errorf("tests %v, want %v", rep.tests, tt.tests)
			}
			for test, want := range tt.tests {
				tc := rep.tests[test]
				if tc == nil {
					t.Errorf("%s missing", test)
					continue
				}
				cells, err := tc.cells()
				got := fmt.Sprintf("%d cells", len(cells))
				if err != nil {
					got = err.Error()
				}
				if got != want {
					t.Errorf("%s: %s, want %s", test, got, want)
				}
			}
		})
	}
}

func TestParseNVBandwidthGarbage(t *testing.T) {
	for _, in := range [][]byte{readSample(t, "nvbandwidth/garbage.txt"), nil, []byte("Device 999: x\nRunning a.\n")} {
		if rep, err := parseNVBandwidth(in); err == nil {
			t.Errorf("%q: parsed as %+v", in[:min(len(in), 20)], rep)
		}
	}
}

// Which way the figures go, from the matrix description.
func TestNVBandwidthDirections(t *testing.T) {
	rep, err := parseNVBandwidth(readSample(t, "nvbandwidth/h100x8-degraded-v0.8.txt"))
	if err != nil {
		t.Fatal(err)
	}
	find := func(test string, src, dst int) float64 {
		cells, err := rep.tests[test].cells()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cells {
			if c.src == src && c.dst == dst {
				return c.gbps
			}
		}
		return -1
	}
	if v := find(nvbwH2D, -1, 5); v != 24.81 {
		t.Errorf("H2D host->5 = %v", v)
	}
	if v := find(nvbwD2H, 0, -1); v != 54.92 {
		t.Errorf("D2H 0->host = %v", v)
	}
	if v := find(nvbwP2P, 3, 4); v != 151.07 {
		t.Errorf("P2P 3->4 = %v", v)
	}
	if v := find(nvbwP2P, 4, 4); !math.IsNaN(v) {
		t.Errorf("P2P 4->4 = %v, want N/A", v)
	}
	write := &nvbwTest{desc: "memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)", cols: []int{0, 1},
		rows: []nvbwRow{{0, []float64{math.NaN(), 276.07}}, {1, []float64{276.19, math.NaN()}}}}
	cells, err := write.cells()
	if err != nil || cells[1].src != 1 || cells[1].dst != 0 || cells[1].gbps != 276.07 {
		t.Errorf("write test cells %+v, %v", cells, err)
	}
	bidir := &nvbwTest{desc: "memcpy CE CPU(row) <-> GPU(column) bandwidth (GB/s)", cols: []int{0}, rows: []nvbwRow{{0, []float64{18.5}}}}
	if _, err := bidir.cells(); err == nil {
		t.Error("bidirectional matrix read as one direction")
	}
}

// nvbandwidthLookup names the H100 samples' GPUs by their addresses.
func nvbandwidthLookup(pci string) (string, check.IDs, bool) {
	for i, bus := range []string{"19", "3b", "4c", "5d", "9b", "bb", "cb", "db"} {
		if pci == "0000:"+bus+":00.0" {
			return fmt.Sprintf("gpu%d", i), check.IDs{GPUIndex: &i, PCIBusID: pci}, true
		}
	}
	return "", check.IDs{}, false
}

func toolConfig() config.Bandwidth {
	c := testConfig()
	c.Libcuda = ""
	return c
}

func TestNVBandwidthCheck(t *testing.T) {
	tests := []struct {
		name    string
		sample  string
		status  string
		p2p     string
		gpus    int
		results int      // how many
		want    []string // among them
		worst   check.Status
	}{
		{"healthy H100s", "h100x8-v0.8.txt", "0", "ring", 8, 24, []string{
			"gpu0/nvbandwidth.h2d OK nvbandwidth H2D 55.5 GB/s >= 48", "gpu5/nvbandwidth.d2h OK nvbandwidth D2H 55.4 GB/s >= 48",
			"gpu7-gpu0/nvbandwidth.p2p OK nvbandwidth P2P 389.4 GB/s >= 335"}, check.OK},
		{"all pairs", "h100x8-v0.8.txt", "0", "all", 8, 8 + 8 + 56, []string{"gpu3-gpu6/nvbandwidth.p2p OK nvbandwidth P2P 390.4 GB/s >= 335"}, check.OK},
		{"no pairs", "h100x8-v0.8.txt", "0", "off", 8, 16, nil, check.OK},
		{"degraded link and NVLink", "h100x8-degraded-v0.8.txt", "0", "ring", 8, 24, []string{
			"gpu5/nvbandwidth.h2d FAIL nvbandwidth H2D 24.8 GB/s < floor 48 (H100 80GB HBM3)",
			"gpu3-gpu4/nvbandwidth.p2p FAIL nvbandwidth P2P 151.1 GB/s < floor 335 (H100 80GB HBM3)"}, check.Fail},
		{"no peer access", "h100x8-nopeer-v0.8.txt", "0", "ring", 8, 24, []string{
			"gpu2-gpu3/nvbandwidth.p2p FAIL nvbandwidth P2P N/A: no peer access, floor 335 (H100 80GB HBM3)"}, check.Fail},
		{"pairs without floor", "a6000x6-read-v0.8.txt", "0", "ring", 6, 7, []string{
			"cuda5-cuda0/nvbandwidth.p2p OK nvbandwidth P2P 21.9 GB/s (no floor for NVIDIA RTX A6000)",
			"nvbandwidth ERROR host_to_device_memcpy_ce: no result (waived or not run); device_to_host_memcpy_ce: no result (waived or not run)"}, check.Error},
		{"old version, no addresses", "rtx4090x8-v0.2.txt", "0", "off", 8, 16, []string{
			"cuda2/nvbandwidth.h2d OK nvbandwidth H2D 23.9 GB/s (no floor for NVIDIA GeForce RTX 4090)"}, check.OK},
		{"local copy counted read+write", "h20-3e-local-copy-v0.8.txt", "0", "off", 8, 9, []string{
			"cuda0/nvbandwidth.d2d OK nvbandwidth D2D 2232.6 GB/s read+write (no floor for NVIDIA H20-3e)"}, check.Error},
		{"tool aborts mid-run", "a100x8-assert-v0.7.txt", "134", "ring", 8, 17, []string{
			"cuda0/nvbandwidth.h2d OK nvbandwidth H2D 24.1 GB/s >= 21",
			"nvbandwidth ERROR device_to_device_memcpy_read_ce: no result matrix; "}, check.Error},
		{"garbage", "garbage.txt", "0", "ring", 8, 1, []string{"nvbandwidth ERROR output not understood: no test results"}, check.Error},
		{"truncated", "h100x8-truncated.txt", "137", "ring", 8, 17, []string{
			`nvbandwidth ERROR device_to_device_memcpy_read_ce: matrix row "2 389.92 389.12 N/A" does not match its 8 columns; `}, check.Error},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := toolConfig()
			c.P2P = tt.p2p
			c.NVBandwidth = catTool(t, "testdata/nvbandwidth/"+tt.sample, tt.status)
			var m measurement
			m.nvbandwidth(context.Background(), c, nvbandwidthLookup, tt.gpus)
			got := summary(m.results)
			for _, w := range tt.want {
				if !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, w) }) {
					t.Errorf("missing %q", w)
				}
			}
			if len(got) != tt.results || check.Worst(m.results) != tt.worst {
				t.Errorf("%d results, worst %s; want %d, %s:\n%s", len(got), check.Worst(m.results), tt.results, tt.worst, strings.Join(got, "\n"))
			}
			for _, r := range m.results {
				if r.Status == check.Fail && r.Action != check.ActionDrain {
					t.Errorf("FAIL without drain: %+v", r)
				}
			}
		})
	}
}

func TestNVBandwidthArguments(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		p2p  string
		gpus int
		want string
	}{
		{"ring", 8, "-t host_to_device_memcpy_ce device_to_host_memcpy_ce device_to_device_memcpy_read_ce"},
		{"ring", -1, "-t host_to_device_memcpy_ce device_to_host_memcpy_ce device_to_device_memcpy_read_ce"},
		{"ring", 1, "-t host_to_device_memcpy_ce device_to_host_memcpy_ce"},
		{"off", 8, "-t host_to_device_memcpy_ce device_to_host_memcpy_ce"},
	} {
		c := toolConfig()
		c.P2P = tt.p2p
		c.NVBandwidth = fakeTool(t, `echo "$@" > `+dir+"/args")
		var m measurement
		m.nvbandwidth(context.Background(), c, nil, tt.gpus)
		b, _ := os.ReadFile(dir + "/args")
		if got := strings.TrimSpace(string(b)); got != tt.want {
			t.Errorf("p2p %s, %d GPUs: args %q, want %q", tt.p2p, tt.gpus, got, tt.want)
		}
	}
}

func TestNVBandwidthThroughMeasure(t *testing.T) {
	c := toolConfig()
	c.NVBandwidth = fakeTool(t, "/bin/sleep 30")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	figs, rs := Measure(ctx, c, nil)
	if got := summary(rs); len(got) != 1 || !strings.Contains(got[0], "nvbandwidth ERROR ") || !strings.Contains(got[0], "killed after") ||
		len(figs) != 0 || rs[0].Check != Name {
		t.Errorf("got %q", got)
	}
	c.NVBandwidth = "/nonexistent/nvbandwidth"
	if _, rs := Measure(context.Background(), c, nil); summary(rs)[0] != "nvbandwidth ERROR /nonexistent/nvbandwidth: not found" {
		t.Errorf("got %q", summary(rs))
	}
}
