package gpu

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

// fabRun runs gpu.fabric once on m with a fresh state directory.
func fabRun(t *testing.T, m *sim.Machine, model string) []check.Result {
	t.Helper()
	return fabRunIn(t, m, model, statefile.Dir{Path: t.TempDir()})
}

// fabRunIn runs gpu.fabric once on m, as one run of the binary would.
func fabRunIn(t *testing.T, m *sim.Machine, model string, st statefile.Dir) []check.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return NewFabric(nvlNode(m, model), st).Run(ctx)
}

const (
	fabOK   = "OK none fabric registration completed, healthy"
	fabSkip = "SKIP none no NVLink fabric state (PCIe, pre-Hopper or no NVSwitch)"
)

func TestFabricHealthy(t *testing.T) {
	for _, model := range nvlModels {
		t.Run(model, func(t *testing.T) {
			m := nvlMachine(t, model)
			rs := fabRun(t, m, model)
			if len(rs) != 8 {
				t.Fatalf("want one result per GPU, got %+v", rs)
			}
			want := fabOK
			if model == "dgxa100" { // NVSwitches, but no fabric state before Hopper
				want = fabSkip
			}
			for i := 0; i < 8; i++ {
				nvlWant(t, rs, "gpu"+strconv.Itoa(i), want)
			}
			nvlIDs(t, m, rs)
		})
	}
}

func TestFabricFaults(t *testing.T) {
	for _, tc := range []struct {
		model, inject string
		gpu           int
		want          string
	}{
		// Fabric Manager still working: a first sighting (see TestFabricTwoRuns).
		{"dgxh100", "gpu2:fabric=in-progress", 2, "WARN none fabric not initialised yet (state in-progress, first sighting)"},
		{"dgxh200", "gpu0:fabric=not-started", 0, "WARN none fabric not initialised yet (state not-started, first sighting)"},
		{"dgxb200", "gpu7:fabric=failed", 7, "FAIL drain fabric registration failed: " + nvml.ErrorString(nvml.ERROR_UNKNOWN)},
		{"dgxh100", "gpu5:fabric-degraded-bw", 5, "FAIL drain fabric health: bandwidth degraded"},
		{"dgxb200", "gpu1:fabric-route-unhealthy", 1, "FAIL drain fabric health: route unhealthy"},
		{"dgxh200", "gpu4:fabric-degraded-bw,gpu4:fabric-route-unhealthy,gpu4:fabric-route-recovery", 4,
			"FAIL drain fabric health: bandwidth degraded, route unhealthy, route recovery in progress"},
		{"dgxh100", "gpu6:fabric-route-recovery", 6, "WARN none fabric health: route recovery in progress"},
		{"dgxh100", "gpu3:fabric=unsupported", 3, fabSkip},
		{"dgxb200", "gpu3:fabric=unsupported", 3, fabSkip},
		// A registration still in progress says nothing about health yet.
		{"dgxh100", "gpu2:fabric-degraded-bw,gpu2:fabric=in-progress", 2, "WARN none fabric not initialised yet (state in-progress, first sighting)"},
	} {
		t.Run(tc.model+"/"+tc.inject, func(t *testing.T) {
			m := nvlMachine(t, tc.model, tc.inject)
			rs := fabRun(t, m, tc.model)
			c := "gpu" + strconv.Itoa(tc.gpu)
			nvlWant(t, rs, c, tc.want)
			for _, r := range rs {
				if r.Component != c && r.Status != check.OK {
					t.Errorf("healthy %s: %s %s", r.Component, r.Status, r.Message)
				}
			}
			nvlIDs(t, m, rs)
		})
	}
}

// TestFabricFaultsNeedFabric: DGX A100 reports no fabric state, so its
// fabric faults are refused rather than silently ignored.
func TestFabricFaultsNeedFabric(t *testing.T) {
	for _, inject := range []string{"gpu0:fabric=in-progress", "gpu0:fabric-degraded-bw", "gpu0:fabric=bogus"} {
		specs, _ := sim.ParseSpecs([]string{inject})
		if _, err := sim.New("dgxa100", specs); err == nil {
			t.Errorf("%s on dgxa100 accepted", inject)
		}
	}
	m := nvlMachine(t, "dgxa100", "gpu0:fabric=unsupported")
	nvlWant(t, fabRun(t, m, "dgxa100"), "gpu0", fabSkip)
}

func TestFabricHang(t *testing.T) {
	m := nvlMachine(t, "dgxh100")
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	m.Devices[2].GetGpuFabricInfo_v4Func = func() (nvml.GpuFabricInfo_v4, nvml.Return) {
		<-block
		return nvml.GpuFabricInfo_v4{}, nvml.SUCCESS
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	rs := NewFabric(nvlNode(m, "dgxh100"), statefile.Dir{Path: t.TempDir()}).Run(ctx)
	if len(rs) != 3 {
		t.Fatalf("want gpu0, gpu1 and the hung gpu2: %+v", rs)
	}
	nvlWant(t, rs, "gpu0", fabOK)
	r := rs[2]
	if r.Component != "gpu2" || r.Status != check.Fail || r.Action != check.ActionReboot ||
		!strings.HasPrefix(r.Message, "NVML did not answer in ") {
		t.Errorf("hung gpu2: %+v", r)
	}
	nvlIDs(t, m, rs)
}

// TestFabricOlderDrivers: the call is chosen by the symbols the library
// has; v1 has no health mask, and no symbol at all is a SKIP.
func TestFabricOlderDrivers(t *testing.T) {
	for _, tc := range []struct {
		have []string
		want string
	}{
		{[]string{"nvmlDeviceGetGpuFabricInfo"}, "OK none fabric registration completed (health not reported by this driver)"},
		{nil, fabSkip},
	} {
		m := nvlMachine(t, "dgxh100", "gpu1:fabric-degraded-bw")
		m.Server.LookupSymbolFunc = func(s string) error {
			for _, h := range tc.have {
				if s == h {
					return nil
				}
			}
			return errors.New("undefined symbol " + s)
		}
		rs := fabRun(t, m, "dgxh100")
		nvlWant(t, rs, "gpu1", tc.want)
	}
}

func TestFabricNVMLError(t *testing.T) {
	m := nvlMachine(t, "dgxh100")
	m.Devices[4].GetGpuFabricInfo_v4Func = func() (nvml.GpuFabricInfo_v4, nvml.Return) {
		return nvml.GpuFabricInfo_v4{}, nvml.ERROR_GPU_IS_LOST
	}
	m.Devices[5].GetGpuFabricInfo_v4Func = func() (nvml.GpuFabricInfo_v4, nvml.Return) {
		return nvml.GpuFabricInfo_v4{State: 9}, nvml.SUCCESS
	}
	rs := fabRun(t, m, "dgxh100")
	nvlWant(t, rs, "gpu4", "ERROR none nvmlDeviceGetGpuFabricInfo: "+nvml.ErrorString(nvml.ERROR_GPU_IS_LOST))
	nvlWant(t, rs, "gpu5", "ERROR none fabric state 9 unknown")
}

func TestFabricHealthMask(t *testing.T) {
	for _, tc := range []struct {
		mask   uint32
		status check.Status
		want   string
	}{
		{0, check.OK, ""}, // every field "not supported"
		{0x1aa, check.OK, ""},
		{0x1a9, check.Fail, "bandwidth degraded"},
		{0x19a, check.Fail, "route unhealthy"},
		{0x1a6, check.Warn, "route recovery in progress"},
		{0x16a, check.Warn, "access timeout recovery in progress"},
		{0x155, check.Fail, "bandwidth degraded, route unhealthy, route recovery in progress, access timeout recovery in progress"},
		{0x3aa, check.OK, ""}, // incorrect configuration is left to multi-node domains
	} {
		st, problems := fabricHealth(tc.mask)
		if st != tc.status || strings.Join(problems, ", ") != tc.want {
			t.Errorf("%#x: %v %q, want %v %q", tc.mask, st, problems, tc.status, tc.want)
		}
	}
}

// TestFabricTwoRuns: a registration not completed FAILs only when the
// previous run found it not completed too; a failed one FAILs at once.
func TestFabricTwoRuns(t *testing.T) {
	const (
		warnIP = "WARN none fabric not initialised yet (state in-progress, first sighting)"
		warnNS = "WARN none fabric not initialised yet (state not-started, first sighting)"
		failIP = "FAIL drain fabric not initialised (state in-progress) on two consecutive runs"
		failed = "FAIL drain fabric registration failed: "
	)
	st := statefile.Dir{Path: t.TempDir()}
	step := func(inject string, gpu int, want string) {
		t.Helper()
		m := nvlMachine(t, "dgxh100", inject)
		rs := fabRunIn(t, m, "dgxh100", st)
		c := "gpu" + strconv.Itoa(gpu)
		nvlWant(t, rs, c, want)
		for _, r := range rs {
			if r.Component != c && r.Status != check.OK {
				t.Errorf("healthy %s: %s %s", r.Component, r.Status, r.Message)
			}
		}
		nvlIDs(t, m, rs)
	}
	// Just after boot: not started, then in progress, then done.
	step("gpu5:fabric=not-started", 5, warnNS)
	step("", 5, fabOK)
	// Stuck: the second run FAILs, and every one after it.
	step("gpu5:fabric=not-started", 5, warnNS)
	step("gpu5:fabric=in-progress", 5, failIP)
	step("gpu5:fabric=in-progress", 5, failIP)
	step("", 5, fabOK)
	// Another GPU's state is its own.
	step("gpu2:fabric=in-progress", 2, warnIP)
	step("gpu3:fabric=in-progress", 3, warnIP)
	// Registration completed and failed: at once, whatever came before.
	step("gpu3:fabric=failed", 3, failed+nvml.ErrorString(nvml.ERROR_UNKNOWN))
	step("gpu4:fabric-route-unhealthy", 4, "FAIL drain fabric health: route unhealthy")
	// After a failure it is a first sighting again.
	step("gpu3:fabric=in-progress", 3, warnIP)
}

// TestFabricState: a dry run (read-only state) never records, so it WARNs
// every time; a GPU NVML did not reach keeps its record; a corrupt record
// starts afresh.
func TestFabricState(t *testing.T) {
	dir := t.TempDir()
	ro := statefile.Dir{Path: dir, ReadOnly: true}
	for range 2 {
		nvlWant(t, fabRunIn(t, nvlMachine(t, "dgxh200", "gpu1:fabric=in-progress"), "dgxh200", ro), "gpu1",
			"WARN none fabric not initialised yet (state in-progress, first sighting)")
	}
	if _, err := os.Stat(filepath.Join(dir, fabricStateFile)); !os.IsNotExist(err) {
		t.Fatalf("read-only run saved: %v", err)
	}
	rw := statefile.Dir{Path: dir}
	fabRunIn(t, nvlMachine(t, "dgxh200", "gpu1:fabric=in-progress", "gpu6:fabric=in-progress"), "dgxh200", rw)
	// gpu0 hangs: gpu1 and the GPUs after it are not reached.
	m := nvlMachine(t, "dgxh200")
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	m.Devices[0].GetGpuFabricInfo_v4Func = func() (nvml.GpuFabricInfo_v4, nvml.Return) {
		<-block
		return nvml.GpuFabricInfo_v4{}, nvml.SUCCESS
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	NewFabric(nvlNode(m, "dgxh200"), rw).Run(ctx)
	var rec fabricState
	if err := rw.Load(fabricStateFile, &rec); err != nil || len(rec.States) != 8 ||
		rec.States[m.Model.UUID(1)] != "in-progress" || rec.States[m.Model.UUID(6)] != "in-progress" {
		t.Fatalf("record after the hang: %+v, %v", rec, err)
	}
	rs := fabRunIn(t, nvlMachine(t, "dgxh200", "gpu6:fabric=in-progress"), "dgxh200", rw)
	nvlWant(t, rs, "gpu6", "FAIL drain fabric not initialised (state in-progress) on two consecutive runs")

	if err := os.WriteFile(filepath.Join(dir, fabricStateFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	rs = fabRunIn(t, nvlMachine(t, "dgxh200", "gpu6:fabric=in-progress"), "dgxh200", rw)
	nvlWant(t, rs, "gpu6", "WARN none fabric not initialised yet (state in-progress, first sighting)")
	if len(rs) != 8 {
		t.Errorf("corrupt record: %+v", rs)
	}

	// A state directory that cannot be written: ERROR, after the GPUs.
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rs = fabRunIn(t, nvlMachine(t, "dgxh200"), "dgxh200", statefile.Dir{Path: notDir})
	if len(rs) != 9 || rs[8].Component != "host" || rs[8].Status != check.Error ||
		!strings.HasPrefix(rs[8].Message, "cannot keep fabric states: ") {
		t.Errorf("unwritable state: %+v", rs)
	}

	// No NVML: nothing judged, the record kept as it was.
	rw2 := statefile.Dir{Path: t.TempDir()}
	fabRunIn(t, nvlMachine(t, "dgxh200", "gpu1:fabric=in-progress"), "dgxh200", rw2)
	fabRunIn(t, nvlMachine(t, "dgxh200", "gpu0:nvml-init"), "dgxh200", rw2)
	nvlWant(t, fabRunIn(t, nvlMachine(t, "dgxh200", "gpu1:fabric=in-progress"), "dgxh200", rw2), "gpu1",
		"FAIL drain fabric not initialised (state in-progress) on two consecutive runs")
}
