package topology

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/ib"
	"github.com/gpuhc/gpuhc/internal/pcibus"
	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// The bring-up fragment loads as configuration, and the node it was taken
// from passes with it.
func TestFragment(t *testing.T) {
	tests := []struct {
		name     string
		tree     string
		mutate   []mutation
		gpus     func(context.Context) ([]GPU, error)
		contains []string
		pairs    int
		want     map[string]want
	}{
		{
			name:     "h100-ndr",
			tree:     sysfsfix.H100NDR,
			contains: []string{`"0000:18:00.0=mlx5_0", # gpu0: same PCIe switch`, `"0000:db:00.0=mlx5_7", # gpu7: same PCIe switch`},
			pairs:    8,
			want:     gpus(8, each(gpuRange(0, 7), want{check.OK, "same PCIe switch, as pinned"})),
		},
		{
			name:     "a100-hdr",
			tree:     sysfsfix.A100HDR,
			contains: []string{`"0000:bd:00.0=mlx5_7", # gpu7: same PCIe switch`},
			pairs:    8,
			want:     gpus(8, each(gpuRange(0, 7), want{check.OK, "as pinned"})),
		},
		{
			name:     "roce",
			tree:     sysfsfix.RoCE,
			contains: []string{`"0000:1b:00.0=mlx5_0", # gpu0: same PCIe switch`},
			pairs:    4,
			want:     gpus(4, each(gpuRange(0, 3), want{check.OK, "as pinned"})),
		},
		{
			name:   "a cross-socket pairing is named",
			tree:   sysfsfix.H100NDR,
			mutate: []mutation{packages(0, 1), down(3, 4, 5, 6, 7)},
			contains: []string{`"0000:5d:00.0=mlx5_0", # gpu3: same NUMA node`,
				`"0000:9a:00.0=mlx5_0", # gpu4: across sockets`},
			pairs: 8,
			want: gpus(8, merge(
				map[int]want{3: {check.OK, "mlx5_0 is on the same NUMA node (0), as pinned"}},
				each(gpuRange(4, 7), want{check.Warn, "mlx5_0 is across sockets"}))),
		},
		{
			name:   "a pairing across NUMA nodes of one socket is named",
			tree:   sysfsfix.H100NDR,
			mutate: []mutation{nps4, removeHCAs(1, 2, 3, 5, 6, 7)},
			contains: []string{`"0000:2a:00.0=mlx5_0", # gpu1: across NUMA nodes of one socket`,
				`"0000:ab:00.0=mlx5_4", # gpu5: across NUMA nodes of one socket`},
			pairs: 8,
			want: gpus(8, merge(
				each(gpuRange(1, 3), want{check.OK, "mlx5_0 is across NUMA nodes of one socket (gpu numa"}),
				each(gpuRange(5, 7), want{check.OK, "mlx5_4 is across NUMA nodes of one socket (gpu numa"}))),
		},
		{
			name:     "a GPU without an active HCA is not pinned",
			tree:     sysfsfix.H100NDR,
			mutate:   []mutation{down(0, 1, 2, 3, 4, 5, 6, 7)},
			contains: []string{"# gpu0 0000:18:00.0 not pinned: no active HCA"},
			want:     gpus(8, each(gpuRange(0, 7), want{check.Warn, "no active HCA"})),
		},
		{
			name:     "a GPU not in sysfs is not pinned",
			tree:     sysfsfix.H100NDR,
			gpus:     fixed("0000:18:00.0", "0000:77:00.0"),
			contains: []string{`"0000:18:00.0=mlx5_0"`, "# gpu1 0000:77:00.0 not pinned: resolve "},
			pairs:    1,
			want: map[string]want{"gpu0": {check.OK, "as pinned"},
				"gpu1": {check.Error, "could not place GPU"}},
		},
		{
			name:     "no HCAs",
			tree:     sysfsfix.RoCE,
			mutate:   []mutation{removeHCAs(0, 1, 2, 3)},
			contains: []string{"# no RDMA devices: nothing to pin.", "pairs = []"},
			want:     map[string]want{"host": {check.Skip, "no RDMA devices"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := sysfsfix.Tree(t, tc.tree)
			for _, m := range tc.mutate {
				m(t, root)
			}
			frag, err := Fragment(context.Background(), root, ib.NewGather(root), mgmt, tc.gpus)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.contains {
				if !strings.Contains(frag, s) {
					t.Errorf("fragment lacks %q:\n%s", s, frag)
				}
			}
			c, err := config.Parse("fragment", []byte(frag), "gpu001")
			if err != nil {
				t.Fatalf("fragment does not load: %v\n%s", err, frag)
			}
			tp := c.Checks.Topology
			if len(tp.Pairs) != tc.pairs {
				t.Errorf("%d pairs, want %d:\n%s", len(tp.Pairs), tc.pairs, frag)
			}
			g := tc.gpus
			if g == nil {
				g = FromBus(pcibus.NewGather(root))
			}
			expect(t, run(t, New(root, ib.NewGather(root), tp, mgmt, g)), tc.want)
		})
	}
}

func TestFragmentErrors(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.H100NDR)
	failing := func(context.Context) ([]GPU, error) { return nil, fmt.Errorf("NVML did not answer") }
	if _, err := Fragment(context.Background(), root, ib.NewGather(root), mgmt, failing); err == nil || !strings.Contains(err.Error(), "NVML did not answer") {
		t.Errorf("got %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Fragment(ctx, root, ib.NewGather(root), mgmt, nil); err == nil {
		t.Error("cancelled context: no error")
	}
}

// The configuration refuses values the check could not act on.
func TestConfig(t *testing.T) {
	tests := []struct {
		toml string
		err  string // "" valid
	}{
		{`numa = "fail"` + "\n" + `same_switch = "warn"` + "\n" + `funnel = "off"`, ""},
		{`numa_same_socket = "warn"`, ""},
		{`numa_same_socket = "on"`, `checks.topology.numa_same_socket: "on": want one of`},
		{`pairs = ["10000:01:00.0=mlx5_0", "00010000:02:00.0=mlx5_1"]`, ""},
		{`pairs = ["10000:01:00.0=mlx5_0", "00010000:01:00.0=mlx5_1"]`, `checks.topology.pairs[1]: GPU 10000:01:00.0 is pinned twice`},
		{`pairs = ["0000:01:00.0=mlx5_0", "00010000:01:00.0=mlx5_1"]`, ""},
		{`pairs = ["000000000:01:00.0=mlx5_0"]`, `is not a PCI address`},
		{`pairs = ["018:00.0=mlx5_0"]`, `is not a PCI address`},
		{`numa = "drain"`, `checks.topology.numa: "drain": want one of`},
		{`same_switch = "on"`, `checks.topology.same_switch: "on"`},
		{`funnel = ""`, `checks.topology.funnel: ""`},
		{`pairs = ["0000:18:00.0=mlx5_0", "00000000:2A:00.0=mlx5_1"]`, ""},
		{`pairs = ["0000:18:00.0"]`, `checks.topology.pairs[0]: "0000:18:00.0": want`},
		{`pairs = ["18:00.0=mlx5_0"]`, `is not a PCI address`},
		{`pairs = ["0000:18:00.0=mlx5/0"]`, `is not an HCA name`},
		{`pairs = ["0000:18:00.0= "]`, `is not an HCA name`},
		{`pairs = ["0000:18:00.0=mlx5_0", "00000000:18:00.0=mlx5_1"]`, `checks.topology.pairs[1]: GPU 0000:18:00.0 is pinned twice`},
		{`timeout = "1m"`, `checks.topology.timeout: 1m0s is longer than the deadline`},
	}
	for _, tc := range tests {
		_, err := config.Parse("t.toml", []byte("[checks.topology]\n"+tc.toml+"\n"), "gpu001")
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.toml, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: got %v, want %q", tc.toml, err, tc.err)
		}
	}
	if _, _, err := config.ParsePair("00000000:2A:00.0=mlx5_1"); err != nil {
		t.Error(err)
	}
	// Addresses come out as sysfs writes them, the domain at least 4 digits.
	for in, addr := range map[string]string{
		" 00000000:2A:00.0 = mlx5_1 ": "0000:2a:00.0",
		"00000000:18:00.0=mlx5_1":     "0000:18:00.0",
		"0000:18:00.0=mlx5_1":         "0000:18:00.0",
		"00010000:01:00.0=mlx5_1":     "10000:01:00.0", // VMD domain, NVML's form
		"10000:E1:00.0=mlx5_1":        "10000:e1:00.0", // and sysfs's
		"0001:9a:00.1=mlx5_1":         "0001:9a:00.1",
	} {
		if a, h, err := config.ParsePair(in); a != addr || h != "mlx5_1" || err != nil {
			t.Errorf("ParsePair(%q) = %q %q %v, want %q mlx5_1", in, a, h, err, addr)
		}
	}
}
