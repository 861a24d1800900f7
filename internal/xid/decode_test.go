package xid

import (
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

// judgeLines parses each line and judges each XID among the others of
// its GPU, as the check does with one batch.
func judgeLines(t *testing.T, tab Table, lines ...string) []Verdict {
	t.Helper()
	var evs []Event
	for _, l := range lines {
		e, ok := ParseLine(l)
		if !ok {
			t.Fatalf("not an XID line: %q", l)
		}
		evs = append(evs, e)
	}
	return tab.JudgeEach(evs)
}

// Real XID lines, judged by NVIDIA's catalogue. The expected verdicts
// come from the catalogue's rows (catalog.go, decode_nvlink5_table.go)
// and gpuhc's bucket mapping, never from running gpuhc. Sources:
//   - [issue] issue 11: a healthy B200 during jobs;
//   - [forum] forums.developer.nvidia.com/t/xid-62-xid-154-gsp-pmu-halt-crash-on-rtx-pro-6000-blackwell-during-llm-inference/364958
//   - [gpud] leptonai/gpud components/accelerator/nvidia/xid/*_test.go (gpud's
//     own test lines, in the driver's format; not all from real nodes);
//   - [synthetic] written here, in the driver's format, for a table row no
//     public sample shows.
func TestJudgeRealLines(t *testing.T) {
	tab := NewTable(config.Default().Checks.GPU.XID)
	for _, tc := range []struct {
		name   string
		line   string
		status check.Status
		action check.Action
		msg    string
	}{
		// [issue] RLW_RXPIPE status 0x8: IGNORE, Non-fatal.
		{"145 nonfatal, healthy B200", "NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)",
			check.OK, check.ActionNone, "XID 145 NVLink RLW error: RLW_RXPIPE Nonfatal, link 13, status 0x00000008"},
		// [gpud] NETIR_LINK_EVT, link-down reason 0x04: RESET_GPU, Link Fatal.
		{"149 link down", "NVRM: Xid (PCI:0000:04:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
			check.Fail, check.ActionResetGPU, "XID 149 NVLink NETIR error: NETIR_LINK_EVT Fatal, link 8, status 0x00000000"},
		// [gpud] reason 0x25: RESET_GPU (investigate the peer device).
		{"149 link down, peer", "NVRM: Xid (PCI:0000:04:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
			check.Fail, check.ActionResetGPU, "XID 149 NVLink NETIR error: NETIR_LINK_EVT Fatal, link 0, status 0x00000000"},
		// [gpud] SAW_MVB 0x8: IGNORE; 0x2: RESET_GPU (newer info encoding).
		{"144 nonfatal", "NVRM: Xid (PCI:0000:04:00): 144, SAW_MVB Nonfatal XC0 i0 Link 00 (0x00000001 0x00000008 0x00000000 0x00000000)",
			check.OK, check.ActionNone, "XID 144 NVLink SAW error: SAW_MVB Nonfatal, link 0, status 0x00000008"},
		{"144 fatal", "NVRM: Xid (PCI:0000:04:00): 144, SAW_MVB Fatal XC0 i0 Link 00 (0x00000001 0x00000002 0x00000000 0x00000000)",
			check.Fail, check.ActionResetGPU, "XID 144 NVLink SAW error: SAW_MVB Fatal, link 0, status 0x00000002"},
		// [gpud] RLW_REMAP 0x1: XID_154_EVAL (the driver's 154 decides); 0x40: RESET_GPU.
		{"145 remap, 154 decides", "NVRM: Xid (PCI:0000:04:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 00 (0x00000004 0x00000001 0x00000000 0x00000000)",
			check.OK, check.ActionNone, "XID 145 NVLink RLW error: RLW_REMAP Nonfatal, link 0, status 0x00000001 (the driver's XID 154 decides)"},
		{"145 remap fatal", "NVRM: Xid (PCI:0000:04:00): 145, RLW_REMAP Fatal XC0 i0 Link 00 (0x00000004 0x00000040 0x00000000 0x00000000)",
			check.Fail, check.ActionResetGPU, "XID 145 NVLink RLW error: RLW_REMAP Fatal, link 0, status 0x00000040"},
		// [gpud] TREX 0x1 and NVLPW 0x80000000: IGNORE.
		{"147 nonfatal", "NVRM: Xid (PCI:0000:04:00): 147, TREX Nonfatal XC0 i0 Link 00 (0x0000000e 0x00000001 0x00000000 0x00000000)",
			check.OK, check.ActionNone, "XID 147 NVLink TREX error: TREX Nonfatal, link 0, status 0x00000001"},
		{"148 nonfatal", "NVRM: Xid (PCI:0000:04:00): 148, NVLPW_CTRL/NVLPW Nonfatal XC0 i0 Link 00 (0x0000000f 0x80000000 0x00000000 0x00000000)",
			check.OK, check.ActionNone, "XID 148 NVLink NVLPW_CTRL error: NVLPW_CTRL/NVLPW Nonfatal, link 0, status 0x80000000"},
		// [synthetic] 149 link-down reason 0x28: the table's one Fatal row
		// whose action is IGNORE (investigate the host).
		{"149 fatal the table ignores", "NVRM: Xid (PCI:0000:04:00): 149, NETIR_LINK_EVT/NETIR_LINK_DOWN Fatal XC0 i0 Link 02 (0x02800011 0x00000000 0x00000000 0x00000000)",
			check.OK, check.ActionNone, "XID 149 NVLink NETIR error: NETIR_LINK_EVT/NETIR_LINK_DOWN Fatal, link 2, status 0x00000000"},
		// [synthetic] combinations the table lacks: the driver's word.
		{"146 fatal, not in the table", "NVRM: Xid (PCI:0000:04:00): 146, TLW_CTRL Fatal XC0 i0 Link 03 (0x00000009 0x00000040 0x00000000 0x00000000)",
			check.Fail, check.ActionResetGPU, "XID 146 NVLink TLW error: TLW_CTRL Fatal, link 3, status 0x00000040 (not in NVIDIA's decode table)"},
		{"146 nonfatal, not in the table", "NVRM: Xid (PCI:0000:04:00): 146, TLW_CTRL Nonfatal XC0 i0 Link 03 (0x00000009 0x00000040 0x00000000 0x00000000)",
			check.Warn, check.ActionNone, "XID 146 NVLink TLW error: TLW_CTRL Nonfatal, link 3, status 0x00000040 (not in NVIDIA's decode table)"},
		{"150 undecodable", "NVRM: Xid (PCI:0000:04:00): 150, pid='<unknown>', name=<unknown>, MSE watchdog",
			check.Warn, check.ActionNone, "XID 150 NVLink MSE error (not decoded)"},
		// [forum] 154 with the GPU reset the driver asks for; [synthetic] the others.
		{"154 gpu reset", "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
			check.Fail, check.ActionResetGPU, "XID 154 GPU recovery action changed: GPU Reset Required"},
		{"154 reboot", "NVRM: Xid (PCI:0000:5d:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
			check.Fail, check.ActionReboot, "XID 154 GPU recovery action changed: Node Reboot Required"},
		{"154 drain p2p", "NVRM: Xid (PCI:0000:5d:00): 154, GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)",
			check.Fail, check.ActionDrain, "XID 154 GPU recovery action changed: Drain P2P"},
		{"154 drain and reset", "NVRM: Xid (PCI:0000:5d:00): 154, GPU recovery action changed from 0x3 (Drain P2P) to 0x4 (Drain and Reset)",
			check.Fail, check.ActionResetGPU, "XID 154 GPU recovery action changed: Drain and Reset"},
		{"154 back to none", "NVRM: Xid (PCI:0000:5d:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)",
			check.OK, check.ActionNone, "XID 154 GPU recovery action changed: None"},
		{"154 without names", "NVRM: Xid (PCI:0000:5d:00): 154, GPU recovery action changed from 0x0 to 0x2",
			check.Fail, check.ActionReboot, "XID 154 GPU recovery action changed: Node Reboot Required"},
		{"154 undecodable", "NVRM: Xid (PCI:0000:5d:00): 154, something else",
			check.Warn, check.ActionNone, "XID 154 GPU recovery action changed: recovery action not decoded"},
		// [forum] RESET_GPU codes.
		{"62", "NVRM: Xid (PCI:0000:01:00): 62, 223b6a66 00002100 00000000 20662342 20662ba6 20664272 2065f7ca 2063f48c",
			check.Fail, check.ActionResetGPU, "XID 62 internal micro-controller halt"},
		{"120", "NVRM: Xid (PCI:0000:01:00): 120, GSP kernel exception: store access page fault (cause:0xf) @ pc:0xffffffff93003d42, partition:4#0",
			check.Fail, check.ActionResetGPU, "XID 120 GSP error"},
		// [gpud] RESTART_BM, RESTART_APP, IGNORE.
		{"79", "NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.",
			check.Fail, check.ActionReboot, "XID 79 GPU has fallen off the bus"},
		{"31", "NVRM: Xid (PCI:0000:01:00): 31, pid=1234",
			check.Warn, check.ActionNone, "XID 31 GPU memory page fault"},
		{"63", "NVRM: Xid (PCI:0000:01:00): 63, Row remapping pending",
			check.OK, check.ActionNone, "XID 63 ECC page retirement or row remapping recording event"},
		// 74: WORKFLOW_NVLINK_ERR decodes the registers. [NVSentinel design
		// 019] register 2 bit 16 only: "if seen repeatedly, run Field Diags
		// and report a bug": one sighting is reported.
		{"74 reg2 bit 16", "NVRM: Xid (PCI:0000:47:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
			check.Warn, check.ActionNone, "XID 74 NVLink error: link 14 (NVIDIA acts on these bits only when they repeat)"},
		// [synthetic, the same form] register 0 bit 8: "check link
		// mechanical connections": a reset, as any bit not named soft.
		{"74 reg0 bit 8", "NVRM: Xid (PCI:0000:47:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 3(0x100, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)",
			check.Fail, check.ActionResetGPU, "XID 74 NVLink error: link 3"},
		{"74 soft and hard bits", "NVRM: Xid (PCI:0000:47:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 3(0x1000, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
			check.Fail, check.ActionResetGPU, "XID 74 NVLink error: link 3"},
		// register 4 bit 20: "a threshold of ECC errors ... Continue operation".
		{"74 reg4 bit 20", "NVRM: Xid (PCI:0000:47:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 3(0x0, 0x0, 0x0, 0x0, 0x100000, 0x0, 0x0)",
			check.OK, check.ActionNone, "XID 74 NVLink error: link 3 (bits NVIDIA says to ignore)"},
		// a register the workflow does not read, or no registers: a reset.
		{"74 reg1", "NVRM: Xid (PCI:0000:47:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 3(0x0, 0x1, 0x0, 0x0, 0x0, 0x0, 0x0)",
			check.Fail, check.ActionResetGPU, "XID 74 NVLink error: link 3"},
		{"74 no registers", "NVRM: Xid (PCI:0000:47:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 3",
			check.Fail, check.ActionResetGPU, "XID 74 NVLink error: link 3"},
		// [synthetic] a GPU behind Intel VMD: the 5-digit domain parses.
		{"79 VMD domain", "NVRM: Xid (PCI:10000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
			check.Fail, check.ActionReboot, "XID 79 GPU has fallen off the bus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := judgeLines(t, tab, tc.line)[0]
			if v.Status != tc.status || v.Action != tc.action || v.Message != tc.msg {
				t.Errorf("got %s %s %q, want %s %s %q", v.Status, v.Action, v.Message, tc.status, tc.action, tc.msg)
			}
		})
	}
}

// XID 45 and 48 follow the other XIDs of their GPU in the batch.
func TestJudgeWithOthers(t *testing.T) {
	tab := NewTable(config.Default().Checks.GPU.XID)
	const (
		x45  = "NVRM: Xid (PCI:0000:01:00): 45, pid=12542, name=VLLM::Worker, channel 0x00000002"
		x48  = "NVRM: Xid (PCI:0000:01:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0."
		x94  = "NVRM: Xid (PCI:0000:01:00): 94, pid=48213, name=python3, Contained: SM (0x1). RST: No, D-RST: No"
		x95  = "NVRM: Xid (PCI:0000:01:00): 95, pid='<unknown>', name=<unknown>, Uncontained: FBHUB. RST: Yes, D-RST: No"
		x62  = "NVRM: Xid (PCI:0000:01:00): 62, 223b6a66 00002100 00000000 20662342 20662ba6 20664272 2065f7ca 2063f48c"
		o48  = "NVRM: Xid (PCI:0000:02:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0."
		x154 = "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
	)
	type vv struct {
		status check.Status
		action check.Action
	}
	for _, tc := range []struct {
		name  string
		lines []string
		want  []vv
	}{
		{"45 solo", []string{x45}, []vv{{check.Warn, check.ActionNone}}},
		// [open-gpu-kernel-modules#1150] the line names the XID it follows,
		// judged in an earlier run: not solo.
		{"45 naming a previous 149", []string{"NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149"},
			[]vv{{check.OK, check.ActionNone}}},
		{"45 after 48", []string{x48, x45}, []vv{{check.Fail, check.ActionResetGPU}, {check.OK, check.ActionNone}}},
		// [forum] the 62, its 154 and the cleanup 45 of one crash.
		{"45 after 62 and 154", []string{x62, x154, x45}, []vv{{check.Fail, check.ActionResetGPU}, {check.Fail, check.ActionResetGPU}, {check.OK, check.ActionNone}}},
		{"45 with a 48 on another GPU", []string{o48, x45}, []vv{{check.Fail, check.ActionResetGPU}, {check.Warn, check.ActionNone}}},
		{"48 contained", []string{x48, x94}, []vv{{check.Warn, check.ActionNone}, {check.Warn, check.ActionNone}}},
		{"48 uncontained", []string{x48, x95}, []vv{{check.Fail, check.ActionResetGPU}, {check.Fail, check.ActionResetGPU}}},
		{"48 alone", []string{x48}, []vv{{check.Fail, check.ActionResetGPU}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := judgeLines(t, tab, tc.lines...)
			for i, w := range tc.want {
				if got[i].Status != w.status || got[i].Action != w.action {
					t.Errorf("line %d: %s %s %q, want %s %s", i, got[i].Status, got[i].Action, got[i].Message, w.status, w.action)
				}
			}
		})
	}
}

// A site's word replaces the catalogue's, decode and all.
func TestJudgeOverrides(t *testing.T) {
	c := config.Default().Checks.GPU.XID
	c.Drain = []int{145}
	c.Warn = []int{79}
	c.Override = []config.XIDOverride{
		{XID: 13, Status: "fail", Action: "reset-gpu", EscalateAfter: 3},
		{XID: 154, Status: "ok"},
		{XID: 95, Status: "fail", EscalateAfter: -1},
	}
	tab := NewTable(c)
	for _, tc := range []struct {
		line     string
		status   check.Status
		action   check.Action
		escalate int
	}{
		{"NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)", check.Fail, check.ActionResetGPU, 2},
		{"NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.", check.Warn, check.ActionNone, 0},
		{"NVRM: Xid (PCI:0000:01:00): 13, Graphics Exception", check.Fail, check.ActionResetGPU, 3},
		{"NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", check.OK, check.ActionNone, 0},
		{"NVRM: Xid (PCI:0000:01:00): 95, Uncontained: FBHUB. RST: Yes, D-RST: No", check.Fail, check.ActionResetGPU, 0},
		{"NVRM: Xid (PCI:0000:01:00): 119, Timeout after 6s of waiting for RPC response", check.Fail, check.ActionResetGPU, 2},
	} {
		v := judgeLines(t, tab, tc.line)[0]
		if v.Status != tc.status || v.Action != tc.action || v.EscalateAfter != tc.escalate {
			t.Errorf("%.50s: %s %s escalate %d, want %s %s %d", tc.line, v.Status, v.Action, v.EscalateAfter, tc.status, tc.action, tc.escalate)
		}
	}
	// Class and Action by code alone, as the epilog asks.
	if tab.Class(145) != Drain || tab.Class(79) != Warn || tab.Class(154) != Ignore || tab.Action(13) != check.ActionResetGPU {
		t.Errorf("by code: 145 %v, 79 %v, 154 %v, 13 %s", tab.Class(145), tab.Class(79), tab.Class(154), tab.Action(13))
	}
	def := NewTable(config.Default().Checks.GPU.XID)
	if def.Class(79) != Drain || def.Action(79) != check.ActionReboot || def.Class(145) != Warn || def.Class(63) != Ignore || def.Class(13) != Warn {
		t.Errorf("default by code: 79 %v %s, 145 %v, 63 %v, 13 %v", def.Class(79), def.Action(79), def.Class(145), def.Class(63), def.Class(13))
	}
}

// XIDs 45 and 48 look at the rest of their GPU's batch once, not once
// per XID: a storm of 45s costs its length, not its square (review: 99,000
// of them timed gpu.xid out). Measured, not timed: the neighbours of a
// batch are summed up in one pass, and the verdicts are the same as
// judging each XID among all the others.
func TestNeighboursSummedOnce(t *testing.T) {
	batch := []Event{{XID: 45}, {XID: 45}, {XID: 48}, {XID: 94}, {XID: 45}}
	n := neighboursOf(batch)
	if n.other != 48 || !n.has94 || n.has95 {
		t.Errorf("neighbours %+v", n)
	}
	tab := NewTable(defaults())
	each := tab.JudgeEach(batch)
	for i, e := range batch {
		if one := tab.Judge(e, batch); one != each[i] {
			t.Errorf("XID %d: JudgeEach %+v, Judge %+v", e.XID, each[i], one)
		}
	}
	if each[0].Status != check.OK || each[2].Status != check.Warn {
		t.Errorf("45 after 48: %+v; 48 with 94: %+v", each[0], each[2])
	}
}
