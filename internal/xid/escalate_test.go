package xid

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/escalate"
	"github.com/gpuhc/gpuhc/internal/kmsg"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

// The same drain-class XID on the same GPU serial in a third boot asks
// for an RMA (escalate_after 2); each boot counts once, however many
// runs repeat the FAIL; the history is keyed by serial, so boots seen on
// another slot or node count too.
func TestEscalationAcrossBoots(t *testing.T) {
	dir := statefile.Dir{Path: t.TempDir()}
	boots := []string{"5e1a7ed0-0000-4000-8000-0000000000a1", "5e1a7ed0-0000-4000-8000-0000000000a2", "5e1a7ed0-0000-4000-8000-0000000000a3"}
	step := func(boot string, inject []string, wants ...[]want) {
		t.Helper()
		m := machine(t, "dgxh100", inject...)
		expect(t, m, run(newCheck(m, defaults(), dir, kmsg.SimulatedSource(m.Kmsg, boot, m.KmsgWatchedFrom()))), wants...)
	}
	reboot := []want{{"gpu3", check.Fail, check.ActionReboot, "XID 79 GPU has fallen off the bus", 3, 3}}
	rma := []want{{"gpu3", check.Fail, check.ActionRMA, "XID 79 GPU has fallen off the bus (3rd boot with it: rma)", 3, 3}}
	seed := func() {
		// The record is of another boot: the first run reads the log
		// from its start.
		if err := dir.Save(stateFile, newState("old-boot")); err != nil {
			t.Fatal(err)
		}
	}
	seed()
	step(boots[0], []string{"gpu3:xid=79"}, oks(0, 3), reboot, oks(4, 8))
	step(boots[0], []string{"gpu3:xid=79", "gpu3:xid=79"}, oks(0, 3), reboot, oks(4, 8)) // same boot: still the 1st
	step(boots[1], []string{"gpu3:xid=79"}, oks(0, 3), reboot, oks(4, 8))
	step(boots[2], []string{"gpu3:xid=79"}, oks(0, 3), rma, oks(4, 8))
	step(boots[2], []string{"gpu3:xid=79"}, oks(0, 3), rma, oks(4, 8)) // sticky, word for word

	// Keyed by serial, not PCI address: nothing in the record names one.
	b, err := os.ReadFile(filepath.Join(dir.Path, historyFile))
	if err != nil {
		t.Fatal(err)
	}
	m := machine(t, "dgxh100")
	if !strings.Contains(string(b), m.Model.Serial(3)) || strings.Contains(string(b), "5d:00") {
		t.Errorf("history %s", b)
	}
	var rec struct {
		Parts map[string]struct {
			Problems map[string]struct{ Boots []string }
		}
	}
	if err := json.Unmarshal(b, &rec); err != nil || len(rec.Parts[m.Model.Serial(3)].Problems["xid79"].Boots) != 3 {
		t.Errorf("history %s: %v", b, err)
	}

	// gpu5's serial was seen with XID 95 in two boots elsewhere (another
	// slot, another node: the record knows only the serial). Its first
	// 95 here is the third boot.
	dir = statefile.Dir{Path: t.TempDir()}
	h := escalate.New(dir, historyFile)
	for _, boot := range []string{"elsewhere-1", "elsewhere-2"} {
		if _, err := h.Seen(m.Model.Serial(5), "xid95", boot); err != nil {
			t.Fatal(err)
		}
	}
	seed()
	step(boots[0], []string{"gpu5:xid=95", "gpu4:xid=95"}, oks(0, 4),
		[]want{{"gpu4", check.Fail, check.ActionResetGPU, "XID 95 uncontained ECC error", 4, 4}},
		[]want{{"gpu5", check.Fail, check.ActionRMA, "XID 95 uncontained ECC error (3rd boot with it: rma)", 5, 5}}, oks(6, 8))
}

// No history is written on the healthy path, nor for WARNs; a per-XID
// escalate_after replaces the default; 0 switches escalation off.
func TestEscalationSettings(t *testing.T) {
	dir := statefile.Dir{Path: t.TempDir()}
	m := machine(t, "dgxh100", "gpu1:xid=13", "gpu2:xid=94")
	run(newCheck(m, defaults(), dir, kmsg.SimulatedSource(m.Kmsg, "boot-a", m.KmsgWatchedFrom())))
	run(newCheck(m, defaults(), dir, kmsg.SimulatedSource(m.Kmsg, "boot-b", m.KmsgWatchedFrom())))
	if _, err := os.Stat(filepath.Join(dir.Path, historyFile)); !os.IsNotExist(err) {
		t.Errorf("history written without a FAIL: %v", err)
	}

	for _, tc := range []struct {
		name     string
		set      func(c *config.XID)
		rmaAfter int // the boot (1st, 2nd, ...) that first says rma; 0 never
	}{
		{"default", func(*config.XID) {}, 3},
		{"per XID", func(c *config.XID) {
			c.Override = []config.XIDOverride{{XID: 79, Status: "fail", Action: "reboot", EscalateAfter: 1}}
		}, 2},
		{"per XID never", func(c *config.XID) {
			c.Override = []config.XIDOverride{{XID: 79, Status: "fail", EscalateAfter: -1}}
		}, 0},
		{"off", func(c *config.XID) { c.EscalateAfter = 0 }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := statefile.Dir{Path: t.TempDir()}
			c := defaults()
			tc.set(&c)
			m := machine(t, "dgxh100", "gpu3:xid=79")
			if err := dir.Save(stateFile, newState("old-boot")); err != nil {
				t.Fatal(err)
			}
			for boot := 1; boot <= 4; boot++ {
				rs := run(newCheck(m, c, dir, kmsg.SimulatedSource(m.Kmsg, fmt.Sprintf("boot-%d", boot), m.KmsgWatchedFrom())))
				want := check.ActionReboot
				if tc.rmaAfter != 0 && boot >= tc.rmaAfter {
					want = check.ActionRMA
				}
				if len(rs) != 8 || rs[3].Status != check.Fail || rs[3].Action != want {
					t.Fatalf("boot %d: %+v, want %s", boot, rs[3], want)
				}
			}
		})
	}

	// A dry run (read-only state) never writes the history.
	ro := statefile.Dir{Path: t.TempDir(), ReadOnly: true}
	if err := (statefile.Dir{Path: ro.Path}).Save(stateFile, newState("old-boot")); err != nil {
		t.Fatal(err)
	}
	m = machine(t, "dgxh100", "gpu3:xid=79")
	if rs := run(newCheck(m, defaults(), ro, kmsg.SimulatedSource(m.Kmsg, "boot-a", m.KmsgWatchedFrom()))); rs[3].Status != check.Fail {
		t.Errorf("dry run: %+v", rs[3])
	}
	if _, err := os.Stat(filepath.Join(ro.Path, historyFile)); !os.IsNotExist(err) {
		t.Errorf("history written by a dry run: %v", err)
	}
}
