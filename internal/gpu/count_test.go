package gpu

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
)

var baseModels = []string{"dgxa100", "dgxh100", "dgxh200", "dgxb200"}

// baseSimNode builds a simulated node the way --simulate does: the
// machine's NVML and its PCI bus.
func baseSimNode(t *testing.T, model string, expected int, inject ...string) (*sim.Machine, *Node) {
	t.Helper()
	m, err := sim.Build(model, inject)
	if err != nil {
		t.Fatal(err)
	}
	return m, NewNode(m.Server, "", expected, model, WithBus(m.OnBus))
}

// baseRun runs c under a short deadline (hang cases wait for it).
func baseRun(c check.Check) []check.Result {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	return c.Run(ctx)
}

// baseWant is one expected result; msg ending in "…" is a prefix.
type baseWant struct {
	component string
	status    check.Status
	action    check.Action
	msg       string
	index     int // -1: none
	serial    int // GPU whose serial (and UUID) the result carries; -1: none
	pci       int // GPU whose PCI address the result carries; -1: none
}

func baseCheck(t *testing.T, m *sim.Machine, got []check.Result, want []baseWant) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(got), len(want), got)
	}
	for k, w := range want {
		r := got[k]
		msgOK := r.Message == w.msg
		if p, ok := strings.CutSuffix(w.msg, "…"); ok {
			msgOK = strings.HasPrefix(r.Message, p)
		}
		act := w.action
		if act == "" {
			act = check.ActionNone
		}
		ra := r.Action
		if ra == "" {
			ra = check.ActionNone
		}
		if r.Component != w.component || r.Status != w.status || ra != act || !msgOK {
			t.Errorf("result %d: %s %v %s %q, want %s %v %s %q", k, r.Component, r.Status, ra, r.Message, w.component, w.status, act, w.msg)
		}
		ids := r.IDs
		switch {
		case w.index < 0 && ids.GPUIndex != nil, w.index >= 0 && (ids.GPUIndex == nil || *ids.GPUIndex != w.index):
			t.Errorf("result %d: index %v, want %d", k, ids.GPUIndex, w.index)
		}
		wantSerial, wantUUID, wantPCI := "", "", ""
		if w.serial >= 0 {
			wantSerial, wantUUID = m.Model.Serial(w.serial), m.Model.UUID(w.serial)
		}
		if w.pci >= 0 {
			wantPCI = m.Model.PCIBusID(w.pci)
		}
		if ids.Serial != wantSerial || ids.UUID != wantUUID || ids.PCIBusID != wantPCI {
			t.Errorf("result %d: IDs %s %s %s, want %s %s %s", k, ids.Serial, ids.UUID, ids.PCIBusID, wantSerial, wantUUID, wantPCI)
		}
	}
}

func TestCount(t *testing.T) {
	host := func(st check.Status, act check.Action, msg string) baseWant {
		return baseWant{"host", st, act, msg, -1, -1, -1}
	}
	for _, model := range baseModels {
		m, _ := baseSimNode(t, model, -1)
		bus := func(i int) baseWant {
			a := m.Model.PCIBusID(i)
			return baseWant{a, check.Fail, check.ActionReboot, a + " on the PCI bus but not seen by NVML (fallen off the bus?)", -1, -1, i}
		}
		for _, tc := range []struct {
			name     string
			expected int
			inject   []string
			want     []baseWant
		}{
			{"healthy", -1, nil, []baseWant{host(check.OK, "", "NVML sees 8 GPUs, expected 8")}},
			{"healthy expected 8", 8, nil, []baseWant{host(check.OK, "", "NVML sees 8 GPUs, expected 8")}},
			{"more than configured", 4, nil, []baseWant{host(check.Warn, "", "NVML sees 8 GPUs, expected 4")}},
			{"fewer than configured", 10, nil, []baseWant{host(check.Fail, check.ActionReboot, "NVML sees 8 GPUs, expected 10")}},
			{"missing", -1, []string{"gpu4:missing"}, []baseWant{bus(4), host(check.Fail, check.ActionReboot, "NVML sees 7 GPUs, expected 8")}},
			{"two missing", 8, []string{"gpu0:missing", "gpu7:missing"}, []baseWant{bus(0), bus(7), host(check.Fail, check.ActionReboot, "NVML sees 6 GPUs, expected 8")}},
			{"lost still counted", -1, []string{"gpu3:lost"}, []baseWant{host(check.OK, "", "NVML sees 8 GPUs, expected 8")}},
			{"missing and lost", -1, []string{"gpu3:lost", "gpu4:missing"}, []baseWant{
				{"pci", check.Fail, check.ActionReboot, "1 GPU on the PCI bus but not seen by NVML, one of " + m.Model.PCIBusID(3) + ", " + m.Model.PCIBusID(4), -1, -1, -1},
				host(check.Fail, check.ActionReboot, "NVML sees 7 GPUs, expected 8")}},
			{"late faults do not matter", -1, []string{"gpu1:hang=late", "gpu2:reset-required"}, []baseWant{host(check.OK, "", "NVML sees 8 GPUs, expected 8")}},
			{"hang", -1, []string{"gpu2:hang"}, []baseWant{host(check.Fail, check.ActionReboot, "NVML did not answer in …")}},
			{"nvml init", -1, []string{"gpu0:nvml-init"}, []baseWant{host(check.Error, "", "NVML unavailable (see gpu.driver): nvmlInit: ERROR_DRIVER_NOT_LOADED")}},
		} {
			t.Run(model+"/"+tc.name, func(t *testing.T) {
				m, n := baseSimNode(t, model, tc.expected, tc.inject...)
				c := NewCount(n, config.GPUCount{Common: config.Common{Enabled: true}, Expected: tc.expected})
				if c.Name() != "gpu.count" {
					t.Fatal(c.Name())
				}
				baseCheck(t, m, baseRun(c), tc.want)
			})
		}
	}
}

func TestCountBusUnknown(t *testing.T) {
	lib := baseFakeLib(2, nil)
	n := NewNode(lib, "", -1, "x")
	got := baseRun(NewCount(n, config.GPUCount{Expected: -1}))
	if len(got) != 1 || got[0].Status != check.OK || got[0].Message != "NVML sees 2 GPUs; the PCI bus lists none to compare with" {
		t.Errorf("%+v", got)
	}
}
