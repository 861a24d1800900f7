package config

import (
	"fmt"
	"math"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Bandwidth configures the bandwidth validation
// (docs/architecture.md#bandwidth-floors):
// copies measured in process through the CUDA driver, and optional runs
// of nvbandwidth, ib_write_bw and all_reduce_perf where they are installed.
type Bandwidth struct {
	Common
	// Libcuda is the CUDA driver library dlopened at run time: a bare
	// name searched like any shared library, or an absolute path. ""
	// turns the in-process measurement off (the tools still run).
	Libcuda string `toml:"libcuda"`
	// Size is the bytes of one copy ("256MiB"); far above the L2 cache
	// (50 MB on H100), or device-to-device figures measure the cache.
	Size string `toml:"size" unit:"bytes (a size)"`
	// Iterations are timed copies after one warm-up; the median counts.
	Iterations int `toml:"iterations"`
	// P2P picks the GPU pairs measured: "all" ordered pairs, "ring"
	// (i -> i+1 mod n) or "off".
	P2P string `toml:"p2p"`
	// Floor holds the per-model floors; the first whose model glob
	// matches the CUDA device name applies. None: the built-in table,
	// DefaultBandwidthFloors (kept out of the defaults so that a site's
	// tables replace it whole, never merge into its entries).
	Floor []BandwidthFloor `toml:"floor"`

	// Absolute paths of the tools; "" leaves a tool out.
	NVBandwidth string `toml:"nvbandwidth"`
	IBWriteBW   string `toml:"ib_write_bw"`
	// IBWritePairs are "server:client" HCA pairs, both on this node.
	IBWritePairs []string `toml:"ib_write_pairs"`
	// IBWriteArgs are appended to both ib_write_bw sides (e.g. "-x", "3").
	IBWriteArgs []string `toml:"ib_write_args"`
	// IBWriteGbps is the floor of each pair's average, in Gb/s; 0: report.
	IBWriteGbps   float64 `toml:"ib_write_gbps" unit:"Gb/s"`
	AllReducePerf string  `toml:"all_reduce_perf"`
	// AllReduceGBps is the floor of the bus bandwidth at 1 GiB, GB/s;
	// 0: report only.
	AllReduceGBps float64 `toml:"all_reduce_gbps" unit:"GB/s"`
}

// BandwidthFloor is the least bandwidth, in GB/s (1e9 bytes/s), of one
// GPU model; 0 leaves that measurement unjudged.
type BandwidthFloor struct {
	// Model is a glob on the CUDA device name ("NVIDIA H100 80GB HBM3").
	Model   string  `toml:"model"`
	H2DGBps float64 `toml:"h2d_gbps" unit:"GB/s"`
	D2HGBps float64 `toml:"d2h_gbps" unit:"GB/s"`
	// D2DGBps counts read plus write bytes of a device-local copy.
	D2DGBps float64 `toml:"d2d_gbps" unit:"GB/s"`
	P2PGBps float64 `toml:"p2p_gbps" unit:"GB/s"`
}

// DefaultBandwidthFloors are the starting floors, used when the
// configuration lists none (docs/architecture.md#bandwidth-floors). The CUDA
// device names are what the driver reports for the SXM parts; PCIe and
// NVL variants ("NVIDIA H100 PCIe", "NVIDIA H200 NVL") deliberately match
// nothing, since their P2P goes over PCIe or bridges to only some peers.
//
// The device-to-device floors are 75% of what a copy-engine copy
// (cuMemcpyDtoD, as here) measures, not of the HBM data sheet figure
// (H100 SXM 3.35 TB/s, H200 4.8 TB/s, A100 40GB 1.555 TB/s, A100 80GB
// 2.039 TB/s, B200 8 TB/s): the copy engines top out far below HBM.
// nvbandwidth's device_local_copy reports 1116 GB/s (counted once, so
// 2232 GB/s read+write) on an H20-3e with H200's 4.8 TB/s memory
// (NVIDIA/nvbandwidth#48); CUDA's bandwidthTest reports 1157 GB/s
// read+write on an A100-SXM4-40GB. Hopper: 75% of ~2 TB/s; A100: 75% of
// ~1.15 TB/s. B200 has no public copy-engine figure yet: not judged.
func DefaultBandwidthFloors() []BandwidthFloor {
	return []BandwidthFloor{
		{Model: "NVIDIA H100 80GB HBM3", H2DGBps: 48, D2HGBps: 48, D2DGBps: 1500, P2PGBps: 335},
		{Model: "NVIDIA H200", H2DGBps: 48, D2HGBps: 48, D2DGBps: 1500, P2PGBps: 335},
		{Model: "*A100-SXM*", H2DGBps: 21, D2HGBps: 21, D2DGBps: 850, P2PGBps: 235},
		// PCIe Gen5 x16 like Hopper; NVLink 5 doubles NVLink 4, so H100's
		// P2P floor is a loose but safe bound until one is measured.
		{Model: "NVIDIA B200", H2DGBps: 48, D2HGBps: 48, D2DGBps: 0, P2PGBps: 335},
	}
}

func defaultBandwidth() Bandwidth {
	return Bandwidth{
		// Timeout 0: check_timeout. A longer default would make every
		// configuration with a shorter deadline invalid.
		Common:     Common{Enabled: true},
		Libcuda:    "libcuda.so.1",
		Size:       "256MiB",
		Iterations: 5,
		P2P:        "ring",
	}
}

// Bounds of checks.bandwidth.size: below 1 MiB launch overhead dominates;
// above 4 GiB the pinned host buffer is a burden on a node about to run a job.
const (
	minBandwidthSize = 1 << 20
	maxBandwidthSize = 4 << 30
)

func (ps *problems) bandwidth(c Bandwidth, deadline time.Duration) {
	const at = "checks.bandwidth."
	ps.timeout(at+"timeout", c.Timeout.Duration, deadline, true)
	if c.Libcuda != "" && strings.Contains(c.Libcuda, "/") && !filepath.IsAbs(c.Libcuda) {
		ps.add(at+"libcuda", "%q: want a library name such as libcuda.so.1 or an absolute path", c.Libcuda)
	}
	if n, err := ParseSize(c.Size); err != nil {
		ps.add(at+"size", "%v", err)
	} else if n < minBandwidthSize || n > maxBandwidthSize {
		ps.add(at+"size", "%q: want 1MiB to 4GiB", c.Size)
	}
	if c.Iterations < 1 || c.Iterations > 100 {
		ps.add(at+"iterations", "want 1 to 100, got %d", c.Iterations)
	}
	ps.oneOf(at+"p2p", c.P2P, "all", "ring", "off")
	seen := map[string]bool{}
	for i, f := range c.Floor {
		fat := fmt.Sprintf("%sfloor[%d]", at, i)
		if _, err := path.Match(f.Model, ""); err != nil || strings.TrimSpace(f.Model) == "" {
			ps.add(fat+".model", "%q is not a valid glob on a CUDA device name", f.Model)
		}
		if seen[f.Model] {
			ps.add(fat+".model", "%q is listed twice", f.Model)
		}
		seen[f.Model] = true
		for key, v := range map[string]float64{"h2d_gbps": f.H2DGBps, "d2h_gbps": f.D2HGBps, "d2d_gbps": f.D2DGBps, "p2p_gbps": f.P2PGBps} {
			ps.gbps(fat+"."+key, v)
		}
	}
	ps.absPath(at+"nvbandwidth", c.NVBandwidth, true)
	ps.absPath(at+"ib_write_bw", c.IBWriteBW, true)
	ps.absPath(at+"all_reduce_perf", c.AllReducePerf, true)
	switch {
	case c.IBWriteBW != "" && len(c.IBWritePairs) == 0:
		ps.add(at+"ib_write_pairs", "ib_write_bw is set but no HCA pairs are listed")
	case c.IBWriteBW == "" && len(c.IBWritePairs) > 0:
		ps.add(at+"ib_write_pairs", "HCA pairs are listed but ib_write_bw is not set")
	}
	for i, p := range c.IBWritePairs {
		if _, _, err := ParseHCAPair(p); err != nil {
			ps.add(fmt.Sprintf("%sib_write_pairs[%d]", at, i), "%v", err)
		}
	}
	for i, a := range c.IBWriteArgs {
		if a == "" || strings.ContainsFunc(a, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			ps.add(fmt.Sprintf("%sib_write_args[%d]", at, i), "%q is not a command-line argument", a)
		}
	}
	ps.gbps(at+"ib_write_gbps", c.IBWriteGbps)
	ps.gbps(at+"all_reduce_gbps", c.AllReduceGBps)
}

// gbps checks a floor: 0 (not judged) or a positive finite figure.
func (ps *problems) gbps(key string, v float64) {
	if !(v >= 0) || math.IsInf(v, 0) {
		ps.add(key, "want 0 (not judged) or a positive figure, got %v", v)
	}
}

// ParseHCAPair splits an ib_write_pairs entry, "mlx5_0:mlx5_1", into the
// server and client devices.
func ParseHCAPair(s string) (server, client string, err error) {
	server, client, ok := strings.Cut(s, ":")
	valid := func(n string) bool {
		return n != "" && !strings.ContainsFunc(n, func(r rune) bool { return r <= ' ' || r == '/' || r == ':' || r == 0x7f })
	}
	switch {
	case !ok || !valid(server) || !valid(client):
		return "", "", errorf("%q: want two HCA names such as \"mlx5_0:mlx5_1\"", s)
	case server == client:
		return "", "", errorf("%q: a pair needs two different HCAs", s)
	}
	return server, client, nil
}
