package config

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestValidateBandwidth(t *testing.T) {
	const at = "checks.bandwidth."
	tests := []struct {
		name string
		set  func(b *Bandwidth)
		key  string // "" when valid
		msg  string
	}{
		{"libcuda by name", func(b *Bandwidth) { b.Libcuda = "libcuda.so" }, "", ""},
		{"libcuda absolute", func(b *Bandwidth) { b.Libcuda = "/usr/lib64/libcuda.so.1" }, "", ""},
		{"libcuda off", func(b *Bandwidth) { b.Libcuda = "" }, "", ""},
		{"libcuda relative path", func(b *Bandwidth) { b.Libcuda = "lib/libcuda.so.1" }, at + "libcuda", "absolute path"},
		{"size", func(b *Bandwidth) { b.Size = "1GiB" }, "", ""},
		{"size not a size", func(b *Bandwidth) { b.Size = "big" }, at + "size", "bad size"},
		{"size too small", func(b *Bandwidth) { b.Size = "64KiB" }, at + "size", "want 1MiB to 4GiB"},
		{"size too large", func(b *Bandwidth) { b.Size = "8GiB" }, at + "size", "want 1MiB to 4GiB"},
		{"iterations zero", func(b *Bandwidth) { b.Iterations = 0 }, at + "iterations", "want 1 to 100"},
		{"iterations many", func(b *Bandwidth) { b.Iterations = 101 }, at + "iterations", "want 1 to 100"},
		{"p2p all", func(b *Bandwidth) { b.P2P = "all" }, "", ""},
		{"p2p unknown", func(b *Bandwidth) { b.P2P = "both" }, at + "p2p", `want one of ["all" "ring" "off"]`},
		{"no floors", func(b *Bandwidth) { b.Floor = nil }, "", ""},
		{"floor bad glob", func(b *Bandwidth) { b.Floor[0].Model = "NVIDIA [H100" }, at + "floor.model", "not a valid glob"},
		{"floor without model", func(b *Bandwidth) { b.Floor[1].Model = " " }, at + "floor.model", "not a valid glob"},
		{"floor twice", func(b *Bandwidth) { b.Floor[1].Model = b.Floor[0].Model }, at + "floor.model", "listed twice"},
		{"floor negative", func(b *Bandwidth) { b.Floor[0].H2DGBps = -1 }, at + "floor.h2d_gbps", "want 0"},
		{"floor NaN", func(b *Bandwidth) { b.Floor[2].P2PGBps = math.NaN() }, at + "floor.p2p_gbps", "want 0"},
		{"floor infinite", func(b *Bandwidth) { b.Floor[3].D2HGBps = math.Inf(1) }, at + "floor.d2h_gbps", "want 0"},
		{"tools", func(b *Bandwidth) {
			b.NVBandwidth, b.AllReducePerf, b.IBWriteBW = "/usr/bin/nvbandwidth", "/opt/nccl-tests/all_reduce_perf", "/usr/bin/ib_write_bw"
			b.IBWritePairs, b.IBWriteArgs, b.IBWriteGbps, b.AllReduceGBps = []string{"mlx5_0:mlx5_1"}, []string{"-x", "3"}, 360, 400
		}, "", ""},
		{"tool relative", func(b *Bandwidth) { b.NVBandwidth = "nvbandwidth" }, at + "nvbandwidth", "absolute"},
		{"all_reduce_perf relative", func(b *Bandwidth) { b.AllReducePerf = "bin/all_reduce_perf" }, at + "all_reduce_perf", "absolute"},
		{"ib_write_bw without pairs", func(b *Bandwidth) { b.IBWriteBW = "/usr/bin/ib_write_bw" }, at + "ib_write_pairs", "no HCA pairs"},
		{"pairs without ib_write_bw", func(b *Bandwidth) { b.IBWritePairs = []string{"mlx5_0:mlx5_1"} }, at + "ib_write_pairs", "not set"},
		{"pair of one", func(b *Bandwidth) {
			b.IBWriteBW, b.IBWritePairs = "/usr/bin/ib_write_bw", []string{"mlx5_0:mlx5_1", "mlx5_2"}
		}, at + "ib_write_pairs", "two HCA names"},
		{"pair with itself", func(b *Bandwidth) {
			b.IBWriteBW, b.IBWritePairs = "/usr/bin/ib_write_bw", []string{"mlx5_0:mlx5_0"}
		}, at + "ib_write_pairs", "two different HCAs"},
		{"pair with a space", func(b *Bandwidth) {
			b.IBWriteBW, b.IBWritePairs = "/usr/bin/ib_write_bw", []string{"mlx5_0:mlx5 1"}
		}, at + "ib_write_pairs", "two HCA names"},
		{"empty argument", func(b *Bandwidth) { b.IBWriteArgs = []string{"-x", ""} }, at + "ib_write_args", "not a command-line argument"},
		{"argument with a newline", func(b *Bandwidth) { b.IBWriteArgs = []string{"-x\n3"} }, at + "ib_write_args", "not a command-line argument"},
		{"ib floor negative", func(b *Bandwidth) { b.IBWriteGbps = -360 }, at + "ib_write_gbps", "want 0"},
		{"all_reduce floor NaN", func(b *Bandwidth) { b.AllReduceGBps = math.NaN() }, at + "all_reduce_gbps", "want 0"},
		{"timeout 30s", func(b *Bandwidth) { b.Timeout = Duration{30 * time.Second} }, "", ""},
		{"timeout over the deadline", func(b *Bandwidth) { b.Timeout = Duration{time.Minute} }, at + "timeout", "longer than the deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Checks.Bandwidth.Floor = DefaultBandwidthFloors()
			tt.set(&c.Checks.Bandwidth)
			wantValidation(t, c, tt.key, tt.msg)
		})
	}
}

// A site's floor tables replace the defaults (arrays are never merged),
// per host too, and a typo in one is caught with its line.
func TestLoadBandwidthFloors(t *testing.T) {
	p := writeFile(t, doc(
		`[[checks.bandwidth.floor]]`,
		`model = "NVIDIA H100 80GB HBM3"`,
		`h2d_gbps = 50.0`,
		`[[host]]`,
		`match = "gpu[001-002]"`,
		`[[host.checks.bandwidth.floor]]`,
		`model = "NVIDIA H200"`,
		`p2p_gbps = 340.0`,
	))
	c, err := Load(p, "gpu003")
	if err != nil {
		t.Fatal(err)
	}
	if want := []BandwidthFloor{{Model: "NVIDIA H100 80GB HBM3", H2DGBps: 50}}; !slices.Equal(c.Checks.Bandwidth.Floor, want) {
		t.Errorf("gpu003 floors %+v", c.Checks.Bandwidth.Floor)
	}
	c, err = Load(p, "gpu001")
	if err != nil {
		t.Fatal(err)
	}
	if want := []BandwidthFloor{{Model: "NVIDIA H200", P2PGBps: 340}}; !slices.Equal(c.Checks.Bandwidth.Floor, want) {
		t.Errorf("gpu001 floors %+v", c.Checks.Bandwidth.Floor)
	}
	if d := DefaultBandwidthFloors(); len(d) != 4 || d[0].H2DGBps != 48 {
		t.Errorf("loading changed the defaults: %+v", d)
	}

	p = writeFile(t, doc(
		`[checks.bandwidth]`,
		`p2p = "ring"`,
		`[[checks.bandwidth.floor]]`,
		`model = "NVIDIA H200"`,
		`h2d_gpbs = 48.0`,
	))
	_, err = Load(p, "gpu001")
	if got := found(t, err, p); !slices.Equal(got, []string{"5 checks.bandwidth.floor.h2d_gpbs"}) {
		t.Errorf("got %q\n%v", got, err)
	}
	p = writeFile(t, doc(
		`[[checks.bandwidth.floor]]`,
		`model = "NVIDIA H200"`,
		`[[checks.bandwidth.floor]]`,
		`model = "NVIDIA H200"`,
		`p2p_gbps = -1.0`,
	))
	_, err = Load(p, "gpu001")
	if got := found(t, err, p); !slices.Equal(got, []string{"4 checks.bandwidth.floor.model", "5 checks.bandwidth.floor.p2p_gbps"}) {
		t.Errorf("got %q\n%v", got, err)
	}
}

// No floor tables in the configuration: the built-in table applies (in
// the bandwidth package); the default configuration lists none, so that
// a site's tables never merge into built-in entries.
func TestBandwidthDefaults(t *testing.T) {
	b := Default().Checks.Bandwidth
	if b.Floor != nil || b.Libcuda != "libcuda.so.1" || b.Size != "256MiB" || b.Iterations != 5 || b.P2P != "ring" ||
		b.NVBandwidth != "" || b.IBWriteBW != "" || b.AllReducePerf != "" || !b.Enabled {
		t.Errorf("defaults %+v", b)
	}
}

func TestParseHCAPair(t *testing.T) {
	if s, c, err := ParseHCAPair("mlx5_0:mlx5_1"); s != "mlx5_0" || c != "mlx5_1" || err != nil {
		t.Errorf("got %q %q %v", s, c, err)
	}
	for _, bad := range []string{"", ":", "mlx5_0:", ":mlx5_1", "a:b:c", "mlx5_0/1:mlx5_1", "a:a"} {
		if _, _, err := ParseHCAPair(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
