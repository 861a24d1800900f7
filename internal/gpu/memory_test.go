package gpu

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

// Helpers shared by the tests of gpu.memory, gpu.pcie, gpu.thermal,
// gpu.power and gpu.config (prefix hw).

var hwModels = []string{"dgxa100", "dgxh100", "dgxh200", "dgxb200"}

// hwTimeout is the check timeout of the tests; a hang case must end
// within it. Its last tenth is what a check has to report the hang
// (check.FinishEarly); checks that then save state (fsync) get
// hwStateTimeout, for a loaded test machine (-race on 2 CPUs).
const (
	hwTimeout      = time.Second
	hwStateTimeout = 2 * time.Second
)

// hwNode builds a simulated node as --simulate does, with inject applied
// and then edit (for answers no --inject key gives).
func hwNode(t *testing.T, model string, edit func(*testing.T, *sim.Machine), inject ...string) (*sim.Machine, *Node) {
	t.Helper()
	m, err := sim.Build(model, inject)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(t, m)
	}
	return m, NewNode(m.Server, "", -1, model, WithBus(m.OnBus))
}

// hwRun runs c as the engine does: through check.Run, under hwTimeout
// (hwStateTimeout for the checks that keep state).
func hwRun(t *testing.T, c check.Check) []check.Result {
	t.Helper()
	timeout := hwTimeout
	if _, ok := hwKeepsState[c.Name()]; ok {
		timeout = hwStateTimeout
	}
	start := time.Now()
	got := check.Run(context.Background(), []check.Task{{Check: c, Timeout: timeout}})[0].Results
	if d := time.Since(start); d > timeout+500*time.Millisecond {
		t.Errorf("check ran %v, timeout %v", d, timeout)
	}
	return got
}

var hwKeepsState = map[string]bool{"gpu.pcie": true, "gpu.thermal": true}

// hwWant is one result that is not OK. A msg ending in "…" is a prefix.
type hwWant struct {
	gpu    int
	status check.Status
	action check.Action
	msg    string
}

func hwFail(gpu int, act check.Action, format string, a ...any) hwWant {
	return hwWant{gpu, check.Fail, act, fmt.Sprintf(format, a...)}
}

func hwWarn(gpu int, format string, a ...any) hwWant {
	return hwWant{gpu, check.Warn, check.ActionNone, fmt.Sprintf(format, a...)}
}

func hwSkip(gpu int, msg string) hwWant { return hwWant{gpu, check.Skip, check.ActionNone, msg} }

func hwError(gpu int, msg string) hwWant { return hwWant{gpu, check.Error, check.ActionNone, msg} }

func hwHung(gpu int) hwWant {
	return hwWant{gpu, check.Fail, check.ActionReboot, "NVML did not answer in …"}
}

// hwCase is one row of a check's table, run on every simulator.
type hwCase struct {
	name   string
	inject []string
	edit   func(*testing.T, *sim.Machine)
	// mk builds the check; nil: the table's.
	mk   func(n *Node, st statefile.Dir) check.Check
	want func(sim.Model) []hwWant // nil: no result but OK
	// hang: the results end with the last want's GPU.
	hang bool
}

// hwTable runs every case on every simulator. The hang cases wait out
// the check timeout, so they all run at once, whatever -parallel allows.
func hwTable(t *testing.T, mk func(n *Node, st statefile.Dir) check.Check, cases []hwCase) {
	type hung struct {
		name string
		m    *sim.Machine
		c    check.Check
		want []hwWant
		got  []check.Result
	}
	var hangs []*hung
	for _, model := range hwModels {
		for _, tc := range cases {
			m, n := hwNode(t, model, tc.edit, tc.inject...)
			build := mk
			if tc.mk != nil {
				build = tc.mk
			}
			c := build(n, statefile.Dir{Path: t.TempDir()})
			var want []hwWant
			if tc.want != nil {
				want = tc.want(m.Model)
			}
			if tc.hang {
				hangs = append(hangs, &hung{name: model + "/" + tc.name, m: m, c: c, want: want})
				continue
			}
			t.Run(model+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				hwExpect(t, m, c.Name(), hwRun(t, c), want, len(m.Devices)-1)
			})
		}
	}
	var wg sync.WaitGroup
	for _, h := range hangs {
		wg.Go(func() { h.got = hwRun(t, h.c) })
	}
	wg.Wait()
	for _, h := range hangs {
		t.Run(h.name, func(t *testing.T) {
			hwExpect(t, h.m, h.c.Name(), h.got, h.want, h.want[len(h.want)-1].gpu)
		})
	}
}

// hwExpect asserts that the results not OK are exactly want, in order,
// that every GPU 0..last has a result and no other does, and that each
// result names its GPU by index, UUID, serial and PCI address.
func hwExpect(t *testing.T, m *sim.Machine, name string, got []check.Result, want []hwWant, last int) {
	t.Helper()
	var bad []check.Result
	seen := map[int]bool{}
	for _, r := range got {
		if r.Check != name {
			t.Errorf("result of %q, want %q: %+v", r.Check, name, r)
		}
		if r.IDs.GPUIndex == nil {
			t.Errorf("result without GPU index: %+v", r)
			continue
		}
		i := *r.IDs.GPUIndex
		seen[i] = true
		mdl := m.Model
		if r.Component != fmt.Sprintf("gpu%d", i) || r.IDs.UUID != mdl.UUID(i) || r.IDs.Serial != mdl.Serial(i) || r.IDs.PCIBusID != mdl.PCIBusID(i) {
			t.Errorf("result names %s %+v, want gpu%d %s %s %s", r.Component, r.IDs, i, mdl.UUID(i), mdl.Serial(i), mdl.PCIBusID(i))
		}
		if r.Status != check.OK {
			bad = append(bad, r)
		}
	}
	for i := 0; i < len(m.Devices); i++ {
		if seen[i] != (i <= last) {
			t.Errorf("gpu%d has a result: %v, want %v", i, seen[i], i <= last)
		}
	}
	if len(bad) != len(want) {
		t.Fatalf("%d results not OK, want %d:\n%s", len(bad), len(want), hwFormat(bad))
	}
	for k, w := range want {
		r := bad[k]
		msgOK := r.Message == w.msg
		if p, ok := strings.CutSuffix(w.msg, "…"); ok {
			msgOK = strings.HasPrefix(r.Message, p) && strings.HasSuffix(r.Message, "s")
		}
		if *r.IDs.GPUIndex != w.gpu || r.Status != w.status || r.Action != w.action || !msgOK {
			t.Errorf("got  %s %v %s %q\nwant gpu%d %v %s %q", r.Component, r.Status, r.Action, r.Message, w.gpu, w.status, w.action, w.msg)
		}
	}
}

func hwFormat(rs []check.Result) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "  %s %v %s %q\n", r.Component, r.Status, r.Action, r.Message)
	}
	return b.String()
}

// hwDevice is GPU i of the machine, for edits.
func hwDevice(m *sim.Machine, i int) *server.Device { return m.Devices[i] }

func TestMemory(t *testing.T) {
	cfg := config.Default().Checks.GPU.Memory
	mk := func(n *Node, _ statefile.Dir) check.Check { return NewMemory(n, cfg) }
	one := func(w ...hwWant) func(sim.Model) []hwWant { return func(sim.Model) []hwWant { return w } }
	hwTable(t, mk, []hwCase{
		{name: "healthy"},
		{name: "dbe", inject: []string{"gpu3:dbe=2"}, want: one(hwFail(3, check.ActionDrain, "volatile DBE 2 > 0"))},
		{name: "remap pending", inject: []string{"gpu1:remap-pending"}, want: one(hwFail(1, check.ActionResetGPU, "row remap pending"))},
		{name: "remap failure", inject: []string{"gpu6:remap-failure"}, want: one(hwFail(6, check.ActionRMA, "row remap failed"))},
		{name: "remap both", inject: []string{"gpu6:remap-failure", "gpu6:remap-pending"},
			want: one(hwFail(6, check.ActionRMA, "row remap failed"), hwFail(6, check.ActionResetGPU, "row remap pending"))},
		{name: "sram ue", inject: []string{"gpu0:sram-ue=1"}, want: one(hwFail(0, check.ActionDrain, "SRAM uncorrectable 1 > 0"))},
		{name: "sram over threshold", edit: func(_ *testing.T, m *sim.Machine) {
			d := hwDevice(m, 2)
			d.GetSramEccErrorStatusFunc = func() (nvml.EccSramErrorStatus, nvml.Return) {
				return nvml.EccSramErrorStatus{AggregateUncParity: 3, AggregateUncSecDed: 9, BThresholdExceeded: 1}, nvml.SUCCESS
			}
		}, want: one(hwFail(2, check.ActionRMA, "SRAM uncorrectable 12 over NVIDIA's RMA threshold"))},
		{name: "correctable", inject: []string{"gpu7:correctable=1500"}, want: one(hwWarn(7, "volatile corrected ECC 1500 > 1000"))},
		{name: "correctable at limit", inject: []string{"gpu7:correctable=1000"}},
		{name: "dbe and remap", inject: []string{"gpu4:dbe=1", "gpu4:remap-pending", "gpu5:dbe=3"},
			want: one(hwFail(4, check.ActionDrain, "volatile DBE 1 > 0"), hwFail(4, check.ActionResetGPU, "row remap pending"),
				hwFail(5, check.ActionDrain, "volatile DBE 3 > 0"))},
		{name: "ecc off", inject: []string{"gpu2:ecc=off"}, want: one(hwSkip(2, "ECC disabled"))},
		{name: "not supported", edit: func(_ *testing.T, m *sim.Machine) {
			d := hwDevice(m, 5)
			d.GetEccModeFunc = func() (nvml.EnableState, nvml.EnableState, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
			d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, nvml.ERROR_NOT_SUPPORTED }
		}, want: one(hwSkip(5, "ECC not supported; neither row remapping nor page retirement supported"))},
		{name: "retired pages", edit: hwRetired(1, 50, 10, true),
			want: one(hwFail(1, check.ActionRMA, "retired pages 60 >= 60"), hwFail(1, check.ActionResetGPU, "page retirement pending"))},
		{name: "retired pages below limit", edit: hwRetired(1, 50, 9, false)},
		{name: "lost", inject: []string{"gpu3:lost=late"}, want: one(hwError(3, "nvmlDeviceGetEccMode: ERROR_GPU_IS_LOST"))},
		{name: "other error", edit: func(_ *testing.T, m *sim.Machine) {
			hwDevice(m, 4).GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, nvml.ERROR_UNKNOWN }
		}, want: one(hwError(4, "nvmlDeviceGetRemappedRows: ERROR_UNKNOWN"))},
		// R470 has no SRAM status call: the per-location counter answers.
		{name: "sram status missing from driver", inject: []string{"gpu0:sram-ue=2"}, edit: hwDriverLacks(symSramStatus),
			want: one(hwFail(0, check.ActionDrain, "SRAM uncorrectable 2 > 0"))},
		{name: "sram status missing, healthy", edit: hwDriverLacks(symSramStatus)},
		// Any answer but a value or a lost GPU falls back to the counter.
		{name: "sram status version mismatch", inject: []string{"gpu3:sram-ue=5"}, edit: hwSramStatus(3, nvml.ERROR_ARGUMENT_VERSION_MISMATCH),
			want: one(hwFail(3, check.ActionDrain, "SRAM uncorrectable 5 > 0"))},
		{name: "sram status no permission", edit: hwSramStatus(3, nvml.ERROR_NO_PERMISSION)},
		{name: "sram status unknown error", edit: hwSramStatus(3, nvml.ERROR_UNKNOWN)},
		{name: "sram counter error after status", edit: func(t *testing.T, m *sim.Machine) {
			hwSramStatus(3, nvml.ERROR_NO_PERMISSION)(t, m)
			hwCounterFails(3, nvml.MEMORY_LOCATION_SRAM, nvml.ERROR_NO_PERMISSION)(t, m)
		}, want: one(hwError(3, "nvmlDeviceGetMemoryErrorCounter(SRAM): ERROR_NO_PERMISSION"))},
		{name: "sram counter of an old driver", edit: func(t *testing.T, m *sim.Machine) {
			hwDriverLacks(symSramStatus)(t, m)
			hwCounterFails(3, nvml.MEMORY_LOCATION_SRAM, nvml.ERROR_INVALID_ARGUMENT)(t, m)
		}},
		{name: "sram status lost", edit: hwSramStatus(6, nvml.ERROR_GPU_IS_LOST),
			want: one(hwError(6, "nvmlDeviceGetSramEccErrorStatus: ERROR_GPU_IS_LOST"))},
		// An error on one counter does not cost the others their verdict.
		{name: "dbe counter error", inject: []string{"gpu1:sram-ue=1"}, edit: hwCounterFails(1, nvml.MEMORY_LOCATION_DEVICE_MEMORY, nvml.ERROR_UNKNOWN),
			want: one(hwError(1, "nvmlDeviceGetMemoryErrorCounter(uncorrected): ERROR_UNKNOWN"), hwFail(1, check.ActionDrain, "SRAM uncorrectable 1 > 0"))},
		{name: "dbe counter error, correctable high", inject: []string{"gpu1:correctable=2000"},
			edit: hwCounterFails(1, nvml.MEMORY_LOCATION_DEVICE_MEMORY, nvml.ERROR_UNKNOWN),
			want: one(hwError(1, "nvmlDeviceGetMemoryErrorCounter(uncorrected): ERROR_UNKNOWN"), hwWarn(1, "volatile corrected ECC 2000 > 1000"))},
		{name: "ecc mode error", inject: []string{"gpu5:sram-ue=3", "gpu5:remap-pending"}, edit: func(_ *testing.T, m *sim.Machine) {
			hwDevice(m, 5).GetEccModeFunc = func() (nvml.EnableState, nvml.EnableState, nvml.Return) { return 0, 0, nvml.ERROR_UNKNOWN }
		}, want: one(hwError(5, "nvmlDeviceGetEccMode: ERROR_UNKNOWN"), hwFail(5, check.ActionDrain, "SRAM uncorrectable 3 > 0"),
			hwFail(5, check.ActionResetGPU, "row remap pending"))},
		{name: "hang", inject: []string{"gpu2:hang=late"}, want: one(hwHung(2)), hang: true},
		{name: "hang after a finding", inject: []string{"gpu2:dbe=4"}, edit: hwBlock(2, func(d *server.Device, block func()) {
			d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { block(); return 0, 0, false, false, nvml.SUCCESS }
		}), want: one(hwFail(2, check.ActionDrain, "volatile DBE 4 > 0"), hwHung(2)), hang: true},
	})
}

// hwSramStatus makes GPU i's SRAM status call answer ret.
func hwSramStatus(i int, ret nvml.Return) func(*testing.T, *sim.Machine) {
	return func(_ *testing.T, m *sim.Machine) {
		hwDevice(m, i).GetSramEccErrorStatusFunc = func() (nvml.EccSramErrorStatus, nvml.Return) {
			return nvml.EccSramErrorStatus{}, ret
		}
	}
}

// hwCounterFails makes GPU i's uncorrected error counter at loc answer ret.
func hwCounterFails(i int, loc nvml.MemoryLocation, ret nvml.Return) func(*testing.T, *sim.Machine) {
	return func(_ *testing.T, m *sim.Machine) {
		d := hwDevice(m, i)
		prev := d.GetMemoryErrorCounterFunc
		d.GetMemoryErrorCounterFunc = func(t nvml.MemoryErrorType, c nvml.EccCounterType, l nvml.MemoryLocation) (uint64, nvml.Return) {
			if t == nvml.MEMORY_ERROR_TYPE_UNCORRECTED && l == loc {
				return 0, ret
			}
			return prev(t, c, l)
		}
	}
}

// hwDriverLacks makes the machine's libnvidia-ml one without syms, as R470
// lacks the functions later drivers added: LookupSymbol answers
// ERROR_NOT_FOUND for them, and calling one on any GPU, which would end
// the process on a real driver ("symbol lookup error"), fails the test.
func hwDriverLacks(syms ...string) func(*testing.T, *sim.Machine) {
	return func(t *testing.T, m *sim.Machine) {
		missing := map[string]bool{}
		for _, s := range syms {
			missing[s] = true
		}
		m.Server.LookupSymbolFunc = func(s string) error {
			if missing[s] {
				return nvml.ERROR_NOT_FOUND
			}
			return nil
		}
		for _, d := range m.Devices {
			dv := reflect.ValueOf(&d.Device).Elem()
			for _, s := range syms {
				name := strings.TrimPrefix(s, "nvmlDevice") + "Func"
				f := dv.FieldByName(name)
				if !f.IsValid() {
					t.Fatalf("mock.Device has no %s", name)
				}
				ft := f.Type()
				f.Set(reflect.MakeFunc(ft, func([]reflect.Value) []reflect.Value {
					t.Errorf("%s called, but the driver lacks it: a real process dies here", s)
					out := make([]reflect.Value, ft.NumOut())
					for k := range out {
						out[k] = reflect.Zero(ft.Out(k))
						if ft.Out(k) == reflect.TypeOf(nvml.SUCCESS) {
							out[k] = reflect.ValueOf(nvml.ERROR_FUNCTION_NOT_FOUND)
						}
					}
					return out
				}))
			}
		}
	}
}

// TestHasSymbol: the library's own answer, or "present" from an
// nvml.Interface without extensions.
func TestHasSymbol(t *testing.T) {
	m, _ := hwNode(t, "dgxh100", hwDriverLacks(symSramStatus))
	if hasSymbol(m.Server, symSramStatus) {
		t.Errorf("%s present, want missing", symSramStatus)
	}
	if !hasSymbol(m.Server, "nvmlDeviceGetMemoryErrorCounter") {
		t.Error("nvmlDeviceGetMemoryErrorCounter missing, want present")
	}
	if !hasSymbol(&mock.Interface{}, symSramStatus) {
		t.Errorf("%s missing from a mock without extensions, want present", symSramStatus)
	}
}

// TestMemoryLooksUpOncePerRun: the symbol is looked up once per run, not
// per GPU, and only after NVML is initialised.
func TestMemoryLooksUpOncePerRun(t *testing.T) {
	m, n := hwNode(t, "dgxb200", nil)
	initialised := false
	m.Server.InitFunc = func() nvml.Return { initialised = true; return nvml.SUCCESS }
	lookups := 0
	m.Server.LookupSymbolFunc = func(s string) error {
		if !initialised {
			t.Errorf("LookupSymbol(%s) before Init", s)
		}
		lookups++
		return nil
	}
	hwExpect(t, m, "gpu.memory", hwRun(t, NewMemory(n, config.Default().Checks.GPU.Memory)), nil, len(m.Devices)-1)
	if lookups != 1 {
		t.Errorf("%d lookups, want 1", lookups)
	}
}

// hwRetired turns GPU i into one that retires pages (before Ampere).
func hwRetired(i, sbe, dbe int, pending bool) func(*testing.T, *sim.Machine) {
	return func(_ *testing.T, m *sim.Machine) {
		d := hwDevice(m, i)
		d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, nvml.ERROR_NOT_SUPPORTED }
		d.GetRetiredPagesFunc = func(c nvml.PageRetirementCause) ([]uint64, nvml.Return) {
			n := sbe
			if c == nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR {
				n = dbe
			}
			return make([]uint64, n), nvml.SUCCESS
		}
		st := nvml.FEATURE_DISABLED
		if pending {
			st = nvml.FEATURE_ENABLED
		}
		d.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) { return st, nvml.SUCCESS }
	}
}

// hwBlock lets set make calls on GPU i block, as NVML does on a sick
// GPU, until the test ends.
func hwBlock(i int, set func(d *server.Device, block func())) func(*testing.T, *sim.Machine) {
	return func(t *testing.T, m *sim.Machine) {
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		set(hwDevice(m, i), func() { <-release })
	}
}
