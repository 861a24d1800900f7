package gpu

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

var nvlModels = []string{"dgxa100", "dgxh100", "dgxh200", "dgxb200"}

// nvlMachine builds a simulated machine with the given --inject specs.
func nvlMachine(t *testing.T, model string, inject ...string) *sim.Machine {
	t.Helper()
	m, err := sim.Build(model, inject)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func nvlNode(m *sim.Machine, model string) *Node {
	return NewNode(m.Server, "", -1, model, WithBus(m.OnBus))
}

func nvlConfig() config.GPUNVLink {
	return config.GPUNVLink{Common: config.Common{Enabled: true}, ExpectedLinks: -1,
		CRCDeltaMax: 100, ReplayDeltaMax: 100, RecoveryDeltaMax: 1}
}

// nvlRun runs gpu.nvlink once on m, as one run of the binary would.
func nvlRun(t *testing.T, m *sim.Machine, model string, cfg config.GPUNVLink, st statefile.Dir) []check.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return NewNVLink(nvlNode(m, model), cfg, st).Run(ctx)
}

// nvlFind returns the results about component.
func nvlFind(rs []check.Result, component string) []check.Result {
	var out []check.Result
	for _, r := range rs {
		if r.Component == component {
			out = append(out, r)
		}
	}
	return out
}

// nvlWant asserts component's results are exactly want ("STATUS action message").
func nvlWant(t *testing.T, rs []check.Result, component string, want ...string) {
	t.Helper()
	var got []string
	for _, r := range nvlFind(rs, component) {
		got = append(got, r.Status.String()+" "+string(r.Action)+" "+r.Message)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n got %q\nwant %q", component, got, want)
	}
}

// nvlIDs asserts every result about GPU i carries its identifiers.
func nvlIDs(t *testing.T, m *sim.Machine, rs []check.Result) {
	t.Helper()
	for _, r := range rs {
		if !strings.HasPrefix(r.Component, "gpu") {
			continue
		}
		ids := r.IDs
		if ids.GPUIndex == nil || r.Component != "gpu"+strconv.Itoa(*ids.GPUIndex) {
			t.Errorf("%s: index %v", r.Component, ids.GPUIndex)
			continue
		}
		i := *ids.GPUIndex
		if ids.UUID != m.Model.UUID(i) || ids.Serial != m.Model.Serial(i) || ids.PCIBusID != m.Model.PCIBusID(i) {
			t.Errorf("%s: IDs %+v", r.Component, ids)
		}
	}
}

func nvlHealthy(m *sim.Machine) string {
	n := strconv.Itoa(m.Model.NVLinks)
	return "OK none " + n + " of " + n + " NVLinks active"
}

func TestNVLinkHealthy(t *testing.T) {
	for _, model := range nvlModels {
		t.Run(model, func(t *testing.T) {
			st := statefile.Dir{Path: t.TempDir()}
			first := nvlRun(t, nvlMachine(t, model), model, nvlConfig(), st)
			second := nvlRun(t, nvlMachine(t, model), model, nvlConfig(), st)
			if len(first) != 8 || len(second) != 8 {
				t.Fatalf("want one result per GPU, got %d and %d", len(first), len(second))
			}
			m := nvlMachine(t, model)
			for i := 0; i < 8; i++ {
				c := "gpu" + strconv.Itoa(i)
				nvlWant(t, first, c, nvlHealthy(m)+"; error counter baseline recorded")
				nvlWant(t, second, c, nvlHealthy(m)+"; error deltas within limits")
			}
			nvlIDs(t, m, first)
		})
	}
}

func TestKnownNVLinksMatchesSimulators(t *testing.T) {
	for _, model := range nvlModels {
		m := nvlMachine(t, model)
		if got := KnownNVLinks(m.Model.GPUName); got != m.Model.NVLinks {
			t.Errorf("%s %q: %d links, simulator has %d", model, m.Model.GPUName, got, m.Model.NVLinks)
		}
	}
	for _, name := range []string{"NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA A100-PCIE-40GB",
		"NVIDIA A800-SXM4-80GB", "NVIDIA H800 80GB HBM3", "Tesla V100-SXM2-32GB", "NVIDIA L40S"} {
		if got := KnownNVLinks(name); got != 0 {
			t.Errorf("%q: %d, want 0 (unknown)", name, got)
		}
	}
	for name, want := range map[string]int{"NVIDIA H100 80GB HBM3": 18, "NVIDIA H200": 18, "NVIDIA H200 141GB HBM3e": 18,
		"NVIDIA A100-SXM4-80GB": 12, "NVIDIA B200": 18, "NVIDIA B200 180GB HBM3e": 18} {
		if got := KnownNVLinks(name); got != want {
			t.Errorf("%q: %d, want %d", name, got, want)
		}
	}
}

// TestNVLinkFaults: one run each, the fault on one GPU, the others healthy.
func TestNVLinkFaults(t *testing.T) {
	for _, tc := range []struct {
		model, inject string
		cfg           func(*config.GPUNVLink)
		gpu           int
		want          []string
	}{
		{"dgxh100", "gpu3:nvlink-down=5", nil, 3, []string{"FAIL drain NVLink 5 inactive (17 of 18 active)"}},
		{"dgxh200", "gpu0:nvlink-down=5,gpu0:nvlink-down=6", nil, 0, []string{"FAIL drain NVLinks 5, 6 inactive (16 of 18 active)"}},
		{"dgxb200", "gpu7:nvlink-down=0,gpu7:nvlink-down=1,gpu7:nvlink-down=2,gpu7:nvlink-down=17", nil, 7,
			[]string{"FAIL drain NVLinks 0-2, 17 inactive (14 of 18 active)"}},
		{"dgxa100", "gpu2:nvlink-down=11", nil, 2, []string{"FAIL drain NVLink 11 inactive (11 of 12 active)"}},
		// An SXM part reporting no link at all has lost them; a PCIe part
		// has none, and none required is none required.
		{"dgxh100", "gpu1:nvlink=unsupported", nil, 1, []string{"FAIL drain no NVLink reported (18 expected)"}},
		{"dgxh100", "gpu1:name=NVIDIA H100 PCIe,gpu1:nvlink=unsupported", nil, 1, []string{"SKIP none no NVLink (PCIe GPU)"}},
		{"dgxh100", "gpu1:nvlink=unsupported", func(c *config.GPUNVLink) { c.ExpectedLinks = 0 }, 1, []string{"SKIP none no NVLink (PCIe GPU)"}},
		{"dgxb200", "gpu4:nvlink-counters=unsupported", nil, 4,
			[]string{"OK none 18 of 18 NVLinks active", "SKIP none NVLink error counters not supported"}},
		{"dgxb200", "gpu4:nvlink-counters=unsupported,gpu4:nvlink-down=9", nil, 4,
			[]string{"FAIL drain NVLink 9 inactive (17 of 18 active)", "SKIP none NVLink error counters not supported"}},
		// Explicit expectations: fewer links required, or none.
		{"dgxh100", "gpu3:nvlink-down=5", func(c *config.GPUNVLink) { c.ExpectedLinks = 16 }, 3,
			[]string{"OK none 17 NVLinks active (16 expected); error counter baseline recorded"}},
		{"dgxh100", "gpu3:nvlink-down=5", func(c *config.GPUNVLink) { c.ExpectedLinks = 18 }, 3,
			[]string{"FAIL drain NVLink 5 inactive (17 of 18 active)"}},
		{"dgxa100", "", func(c *config.GPUNVLink) { c.ExpectedLinks = 14 }, 0,
			[]string{"FAIL drain NVLinks 12, 13 inactive (12 of 14 active)"}},
	} {
		t.Run(tc.model+"/"+tc.inject, func(t *testing.T) {
			cfg := nvlConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			m := nvlMachine(t, tc.model, tc.inject)
			rs := nvlRun(t, m, tc.model, cfg, statefile.Dir{Path: t.TempDir()})
			nvlWant(t, rs, "gpu"+strconv.Itoa(tc.gpu), tc.want...)
			for _, r := range rs {
				if tc.inject != "" && r.Component != "gpu"+strconv.Itoa(tc.gpu) && r.Status != check.OK {
					t.Errorf("healthy %s: %s %s", r.Component, r.Status, r.Message)
				}
			}
			nvlIDs(t, m, rs)
		})
	}
}

// TestNVLinkMissingLinks: a GPU whose driver stops reporting links (NOT
// SUPPORTED, not FEATURE_DISABLED) is judged against its part's count.
func TestNVLinkMissingLinks(t *testing.T) {
	m := nvlMachine(t, "dgxh100")
	d := m.Devices[6]
	prev := d.GetNvLinkStateFunc
	d.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
		if l >= 16 && l < nvml.NVLINK_MAX_LINKS {
			return nvml.FEATURE_DISABLED, nvml.ERROR_NOT_SUPPORTED
		}
		return prev(l)
	}
	rs := nvlRun(t, m, "dgxh100", nvlConfig(), statefile.Dir{Path: t.TempDir()})
	nvlWant(t, rs, "gpu6", "FAIL drain NVLinks 16, 17 inactive (16 of 18 active)")
}

// TestNVLinkCounterDeltas: two runs sharing a state directory; the second
// carries the fault.
func TestNVLinkCounterDeltas(t *testing.T) {
	for _, tc := range []struct {
		model, inject string
		gpu           int
		want          []string
	}{
		{"dgxh100", "gpu2:nvlink-crc=3:150", 2, []string{"FAIL drain NVLink 3 CRC delta 150 > 100"}},
		{"dgxh200", "gpu5:nvlink-replay=101", 5, []string{"FAIL drain NVLink 0 replay delta 101 > 100"}},
		{"dgxb200", "gpu0:nvlink-recovery=17:2", 0, []string{"FAIL drain NVLink 17 recovery delta 2 > 1"}},
		{"dgxa100", "gpu1:nvlink-crc=11:500,gpu1:nvlink-replay=11:200", 1,
			[]string{"FAIL drain NVLink 11 CRC delta 500 > 100", "FAIL drain NVLink 11 replay delta 200 > 100"}},
		{"dgxh100", "gpu2:nvlink-crc=3:150,gpu2:nvlink-down=3", 2,
			[]string{"FAIL drain NVLink 3 inactive (17 of 18 active)", "FAIL drain NVLink 3 CRC delta 150 > 100"}},
		// At the limit is within it.
		{"dgxh100", "gpu2:nvlink-crc=100,gpu2:nvlink-recovery=1", 2,
			[]string{"OK none 18 of 18 NVLinks active; error deltas within limits"}},
	} {
		t.Run(tc.model+"/"+tc.inject, func(t *testing.T) {
			st := statefile.Dir{Path: t.TempDir()}
			nvlRun(t, nvlMachine(t, tc.model), tc.model, nvlConfig(), st)
			m := nvlMachine(t, tc.model, tc.inject)
			rs := nvlRun(t, m, tc.model, nvlConfig(), st)
			nvlWant(t, rs, "gpu"+strconv.Itoa(tc.gpu), tc.want...)
			if len(rs) != 7+len(tc.want) {
				t.Errorf("%d results, want %d: %+v", len(rs), 7+len(tc.want), rs)
			}
			nvlIDs(t, m, rs)
		})
	}
}

// TestNVLinkFirstRunIsBaseline: counters high since boot are no growth.
func TestNVLinkFirstRunIsBaseline(t *testing.T) {
	rs := nvlRun(t, nvlMachine(t, "dgxh100", "gpu2:nvlink-crc=3:5000"), "dgxh100", nvlConfig(), statefile.Dir{Path: t.TempDir()})
	if check.Worst(rs) != check.OK {
		t.Errorf("first run: %+v", rs)
	}
}

// TestNVLinkCounterReset: a counter lower than before (driver reload, GPU
// reset) is a new baseline, not a huge delta; growth after it counts from
// the new value.
func TestNVLinkCounterReset(t *testing.T) {
	st := statefile.Dir{Path: t.TempDir()}
	nvlRun(t, nvlMachine(t, "dgxh100", "gpu4:nvlink-crc=2:5000"), "dgxh100", nvlConfig(), st)
	rs := nvlRun(t, nvlMachine(t, "dgxh100", "gpu4:nvlink-crc=2:30"), "dgxh100", nvlConfig(), st)
	nvlWant(t, rs, "gpu4", "OK none 18 of 18 NVLinks active; error counters reset, new baseline")
	rs = nvlRun(t, nvlMachine(t, "dgxh100", "gpu4:nvlink-crc=2:200"), "dgxh100", nvlConfig(), st)
	nvlWant(t, rs, "gpu4", "FAIL drain NVLink 2 CRC delta 170 > 100")
	rs = nvlRun(t, nvlMachine(t, "dgxh100", "gpu4:nvlink-crc=2:200"), "dgxh100", nvlConfig(), st)
	nvlWant(t, rs, "gpu4", "OK none 18 of 18 NVLinks active; error deltas within limits")
}

// TestNVLinkReadOnly: a dry run loads but never saves, so a fault seen in
// a dry run is seen again by the next real run.
func TestNVLinkReadOnly(t *testing.T) {
	dir := t.TempDir()
	ro := statefile.Dir{Path: dir, ReadOnly: true}
	nvlRun(t, nvlMachine(t, "dgxh100"), "dgxh100", nvlConfig(), ro)
	if _, err := os.Stat(filepath.Join(dir, nvlinkStateFile)); !os.IsNotExist(err) {
		t.Fatalf("read-only run saved: %v", err)
	}
	rw := statefile.Dir{Path: dir}
	nvlRun(t, nvlMachine(t, "dgxh100"), "dgxh100", nvlConfig(), rw)
	for i := 0; i < 2; i++ {
		rs := nvlRun(t, nvlMachine(t, "dgxh100", "gpu1:nvlink-crc=1:400"), "dgxh100", nvlConfig(), ro)
		nvlWant(t, rs, "gpu1", "FAIL drain NVLink 1 CRC delta 400 > 100")
	}
}

// TestNVLinkState: the record is keyed by UUID, drops GPUs gone from the
// node, and survives a corrupt file by starting afresh.
func TestNVLinkState(t *testing.T) {
	dir := t.TempDir()
	st := statefile.Dir{Path: dir}
	gone := nvlinkState{GPUs: map[string]map[int]linkCounters{"GPU-gone": {0: {"crc": 1}}}}
	if err := st.Save(nvlinkStateFile, gone); err != nil {
		t.Fatal(err)
	}
	m := nvlMachine(t, "dgxh100")
	nvlRun(t, m, "dgxh100", nvlConfig(), st)
	var got nvlinkState
	if err := st.Load(nvlinkStateFile, &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.GPUs["GPU-gone"]; ok || len(got.GPUs) != 8 {
		t.Errorf("record: %d GPUs, gone kept: %v", len(got.GPUs), ok)
	}
	if c := got.GPUs[m.Model.UUID(3)][17]; len(c) != 3 {
		t.Errorf("gpu3 link 17: %v", c)
	}
	if err := os.WriteFile(filepath.Join(dir, nvlinkStateFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	rs := nvlRun(t, nvlMachine(t, "dgxh100", "gpu0:nvlink-crc=900"), "dgxh100", nvlConfig(), st)
	nvlWant(t, rs, "gpu0", "OK none 18 of 18 NVLinks active; error counter baseline recorded")
	if len(rs) != 8 {
		t.Errorf("corrupt record: %+v", rs)
	}
}

// TestNVLinkHang: NVML blocks on one GPU; it FAILs by name, and the
// baselines of the GPUs not reached are kept.
func TestNVLinkHang(t *testing.T) {
	st := statefile.Dir{Path: t.TempDir()}
	nvlRun(t, nvlMachine(t, "dgxh200"), "dgxh200", nvlConfig(), st)
	m := nvlMachine(t, "dgxh200", "gpu5:nvlink-crc=1000")
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	m.Devices[3].GetNvLinkErrorCounterFunc = func(int, nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
		<-block
		return 0, nvml.SUCCESS
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	rs := NewNVLink(nvlNode(m, "dgxh200"), nvlConfig(), st).Run(ctx)
	hung := nvlFind(rs, "gpu3")
	if len(hung) != 1 || hung[0].Status != check.Fail || hung[0].Action != check.ActionReboot ||
		!strings.HasPrefix(hung[0].Message, "NVML did not answer in ") {
		t.Fatalf("gpu3: %+v", hung)
	}
	nvlIDs(t, m, rs)
	for i := 0; i < 3; i++ {
		nvlWant(t, rs, "gpu"+strconv.Itoa(i), "OK none 18 of 18 NVLinks active; error deltas within limits")
	}
	for i := 4; i < 8; i++ {
		if got := nvlFind(rs, "gpu"+strconv.Itoa(i)); len(got) != 0 {
			t.Errorf("gpu%d judged after the hang: %+v", i, got)
		}
	}
	var rec nvlinkState
	if err := st.Load(nvlinkStateFile, &rec); err != nil || len(rec.GPUs) != 8 {
		t.Fatalf("record after hang: %d GPUs, %v", len(rec.GPUs), err)
	}
	// gpu5 was not reached: its baseline is still the healthy one, so the
	// next run sees the growth.
	rs = nvlRun(t, nvlMachine(t, "dgxh200", "gpu5:nvlink-crc=1000"), "dgxh200", nvlConfig(), st)
	nvlWant(t, rs, "gpu5", "FAIL drain NVLink 0 CRC delta 1000 > 100")
}

// TestNVLinkNVMLError: an NVML error other than "no such link" is ERROR,
// never FAIL, and keeps the previous record.
func TestNVLinkNVMLError(t *testing.T) {
	st := statefile.Dir{Path: t.TempDir()}
	nvlRun(t, nvlMachine(t, "dgxh100"), "dgxh100", nvlConfig(), st)
	m := nvlMachine(t, "dgxh100", "gpu2:nvlink-crc=7:300")
	d := m.Devices[2]
	prev := d.GetNvLinkErrorCounterFunc
	d.GetNvLinkErrorCounterFunc = func(l int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
		if l == 4 {
			return 0, nvml.ERROR_UNKNOWN
		}
		return prev(l, c)
	}
	m.Devices[6].GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	rs := nvlRun(t, m, "dgxh100", nvlConfig(), st)
	nvlWant(t, rs, "gpu2", "ERROR none nvmlDeviceGetNvLinkErrorCounter(link 4, CRC): "+nvml.ErrorString(nvml.ERROR_UNKNOWN))
	nvlWant(t, rs, "gpu6", "ERROR none nvmlDeviceGetNvLinkState(link 0): "+nvml.ErrorString(nvml.ERROR_GPU_IS_LOST))
	rs = nvlRun(t, nvlMachine(t, "dgxh100", "gpu2:nvlink-crc=7:300"), "dgxh100", nvlConfig(), st)
	nvlWant(t, rs, "gpu2", "FAIL drain NVLink 7 CRC delta 300 > 100")
}

func TestNVLinkNoGPUs(t *testing.T) {
	m := nvlMachine(t, "dgxh100", "gpu0:nvml-init")
	rs := nvlRun(t, m, "dgxh100", nvlConfig(), statefile.Dir{Path: t.TempDir()})
	if len(rs) != 1 || rs[0].Component != "host" || rs[0].Status == check.Fail {
		t.Errorf("NVML down: %+v", rs)
	}
}

func TestLinkRanges(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{[]int{5}, "5"}, {[]int{5, 6}, "5, 6"}, {[]int{0, 1, 2, 17}, "0-2, 17"},
		{[]int{1, 3, 4, 5, 6, 9, 10}, "1, 3-6, 9, 10"}, {nil, ""},
	} {
		if got := linkRanges(tc.in); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestNVLinkInjectErrors(t *testing.T) {
	for _, inject := range []string{"gpu0:nvlink-down=18", "gpu0:nvlink-down", "gpu0:nvlink-crc=x",
		"gpu0:nvlink-crc=18:5", "gpu0:nvlink-replay=-1", "gpu0:nvlink=off", "gpu0:nvlink-counters",
		"gpu0:nvlink-active=19", "gpu0:nvlink-active=-1", "gpu0:nvlink-active", "gpu0:name"} {
		specs, err := sim.ParseSpecs([]string{inject})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sim.New("dgxh100", specs); err == nil {
			t.Errorf("%s accepted", inject)
		}
	}
	if _, err := sim.New("dgxa100", []sim.Spec{{GPU: 0, Key: "nvlink-down", Value: "12"}}); err == nil {
		t.Error("dgxa100 link 12 accepted (it has 12 links)")
	}
}

// Names of parts the knownNVLinks table does not list.
const (
	a100PCIe = "NVIDIA A100-PCIE-40GB"
	h100PCIe = "NVIDIA H100 PCIe"
	h100NVL  = "NVIDIA H100 NVL"
)

// TestNVLinkPCIeCard: a PCIe card without an NVLink bridge reports every
// link it has, none active. It has no NVLink to judge: SKIP, run after
// run, where the links it reports used to make it FAIL (and drain).
func TestNVLinkPCIeCard(t *testing.T) {
	for _, tc := range []struct{ model, name string }{{"dgxa100", a100PCIe}, {"dgxh100", h100PCIe}, {"dgxh200", h100NVL}} {
		t.Run(tc.name, func(t *testing.T) {
			st := statefile.Dir{Path: t.TempDir()}
			inject := "gpu2:name=" + tc.name + ",gpu2:nvlink=inactive"
			for run := 0; run < 2; run++ {
				m := nvlMachine(t, tc.model, inject)
				rs := nvlRun(t, m, tc.model, nvlConfig(), st)
				nvlWant(t, rs, "gpu2", "SKIP none no NVLink connected")
				if len(rs) != 8 {
					t.Errorf("run %d: %d results: %+v", run, len(rs), rs)
				}
				nvlIDs(t, m, rs)
			}
			var rec nvlinkState
			if err := st.Load(nvlinkStateFile, &rec); err != nil {
				t.Fatal(err)
			}
			m := nvlMachine(t, tc.model)
			if a, ok := rec.Active[m.Model.UUID(2)]; ok {
				t.Errorf("unconnected card recorded %+v", a)
			}
			if a := rec.Active[m.Model.UUID(3)]; a.Max != m.Model.NVLinks || len(a.Links) != m.Model.NVLinks {
				t.Errorf("gpu3 recorded %+v", a)
			}
		})
	}
	// The same card in the table's SXM form is expected to have its links.
	rs := nvlRun(t, nvlMachine(t, "dgxh100", "gpu0:nvlink=inactive"), "dgxh100", nvlConfig(), statefile.Dir{Path: t.TempDir()})
	nvlWant(t, rs, "gpu0", "FAIL drain NVLinks 0-17 inactive (0 of 18 active)")
}

// TestNVLinkUnknownPartLinkDown: on a part the table does not list, the
// most links seen active is the expectation; fewer FAILs, on the second
// run, naming the link that went down.
func TestNVLinkUnknownPartLinkDown(t *testing.T) {
	st := statefile.Dir{Path: t.TempDir()}
	step := func(inject string, want ...string) {
		t.Helper()
		m := nvlMachine(t, "dgxa100", "gpu5:name="+a100PCIe+","+inject)
		rs := nvlRun(t, m, "dgxa100", nvlConfig(), st)
		nvlWant(t, rs, "gpu5", want...)
		nvlIDs(t, m, rs)
		for _, r := range rs {
			if r.Component != "gpu5" && r.Status != check.OK {
				t.Errorf("healthy %s: %s %s", r.Component, r.Status, r.Message)
			}
		}
	}
	// A bridge joining 4 of the card's 12 links.
	step("gpu5:nvlink-active=4", "OK none 4 of 12 NVLinks active; error counter baseline recorded")
	step("gpu5:nvlink-active=3", "FAIL drain NVLink 3 inactive (3 active, 4 seen before)")
	// Still one down: still FAIL (the expectation does not come down).
	step("gpu5:nvlink-active=3", "FAIL drain NVLink 3 inactive (3 active, 4 seen before)")
	step("gpu5:nvlink-active=4", "OK none 4 of 12 NVLinks active; error deltas within limits")
	// Every link of the bridge down is not a card without a bridge.
	step("gpu5:nvlink=inactive", "FAIL drain NVLinks 0-3 inactive (0 active, 4 seen before)")
	// More links than ever: the expectation grows.
	step("gpu5:nvlink-active=6", "OK none 6 of 12 NVLinks active; error deltas within limits")
	step("gpu5:nvlink-active=4,gpu5:nvlink-down=1", "FAIL drain NVLinks 1, 4, 5 inactive (3 active, 6 seen before)")

	var rec nvlinkState
	if err := st.Load(nvlinkStateFile, &rec); err != nil {
		t.Fatal(err)
	}
	m := nvlMachine(t, "dgxa100")
	if a := rec.Active[m.Model.UUID(5)]; a.Max != 6 || fmt.Sprint(a.Links) != "[0 1 2 3 4 5]" {
		t.Errorf("gpu5 recorded %+v", a)
	}
}

// TestNVLinkKnownPartLearns: on a listed part the table is the floor, and
// more links seen than it lists raise the expectation.
func TestNVLinkKnownPartLearns(t *testing.T) {
	st := statefile.Dir{Path: t.TempDir()}
	rs := nvlRun(t, nvlMachine(t, "dgxh100", "gpu1:nvlink-down=2"), "dgxh100", nvlConfig(), st)
	nvlWant(t, rs, "gpu1", "FAIL drain NVLink 2 inactive (17 of 18 active)")
	nvlRun(t, nvlMachine(t, "dgxh100"), "dgxh100", nvlConfig(), st)
	rs = nvlRun(t, nvlMachine(t, "dgxh100", "gpu1:nvlink-down=2"), "dgxh100", nvlConfig(), st)
	nvlWant(t, rs, "gpu1", "FAIL drain NVLink 2 inactive (17 of 18 active)")
}

// TestNVLinkMIG: a GPU in MIG mode has its link state left alone (its
// error counters are still judged), and the most links seen active is
// kept for when MIG is off again.
func TestNVLinkMIG(t *testing.T) {
	st := statefile.Dir{Path: t.TempDir()}
	name := "gpu1:name=" + h100NVL
	rs := nvlRun(t, nvlMachine(t, "dgxh100", name, "gpu1:nvlink-active=8"), "dgxh100", nvlConfig(), st)
	nvlWant(t, rs, "gpu1", "OK none 8 of 18 NVLinks active; error counter baseline recorded")
	for _, inject := range []string{"gpu1:mig=on,gpu1:nvlink=inactive", "gpu1:mig=on,gpu1:nvlink-down=3,gpu1:nvlink-active=18"} {
		rs = nvlRun(t, nvlMachine(t, "dgxh100", name, inject), "dgxh100", nvlConfig(), st)
		nvlWant(t, rs, "gpu1", "OK none error deltas within limits", "SKIP none MIG enabled: NVLink state not judged")
	}
	rs = nvlRun(t, nvlMachine(t, "dgxh100", name, "gpu1:nvlink-active=7"), "dgxh100", nvlConfig(), st)
	nvlWant(t, rs, "gpu1", "FAIL drain NVLink 7 inactive (7 active, 8 seen before)")

	// A listed part in MIG mode: no FAIL for its inactive links, and the
	// counters still count.
	rs = nvlRun(t, nvlMachine(t, "dgxa100", "gpu0:mig=on,gpu0:nvlink=inactive"), "dgxa100", nvlConfig(), statefile.Dir{Path: t.TempDir()})
	nvlWant(t, rs, "gpu0", "OK none error counter baseline recorded", "SKIP none MIG enabled: NVLink state not judged")
	rs = nvlRun(t, nvlMachine(t, "dgxh100", "gpu2:mig=on,gpu2:nvlink-crc=4:900"), "dgxh100", nvlConfig(), st)
	nvlWant(t, rs, "gpu2", "FAIL drain NVLink 4 CRC delta 900 > 100", "SKIP none MIG enabled: NVLink state not judged")

	// MIG mode that cannot be read (pre-Ampere) is not MIG.
	m := nvlMachine(t, "dgxh100", "gpu3:nvlink-down=0")
	m.Devices[3].GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
	nvlWant(t, nvlRun(t, m, "dgxh100", nvlConfig(), statefile.Dir{Path: t.TempDir()}), "gpu3", "FAIL drain NVLink 0 inactive (17 of 18 active)")
}

// TestNVLinkExpectedIgnoresSeen: an explicit expected_links is the
// expectation, whatever was seen before.
func TestNVLinkExpectedIgnoresSeen(t *testing.T) {
	st := statefile.Dir{Path: t.TempDir()}
	cfg := nvlConfig()
	cfg.ExpectedLinks = 2
	nvlRun(t, nvlMachine(t, "dgxa100", "gpu0:name="+a100PCIe, "gpu0:nvlink-active=4"), "dgxa100", cfg, st)
	rs := nvlRun(t, nvlMachine(t, "dgxa100", "gpu0:name="+a100PCIe, "gpu0:nvlink-active=3"), "dgxa100", cfg, st)
	nvlWant(t, rs, "gpu0", "OK none 3 NVLinks active (2 expected); error deltas within limits")
	rs = nvlRun(t, nvlMachine(t, "dgxa100", "gpu0:name="+a100PCIe, "gpu0:nvlink=inactive"), "dgxa100", cfg, st)
	nvlWant(t, rs, "gpu0", "FAIL drain NVLinks 0-11 inactive (0 of 2 active)")
	// Back to -1: the 4 seen under the explicit setting count.
	rs = nvlRun(t, nvlMachine(t, "dgxa100", "gpu0:name="+a100PCIe, "gpu0:nvlink-active=3"), "dgxa100", nvlConfig(), st)
	nvlWant(t, rs, "gpu0", "FAIL drain NVLink 3 inactive (3 active, 4 seen before)")
}
