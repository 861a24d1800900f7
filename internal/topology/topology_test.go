package topology

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/check/checktest"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
	"github.com/gpuhc/gpuhc/internal/ib"
	"github.com/gpuhc/gpuhc/internal/pcibus"
	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// The h100-ndr tree: GPU i and mlx5_i share a PCIe switch; GPUs 0-3 and
// their HCAs are on NUMA node 0, 4-7 on node 1; mlx5_8 is the management
// Ethernet port on node 1, under no GPU's switch.
var h100GPUs = []string{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
	"0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"}

// mgmt is the exclude list a DGX H100 would be configured with.
var mgmt = []string{"mlx5_8"}

// want is the expected verdict on one component (see checktest.Want).
type want checktest.Want

// mutation changes one thing in a fixture tree.
type mutation func(t *testing.T, root string)

func down(devs ...int) mutation {
	return func(t *testing.T, root string) {
		for _, d := range devs {
			sysfsfix.Set(t, root, sysfsfix.PortDir(fmt.Sprintf("mlx5_%d", d), 1)+"/state", "1: DOWN")
			sysfsfix.Set(t, root, sysfsfix.PortDir(fmt.Sprintf("mlx5_%d", d), 1)+"/phys_state", "3: Disabled")
		}
	}
}

func setPort(dev int, attr, v string) mutation {
	return func(t *testing.T, root string) {
		sysfsfix.Set(t, root, sysfsfix.PortDir(fmt.Sprintf("mlx5_%d", dev), 1)+"/"+attr, v)
	}
}

func gpuNUMA(v string, gpus ...int) mutation {
	return func(t *testing.T, root string) {
		for _, g := range gpus {
			sysfsfix.Set(t, root, "sys/bus/pci/devices/"+h100GPUs[g]+"/numa_node", v)
		}
	}
}

func hcaNUMA(v string, devs ...int) mutation {
	return func(t *testing.T, root string) {
		for _, d := range devs {
			sysfsfix.Set(t, root, fmt.Sprintf("sys/class/infiniband/mlx5_%d/device/numa_node", d), v)
		}
	}
}

func removeHCAs(devs ...int) mutation {
	return func(t *testing.T, root string) {
		for _, d := range devs {
			sysfsfix.RemoveHCA(t, root, fmt.Sprintf("mlx5_%d", d))
		}
	}
}

func gpuRange(lo, hi int) []int {
	var out []int
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out
}

// gpus builds the expectation for GPUs: by default OK on their own
// switch, with the listed GPUs overridden.
func gpus(n int, over map[int]want) map[string]want {
	w := map[string]want{}
	for i := range n {
		w[fmt.Sprintf("gpu%d", i)] = want{check.OK, fmt.Sprintf("nearest active HCA mlx5_%d is on the same PCIe switch", i)}
	}
	for i, v := range over {
		w[fmt.Sprintf("gpu%d", i)] = v
	}
	return w
}

func each(idx []int, w want) map[int]want {
	m := map[int]want{}
	for _, i := range idx {
		m[i] = w
	}
	return m
}

func with(m map[string]want, comp string, w want) map[string]want {
	m[comp] = w
	return m
}

func defaults() config.Topology { return config.Default().Checks.Topology }

func cfg(f func(c *config.Topology)) config.Topology {
	c := defaults()
	f(&c)
	return c
}

var numaFail = cfg(func(c *config.Topology) { c.NUMA = "fail" })

// Healthy nodes of every shape pass, with the defaults and with the
// strictest placement rules.
func TestHealthy(t *testing.T) {
	strict := cfg(func(c *config.Topology) { c.NUMA, c.SameSwitch, c.Funnel = "fail", "fail", "fail" })
	for _, tc := range []struct {
		tree    string
		exclude []string
		n       int
	}{
		{sysfsfix.H100NDR, mgmt, 8},
		{sysfsfix.H100NDR, nil, 8}, // the management port is never nearer than a GPU's own
		{sysfsfix.A100HDR, nil, 8},
		{sysfsfix.RoCE, nil, 4},
		// HGX B200: the NVSwitch management devices (VPD SMDL=SW_MNG) on
		// their own root ports are no HCA for any GPU.
		{sysfsfix.B200, nil, 8},
	} {
		for cname, c := range map[string]config.Topology{"defaults": defaults(), "strict": strict} {
			t.Run(tc.tree+"/"+cname+"/"+strings.Join(tc.exclude, ","), func(t *testing.T) {
				t.Parallel()
				root := sysfsfix.Tree(t, tc.tree)
				rs := run(t, New(root, ib.NewGather(root), c, tc.exclude, nil))
				expect(t, rs, gpus(tc.n, nil))
			})
		}
	}
}

// On an HGX B200 whose NUMA-0 HCAs are all down, the GPUs there have no
// network near them: the nearest HCA is across sockets (WARN), though an
// NVSwitch management device with an ACTIVE IB port sits on their NUMA
// node; it is never anyone's HCA. Nor does the inventory pin one.
func TestB200SwitchMgmtNeverPaired(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.B200)
	for _, d := range []string{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"} {
		sysfsfix.Set(t, root, sysfsfix.PortDir(d, 1)+"/state", "1: DOWN")
	}
	rs := run(t, New(root, ib.NewGather(root), defaults(), nil, nil))
	expect(t, rs, gpus(8, map[int]want{
		0: {check.Warn, "nearest active HCA mlx5_4 is across sockets"},
		1: {check.Warn, "nearest active HCA mlx5_4 is across sockets"},
		2: {check.Warn, "nearest active HCA mlx5_4 is across sockets"},
		3: {check.Warn, "nearest active HCA mlx5_4 is across sockets"},
	}))
	b200 := sysfsfix.Tree(t, sysfsfix.B200)
	frag, err := Fragment(context.Background(), b200, ib.NewGather(b200), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if !strings.Contains(frag, fmt.Sprintf("=mlx5_%d\", # gpu%d: same PCIe switch", i, i)) {
			t.Errorf("gpu%d not pinned to mlx5_%d:\n%s", i, i, frag)
		}
	}
}

func TestH100Faults(t *testing.T) {
	crossWarn := want{check.Warn, "nearest active HCA mlx5_0 is across sockets (gpu numa 1, HCA numa 0)"}
	crossFail := want{check.Fail, crossWarn.Msg}
	unsure := want{check.Warn, "nearest active HCA mlx5_0 is on another NUMA node, socket unknown (gpu numa 1, HCA numa 0)"}
	funnel := "mlx5_0 is across sockets (gpu numa 1, HCA numa 0) (funnel, see host)"
	tests := []struct {
		name    string
		mutate  []mutation
		cfg     config.Topology
		exclude []string
		gpus    func(context.Context) ([]GPU, error)
		want    map[string]want
	}{
		{
			name:   "socket 1 HCAs down: GPUs there reach across sockets, WARN by default",
			mutate: []mutation{down(4, 5, 6, 7)},
			want:   gpus(8, each(gpuRange(4, 7), crossWarn)),
		},
		{
			name:   "socket 1 HCAs down with numa=fail",
			mutate: []mutation{down(4, 5, 6, 7)},
			cfg:    numaFail,
			want:   gpus(8, each(gpuRange(4, 7), crossFail)),
		},
		{
			name:   "socket 1 HCAs down with numa=off",
			mutate: []mutation{down(4, 5, 6, 7)},
			cfg:    cfg(func(c *config.Topology) { c.NUMA = "off" }),
			want:   gpus(8, each(gpuRange(4, 7), want{check.OK, crossWarn.Msg})),
		},
		{
			name:    "without the exclude list the management port on socket 1 serves",
			mutate:  []mutation{down(4, 5, 6, 7)},
			cfg:     numaFail,
			exclude: []string{},
			want:    gpus(8, each(gpuRange(4, 7), want{check.OK, "nearest active HCA mlx5_8 is on the same NUMA node (1)"})),
		},
		{
			name:    "an excluded port counts as excluded",
			mutate:  []mutation{down(4, 5, 6, 7)},
			cfg:     numaFail,
			exclude: []string{"mlx5_8/1"},
			want:    gpus(8, each(gpuRange(4, 7), crossFail)),
		},
		{
			name:   "an HCA numa_node disagreeing under one switch is still the same switch",
			mutate: []mutation{hcaNUMA("0", 4, 5, 6, 7)},
			cfg:    numaFail,
			want:   gpus(8, nil),
		},
		{
			name:   "own HCA down: the next on the same NUMA node is fine by default",
			mutate: []mutation{down(3)},
			want:   gpus(8, map[int]want{3: {check.OK, "nearest active HCA mlx5_0 is on the same NUMA node (0)"}}),
		},
		{
			name:   "own HCA down with same_switch=fail",
			mutate: []mutation{down(3)},
			cfg:    cfg(func(c *config.Topology) { c.SameSwitch = "fail" }),
			want: gpus(8, map[int]want{3: {check.Fail,
				"nearest active HCA mlx5_0 is on the same NUMA node (0), not on the GPU's PCIe switch"}}),
		},
		{
			name:   "own HCA down with same_switch=warn",
			mutate: []mutation{down(3)},
			cfg:    cfg(func(c *config.Topology) { c.SameSwitch = "warn" }),
			want:   gpus(8, map[int]want{3: {check.Warn, "not on the GPU's PCIe switch"}}),
		},
		{
			name:   "funnel: only mlx5_0 active is a WARN, not a FAIL",
			mutate: []mutation{down(1, 2, 3, 4, 5, 6, 7)},
			cfg:    numaFail,
			want: with(gpus(8, merge(
				each(gpuRange(1, 3), want{check.OK, "nearest active HCA mlx5_0 is on the same NUMA node (0)"}),
				each(gpuRange(4, 7), want{check.Warn, funnel}))),
				"host", want{check.Warn, "all 8 GPUs funnel to mlx5_0 (4 across sockets)"}),
		},
		{
			name:   "funnel=fail drains on the host result",
			mutate: []mutation{down(1, 2, 3, 4, 5, 6, 7)},
			cfg:    cfg(func(c *config.Topology) { c.Funnel = "fail" }),
			want: with(gpus(8, merge(
				each(gpuRange(1, 3), want{check.OK, "same NUMA node"}),
				each(gpuRange(4, 7), want{check.Warn, funnel}))),
				"host", want{check.Fail, "all 8 GPUs funnel to mlx5_0 (4 across sockets)"}),
		},
		{
			name:   "funnel=off leaves the NUMA rule alone",
			mutate: []mutation{down(1, 2, 3, 4, 5, 6, 7)},
			cfg:    cfg(func(c *config.Topology) { c.NUMA, c.Funnel = "fail", "off" }),
			want: gpus(8, merge(
				each(gpuRange(1, 3), want{check.OK, "same NUMA node"}),
				each(gpuRange(4, 7), crossFail))),
		},
		{
			name:   "one NIC on the GPUs' own socket is no funnel",
			mutate: []mutation{down(1, 2, 3, 4, 5, 6, 7)},
			gpus:   fixed(h100GPUs[:4]...),
			want: gpus(4, each(gpuRange(1, 3),
				want{check.OK, "nearest active HCA mlx5_0 is on the same NUMA node (0)"})),
		},
		{
			name:   "GPUs with two equally near NICs across sockets are no funnel",
			mutate: []mutation{down(2, 3, 4, 5, 6, 7)},
			gpus:   fixed(h100GPUs[4:]...),
			want:   gpus(4, each(gpuRange(0, 3), crossWarn)),
		},
		{
			name:   "GPUs with one NIC across sockets are a funnel",
			mutate: []mutation{down(1, 2, 3, 4, 5, 6, 7)},
			gpus:   fixed(h100GPUs[4:]...),
			want: with(gpus(4, each(gpuRange(0, 3), want{check.Warn, funnel})),
				"host", want{check.Warn, "all 4 GPUs funnel to mlx5_0 (4 across sockets)"}),
		},
		{
			name:   "a GPU that cannot be placed leaves the others' funnel",
			mutate: []mutation{down(1, 2, 3, 4, 5, 6, 7)},
			gpus:   fixed(append([]string{"0000:77:00.0"}, h100GPUs[4:]...)...),
			want: with(gpus(5, merge(each(gpuRange(1, 4), want{check.Warn, funnel}),
				map[int]want{0: {check.Error, "could not place GPU"}})),
				"host", want{check.Warn, "4 of 5 GPUs funnel to mlx5_0 (4 across sockets)"}),
		},
		{
			name:   "a soft RDMA device is not on the PCI hierarchy",
			mutate: []mutation{softHCA("rxe0")},
			cfg:    numaFail,
			want:   gpus(8, nil),
		},
		{
			name:   "pinned to a soft RDMA device is a config error, not a FAIL",
			mutate: []mutation{softHCA("rxe0")},
			cfg:    cfg(func(c *config.Topology) { c.Pairs = []string{"0000:18:00.0=rxe0"} }),
			want:   gpus(8, map[int]want{0: {check.Error, "pinned HCA rxe0 is not a PCI device"}}),
		},
		{
			name:   "only a soft RDMA device: SKIP",
			mutate: []mutation{removeHCAs(0, 1, 2, 3, 4, 5, 6, 7), softHCA("rxe0")},
			want:   map[string]want{"host": {check.Skip, "no physical RDMA devices outside checks.ib.exclude (1 excluded, 1 virtual)"}},
		},
		{
			// mlx5_10 would win the tie with mlx5_4 by name.
			name:   "an SR-IOV VF beside its PF is not a GPU's nearest HCA",
			mutate: []mutation{vfHCA(4, "mlx5_10", 1)},
			cfg:    cfg(func(c *config.Topology) { c.NUMA, c.SameSwitch = "fail", "fail" }),
			want:   gpus(8, nil),
		},
		{
			name:   "a VF forced up on a down PF does not serve its GPU",
			mutate: []mutation{down(4), vfHCA(4, "mlx5_10", 1)},
			cfg:    cfg(func(c *config.Topology) { c.SameSwitch = "fail" }),
			want: gpus(8, map[int]want{4: {check.Fail,
				"nearest active HCA mlx5_5 is on the same NUMA node (1), not on the GPU's PCIe switch"}}),
		},
		{
			name:   "a VF on the one active PF does not hide the funnel",
			mutate: []mutation{down(1, 2, 3, 4, 5, 6, 7), vfHCA(0, "mlx5_10", 1)},
			cfg:    cfg(func(c *config.Topology) { c.Funnel = "fail" }),
			want: with(gpus(8, merge(
				each(gpuRange(1, 3), want{check.OK, "nearest active HCA mlx5_0 is on the same NUMA node (0)"}),
				each(gpuRange(4, 7), want{check.Warn, funnel}))),
				"host", want{check.Fail, "all 8 GPUs funnel to mlx5_0 (4 across sockets)"}),
		},
		{
			name:   "pinned to a VF is a config error, not a FAIL",
			mutate: []mutation{vfHCA(0, "mlx5_10", 1)},
			cfg:    cfg(func(c *config.Topology) { c.Pairs = []string{"0000:18:00.0=mlx5_10"} }),
			want:   gpus(8, map[int]want{0: {check.Error, "pinned HCA mlx5_10 is an SR-IOV virtual function"}}),
		},
		{
			name:    "only VFs outside the exclude list: SKIP",
			mutate:  []mutation{vfHCA(0, "mlx5_10", 1), vfHCA(1, "mlx5_11", 1)},
			exclude: []string{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8"},
			want:    map[string]want{"host": {check.Skip, "no physical RDMA devices outside checks.ib.exclude (9 excluded, 2 virtual)"}},
		},
		{
			name:   "no HCA active",
			mutate: []mutation{down(0, 1, 2, 3, 4, 5, 6, 7)},
			want:   gpus(8, each(gpuRange(0, 7), want{check.Warn, "no active HCA (8 HCAs, none with an ACTIVE port)"})),
		},
		{
			name:   "socket of a NUMA node unknown: numa=fail is at most a WARN",
			mutate: []mutation{down(4, 5, 6, 7), removeFile("sys/devices/system/cpu/cpu56/topology/physical_package_id")},
			cfg:    numaFail,
			want:   gpus(8, each(gpuRange(4, 7), unsure)),
		},
		{
			name:   "garbage physical_package_id is an unknown socket, not a FAIL",
			mutate: []mutation{down(4, 5, 6, 7), cpuPackage(56, "banana")},
			cfg:    numaFail,
			want:   gpus(8, each(gpuRange(4, 7), unsure)),
		},
		{
			name:   "physical_package_id -1 is an unknown socket",
			mutate: []mutation{down(4, 5, 6, 7), cpuPackage(0, "-1")},
			cfg:    numaFail,
			want:   gpus(8, each(gpuRange(4, 7), unsure)),
		},
		{
			name:   "a node without CPUs has no socket",
			mutate: []mutation{down(4, 5, 6, 7), cpuList(1, "")},
			cfg:    numaFail,
			want:   gpus(8, each(gpuRange(4, 7), unsure)),
		},
		{
			name:   "garbage cpulist is an unknown socket",
			mutate: []mutation{down(4, 5, 6, 7), cpuList(1, "56-banana")},
			cfg:    numaFail,
			want:   gpus(8, each(gpuRange(4, 7), unsure)),
		},
		{
			// CPUs numbered round-robin across sockets: each node's
			// cpulist is hundreds of bytes.
			name: "a long round-robin cpulist still tells the socket",
			mutate: []mutation{down(4, 5, 6, 7), cpuList(0, stride(0, 2, 224)), cpuList(1, stride(1, 2, 224)),
				cpuPackage(0, "0"), cpuPackage(1, "1")},
			cfg:  numaFail,
			want: gpus(8, each(gpuRange(4, 7), crossFail)),
		},
		{
			name: "a long cpulist tells two nodes of one socket",
			mutate: []mutation{down(4, 5, 6, 7), cpuList(0, stride(0, 2, 224)), cpuList(1, stride(1, 2, 224)),
				cpuPackage(0, "0"), cpuPackage(1, "0")},
			cfg:  numaFail,
			want: gpus(8, each(gpuRange(4, 7), want{check.OK, "nearest active HCA mlx5_0 is across NUMA nodes of one socket (gpu numa 1, HCA numa 0)"})),
		},
		{
			name:   "a cpulist over 4 KiB is an unknown socket, not a FAIL",
			mutate: []mutation{down(4, 5, 6, 7), cpuList(1, "1"+strings.Repeat(",1", 2100))},
			cfg:    numaFail,
			want:   gpus(8, each(gpuRange(4, 7), unsure)),
		},
		{
			name:   "a funnel reached on nodes of unknown socket is at most a WARN",
			mutate: []mutation{down(1, 2, 3, 4, 5, 6, 7), removeFile("sys/devices/system/cpu/cpu56/topology/physical_package_id")},
			cfg:    cfg(func(c *config.Topology) { c.NUMA, c.Funnel = "fail", "fail" }),
			want: with(gpus(8, merge(
				each(gpuRange(1, 3), want{check.OK, "same NUMA node"}),
				each(gpuRange(4, 7), want{check.Warn, unsure.Msg + " (funnel, see host)"}))),
				"host", want{check.Warn, "all 8 GPUs funnel to mlx5_0 (4 on other NUMA nodes, socket unknown)"}),
		},
		{
			name:   "GPU numa_node -1 is not judged",
			mutate: []mutation{down(4, 5, 6, 7), gpuNUMA("-1", 4, 5, 6, 7)},
			cfg:    numaFail,
			want: gpus(8, each(gpuRange(4, 7), want{check.OK,
				"nearest active HCA mlx5_0 is on another root complex, NUMA unknown (gpu numa -1, HCA numa 0), not judged"})),
		},
		{
			name:   "HCA numa_node -1 is not judged",
			mutate: []mutation{down(4, 5, 6, 7), hcaNUMA("-1", 0, 1, 2, 3)},
			cfg:    numaFail,
			want:   gpus(8, each(gpuRange(4, 7), want{check.OK, "NUMA unknown (gpu numa 1, HCA numa -1), not judged"})),
		},
		{
			name:   "missing numa_node is unknown",
			mutate: []mutation{down(4, 5, 6, 7), removeFile("sys/bus/pci/devices/0000:9a:00.0/numa_node")},
			cfg:    numaFail,
			want: gpus(8, merge(each(gpuRange(5, 7), crossFail),
				map[int]want{4: {check.OK, "NUMA unknown (gpu numa -1, HCA numa 0), not judged"}})),
		},
		{
			name:   "garbage GPU numa_node is an ERROR, not a FAIL",
			mutate: []mutation{down(4), gpuNUMA("banana", 4)},
			cfg:    numaFail,
			want:   gpus(8, map[int]want{4: {check.Error, `could not check mlx5_0: `}, 5: {check.OK, "mlx5_5 is on the same PCIe switch"}}),
		},
		{
			name:   "negative GPU numa_node is an ERROR",
			mutate: []mutation{down(4), gpuNUMA("-2", 4)},
			cfg:    numaFail,
			want:   gpus(8, map[int]want{4: {check.Error, `0000:9a:00.0/numa_node: "-2" is not a NUMA node`}}),
		},
		{
			name:   "garbage numa_node that decides nothing is not reported",
			mutate: []mutation{gpuNUMA("banana", 4), hcaNUMA("999999", 5)},
			cfg:    numaFail,
			want:   gpus(8, nil),
		},
		{
			name:   "garbage HCA numa_node is an ERROR, not a FAIL",
			mutate: []mutation{down(4, 5, 6, 7), hcaNUMA("0x1", 0, 1, 2, 3)},
			cfg:    numaFail,
			want:   gpus(8, each(gpuRange(4, 7), want{check.Error, `"0x1" is not a NUMA node`})),
		},
		{
			name:   "unreadable state of a nearer HCA is an ERROR, not a FAIL",
			mutate: []mutation{setPort(4, "state", "garbage")},
			cfg:    cfg(func(c *config.Topology) { c.SameSwitch = "fail" }),
			want:   gpus(8, map[int]want{4: {check.Error, "could not check mlx5_4: port 1: "}}),
		},
		{
			name:   "unlistable ports of a nearer HCA are an ERROR, not a FAIL",
			mutate: []mutation{func(t *testing.T, root string) { sysfsfix.UnlistPorts(t, root, "mlx5_4") }},
			cfg:    cfg(func(c *config.Topology) { c.SameSwitch = "fail" }),
			want:   gpus(8, map[int]want{4: {check.Error, "could not check mlx5_4: list ports"}}),
		},
		{
			name:   "unreadable state of an HCA that could not change the verdict",
			mutate: []mutation{setPort(4, "state", "garbage")},
			cfg:    numaFail,
			want:   gpus(8, map[int]want{4: {check.OK, "nearest active HCA mlx5_5 is on the same NUMA node (1)"}}),
		},
		{
			name:   "an HCA down with garbage rate is still down",
			mutate: []mutation{down(4), setPort(4, "rate", "fast")},
			want:   gpus(8, map[int]want{4: {check.OK, "nearest active HCA mlx5_5 is on the same NUMA node (1)"}}),
		},
		{
			name: "pins as found pass",
			cfg: cfg(func(c *config.Topology) {
				for i, a := range h100GPUs {
					c.Pairs = append(c.Pairs, fmt.Sprintf("%s=mlx5_%d", a, i))
				}
			}),
			want: gpus(8, each(gpuRange(0, 7), want{check.OK, "is on the same PCIe switch, as pinned"})),
		},
		{
			name: "pinned pair mismatch FAILs",
			cfg:  cfg(func(c *config.Topology) { c.Pairs = []string{"0000:18:00.0=mlx5_1", "00000000:2A:00.0=mlx5_1"} }),
			want: gpus(8, map[int]want{
				0: {check.Fail, "pinned HCA mlx5_1 is same NUMA node; nearest active is mlx5_0, same PCIe switch"},
				1: {check.OK, "same PCIe switch, as pinned"},
			}),
		},
		{
			name:   "pinned HCA down FAILs",
			mutate: []mutation{down(0)},
			cfg:    cfg(func(c *config.Topology) { c.Pairs = []string{"0000:18:00.0=mlx5_0"} }),
			want:   gpus(8, map[int]want{0: {check.Fail, "pinned HCA mlx5_0 has no ACTIVE port"}}),
		},
		{
			name:   "pinned HCA gone FAILs",
			mutate: []mutation{removeHCAs(0)},
			cfg:    cfg(func(c *config.Topology) { c.Pairs = []string{"0000:18:00.0=mlx5_0"} }),
			want:   gpus(8, map[int]want{0: {check.Fail, "pinned HCA mlx5_0 not found"}}),
		},
		{
			name: "pinned GPU gone FAILs",
			gpus: fixed(h100GPUs[1:]...),
			cfg:  cfg(func(c *config.Topology) { c.Pairs = []string{"0000:18:00.0=mlx5_0"} }),
			want: with(
				map[string]want{"gpu0": {check.OK, "mlx5_1 is on the same PCIe switch"}, "gpu1": {check.OK, "mlx5_2"},
					"gpu2": {check.OK, "mlx5_3"}, "gpu3": {check.OK, "mlx5_4"}, "gpu4": {check.OK, "mlx5_5"},
					"gpu5": {check.OK, "mlx5_6"}, "gpu6": {check.OK, "mlx5_7"}},
				"0000:18:00.0", want{check.Fail, "pinned GPU not found (pinned to mlx5_0)"}),
		},
		{
			name: "pinned to an excluded HCA is a config error, not a FAIL",
			cfg:  cfg(func(c *config.Topology) { c.Pairs = []string{"0000:9a:00.0=mlx5_8"} }),
			want: gpus(8, map[int]want{4: {check.Error, "pinned HCA mlx5_8 is excluded by checks.ib.exclude"}}),
		},
		{
			name:   "no HCAs: SKIP",
			mutate: []mutation{removeHCAs(0, 1, 2, 3, 4, 5, 6, 7, 8)},
			cfg:    numaFail,
			want:   map[string]want{"host": {check.Skip, "no RDMA devices"}},
		},
		{
			name:   "no RDMA class at all: SKIP",
			mutate: []mutation{removeFile("sys/class/infiniband")},
			want:   map[string]want{"host": {check.Skip, "no RDMA devices"}},
		},
		{
			name:    "every HCA excluded: SKIP",
			exclude: []string{"mlx5_*"},
			want:    map[string]want{"host": {check.Skip, "no RDMA devices outside checks.ib.exclude (9 excluded)"}},
		},
		{
			name:   "only excluded HCAs left: SKIP",
			mutate: []mutation{removeHCAs(0, 1, 2, 3, 4, 5, 6, 7)},
			cfg:    numaFail,
			want:   map[string]want{"host": {check.Skip, "no RDMA devices outside checks.ib.exclude"}},
		},
		{
			name: "no GPUs: SKIP",
			gpus: fixed(),
			want: map[string]want{"host": {check.Skip, "no GPUs"}},
		},
		{
			name: "no GPUs on the bus: SKIP",
			gpus: FromBus(pcibus.NewGather(t.TempDir())),
			want: map[string]want{"host": {check.Skip, "no GPUs"}},
		},
		{
			name: "GPU list unavailable: ERROR",
			gpus: func(context.Context) ([]GPU, error) { return nil, errors.New("NVML did not answer") },
			want: map[string]want{"host": {check.Error, "list GPUs: NVML did not answer"}},
		},
		{
			name: "GPU not in sysfs: ERROR",
			gpus: fixed("0000:77:00.0"),
			want: map[string]want{"gpu0": {check.Error, "could not place GPU: resolve "}},
		},
		{
			name: "GPU address garbage: ERROR",
			gpus: fixed("../../etc"),
			want: map[string]want{"gpu0": {check.Error, `could not place GPU: "../../etc" is not a PCI address`}},
		},
		{
			name: "invalid configuration: ERROR, never a verdict",
			cfg:  cfg(func(c *config.Topology) { c.NUMA = "drain" }),
			want: map[string]want{"host": {check.Error, `checks.topology.numa: "drain"`}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := sysfsfix.Tree(t, sysfsfix.H100NDR)
			packages(0, 1)(t, root)
			for _, m := range tc.mutate {
				m(t, root)
			}
			c := tc.cfg
			if c.NUMA == "" {
				c = defaults()
			}
			ex := tc.exclude
			if ex == nil {
				ex = mgmt
			}
			g := tc.gpus
			if g == nil {
				g = FromBus(pcibus.NewGather(root))
			}
			expect(t, run(t, New(root, ib.NewGather(root), c, ex, g)), tc.want)
		})
	}
}

// An HCA two GPUs share a switch with is as near to both; the one two
// switch levels up loses to one on the GPU's own downstream port.
func TestRelate(t *testing.T) {
	dev := func(complex string, chain ...string) device {
		return device{addr: chain[len(chain)-1], complex: complex, chain: chain, numa: 0}
	}
	g := dev("pci0000:15", "0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:18:00.0")
	sk := &sockets{pkg: map[int]int{}}
	tests := []struct {
		name  string
		h     device
		rel   relation
		depth int
	}{
		{"same downstream port", dev("pci0000:15", "0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:18:00.1"), relSwitch, 3},
		{"same switch", dev("pci0000:15", "0000:15:01.0", "0000:16:00.0", "0000:17:01.0", "0000:19:00.0"), relSwitch, 2},
		{"same root port only", dev("pci0000:15", "0000:15:01.0", "0000:16:00.1"), relComplex, 1},
		{"another root port", dev("pci0000:15", "0000:15:02.0", "0000:20:00.0"), relComplex, 0},
		{"another root complex", dev("pci0000:25", "0000:25:01.0", "0000:26:00.0"), relNUMA, 0},
		{"VMD domain below the GPU's root complex", dev("pci0000:15/0000:15:05.5/pci10000:00", "10000:00:02.0", "10000:01:00.0"), relNUMA, 0},
	}
	for _, tc := range tests {
		l, err := relate(g, tc.h, sk)
		if err != nil || l.rel != tc.rel || l.depth != tc.depth {
			t.Errorf("%s: got %v depth %d (%v), want %v depth %d", tc.name, l.rel, l.depth, err, tc.rel, tc.depth)
		}
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		rel, addr, complex string
		chain              int
		fail               bool
	}{
		{"pci0000:15/0000:15:01.0/0000:16:00.0", "0000:16:00.0", "pci0000:15", 2, false},
		{"pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:1d.0/10000:e1:00.0", "10000:e1:00.0", "pci0000:00/0000:00:0e.0/pci10000:e0", 2, false},
		{"LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/abcd/pcia0b1:00/a0b1:00:00.0", "a0b1:00:00.0", "LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/abcd/pcia0b1:00", 1, false},
		{"platform/foo/0000:16:00.0", "0000:16:00.0", "", 0, true},
		{"pci0000:15/0000:15:01.0/net/0000:16:00.0", "0000:16:00.0", "", 0, true},
		{"pci0000:15/0000:15:01.0", "0000:16:00.0", "", 0, true},
		{"pci0000:15", "0000:16:00.0", "", 0, true},
	}
	for _, tc := range tests {
		c, chain, err := split(tc.rel, tc.addr)
		if (err != nil) != tc.fail || c != tc.complex || len(chain) != tc.chain {
			t.Errorf("split(%q) = %q %q %v", tc.rel, c, chain, err)
		}
	}
}

// Sub-NUMA clustering (AMD NPS4, Intel SNC): four NUMA nodes per socket,
// nodes 0-3 on socket 0 and 4-7 on socket 1, GPU i and mlx5_i on node i.
// An HCA on another node of the GPU's socket is nearer than one across
// sockets, and numa = "fail" does not drain a node built with one HCA per
// socket.
func TestSubNUMA(t *testing.T) {
	oneSocket := func(hca string) want { return want{check.OK, hca + " is across NUMA nodes of one socket"} }
	perSocket := removeHCAs(1, 2, 3, 5, 6, 7)
	tests := []struct {
		name   string
		mutate []mutation
		cfg    config.Topology
		gpus   func(context.Context) ([]GPU, error)
		want   map[string]want
	}{
		{
			name:   "one HCA per socket passes numa=fail, each GPU paired on its own socket",
			mutate: []mutation{perSocket},
			cfg:    cfg(func(c *config.Topology) { c.NUMA, c.Funnel = "fail", "fail" }),
			want: gpus(8, merge(
				each(gpuRange(1, 3), oneSocket("nearest active HCA mlx5_0")),
				each(gpuRange(5, 7), oneSocket("nearest active HCA mlx5_4")))),
		},
		{
			name:   "the message names both nodes",
			mutate: []mutation{perSocket},
			want: gpus(8, merge(
				each(gpuRange(1, 3), oneSocket("mlx5_0")),
				each(gpuRange(5, 7), oneSocket("mlx5_4")),
				map[int]want{6: {check.OK, "nearest active HCA mlx5_4 is across NUMA nodes of one socket (gpu numa 6, HCA numa 4)"}})),
		},
		{
			name:   "numa_same_socket=warn",
			mutate: []mutation{perSocket},
			cfg:    cfg(func(c *config.Topology) { c.NUMASameSocket = "warn" }),
			want: gpus(8, merge(
				each(gpuRange(1, 3), want{check.Warn, "mlx5_0 is across NUMA nodes of one socket"}),
				each(gpuRange(5, 7), want{check.Warn, "mlx5_4 is across NUMA nodes of one socket"}))),
		},
		{
			name:   "numa_same_socket=fail",
			mutate: []mutation{perSocket},
			cfg:    cfg(func(c *config.Topology) { c.NUMASameSocket = "fail" }),
			want: gpus(8, merge(
				each(gpuRange(1, 3), want{check.Fail, "mlx5_0 is across NUMA nodes of one socket"}),
				each(gpuRange(5, 7), want{check.Fail, "mlx5_4 is across NUMA nodes of one socket"}))),
		},
		{
			name:   "socket 1's HCA down: its GPUs reach across sockets",
			mutate: []mutation{perSocket, down(4)},
			cfg:    cfg(func(c *config.Topology) { c.NUMA, c.Funnel = "fail", "off" }),
			want: gpus(8, merge(
				each(gpuRange(1, 3), oneSocket("mlx5_0")),
				each(gpuRange(4, 7), want{check.Fail, "nearest active HCA mlx5_0 is across sockets (gpu numa"}))),
		},
		{
			name:   "one NIC for the GPUs of its own socket is no funnel",
			mutate: []mutation{perSocket, removeHCAs(4)},
			cfg:    cfg(func(c *config.Topology) { c.NUMA, c.Funnel = "fail", "fail" }),
			gpus:   fixed(h100GPUs[:4]...),
			want:   gpus(4, each(gpuRange(1, 3), oneSocket("mlx5_0"))),
		},
		{
			name:   "a node whose socket is unknown is at most a WARN",
			mutate: []mutation{perSocket, removeFile("sys/devices/system/cpu/cpu50/topology/physical_package_id")},
			cfg:    numaFail,
			want: gpus(8, merge(
				each(gpuRange(1, 3), oneSocket("mlx5_0")),
				each(gpuRange(6, 7), oneSocket("mlx5_4")),
				map[int]want{5: {check.Warn, "on another NUMA node, socket unknown (gpu numa 5, HCA numa"}})),
		},
		{
			// gpu1 (node 1) is nearest mlx5_0, moved to node 2 whose
			// socket is unknown: it may be no nearer than the pin.
			name: "a pin farther than an HCA of unknown socket is not checked",
			mutate: []mutation{perSocket, hcaNUMA("2", 0),
				removeFile("sys/devices/system/cpu/cpu20/topology/physical_package_id")},
			cfg: cfg(func(c *config.Topology) { c.Pairs = []string{"0000:2a:00.0=mlx5_4"} }),
			want: gpus(8, merge(
				each(gpuRange(5, 7), oneSocket("mlx5_4")),
				map[int]want{
					1: {check.Error, "could not check pinned HCA mlx5_4: nearest active mlx5_0 is another NUMA node, socket unknown"},
					2: {check.OK, "nearest active HCA mlx5_0 is on the same NUMA node (2)"},
					3: {check.Warn, "nearest active HCA mlx5_0 is on another NUMA node, socket unknown (gpu numa 3, HCA numa 2)"},
				})),
		},
		{
			name:   "a pin on another node of the socket when the GPU's own HCA is up FAILs",
			mutate: []mutation{},
			cfg:    cfg(func(c *config.Topology) { c.Pairs = []string{"0000:2a:00.0=mlx5_0"} }),
			want: gpus(8, map[int]want{1: {check.Fail,
				"pinned HCA mlx5_0 is across NUMA nodes of one socket; nearest active is mlx5_1, same PCIe switch"}}),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := sysfsfix.Tree(t, sysfsfix.H100NDR)
			nps4(t, root)
			for _, m := range tc.mutate {
				m(t, root)
			}
			c := tc.cfg
			if c.NUMA == "" {
				c = defaults()
			}
			g := tc.gpus
			if g == nil {
				g = FromBus(pcibus.NewGather(root))
			}
			expect(t, run(t, New(root, ib.NewGather(root), c, mgmt, g)), tc.want)
		})
	}
}

// nps4 makes the h100-ndr tree an NPS4 node: NUMA nodes 0-3 on socket 0,
// 4-7 on socket 1, node n's CPUs 10n-10n+9, GPU i and mlx5_i on node i.
func nps4(t *testing.T, root string) {
	t.Helper()
	for n := range 8 {
		cpuList(n, fmt.Sprintf("%d-%d", 10*n, 10*n+9))(t, root)
		cpuPackage(10*n, strconv.Itoa(n/4))(t, root)
		gpuNUMA(strconv.Itoa(n), n)(t, root)
		hcaNUMA(strconv.Itoa(n), n)(t, root)
	}
}

// FromNode names GPUs as NVML does and carries their IDs.
func TestFromNode(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.H100NDR)
	packages(0, 1)(t, root)
	down(4, 5, 6, 7)(t, root)
	m, err := sim.Build("dgxh100", nil)
	if err != nil {
		t.Fatal(err)
	}
	n := gpu.NewNode(m.Server, root, -1, "dgxh100", gpu.WithBus(m.OnBus))
	rs := run(t, New(root, ib.NewGather(root), numaFail, mgmt, FromNode(n)))
	expect(t, rs, gpus(8, each(gpuRange(4, 7), want{check.Fail, "across sockets"})))
	for _, r := range rs {
		if r.IDs.GPUIndex == nil || r.IDs.UUID == "" || r.IDs.PCIBusID == "" || r.Component != fmt.Sprintf("gpu%d", *r.IDs.GPUIndex) {
			t.Errorf("%s: IDs %+v", r.Component, r.IDs)
		}
	}

	m, err = sim.Build("dgxh100", []string{"gpu0:nvml-init"})
	if err != nil {
		t.Fatal(err)
	}
	broken := gpu.NewNode(m.Server, root, -1, "dgxh100", gpu.WithBus(m.OnBus))
	expect(t, run(t, New(root, ib.NewGather(root), numaFail, mgmt, FromNode(broken))),
		map[string]want{"host": {check.Error, "list GPUs: GPU inventory: nvmlInit: "}})

	// No driver and nothing on the bus: a node without GPUs.
	none := gpu.NewNode(m.Server, root, -1, "", gpu.WithBus(func() ([]string, error) { return nil, nil }))
	expect(t, run(t, New(root, ib.NewGather(root), numaFail, mgmt, FromNode(none))), map[string]want{"host": {check.Skip, "no GPUs"}})
}

func TestInterrupted(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.H100NDR)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rs := New(root, ib.NewGather(root), defaults(), mgmt, nil).Run(ctx)
	expect(t, rs, map[string]want{"host": {check.Error, "interrupted"}})
}

func fixed(addrs ...string) func(context.Context) ([]GPU, error) {
	return func(context.Context) ([]GPU, error) {
		var out []GPU
		for i, a := range addrs {
			out = append(out, GPU{Component: fmt.Sprintf("gpu%d", i), PCIAddr: a})
		}
		return out, nil
	}
}

func removeFile(rel string) mutation {
	return func(t *testing.T, root string) { sysfsfix.Remove(t, root, rel) }
}

func merge(ms ...map[int]want) map[int]want {
	out := map[int]want{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func run(t *testing.T, c check.Check) []check.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c.Name() != "topology" {
		t.Errorf("name %q", c.Name())
	}
	return c.Run(ctx)
}

// expect checks that rs holds exactly the components in w with their
// statuses and message fragments, and that every result is well formed.
func expect(t *testing.T, rs []check.Result, w map[string]want) {
	t.Helper()
	checktest.Expect(t, rs, w, checktest.WellFormed("topology"))
}

// packages sets each NUMA node's CPU package (pkg[n] for node n) on its
// first CPU, as the kernel shows it; the fixture trees have no
// cpu*/topology, so without this every socket is unknown.
func packages(pkg ...int) mutation {
	return func(t *testing.T, root string) {
		for n, p := range pkg {
			cpuPackage(firstCPU(t, root, n), strconv.Itoa(p))(t, root)
		}
	}
}

func cpuPackage(cpu int, v string) mutation {
	return func(t *testing.T, root string) {
		write(t, root, fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu), v)
	}
}

func cpuList(node int, list string) mutation {
	return func(t *testing.T, root string) {
		write(t, root, fmt.Sprintf("sys/devices/system/node/node%d/cpulist", node), list)
	}
}

// stride is a cpulist of n CPUs from first, step apart: "0,2,4,...".
func stride(first, step, n int) string {
	l := make([]string, n)
	for i := range l {
		l[i] = strconv.Itoa(first + i*step)
	}
	return strings.Join(l, ",")
}

// firstCPU is the first CPU of a NUMA node in the tree.
func firstCPU(t *testing.T, root string, node int) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, fmt.Sprintf("sys/devices/system/node/node%d/cpulist", node)))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(b)), "-")
	first, _, _ = strings.Cut(first, ",")
	n, err := strconv.Atoi(first)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// write adds a file the tree does not have.
func write(t *testing.T, root, rel, value string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(value+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// vfHCA adds SR-IOV virtual function fn of mlx5_<pf> as RDMA device
// name, its port ACTIVE, laid out as mlx5_core does on the host: a PCI
// function beside the PF's with a physfn link to it, on the PCI bus, with
// infiniband/<name> below it and the class link.
func vfHCA(pf int, name string, fn int) mutation {
	return func(t *testing.T, root string) {
		class := filepath.Join(root, "sys/class/infiniband")
		target, err := os.Readlink(filepath.Join(class, fmt.Sprintf("mlx5_%d", pf)))
		if err != nil {
			t.Fatal(err)
		}
		pfRel := filepath.Dir(filepath.Dir(target)) // ../../devices/.../<pf addr>
		pfAddr := filepath.Base(pfRel)
		vfAddr := pfAddr[:len(pfAddr)-1] + strconv.Itoa(fn)
		vfRel := filepath.Join(filepath.Dir(pfRel), vfAddr)
		vf := filepath.Join(class, vfRel)
		ib := filepath.Join(vfRel, "infiniband", name)
		for attr, v := range map[string]string{"vendor": "0x15b3", "device": "0x101e", "class": "0x020700", "numa_node": "-1",
			"infiniband/" + name + "/fw_ver": "28.39.1002", "infiniband/" + name + "/ports/1/state": "4: ACTIVE",
			"infiniband/" + name + "/ports/1/phys_state": "5: LinkUp", "infiniband/" + name + "/ports/1/rate": "400 Gb/sec (4X NDR)",
			"infiniband/" + name + "/ports/1/link_layer": "InfiniBand"} {
			write(t, vf, attr, v)
		}
		for link, to := range map[string]string{
			filepath.Join(vf, "physfn"):                        "../" + pfAddr,
			filepath.Join(class, ib, "device"):                 "../../../" + vfAddr,
			filepath.Join(class, name):                         ib,
			filepath.Join(root, "sys/bus/pci/devices", vfAddr): filepath.Join("..", vfRel),
		} {
			if err := os.Symlink(to, link); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// softHCA adds a software RDMA device (rdma_rxe) with an ACTIVE port: its
// class link leads to devices/virtual, not to a PCI device.
func softHCA(dev string) mutation {
	return func(t *testing.T, root string) {
		dir := "sys/devices/virtual/infiniband/" + dev
		for attr, v := range map[string]string{"fw_ver": "0.0.0", "ports/1/state": "4: ACTIVE",
			"ports/1/phys_state": "5: LinkUp", "ports/1/rate": "10 Gb/sec (1X QDR)", "ports/1/link_layer": "Ethernet"} {
			write(t, root, dir+"/"+attr, v)
		}
		if err := os.Symlink("../../devices/virtual/infiniband/"+dev, filepath.Join(root, "sys/class/infiniband", dev)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadNUMA(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		content string // "\x00" : no file
		node    int
		fail    bool
	}{
		{"0\n", 0, false},
		{"1\n", 1, false},
		{"-1\n", -1, false},
		{"\x00", -1, false},
		{"1023\n", 1023, false},
		{"1024\n", -1, true},
		{"-2\n", -1, true},
		{"\n", -1, true},
		{"one\n", -1, true},
		{"0x1\n", -1, true},
		{strings.Repeat("1", 100), -1, true},
	}
	for i, tc := range tests {
		p := filepath.Join(dir, strconv.Itoa(i))
		if tc.content != "\x00" {
			if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		n, err := readNUMA(p)
		if n != tc.node || (err != nil) != tc.fail {
			t.Errorf("numa_node %q: got %d, %v; want %d, fail=%v", tc.content, n, err, tc.node, tc.fail)
		}
	}
}
