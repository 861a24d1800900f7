package bandwidth

import (
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

// The default tables must catch the SXM parts by the names CUDA gives
// them and leave PCIe and NVL parts, whose peers are not all on NVLink,
// unjudged.
func TestDefaultFloorsMatchCUDANames(t *testing.T) {
	floors := config.DefaultBandwidthFloors()
	tests := []struct {
		name          string
		h2d, d2d, p2p float64
		known         bool
	}{
		{"NVIDIA H100 80GB HBM3", 48, 1500, 335, true},
		{"NVIDIA H200", 48, 1500, 335, true},
		{"NVIDIA A100-SXM4-80GB", 21, 850, 235, true},
		{"NVIDIA A100-SXM4-40GB", 21, 850, 235, true},
		{"A100-SXM4-40GB", 21, 850, 235, true}, // drivers before 470 had no vendor prefix
		{"NVIDIA A100-SXM-80GB", 21, 850, 235, true},
		{"NVIDIA B200", 48, 0, 335, true},
		{"NVIDIA H100 PCIe", 0, 0, 0, false},
		{"NVIDIA H100 NVL", 0, 0, 0, false},
		{"NVIDIA H200 NVL", 0, 0, 0, false},
		{"NVIDIA A100 80GB PCIe", 0, 0, 0, false},
		{"NVIDIA H800", 0, 0, 0, false},
		{"", 0, 0, 0, false},
	}
	for _, tt := range tests {
		m := modelFor(floors, tt.name)
		if m.known != tt.known || m.floorOf(KindH2D) != tt.h2d || m.floorOf(KindD2D) != tt.d2d ||
			m.floorOf(KindP2P) != tt.p2p || m.floorOf(KindNVBandwidthP2P) != tt.p2p {
			t.Errorf("%q: known %v h2d %v d2d %v p2p %v, want %v %v %v %v", tt.name, m.known,
				m.floorOf(KindH2D), m.floorOf(KindD2D), m.floorOf(KindP2P), tt.known, tt.h2d, tt.d2d, tt.p2p)
		}
	}
}

func TestFirstMatchingFloorWins(t *testing.T) {
	floors := []config.BandwidthFloor{
		{Model: "NVIDIA H100*", H2DGBps: 40},
		{Model: "NVIDIA H100 80GB HBM3", H2DGBps: 48},
		{Model: "[", H2DGBps: 99}, // a broken glob matches nothing
	}
	if got := modelFor(floors, "NVIDIA H100 80GB HBM3").floorOf(KindH2D); got != 40 {
		t.Errorf("floor %v, want the first table's 40", got)
	}
	if m := modelFor(floors, "["); m.known {
		t.Errorf("a broken glob matched: %+v", m)
	}
}

func TestVerdict(t *testing.T) {
	h100 := modelFor(config.DefaultBandwidthFloors(), "NVIDIA H100 80GB HBM3")
	b200 := modelFor(config.DefaultBandwidthFloors(), "NVIDIA B200")
	other := modelFor(config.DefaultBandwidthFloors(), "NVIDIA RTX A6000")
	p2pNoPeer := h100.judge("gpu0-gpu1", KindP2P, "P2P", 12.3)
	p2pNoPeer.note = "no peer access"
	d2d := h100.judge("gpu0", KindD2D, "D2D", 1210)
	d2d.counts = "read+write"
	tests := []struct {
		name   string
		j      judged
		status check.Status
		action check.Action
		msg    string
		floor  float64
	}{
		{"above the floor", h100.judge("gpu0", KindH2D, "H2D", 52.3), check.OK, check.ActionNone, "H2D 52.3 GB/s >= 48", 48},
		{"at the floor", h100.judge("gpu0", KindH2D, "H2D", 48), check.OK, check.ActionNone, "H2D 48.0 GB/s >= 48", 48},
		{"below the floor", h100.judge("gpu3", KindH2D, "H2D", 31), check.Fail, check.ActionDrain, "H2D 31.0 GB/s < floor 48 (H100 80GB HBM3)", 48},
		{"below with a note", p2pNoPeer, check.Fail, check.ActionDrain, "P2P 12.3 GB/s < floor 335 (H100 80GB HBM3; no peer access)", 335},
		{"read+write counted", d2d, check.Fail, check.ActionDrain, "D2D 1210.0 GB/s read+write < floor 1500 (H100 80GB HBM3)", 1500},
		{"unknown model", other.judge("gpu0", KindH2D, "H2D", 3), check.OK, check.ActionNone, "H2D 3.0 GB/s (no floor for NVIDIA RTX A6000)", 0},
		{"floor 0", b200.judge("gpu0", KindD2D, "D2D", 10), check.OK, check.ActionNone, "D2D 10.0 GB/s (no D2D floor for B200)", 0},
		{"Gb/s tool", judged{component: "mlx5_0-mlx5_1", kind: KindIBWrite, label: "ib_write_bw", unit: "Gb/s", value: 180.2, floor: 360},
			check.Fail, check.ActionDrain, "ib_write_bw 180.2 Gb/s < floor 360", 45},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, r := tt.j.verdict()
			if r.Status != tt.status || r.Action != tt.action || r.Message != tt.msg {
				t.Errorf("got %s %s %q, want %s %s %q", r.Status, r.Action, r.Message, tt.status, tt.action, tt.msg)
			}
			if f.Floor != tt.floor || f.Component != tt.j.component || f.Kind != tt.j.kind {
				t.Errorf("figure %+v, want floor %v", f, tt.floor)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
		ok   bool
	}{
		{[]float64{3, 1, 2}, 2, true},
		{[]float64{4, 1, 3, 2}, 2.5, true},
		{[]float64{5}, 5, true},
		{nil, 0, false},
		{[]float64{1, 0}, 0, false},
		{[]float64{1, -2}, 0, false},
	}
	for _, tt := range tests {
		if got, ok := median(tt.in); got != tt.want || ok != tt.ok {
			t.Errorf("median(%v) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestPrintable(t *testing.T) {
	if got := printable("a\x00b\nc\t d\xff"); got != "a b c d" {
		t.Errorf("printable: %q", got)
	}
	long := printable(strings.Repeat("é", 200))
	if len(long) > maxMessage || !strings.HasSuffix(long, "...") || !strings.HasPrefix(long, "é") || printable(long) != long {
		t.Errorf("long text: %d bytes %q", len(long), long[len(long)-8:])
	}
}
