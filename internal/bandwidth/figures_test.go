package bandwidth

import (
	"slices"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
)

// Every figure's result carries it as a check.Figure, for the event log
// and metrics: named by kind, in GB/s, with its floor (0 unjudged); the
// figures match Measure's own one for one; results without a figure
// (ERRORs) carry none.
func TestResultsCarryFigures(t *testing.T) {
	g := &goCUDA{n: 2, names: []string{"NVIDIA H100 80GB HBM3", "Unknown GPU"},
		gbps: map[string]float64{KindH2D: 31, KindD2H: 54.123456789, KindD2D: 2100, KindP2P: 389},
		fail: map[string]error{}}
	figs, rs, _ := runSession(t, testConfig(), g, 5*time.Second)
	type fig struct {
		component string
		status    check.Status
		figure    check.Figure
	}
	want := []fig{
		{"gpu0/h2d", check.Fail, check.Figure{Name: "h2d", Value: 31, Unit: "GB/s", Floor: 48}},
		{"gpu0/d2h", check.OK, check.Figure{Name: "d2h", Value: 54.1235, Unit: "GB/s", Floor: 48}},
		{"gpu0/d2d", check.OK, check.Figure{Name: "d2d", Value: 2100, Unit: "GB/s", Floor: 1500}},
		{"gpu1/h2d", check.OK, check.Figure{Name: "h2d", Value: 31, Unit: "GB/s"}}, // no floor for its model
		{"gpu1/d2h", check.OK, check.Figure{Name: "d2h", Value: 54.1235, Unit: "GB/s"}},
		{"gpu1/d2d", check.OK, check.Figure{Name: "d2d", Value: 2100, Unit: "GB/s"}},
		{"gpu0-gpu1/p2p", check.OK, check.Figure{Name: "p2p", Value: 389, Unit: "GB/s", Floor: 335}},
		{"gpu1-gpu0/p2p", check.OK, check.Figure{Name: "p2p", Value: 389, Unit: "GB/s"}},
	}
	if len(rs) != len(want) || len(figs) != len(want) {
		t.Fatalf("%d results, %d figures, want %d:\n%q", len(rs), len(figs), len(want), summary(rs))
	}
	for i, w := range want {
		r := rs[i]
		if r.Component != w.component || r.Status != w.status || !slices.Equal(r.Figures, []check.Figure{w.figure}) {
			t.Errorf("result %d: %s %s %+v, want %s %s %+v", i, r.Component, r.Status, r.Figures, w.component, w.status, w.figure)
		}
		if f := figs[i]; f.Kind != r.Figures[0].Name || sig6(f.GBps) != r.Figures[0].Value || f.Floor != r.Figures[0].Floor {
			t.Errorf("Measure's figure %+v does not match the result's %+v", f, r.Figures)
		}
	}

	// A copy that failed has no figure.
	g = &goCUDA{n: 1, fail: map[string]error{KindD2H: &cudaError{Op: "cuMemcpyDtoH", Code: 700}}}
	_, rs, _ = runSession(t, testConfig(), g, 5*time.Second)
	for _, r := range rs {
		if (r.Status == check.Error) != (r.Figures == nil) {
			t.Errorf("%s %s carries %+v", r.Component, r.Status, r.Figures)
		}
	}
}

// Tools' figures in Gb/s (ib_write_bw) are carried in GB/s, floor too,
// as Figure has them.
func TestVerdictFigureUnits(t *testing.T) {
	tests := []struct {
		j    judged
		want check.Figure
	}{
		{judged{component: "mlx5_0-mlx5_1", kind: KindIBWrite, label: "ib_write_bw", unit: "Gb/s", value: 391.38, floor: 360},
			check.Figure{Name: KindIBWrite, Value: 48.9225, Unit: "GB/s", Floor: 45}},
		{judged{component: "mlx5_0-mlx5_1", kind: KindIBWrite, label: "ib_write_bw", unit: "Gb/s", value: 195.91, noFloor: "no floor"},
			check.Figure{Name: KindIBWrite, Value: 24.4887, Unit: "GB/s"}},
		{judged{component: "all-gpus", kind: KindAllReduce, label: "all_reduce_perf", unit: "GB/s", value: 480.5, floor: 400},
			check.Figure{Name: KindAllReduce, Value: 480.5, Unit: "GB/s", Floor: 400}},
		{judged{component: "gpu0", kind: KindNVBandwidthH2D, label: "nvbandwidth H2D", unit: "GB/s", value: 0.000123456789, floor: 48},
			check.Figure{Name: KindNVBandwidthH2D, Value: 0.000123457, Unit: "GB/s", Floor: 48}},
	}
	for _, tt := range tests {
		_, r := tt.j.verdict()
		if !slices.Equal(r.Figures, []check.Figure{tt.want}) {
			t.Errorf("%s %v %s: figures %+v, want %+v", tt.j.kind, tt.j.value, tt.j.unit, r.Figures, tt.want)
		}
	}
}
