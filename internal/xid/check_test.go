package xid

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
	"github.com/gpuhc/gpuhc/internal/kmsg"
	"github.com/gpuhc/gpuhc/internal/policy"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

var models = []string{"dgxa100", "dgxh100", "dgxh200", "dgxb200"}

func machine(t *testing.T, model string, inject ...string) *sim.Machine {
	t.Helper()
	m, err := sim.Build(model, inject)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// newCheck is gpu.xid on a simulated machine, as --simulate wires it: a
// fresh gpu.Node per run, as each run of the binary has.
func newCheck(m *sim.Machine, c config.XID, dir statefile.Dir, src kmsg.Source) check.Check {
	return newPass(gpu.NewNode(m.Server, "", -1, m.Model.Name, gpu.WithBus(m.OnBus)), c, dir, src)
}

func defaults() config.XID { return config.Default().Checks.GPU.XID }

// simSrc is m's kernel log as --simulate reads it: gpuhc watched it since
// boot, so that the injected XIDs are new even without a cursor yet.
func simSrc(m *sim.Machine) kmsg.Source {
	return kmsg.SimulatedSource(m.Kmsg, m.BootID, m.KmsgWatchedFrom())
}

func run(c check.Check) []check.Result {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	return c.Run(ctx)
}

// want is one expected result. gpu is the NVML index in IDs (-1: none);
// dev is the simulated device whose serial and PCI address IDs carry (-1:
// none). msg is exact.
type want struct {
	component string
	status    check.Status
	action    check.Action
	msg       string
	gpu, dev  int
}

func ok(i int) want              { return want{fmt.Sprintf("gpu%d", i), check.OK, "", "no XIDs", i, i} }
func okMsg(i int, m string) want { return want{fmt.Sprintf("gpu%d", i), check.OK, "", m, i, i} }

// oks are OK results for GPUs from to to-1, except skip.
func oks(from, to int, skip ...int) []want {
	var out []want
	for i := from; i < to; i++ {
		if !contains(skip, i) {
			out = append(out, ok(i))
		}
	}
	return out
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

func expect(t *testing.T, m *sim.Machine, got []check.Result, wants ...[]want) {
	t.Helper()
	var ws []want
	for _, w := range wants {
		ws = append(ws, w...)
	}
	var b strings.Builder
	for _, r := range got {
		fmt.Fprintf(&b, "  %s %s %s %q %+v\n", r.Component, r.Status, r.Action, r.Message, r.IDs)
	}
	if len(got) != len(ws) {
		t.Fatalf("%d results, want %d:\n%s", len(got), len(ws), b.String())
	}
	for i, w := range ws {
		r := got[i]
		action := w.action
		if action == "" {
			action = check.ActionNone
		}
		if r.Action == "" {
			r.Action = check.ActionNone
		}
		if r.Component != w.component || r.Status != w.status || r.Action != action || r.Message != w.msg {
			t.Errorf("result %d = %s %s %s %q, want %s %s %s %q\n%s", i, r.Component, r.Status, r.Action, r.Message,
				w.component, w.status, action, w.msg, b.String())
			continue
		}
		var wantIDs check.IDs
		if w.dev >= 0 {
			wantIDs = check.IDs{UUID: m.Model.UUID(w.dev), Serial: m.Model.Serial(w.dev), PCIBusID: m.Model.PCIBusID(w.dev)}
		}
		if w.gpu >= 0 {
			idx := w.gpu
			wantIDs.GPUIndex = &idx
		}
		if fmt.Sprint(ids(r.IDs)) != fmt.Sprint(ids(wantIDs)) {
			t.Errorf("result %d (%s) IDs %v, want %v", i, r.Component, ids(r.IDs), ids(wantIDs))
		}
	}
}

func ids(i check.IDs) []string {
	idx := "-"
	if i.GPUIndex != nil {
		idx = fmt.Sprint(*i.GPUIndex)
	}
	return []string{idx, i.UUID, i.Serial, i.PCIBusID}
}

// The fault matrix: each case on all four simulated DGX servers, one run
// of the check with a fresh state directory.
func TestSimulators(t *testing.T) {
	for _, model := range models {
		pci := func(dev int) string { return machine(t, model).Model.PCIBusID(dev) }
		for _, tc := range []struct {
			name   string
			inject []string
			want   [][]want
		}{
			{"healthy", nil, [][]want{oks(0, 8)}},
			{"xid 79", []string{"gpu3:xid=79"}, [][]want{oks(0, 3),
				{{"gpu3", check.Fail, check.ActionReboot, "XID 79 GPU has fallen off the bus", 3, 3}}, oks(4, 8)}},
			{"worst of several", []string{"gpu3:xid=13", "gpu3:xid=48", "gpu3:xid=79"}, [][]want{oks(0, 3),
				{{"gpu3", check.Fail, check.ActionReboot, "XID 79 GPU has fallen off the bus (+2 more XIDs)", 3, 3}}, oks(4, 8)}},
			{"same action: the first", []string{"gpu6:xid=95", "gpu6:xid=48"}, [][]want{oks(0, 6),
				{{"gpu6", check.Fail, check.ActionResetGPU, "XID 95 uncontained ECC error (+1 more XIDs)", 6, 6}}, oks(7, 8)}},
			{"dbe", []string{"gpu0:xid=48"}, [][]want{
				{{"gpu0", check.Fail, check.ActionResetGPU, "XID 48 double-bit ECC error", 0, 0}}, oks(1, 8)}},
			{"gsp timeout", []string{"gpu7:xid=119"}, [][]want{oks(0, 7),
				{{"gpu7", check.Fail, check.ActionResetGPU, "XID 119 GSP RPC timeout", 7, 7}}}},
			// The simulator's 74 sets register 2 bit 16 only: NVIDIA acts
			// on it when it repeats (WORKFLOW_NVLINK_ERR), so one is a WARN.
			{"nvlink", []string{"gpu2:xid=74"}, [][]want{oks(0, 2),
				{{"gpu2", check.Warn, "", "XID 74 NVLink error: link 14 (NVIDIA acts on these bits only when they repeat) (1 this boot)", 2, 2}}, oks(3, 8)}},
			{"warn", []string{"gpu1:xid=13"}, [][]want{oks(0, 1),
				{{"gpu1", check.Warn, "", "XID 13 graphics engine exception (1 this boot)", 1, 1}}, oks(2, 8)}},
			{"warns counted", []string{"gpu1:xid=31", "gpu1:xid=13", "gpu1:xid=31"}, [][]want{oks(0, 1),
				{{"gpu1", check.Warn, "", "XID 31 GPU memory page fault (+2 more XIDs, 3 this boot)", 1, 1}}, oks(2, 8)}},
			{"drain beats warn", []string{"gpu5:xid=94", "gpu5:xid=45", "gpu5:xid=64"}, [][]want{oks(0, 5),
				{{"gpu5", check.Fail, check.ActionResetGPU, "XID 64 ECC page retirement or row remapping recording failure (+1 more XIDs)", 5, 5}}, oks(6, 8)}},
			{"two GPUs", []string{"gpu2:xid=94", "gpu6:xid=140"}, [][]want{oks(0, 2),
				{{"gpu2", check.Warn, "", "XID 94 contained ECC error (1 this boot)", 2, 2}}, oks(3, 6),
				{{"gpu6", check.Fail, check.ActionResetGPU, "XID 140 unrecovered ECC error", 6, 6}}, oks(7, 8)}},
			// The simulator's 149 is NETIR_LINK_EVT Fatal, a RESET_GPU row
			// of NVIDIA's decode table; its 145 the RLW_RXPIPE Nonfatal
			// line healthy B200s log, an IGNORE row.
			{"nvlink5 fatal", []string{"gpu4:xid=149"}, [][]want{oks(0, 4),
				{{"gpu4", check.Fail, check.ActionResetGPU, "XID 149 NVLink NETIR error: NETIR_LINK_EVT Fatal, link 8, status 0x00000000", 4, 4}}, oks(5, 8)}},
			{"nvlink5 nonfatal", []string{"gpu4:xid=145"}, [][]want{oks(0, 8)}},
			{"recovery action", []string{"gpu5:xid=154"}, [][]want{oks(0, 5),
				{{"gpu5", check.Fail, check.ActionReboot, "XID 154 GPU recovery action changed: Node Reboot Required", 5, 5}}, oks(6, 8)}},
			{"ignored xids", []string{"gpu5:xid=43", "gpu5:xid=63", "gpu6:xid=92"}, [][]want{oks(0, 8)}},
			{"45 alone", []string{"gpu2:xid=45"}, [][]want{oks(0, 2),
				{{"gpu2", check.Warn, "", "XID 45 preemptive cleanup, due to previous errors (1 this boot)", 2, 2}}, oks(3, 8)}},
			{"45 after 48", []string{"gpu2:xid=48", "gpu2:xid=45"}, [][]want{oks(0, 2),
				{{"gpu2", check.Fail, check.ActionResetGPU, "XID 48 double-bit ECC error", 2, 2}}, oks(3, 8)}},
			{"48 contained", []string{"gpu2:xid=48", "gpu2:xid=94", "gpu2:xid=45"}, [][]want{oks(0, 2),
				{{"gpu2", check.Warn, "", "XID 48 double-bit ECC error (contained: XID 94) (+1 more XIDs, 2 this boot)", 2, 2}}, oks(3, 8)}},
			// The GPU fell off the bus before NVML enumerated it: it is
			// named by PCI address, and the GPUs after it are renumbered.
			{"xid 79, GPU gone from NVML", []string{"gpu3:missing", "gpu3:xid=79"}, [][]want{oks(0, 3),
				{{"gpu3", check.OK, "", "no XIDs", 3, 4}, {"gpu4", check.OK, "", "no XIDs", 4, 5},
					{"gpu5", check.OK, "", "no XIDs", 5, 6}, {"gpu6", check.OK, "", "no XIDs", 6, 7}},
				{{pci(3), check.Fail, check.ActionReboot, "XID 79 GPU has fallen off the bus", -1, -2}}}},
			{"xid 79, GPU lost", []string{"gpu3:lost", "gpu3:xid=79"}, [][]want{oks(0, 8, 3),
				{{pci(3), check.Fail, check.ActionReboot, "XID 79 GPU has fallen off the bus", -1, -2}}}},
			// NVML itself is down: XIDs still FAIL, by PCI address; with
			// none, one OK (gpu.driver reports NVML).
			{"xid without NVML", []string{"gpu0:nvml-init", "gpu3:xid=95"}, [][]want{
				{{pci(3), check.Fail, check.ActionResetGPU, "XID 95 uncontained ECC error", -1, -2}}}},
			{"no NVML, no XIDs", []string{"gpu0:nvml-init"}, [][]want{
				{{"host", check.OK, "", "no XIDs", -1, -1}}}},
			{"xid while NVML hangs", []string{"gpu4:hang", "gpu4:xid=48"}, [][]want{
				{{pci(4), check.Fail, check.ActionResetGPU, "XID 48 double-bit ECC error", -1, -2}}}},
		} {
			t.Run(model+"/"+tc.name, func(t *testing.T) {
				m := machine(t, model, tc.inject...)
				c := newCheck(m, defaults(), statefile.Dir{Path: t.TempDir()}, simSrc(m))
				if c.Name() != "gpu.xid" {
					t.Fatal(c.Name())
				}
				expectPCI(t, m, run(c), tc.want...)
			})
		}
	}
}

// expectPCI is expect, where dev -2 means IDs name only the PCI address
// (a GPU NVML does not list).
func expectPCI(t *testing.T, m *sim.Machine, got []check.Result, wants ...[]want) {
	t.Helper()
	var plain [][]want
	var pciOnly []check.Result
	var kept []check.Result
	for _, ws := range wants {
		var p []want
		for _, w := range ws {
			if w.dev == -2 {
				w.dev = -1
				pciOnly = append(pciOnly, check.Result{Component: w.component})
			}
			p = append(p, w)
		}
		plain = append(plain, p)
	}
	for _, r := range got {
		if len(pciOnly) > 0 && r.Component == pciOnly[0].Component {
			if r.IDs.PCIBusID != r.Component || r.IDs.GPUIndex != nil || r.IDs.Serial != "" {
				t.Errorf("%s: IDs %v, want only the PCI address", r.Component, ids(r.IDs))
			}
			r.IDs = check.IDs{}
		}
		kept = append(kept, r)
	}
	expect(t, m, kept, plain...)
}

// The drain reason an admin reads, built by the policy from the result.
func TestReason(t *testing.T) {
	m := machine(t, "dgxh100", "gpu3:xid=79")
	rs := run(newCheck(m, defaults(), statefile.Dir{Path: t.TempDir()}, simSrc(m)))
	for i := range rs {
		rs[i].Check = Name
	}
	var fails []check.Result
	for _, r := range rs {
		if r.Status == check.Fail {
			fails = append(fails, r)
		}
	}
	got := policy.Reason(fails)
	want := "gpuhc: gpu.xid: gpu3 (SN 1654922000003, 0000:5d:00.0): XID 79 GPU has fallen off the bus"
	if got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
}

// started are the OK results of a run that only put the cursor at the end
// of the log, for GPUs from to to-1.
func started(from, to int) []want {
	var out []want
	for i := from; i < to; i++ {
		out = append(out, okMsg(i, msgStarted))
	}
	return out
}

// A first run (no record) starts the cursor at the end of the log: the
// XIDs already there, from earlier in this boot, are not acted on. After
// it each XID is acted on by exactly one run; a drain-class XID keeps the
// GPU failed for the rest of the boot; a reboot reads the new boot's log
// from its start.
func TestCursorAcrossRuns(t *testing.T) {
	dir := statefile.Dir{Path: t.TempDir()}
	const boot = "5e1a7ed0-0000-4000-8000-0000000000aa"
	step := func(t *testing.T, m *sim.Machine, boot string, wants ...[]want) {
		t.Helper()
		expect(t, m, run(newCheck(m, defaults(), dir, kmsg.SliceSource(m.Kmsg, boot))), wants...)
	}

	// gpuhc installed on a node whose GPUs had XIDs earlier this boot
	// (maybe cured since by a GPU reset): nothing to act on.
	m := machine(t, "dgxh100", "gpu1:xid=13", "gpu3:xid=79")
	step(t, m, boot, started(0, 8))
	var st state
	if err := dir.Load(stateFile, &st); err != nil || st.BootID != boot || len(st.GPUs) != 0 {
		t.Fatalf("state after the first run: %+v, %v", st, err)
	}
	if b, next := cursorOf(t, dir); b != boot || next != uint64(len(m.Kmsg)) {
		t.Fatalf("cursor after the first run: %s %d", b, next)
	}

	// A restart (the next run of the binary): the same log, nothing new.
	step(t, m, boot, oks(0, 8))

	// New XIDs after the cursor: only they are counted.
	m = machine(t, "dgxh100", "gpu1:xid=13", "gpu3:xid=79", "gpu1:xid=13", "gpu3:xid=79")
	xid79 := []want{{"gpu3", check.Fail, check.ActionReboot, "XID 79 GPU has fallen off the bus", 3, 3}}
	step(t, m, boot, oks(0, 1), []want{{"gpu1", check.Warn, "", "XID 13 graphics engine exception (1 this boot)", 1, 1}}, oks(2, 3), xid79, oks(4, 8))

	// Nothing new: XID 13 is not counted again; XID 79 still fails, word
	// for word.
	step(t, m, boot, oks(0, 1), []want{okMsg(1, "no new XIDs (1 this boot)")}, oks(2, 3), xid79, oks(4, 8))

	// More XIDs after the cursor: only they are counted.
	m = machine(t, "dgxh100", "gpu1:xid=13", "gpu3:xid=79", "gpu1:xid=13", "gpu3:xid=79", "gpu1:xid=31", "gpu6:xid=8")
	step(t, m, boot, oks(0, 1), []want{{"gpu1", check.Warn, "", "XID 31 GPU memory page fault (2 this boot)", 1, 1}}, oks(2, 3), xid79,
		oks(4, 6), []want{{"gpu6", check.Warn, "", "XID 8 GPU stopped processing (1 this boot)", 6, 6}}, oks(7, 8))

	// A milder XID on the failed GPU (a smaller action) leaves its reason
	// as it was.
	m = machine(t, "dgxh100", "gpu1:xid=13", "gpu3:xid=79", "gpu1:xid=13", "gpu3:xid=79", "gpu1:xid=31", "gpu6:xid=8", "gpu3:xid=13", "gpu3:xid=48")
	step(t, m, boot, oks(0, 1), []want{okMsg(1, "no new XIDs (2 this boot)")}, oks(2, 3), xid79,
		oks(4, 6), []want{okMsg(6, "no new XIDs (1 this boot)")}, oks(7, 8))

	// Reboot: a new boot id, and the kernel's sequence numbers start
	// again. The old boot's XIDs are gone from the log and from the state;
	// the new boot's log is read from its start, XIDs from before the
	// first run included: the previous boot's record says gpuhc watched.
	const boot2 = "5e1a7ed0-0000-4000-8000-0000000000bb"
	m = machine(t, "dgxh100", "gpu5:xid=48")
	xid48 := []want{{"gpu5", check.Fail, check.ActionResetGPU, "XID 48 double-bit ECC error", 5, 5}}
	step(t, m, boot2, oks(0, 5), xid48, oks(6, 8))
	step(t, m, boot2, oks(0, 5), xid48, oks(6, 8))

	// A worse XID (a bigger action) on the failed GPU becomes its reason.
	m = machine(t, "dgxh100", "gpu5:xid=48", "gpu5:xid=79")
	xid79on5 := []want{{"gpu5", check.Fail, check.ActionReboot, "XID 79 GPU has fallen off the bus", 5, 5}}
	step(t, m, boot2, oks(0, 5), xid79on5, oks(6, 8))
	step(t, m, boot2, oks(0, 5), xid79on5, oks(6, 8))

	// Reboot into a clean log.
	step(t, machine(t, "dgxh100"), "5e1a7ed0-0000-4000-8000-0000000000cc", oks(0, 8))
}

// After `nvidia-smi -r` cured a GPU, its sticky FAIL is cleared by
// deleting the state file: the kernel-log cursor is the pass's own file,
// so the XID still in the kernel's buffer does not drain the node again;
// an XID after that is acted on. Deleting only the GPU's entry under
// "gpus" does the same for that GPU alone.
func TestClearStickyAfterReset(t *testing.T) {
	path := t.TempDir()
	dir := statefile.Dir{Path: path}
	m := machine(t, "dgxb200", "gpu4:xid=95")
	xid95 := []want{{"gpu4", check.Fail, check.ActionResetGPU, "XID 95 uncontained ECC error", 4, 4}}
	expect(t, m, run(newCheck(m, defaults(), dir, simSrc(m))), oks(0, 4), xid95, oks(5, 8))
	expect(t, m, run(newCheck(m, defaults(), dir, kmsg.SliceSource(m.Kmsg, m.BootID))), oks(0, 4), xid95, oks(5, 8))

	// The cursor is the kernel-log pass's (kmsg-cursor.json), so it
	// stays where it was: the XID behind it is not judged again.
	if err := os.Remove(filepath.Join(path, stateFile)); err != nil {
		t.Fatal(err)
	}
	expect(t, m, run(newCheck(m, defaults(), dir, kmsg.SliceSource(m.Kmsg, m.BootID))), oks(0, 8))
	expect(t, m, run(newCheck(m, defaults(), dir, kmsg.SliceSource(m.Kmsg, m.BootID))), oks(0, 8))
	// Both removed: the cursor starts at the end of the log again.
	for _, f := range []string{stateFile, kmsg.CursorFile} {
		if err := os.Remove(filepath.Join(path, f)); err != nil {
			t.Fatal(err)
		}
	}
	expect(t, m, run(newCheck(m, defaults(), dir, kmsg.SliceSource(m.Kmsg, m.BootID))), started(0, 8))
	expect(t, m, run(newCheck(m, defaults(), dir, kmsg.SliceSource(m.Kmsg, m.BootID))), oks(0, 8))

	// The GPU fails again: a new XID.
	m = machine(t, "dgxb200", "gpu4:xid=95", "gpu4:xid=95")
	expect(t, m, run(newCheck(m, defaults(), dir, kmsg.SliceSource(m.Kmsg, m.BootID))), oks(0, 4), xid95, oks(5, 8))

	// Only the GPU's entry.
	var st state
	if err := dir.Load(stateFile, &st); err != nil || st.GPUs[m.Model.PCIBusID(4)] == nil {
		t.Fatalf("state %+v, %v", st, err)
	}
	delete(st.GPUs, m.Model.PCIBusID(4))
	if err := dir.Save(stateFile, st); err != nil {
		t.Fatal(err)
	}
	expect(t, m, run(newCheck(m, defaults(), dir, kmsg.SliceSource(m.Kmsg, m.BootID))), oks(0, 8))
}

// A first run that cannot read the log to its end in time does not start
// the cursor, which would take the rest of the log for new next time.
func TestFirstRunIncomplete(t *testing.T) {
	m := machine(t, "dgxh100", "gpu3:xid=79")
	dir := statefile.Dir{Path: t.TempDir()}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rs := newCheck(m, defaults(), dir, kmsg.SliceSource(m.Kmsg, m.BootID)).Run(ctx)
	if len(rs) != 1 || rs[0].Component != "host" || rs[0].Status != check.Error ||
		rs[0].Message != "cannot read the kernel log: it could not be read to its end in time; the cursor starts on the next run" {
		t.Fatalf("incomplete first read: %v", summary(rs))
	}
	if b, next := cursorOf(t, dir); b != "" || next != 0 {
		t.Errorf("saved cursor %s %d", b, next)
	}
}

// Without a boot id the cursor still starts at the end of the log and
// survives restarts, and a log whose sequence numbers went back (a
// reboot) is read from its start.
func TestCursorWithoutBootID(t *testing.T) {
	dir := statefile.Dir{Path: t.TempDir()}
	m := machine(t, "dgxa100", "gpu2:xid=62")
	expect(t, m, run(newCheck(m, defaults(), dir, kmsg.SliceSource(m.Kmsg, ""))), started(0, 8))
	m = machine(t, "dgxa100", "gpu2:xid=62", "gpu2:xid=62")
	xid62 := []want{{"gpu2", check.Fail, check.ActionResetGPU, "XID 62 internal micro-controller halt", 2, 2}}
	expect(t, m, run(newCheck(m, defaults(), dir, kmsg.SliceSource(m.Kmsg, ""))), oks(0, 2), xid62, oks(3, 8))
	expect(t, m, run(newCheck(m, defaults(), dir, kmsg.SliceSource(m.Kmsg, ""))), oks(0, 2), xid62, oks(3, 8))

	// After the reboot the log is shorter than the cursor.
	short := machine(t, "dgxa100")
	short.Kmsg = short.Kmsg[:3]
	expect(t, short, run(newCheck(short, defaults(), dir, kmsg.SliceSource(append(short.Kmsg,
		"4,3,99,-;NVRM: Xid (PCI:0000:4e:00): 13, pid=1, name=x, Graphics Exception"), ""))),
		oks(0, 3), []want{{"gpu3", check.Warn, "", "XID 13 graphics engine exception (1 this boot)", 3, 3}}, oks(4, 8))
	var st state
	if err := dir.Load(stateFile, &st); err != nil || st.GPUs["0000:47:00.0"] != nil {
		t.Errorf("state after reboot: %+v, %v", st, err)
	}
	if _, next := cursorOf(t, dir); next != 4 {
		t.Errorf("cursor after reboot: %d", next)
	}
}

// A dry run saves nothing: the next run sees the same XIDs again.
func TestDryRunSavesNothing(t *testing.T) {
	path := t.TempDir()
	dir := statefile.Dir{Path: path, ReadOnly: true}
	m := machine(t, "dgxb200", "gpu0:xid=79")
	for range 2 {
		expect(t, m, run(newCheck(m, defaults(), dir, simSrc(m))),
			[]want{{"gpu0", check.Fail, check.ActionReboot, "XID 79 GPU has fallen off the bus", 0, 0}}, oks(1, 8))
	}
	for _, f := range []string{stateFile, kmsg.CursorFile} {
		if _, err := os.Stat(filepath.Join(path, f)); !os.IsNotExist(err) {
			t.Errorf("dry run wrote %s: %v", f, err)
		}
	}
}

// An XID line the driver was still writing when the log was read is read
// again, whole, by the next run.
func TestSplitLineAcrossRuns(t *testing.T) {
	dir := statefile.Dir{Path: t.TempDir()}
	m := machine(t, "dgxh200", "gpu4:xid=13")
	n := uint64(len(m.Kmsg))
	first := append(append([]string(nil), m.Kmsg...), fmt.Sprintf("4,%d,7200000000,-;NVRM: Xid (PCI:0000:9a:00): ", n))
	warn := []want{{"gpu4", check.Warn, "", "XID 13 graphics engine exception (1 this boot)", 4, 4}}
	expect(t, m, run(newCheck(m, defaults(), dir, kmsg.SimulatedSource(first, m.BootID, m.KmsgWatchedFrom()))), oks(0, 4), warn, oks(5, 8))
	if _, next := cursorOf(t, dir); next != n {
		t.Fatalf("cursor %d, want it held on the unfinished line %d", next, n)
	}
	var st state
	second := append(append([]string(nil), first...),
		fmt.Sprintf("6,%d,7200000010,-;mlx5_core 0000:9b:00.0: Port module event: module 0, Cable plugged", n+1),
		fmt.Sprintf("4,%d,7200000020,c;79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", n+2))
	expect(t, m, run(newCheck(m, defaults(), dir, kmsg.SliceSource(second, m.BootID))), oks(0, 4),
		[]want{{"gpu4", check.Fail, check.ActionReboot, "XID 79 GPU has fallen off the bus", 4, 4}}, oks(5, 8))
	expect(t, m, run(newCheck(m, defaults(), dir, kmsg.SliceSource(second, m.BootID))), oks(0, 4),
		[]want{{"gpu4", check.Fail, check.ActionReboot, "XID 79 GPU has fallen off the bus", 4, 4}}, oks(5, 8))
	if err := dir.Load(stateFile, &st); err != nil || st.GPUs["0000:9a:00.0"].Count != 2 {
		t.Fatalf("state %+v (%v)", st, err)
	}
	if _, next := cursorOf(t, dir); next != n+3 {
		t.Fatalf("cursor %d, want %d", next, n+3)
	}
}

// Sites override the table per host.
func TestConfigOverride(t *testing.T) {
	// The old drain and warn lists override the catalogue for their
	// XIDs only: 95 is still the catalogue's RESET_GPU.
	c := defaults()
	c.Drain = []int{13, 79}
	c.Warn = []int{48}
	m := machine(t, "dgxh100", "gpu0:xid=13", "gpu1:xid=48", "gpu2:xid=95", "gpu3:xid=79")
	expect(t, m, run(newCheck(m, c, statefile.Dir{Path: t.TempDir()}, simSrc(m))),
		[]want{{"gpu0", check.Fail, check.ActionDrain, "XID 13 graphics engine exception", 0, 0},
			{"gpu1", check.Warn, "", "XID 48 double-bit ECC error (1 this boot)", 1, 1},
			{"gpu2", check.Fail, check.ActionResetGPU, "XID 95 uncontained ECC error", 2, 2},
			{"gpu3", check.Fail, check.ActionReboot, "XID 79 GPU has fallen off the bus", 3, 3}}, oks(4, 8))

	c.Drain, c.Warn = []int{300}, nil
	m = machine(t, "dgxh100", "gpu7:xid=300", "gpu6:xid=79")
	expect(t, m, run(newCheck(m, c, statefile.Dir{Path: t.TempDir()}, simSrc(m))),
		oks(0, 6), []want{{"gpu6", check.Fail, check.ActionReboot, "XID 79 GPU has fallen off the bus", 6, 6},
			{"gpu7", check.Fail, check.ActionDrain, "XID 300 unlisted XID", 7, 7}})
}

// Could not read the kernel log: ERROR, never FAIL; a GPU already known
// broken this boot stays FAIL.
func TestUnreadableLog(t *testing.T) {
	m := machine(t, "dgxh100")
	root := t.TempDir()
	c := newCheck(m, defaults(), statefile.Dir{Path: t.TempDir()}, kmsg.KmsgSource(root, "/dev/kmsg"))
	rs := run(c)
	if len(rs) != 1 || rs[0].Component != "host" || rs[0].Status != check.Error ||
		rs[0].Message != fmt.Sprintf("cannot read the kernel log: open %s/dev/kmsg: no such file or directory", root) {
		t.Fatalf("missing /dev/kmsg: %+v", rs)
	}

	dir := statefile.Dir{Path: t.TempDir()}
	m = machine(t, "dgxh100", "gpu3:xid=79")
	mustWrite(t, filepath.Join(root, "proc/sys/kernel/random/boot_id"), m.BootID+"\n")
	run(newCheck(m, defaults(), dir, simSrc(m)))
	expect(t, m, run(newCheck(m, defaults(), dir, kmsg.KmsgSource(root, "/dev/kmsg"))),
		[]want{{"host", check.Error, "", fmt.Sprintf("cannot read the kernel log: open %s/dev/kmsg: no such file or directory", root), -1, -1},
			{"gpu3", check.Fail, check.ActionReboot, "XID 79 GPU has fallen off the bus", 3, 3}})
}

// The kmsg source on a captured dump, through the whole check: the
// fixture's GPUs are not the simulator's, so everything is by PCI address.
func TestDumpThroughCheck(t *testing.T) {
	dir := statefile.Dir{Path: t.TempDir()}
	c := newPass(nil, defaults(), dir, kmsg.KmsgSource("", "../kmsg/testdata/kmsg-h100.txt"))
	// No record: the cursor starts at the end of the dump.
	if got := fmt.Sprint(summary(run(c))); got != "[host OK none "+msgStarted+"]" {
		t.Errorf("first run: %s", got)
	}
	boot, next := cursorOf(t, dir)
	if next == 0 {
		t.Fatalf("cursor %s %d", boot, next)
	}
	// A cursor at the start of this boot: the whole dump.
	if err := dir.Save(kmsg.CursorFile, map[string]any{"boot_id": boot, "next_seq": 0}); err != nil {
		t.Fatal(err)
	}
	rs := run(c)
	got := fmt.Sprint(summary(rs))
	// 2a: the XID 45 follows the 94 and is not reported; 5d: the 154
	// asks for the same reboot as the 79, which came first.
	want := "[0000:2a:00.0 WARN none XID 94 contained ECC error (1 this boot) 0000:5d:00.0 FAIL reboot XID 79 GPU has fallen off the bus (+1 more XIDs)]"
	if got != want {
		t.Errorf("results %s, want %s", got, want)
	}
}

func summary(rs []check.Result) []string {
	var out []string
	for _, r := range rs {
		a := r.Action
		if a == "" {
			a = check.ActionNone
		}
		out = append(out, fmt.Sprintf("%s %s %s %s", r.Component, r.Status, a, r.Message))
	}
	return out
}

func TestStateTrouble(t *testing.T) {
	m := machine(t, "dgxh100", "gpu3:xid=79")
	fail79 := []want{{"gpu3", check.Fail, check.ActionReboot, "XID 79 GPU has fallen off the bus", 3, 3}}

	// A corrupt record, or one of the wrong shape: start afresh, at the
	// end of the log (the XID is not reported again).
	// The cursor is the pass's own file, or, before it had one (an
	// upgrade), gpu-xid.json's.
	for _, file := range []string{kmsg.CursorFile, stateFile} {
		for _, bad := range []string{"{not json", `{"next_seq": "x"}`, "[]"} {
			path := t.TempDir()
			mustWrite(t, filepath.Join(path, file), bad)
			expect(t, m, run(newCheck(m, defaults(), statefile.Dir{Path: path}, kmsg.SliceSource(m.Kmsg, m.BootID))), started(0, 8))
			var st state
			if err := (statefile.Dir{Path: path}).Load(stateFile, &st); err != nil || st.BootID != m.BootID {
				t.Errorf("%s %s: state after %+v, %v", file, bad, st, err)
			}
			if b, next := cursorOf(t, statefile.Dir{Path: path}); b != m.BootID || next != uint64(len(m.Kmsg)) {
				t.Errorf("%s %s: cursor after %s %d", file, bad, b, next)
			}
		}
	}

	// A state directory that cannot be written: say so, as ERROR.
	notDir := filepath.Join(t.TempDir(), "file")
	mustWrite(t, notDir, "")
	rs := run(newCheck(m, defaults(), statefile.Dir{Path: notDir}, kmsg.SliceSource(m.Kmsg, m.BootID)))
	if rs[0].Component != "host" || rs[0].Status != check.Error || !regexp.MustCompile(
		`^cannot read the kernel log cursor, reading the kernel log from the start: .*not a directory; `+
			`cannot read the XID state, this boot's earlier XIDs are forgotten: .*not a directory; `+
			`cannot save the XID state, these XIDs will be counted again: .*not a directory$`).MatchString(rs[0].Message) {
		t.Errorf("unusable state directory: %+v", rs[0])
	}
	expect(t, m, rs[1:], oks(0, 3), fail79, oks(4, 8))
}

// A GPU-less node: SKIP, and no state beyond the cursor.
func TestNoGPUs(t *testing.T) {
	root := t.TempDir()
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	node := gpu.NewNode(lib, root, 0, "")
	src := kmsg.SliceSource([]string{"6,0,1,-;Linux version 6.1.0"}, "b")
	rs := run(newPass(node, defaults(), statefile.Dir{Path: t.TempDir()}, src))
	if fmt.Sprint(summary(rs)) != "[host SKIP none no NVIDIA GPU on this node]" {
		t.Errorf("no GPUs: %v", summary(rs))
	}
	// An XID line all the same (a saved log replayed on a GPU-less
	// machine, a GPU gone from the bus): judged, by PCI address.
	src = kmsg.SimulatedSource([]string{"6,0,1,-;Linux version 6.1.0", "4,1,2,-;NVRM: Xid (PCI:0000:4e:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."}, "b", 0)
	rs = run(newPass(node, defaults(), statefile.Dir{Path: t.TempDir()}, src))
	if fmt.Sprint(summary(rs)) != "[0000:4e:00.0 FAIL reboot XID 79 GPU has fallen off the bus]" {
		t.Errorf("no GPUs, an XID: %v", summary(rs))
	}
}

// The run that reads XID 79 still sees the GPU in NVML; by the next run
// it has dropped out and the GPUs after it are renumbered. The sticky
// FAIL moves to the PCI address and keeps the serial, not the index.
func TestStickyGPUDropsOut(t *testing.T) {
	dir := statefile.Dir{Path: t.TempDir()}
	m := machine(t, "dgxh100", "gpu3:xid=79")
	expect(t, m, run(newCheck(m, defaults(), dir, simSrc(m))), oks(0, 3),
		[]want{{"gpu3", check.Fail, check.ActionReboot, "XID 79 GPU has fallen off the bus", 3, 3}}, oks(4, 8))

	gone := machine(t, "dgxh100", "gpu3:xid=79", "gpu3:missing")
	rs := run(newCheck(gone, defaults(), dir, simSrc(gone)))
	last := rs[len(rs)-1]
	last.Check = Name
	if got, want := policy.Reason([]check.Result{last}), "gpuhc: gpu.xid: 0000:5d:00.0 (SN 1654922000003): XID 79 GPU has fallen off the bus"; got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
	if last.Status != check.Fail || last.Action != check.ActionReboot || last.IDs.GPUIndex != nil ||
		last.IDs.UUID != m.Model.UUID(3) || last.IDs.Serial != m.Model.Serial(3) || last.IDs.PCIBusID != "0000:5d:00.0" {
		t.Errorf("dropped-out GPU: %+v %v", last, ids(last.IDs))
	}
	if len(rs) != 8 {
		t.Errorf("%d results, want 7 GPUs and the lost one: %v", len(rs), summary(rs))
	}
}

// The simulator's kernel log: realistic, deterministic records with
// increasing sequence numbers, and no XID until one is injected.
func TestSimulatedKmsg(t *testing.T) {
	for _, model := range models {
		m := machine(t, model, "gpu6:xid=79", "gpu0:xid=13")
		again := machine(t, model, "gpu6:xid=79", "gpu0:xid=13")
		if strings.Join(m.Kmsg, "\n") != strings.Join(again.Kmsg, "\n") {
			t.Errorf("%s: log differs between two builds", model)
		}
		b, _ := kmsg.SliceSource(m.Kmsg, m.BootID).Records(context.Background(), 0)
		if b.Seen != len(m.Kmsg) {
			t.Fatalf("%s: %d of %d records parse", model, b.Seen, len(m.Kmsg))
		}
		for i, r := range b.Records {
			if r.Seq != uint64(i) || (i > 0 && r.TimeUsec <= b.Records[i-1].TimeUsec) || r.Facility != 0 {
				t.Errorf("%s: record %d = %+v", model, i, r)
			}
		}
		events, _ := eventsOf(b.Records)
		if len(events) != 2 || events[0].XID != 79 || events[0].PCI != m.Model.PCIBusID(6) ||
			events[1].XID != 13 || events[1].PCI != m.Model.PCIBusID(0) {
			t.Errorf("%s: events %s", model, dumpEvents(events))
		}
		want := fmt.Sprintf("NVRM: Xid (PCI:%s): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
			strings.TrimSuffix(m.Model.PCIBusID(6), ".0"))
		if got := b.Records[len(b.Records)-2].Text; got != want {
			t.Errorf("%s: %q, want %q", model, got, want)
		}
		healthy, _ := eventsOf(mustRecords(t, machine(t, model)))
		if len(healthy) != 0 {
			t.Errorf("%s: healthy machine logs XIDs: %s", model, dumpEvents(healthy))
		}
		// The boot's messages come before the injected XIDs.
		if w := m.KmsgWatchedFrom(); w != uint64(len(m.Kmsg)-2) {
			t.Errorf("%s: watched from %d, want %d", model, w, len(m.Kmsg)-2)
		}
		if h := machine(t, model); h.KmsgWatchedFrom() != uint64(len(h.Kmsg)) || len(h.Kmsg) != len(m.Kmsg)-2 {
			t.Errorf("%s: healthy log watched from %d of %d", model, h.KmsgWatchedFrom(), len(h.Kmsg))
		}
	}
	for _, bad := range []string{"gpu0:xid", "gpu0:xid=0", "gpu0:xid=1000", "gpu0:xid=79x", "gpu8:xid=79"} {
		specs, err := sim.ParseSpecs([]string{bad})
		if err == nil {
			_, err = sim.New("dgxh100", specs)
		}
		if err == nil {
			t.Errorf("inject %q accepted", bad)
		}
	}
}

func mustRecords(t *testing.T, m *sim.Machine) []kmsg.Record {
	t.Helper()
	b, err := kmsg.SliceSource(m.Kmsg, m.BootID).Records(context.Background(), 0)
	if err != nil || b.Seen == 0 {
		t.Fatalf("records: %+v, %v", b, err)
	}
	return b.Records
}

// Lines read again (a job run's pass, whose cursor waits for rules it does
// not run) are judged once: a warn-class XID is not counted twice.
func TestLinesReadAgainJudgedOnce(t *testing.T) {
	m := machine(t, "dgxh100", "gpu2:xid=13")
	var recs []kmsg.Record
	for _, s := range m.Kmsg {
		r, err := kmsg.ParseRecord(s)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	lines, _ := kmsg.Lines(recs)
	snap := kmsg.Snapshot{BootID: m.BootID, Lines: lines}
	dir := statefile.Dir{Path: t.TempDir()}
	for i, want := range []check.Status{check.Warn, check.OK} {
		node := gpu.NewNode(m.Server, "", -1, m.Model.Name, gpu.WithBus(m.OnBus))
		rs := run(New(node, defaults(), dir, &kmsg.Fixed{Snap: snap}))
		if rs[2].Status != want {
			t.Errorf("read %d: gpu2 %v %q, want %v", i+1, rs[2].Status, rs[2].Message, want)
		}
		if i == 1 && rs[2].Message != "no new XIDs (1 this boot)" {
			t.Errorf("read again: gpu2 %q, want the XID counted once", rs[2].Message)
		}
	}
}

// A GPU that failed this boot and has since left the bus (hot removed
// after its XID 79, NVML seeing nothing) stays failed: the check does not
// fall back to "no NVIDIA GPU on this node". Found in review.
func TestStickyKeptWhenTheBusEmpties(t *testing.T) {
	dir := statefile.Dir{Path: t.TempDir()}
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }}
	node := func() *gpu.Node { return gpu.NewNode(lib, t.TempDir(), -1, "") }
	log := []string{"6,0,1,-;Linux version 6.1.0", "4,1,2,-;NVRM: Xid (PCI:0000:4e:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."}
	for i := range 2 {
		rs := run(newPass(node(), defaults(), dir, kmsg.SimulatedSource(log, "b", 0)))
		if len(rs) != 1 || rs[0].Component != "0000:4e:00.0" || rs[0].Status != check.Fail || rs[0].Action != check.ActionReboot {
			t.Errorf("run %d: %+v, want the sticky XID 79 FAIL", i+1, rs)
		}
	}
}
