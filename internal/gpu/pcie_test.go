package gpu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

func TestPCIe(t *testing.T) {
	cfg := config.Default().Checks.GPU.PCIe
	mk := func(n *Node, st statefile.Dir) check.Check { return NewPCIe(n, cfg, st) }
	hwTable(t, mk, []hwCase{
		{name: "healthy"},
		{name: "width", inject: []string{"gpu5:pcie-width=8"}, want: func(m sim.Model) []hwWant {
			return []hwWant{hwFail(5, check.ActionDrain, "PCIe Gen%d x8 < max Gen%d x16", m.PCIeMaxGen, m.PCIeMaxGen)}
		}},
		{name: "gen", inject: []string{"gpu2:pcie-gen=3"}, want: func(m sim.Model) []hwWant {
			return []hwWant{hwFail(2, check.ActionDrain, "PCIe Gen3 x16 < max Gen%d x16", m.PCIeMaxGen)}
		}},
		{name: "gen and width", inject: []string{"gpu0:pcie-gen=2", "gpu0:pcie-width=4"}, want: func(m sim.Model) []hwWant {
			return []hwWant{hwFail(0, check.ActionDrain, "PCIe Gen2 x4 < max Gen%d x16", m.PCIeMaxGen)}
		}},
		// An idle GPU trains its link down to Gen1: no drain for that.
		{name: "idle", inject: []string{"gpu1:idle", "gpu6:idle"}},
		// An idle link may narrow too: a first sighting only warns.
		{name: "idle narrow", inject: []string{"gpu1:idle", "gpu1:pcie-width=8"}, want: func(sim.Model) []hwWant {
			return []hwWant{hwWarn(1, "PCIe x8 < max x16 at idle (first sighting)")}
		}},
		{name: "utilisation unknown", inject: []string{"gpu4:pcie-gen=1"}, edit: func(_ *testing.T, m *sim.Machine) {
			hwDevice(m, 4).GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED }
		}},
		{name: "replay first run", inject: []string{"gpu3:pcie-replay=5000"}},
		{name: "not supported", edit: func(_ *testing.T, m *sim.Machine) {
			d := hwDevice(m, 7)
			d.GetCurrPcieLinkWidthFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
			d.GetPcieReplayCounterFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		}, want: func(sim.Model) []hwWant {
			return []hwWant{hwSkip(7, "PCIe link not reported; PCIe replay counter not supported")}
		}},
		{name: "lost", inject: []string{"gpu3:lost=late"}, want: func(sim.Model) []hwWant {
			return []hwWant{hwError(3, "nvmlDeviceGetCurrPcieLink: ERROR_GPU_IS_LOST")}
		}},
		{name: "hang", inject: []string{"gpu4:hang=late"}, want: func(sim.Model) []hwWant { return []hwWant{hwHung(4)} }, hang: true},
		{name: "hang on replay counter", inject: []string{"gpu0:pcie-width=2"}, edit: hwBlock(0, func(d *server.Device, block func()) {
			d.GetPcieReplayCounterFunc = func() (int, nvml.Return) { block(); return 0, nvml.SUCCESS }
		}), want: func(m sim.Model) []hwWant {
			return []hwWant{hwFail(0, check.ActionDrain, "PCIe Gen%d x2 < max Gen%d x16", m.PCIeMaxGen, m.PCIeMaxGen), hwHung(0)}
		}, hang: true},
	})
}

// TestPCIeReplayAcrossRuns runs the check several times on one state
// directory, as successive health checks do.
func TestPCIeReplayAcrossRuns(t *testing.T) {
	cfg := config.Default().Checks.GPU.PCIe
	for _, model := range hwModels {
		t.Run(model, func(t *testing.T) {
			t.Parallel()
			dir := statefile.Dir{Path: t.TempDir()}
			run := func(st statefile.Dir, edit func(*testing.T, *sim.Machine), inject []string, want ...hwWant) {
				t.Helper()
				m, n := hwNode(t, model, edit, inject...)
				last := len(m.Devices) - 1
				if len(want) > 0 && want[len(want)-1].msg == hwHung(0).msg {
					last = want[len(want)-1].gpu
				}
				hwExpect(t, m, "gpu.pcie", hwRun(t, NewPCIe(n, cfg, st)), want, last)
			}
			replay := func(v string) []string { return []string{"gpu1:pcie-replay=" + v} }
			warn := func(delta int) hwWant { return hwWarn(1, "PCIe replay counter +%d since last run > 100", delta) }

			run(dir, nil, replay("40"))                       // baseline 40
			run(dir, nil, replay("140"))                      // +100: at the limit
			run(dir, nil, replay("241"), warn(101))           // +101
			run(hwDryRun(dir), nil, replay("500"), warn(259)) // dry run: +259 over 241, not kept
			run(dir, nil, replay("300"))                      // +59 over 241: the dry run kept nothing
			run(dir, nil, replay("120"), warn(120))           // reset (driver reload): all 120 are new
			run(dir, nil, nil)                                // reset to 0: +0
			run(dir, nil, replay("101"), warn(101))

		})
	}
}

// TestPCIeWidthAcrossRuns: under load a narrow link FAILs at once; at idle
// only when the previous run saw it narrow too. A dry run keeps nothing.
func TestPCIeWidthAcrossRuns(t *testing.T) {
	cfg := config.Default().Checks.GPU.PCIe
	for _, model := range hwModels {
		t.Run(model, func(t *testing.T) {
			t.Parallel()
			dir := statefile.Dir{Path: t.TempDir()}
			run := func(st statefile.Dir, inject []string, want ...hwWant) {
				t.Helper()
				m, n := hwNode(t, model, nil, inject...)
				hwExpect(t, m, "gpu.pcie", hwRun(t, NewPCIe(n, cfg, st)), want, len(m.Devices)-1)
			}
			idle := []string{"gpu3:idle"}
			idleX8 := []string{"gpu3:idle", "gpu3:pcie-width=8"}
			first := hwWarn(3, "PCIe x8 < max x16 at idle (first sighting)")
			again := func(w int) hwWant {
				return hwFail(3, check.ActionDrain, "PCIe x%d < max x16 on two consecutive runs", w)
			}
			sm, _ := hwNode(t, model, nil)
			gen := sm.Model.PCIeMaxGen
			busy := hwFail(3, check.ActionDrain, "PCIe Gen%d x8 < max Gen%d x16", gen, gen)

			run(dir, idle) // idle at Gen1 x16: healthy, run after run
			run(dir, idle)
			run(hwDryRun(dir), idleX8, first)    // dry run: not kept
			run(dir, idleX8, first)              // the dry run kept nothing
			run(hwDryRun(dir), idleX8, again(8)) // a dry run reads what was kept
			run(dir, []string{"gpu3:idle", "gpu3:pcie-width=4"}, again(4))
			run(dir, idle) // back at x16: cleared
			run(dir, idleX8, first)
			run(dir, nil)                                 // busy at x16: cleared
			run(dir, []string{"gpu3:pcie-width=8"}, busy) // busy: at once
			run(dir, idleX8, again(8))                    // then idle: still narrow
		})
	}
}

// TestPCIeWidthOldRecord: a record from before widths were kept counts as
// no sighting.
func TestPCIeWidthOldRecord(t *testing.T) {
	t.Parallel()
	cfg := config.Default().Checks.GPU.PCIe
	dir := statefile.Dir{Path: t.TempDir()}
	m, n := hwNode(t, "dgxh100", nil, "gpu1:idle", "gpu1:pcie-width=8")
	if err := os.WriteFile(filepath.Join(dir.Path, pcieStateFile), []byte(`{"replay":{"`+m.Model.UUID(1)+`":3}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	hwExpect(t, m, "gpu.pcie", hwRun(t, NewPCIe(n, cfg, dir)), []hwWant{hwWarn(1, "PCIe x8 < max x16 at idle (first sighting)")}, 7)
	var st pcieState
	if err := dir.Load(pcieStateFile, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Width) != 8 || st.Width[m.Model.UUID(1)] != 8 || st.Width[m.Model.UUID(0)] != 16 {
		t.Errorf("widths kept: %v", st.Width)
	}
}

// TestPCIeStateKeptAndDropped: a hang keeps the baselines of the GPUs it
// kept from being read; a GPU gone from the node loses its baseline.
func TestPCIeStateKeptAndDropped(t *testing.T) {
	t.Parallel()
	cfg := config.Default().Checks.GPU.PCIe
	dir := statefile.Dir{Path: t.TempDir()}
	run := func(edit func(*testing.T, *sim.Machine), inject []string, last int, want ...hwWant) *sim.Machine {
		t.Helper()
		m, n := hwNode(t, "dgxh100", edit, inject...)
		hwExpect(t, m, "gpu.pcie", hwRun(t, NewPCIe(n, cfg, dir)), want, last)
		return m
	}
	load := func() pcieState {
		t.Helper()
		var st pcieState
		if err := dir.Load(pcieStateFile, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	m := run(nil, []string{"gpu1:pcie-replay=101", "gpu5:pcie-replay=7"}, 7)
	run(hwBlock(0, func(d *server.Device, block func()) {
		d.GetPcieReplayCounterFunc = func() (int, nvml.Return) { block(); return 0, nvml.SUCCESS }
	}), []string{"gpu1:pcie-replay=999"}, 0, hwHung(0))
	if st := load(); len(st.Replay) != 8 || st.Replay[m.Model.UUID(1)] != 101 || st.Replay[m.Model.UUID(5)] != 7 || len(st.Width) != 8 {
		t.Fatalf("state after a hang: %+v", st)
	}
	run(nil, []string{"gpu1:pcie-replay=302"}, 7, hwWarn(1, "PCIe replay counter +201 since last run > 100"))

	// gpu7 is now NVML's gpu6: no identity check here.
	_, n := hwNode(t, "dgxh100", nil, "gpu6:missing")
	if got := hwRun(t, NewPCIe(n, cfg, dir)); check.Worst(got) != check.OK {
		t.Fatalf("GPU missing: %s", hwFormat(got))
	}
	st := load()
	if _, ok := st.Replay[m.Model.UUID(6)]; ok || len(st.Replay) != 7 || len(st.Width) != 7 {
		t.Errorf("state after gpu6 went missing: %+v", st)
	}
}

// TestPCIeStateProblems: a corrupt record is a fresh start; a state
// directory that cannot be written is an ERROR, the GPUs still judged.
func TestPCIeStateProblems(t *testing.T) {
	cfg := config.Default().Checks.GPU.PCIe
	dir := statefile.Dir{Path: t.TempDir()}
	if err := os.WriteFile(filepath.Join(dir.Path, pcieStateFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, n := hwNode(t, "dgxh100", nil, "gpu1:pcie-replay=5000")
	hwExpect(t, m, "gpu.pcie", hwRun(t, NewPCIe(n, cfg, dir)), nil, len(m.Devices)-1)

	bad := statefile.Dir{Path: filepath.Join(dir.Path, pcieStateFile, "sub")}
	_, n = hwNode(t, "dgxh100", nil)
	got := hwRun(t, NewPCIe(n, cfg, bad))
	last := got[len(got)-1]
	if len(got) != len(m.Devices)+1 || last.Component != "host" || last.Status != check.Error {
		t.Fatalf("unwritable state: %+v", got)
	}
}

// hwDryRun is d as a dry run sees it.
func hwDryRun(d statefile.Dir) statefile.Dir { return statefile.Dir{Path: d.Path, ReadOnly: true} }
