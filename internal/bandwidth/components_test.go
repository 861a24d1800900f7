package bandwidth

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

// assertUniqueComponents fails for two results of one run under one
// component: the policy engine remembers statuses by check and component,
// and would read them as one status flapping.
func assertUniqueComponents(t *testing.T, rs []check.Result) {
	t.Helper()
	seen := map[string]int{}
	for _, r := range rs {
		seen[r.Component]++
	}
	for c, n := range seen {
		if n > 1 {
			t.Errorf("component %q has %d results:\n%s", c, n, strings.Join(summary(rs), "\n"))
		}
	}
}

// components lists the results' components in order.
func components(rs []check.Result) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Component)
	}
	return out
}

// fullRunComponents are the components of a healthy run of everything on
// two GPUs named gpu0 and gpu1, with p2p = "all" and one HCA pair.
var fullRunComponents = []string{
	"gpu0/h2d", "gpu0/d2h", "gpu0/d2d", "gpu1/h2d", "gpu1/d2h", "gpu1/d2d", "gpu0-gpu1/p2p", "gpu1-gpu0/p2p",
	"gpu0/nvbandwidth.h2d", "gpu1/nvbandwidth.h2d", "gpu0/nvbandwidth.d2h", "gpu1/nvbandwidth.d2h",
	"gpu0-gpu1/nvbandwidth.p2p", "gpu1-gpu0/nvbandwidth.p2p", "gpu0/nvbandwidth.d2d", "gpu1/nvbandwidth.d2d",
	"mlx5_0-mlx5_1/ib_write", "all-gpus",
}

// fullConfig turns every measurement on, the tools being fakes that print
// healthy H100 output for two GPUs at the fake drivers' PCI addresses.
func fullConfig(t *testing.T, c config.Bandwidth) config.Bandwidth {
	t.Helper()
	c.P2P = "all"
	c.NVBandwidth = catTool(t, "testdata/nvbandwidth/h100x2-v0.8.txt", "0")
	tool, _ := fakePerftest(t, "ndr-client.txt", 0, "0", "")
	c.IBWriteBW, c.IBWritePairs, c.IBWriteGbps = tool, []string{"mlx5_0:mlx5_1"}, 360
	c.AllReducePerf = catTool(t, "testdata/all_reduce_perf/h100x8.txt", "0")
	c.AllReduceGBps = 400
	return c
}

// assertFigures checks that figures keep the bare component with the kind
// apart, and name each measurement once.
func assertFigures(t *testing.T, figs []Figure) {
	t.Helper()
	seen := map[[2]string]bool{}
	for _, f := range figs {
		if strings.Contains(f.Component, "/") || f.Kind == "" || seen[[2]string{f.Component, f.Kind}] {
			t.Errorf("figure %+v: want a bare component, a kind, once", f)
		}
		seen[[2]string{f.Component, f.Kind}] = true
	}
}

// Every result of a run has a component of its own, whatever the run
// finds: healthy, every kind of fault and error at once, cut short.
func TestFullRunComponentsUnique(t *testing.T) {
	illegal := &cudaError{Op: "cuMemcpyDtoD_v2", Code: 700}
	tests := []struct {
		name    string
		g       *goCUDA
		setup   func(t *testing.T, c *config.Bandwidth)
		timeout time.Duration
		want    []string // results that must be among the output
	}{
		{"healthy", &goCUDA{n: 2, gbps: map[string]float64{KindH2D: 55, KindD2H: 54, KindD2D: 2100, KindP2P: 389}},
			func(*testing.T, *config.Bandwidth) {}, 10 * time.Second, nil},
		{"faults and errors", &goCUDA{n: 2, gbps: map[string]float64{KindH2D: 20, KindP2P: 389}, fail: map[string]error{KindD2D: illegal}},
			func(t *testing.T, c *config.Bandwidth) {
				c.NVBandwidth = catTool(t, "testdata/nvbandwidth/h100x2-v0.8.txt", "137")
				tool, _ := fakePerftest(t, "completion-error-client.txt", 0, "1", "")
				c.IBWriteBW = tool
				c.IBWritePairs = []string{"mlx5_0:mlx5_1", "mlx5_0", "mlx5_0:mlx5_1", "mlx5_2:mlx5_2"}
				c.AllReducePerf = catTool(t, "testdata/all_reduce_perf/h100x8-wrong.txt", "0")
			}, 10 * time.Second, []string{
				"gpu0/h2d FAIL H2D 20.0 GB/s < floor 48", "gpu1/h2d FAIL H2D 20.0 GB/s < floor 48",
				"gpu0/d2d ERROR D2D: cuMemcpyDtoD_v2", "gpu1/d2d ERROR D2D: cuMemcpyDtoD_v2",
				"gpu0/nvbandwidth.h2d OK", "nvbandwidth ERROR ",
				"mlx5_0-mlx5_1/ib_write ERROR ib_write_bw: ",
				`ib_write_bw ERROR checks.bandwidth.ib_write_pairs: "mlx5_0": want two HCA names such as "mlx5_0:mlx5_1"; "mlx5_2:mlx5_2": a pair needs two different HCAs`,
				"all-gpus FAIL all_reduce_perf: 4096 wrong values",
			}},
		{"cut short", &goCUDA{n: 2, block: KindD2H}, func(*testing.T, *config.Bandwidth) {}, 300 * time.Millisecond, []string{
			"gpu0/h2d OK", "host ERROR out of time after 1 of 8 measurements (D2H copy on gpu0",
			"nvbandwidth ERROR ", "mlx5_0-mlx5_1/ib_write ERROR ib_write_bw: ", "all-gpus ERROR ",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fullConfig(t, testConfig())
			tt.setup(t, &c)
			tt.g.unblock = make(chan struct{})
			t.Cleanup(func() { close(tt.g.unblock) })
			ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			figs, rs := measure(ctx, c, gpuLookup, func(string) (cudaAPI, error) { return tt.g, nil })
			assertUniqueComponents(t, rs)
			assertFigures(t, figs)
			got := summary(rs)
			for _, w := range tt.want {
				if !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, w) }) {
					t.Errorf("missing %q in\n%s", w, strings.Join(got, "\n"))
				}
			}
			if tt.want != nil {
				return
			}
			if !slices.Equal(components(rs), fullRunComponents) || check.Worst(rs) != check.OK {
				t.Errorf("healthy run:\n%s\nwant all OK, components %q", strings.Join(got, "\n"), fullRunComponents)
			}
			if len(figs) != len(fullRunComponents) || figs[0].Component != "gpu0" || figs[0].Kind != KindH2D {
				t.Errorf("figures %+v", figs)
			}
		})
	}
}

// A device nvbandwidth lists twice (one GPU at two ordinals) would give
// two results under one component: the second gets a number rather than
// a shared key.
func TestNVBandwidthDeviceTwiceStaysUnique(t *testing.T) {
	b := readSample(t, "nvbandwidth/h100x2-v0.8.txt")
	b = []byte(strings.Replace(string(b), "(00000000:2b:00)", "(00000000:1b:00)", 1))
	p := filepath.Join(t.TempDir(), "twice.txt")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	c := toolConfig()
	c.NVBandwidth = catTool(t, p, "0")
	_, rs := Measure(context.Background(), c, gpuLookup)
	assertUniqueComponents(t, rs)
	if got := components(rs); !slices.Contains(got, "gpu0/nvbandwidth.h2d") || !slices.Contains(got, "gpu0/nvbandwidth.h2d#2") {
		t.Errorf("components %q", got)
	}
}

func TestUniqueComponents(t *testing.T) {
	tests := []struct{ in, want []string }{
		{[]string{"gpu0/h2d", "gpu0/d2h", "host"}, []string{"gpu0/h2d", "gpu0/d2h", "host"}},
		{[]string{"gpu0/h2d", "gpu0/h2d", "gpu0/h2d"}, []string{"gpu0/h2d", "gpu0/h2d#2", "gpu0/h2d#3"}},
		{[]string{"x", "x#2", "x"}, []string{"x", "x#2", "x#3"}},
		{nil, nil},
	}
	for _, tt := range tests {
		var rs []check.Result
		for _, c := range tt.in {
			rs = append(rs, check.Result{Component: c})
		}
		uniqueComponents(rs)
		if got := components(rs); !slices.Equal(got, tt.want) {
			t.Errorf("%q: got %q, want %q", tt.in, got, tt.want)
		}
	}
}
