package xid

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/lazyre"
)

// bucketVerdicts is gpuhc's mapping of the catalogue's immediate actions to
// gpuhc's verdicts (docs/architecture.md#xid-classification). The workflows
// are decoded from the line instead (catalogVerdict). Buckets the mapping
// does not name (RESTART_VM, CHECK_UVM, none listed) are reported, never
// drained: NVIDIA asks for nothing gpuhc could do to the node.
var bucketVerdicts = map[Bucket]Verdict{
	RestartBM:        {Status: check.Fail, Action: check.ActionReboot},
	ResetGPU:         {Status: check.Fail, Action: check.ActionResetGPU},
	RestartApp:       {Status: check.Warn},
	IgnoreBucket:     {Status: check.OK},
	ContactSupport:   {Status: check.Fail, Action: check.ActionDrain},
	CheckMechanicals: {Status: check.Fail, Action: check.ActionDrain},
	UpdateSWFW:       {Status: check.Warn},
	RestartVM:        {Status: check.Warn},
	CheckUVM:         {Status: check.Warn},
	NotListed:        {Status: check.Warn},
}

// neighbours is what XIDs 45 and 48 need of the other XIDs of their GPU
// in a batch, summed up once per batch: looking through the batch for
// every XID would cost a storm of 45s the square of its length (review:
// 99,000 of them timed gpu.xid out, which would then hold the cursor).
type neighbours struct {
	other        int // the first XID other than 45, 0 if none
	has94, has95 bool
}

func neighboursOf(events []Event) neighbours {
	var n neighbours
	for _, o := range events {
		if n.other == 0 && o.XID != 45 {
			n.other = o.XID
		}
		n.has94 = n.has94 || o.XID == 94
		n.has95 = n.has95 || o.XID == 95
	}
	return n
}

// catalogVerdict is the catalogue's verdict on e, workflows decoded.
func catalogVerdict(e Event, others neighbours) Verdict {
	entry, ok := Lookup(e.XID)
	if !ok {
		return Verdict{Status: check.Warn, Message: describe(e.XID) + " (not in NVIDIA's catalogue)"}
	}
	switch entry.Immediate {
	case WorkflowXID45:
		return decode45(e, others)
	case WorkflowXID48:
		return decode48(e, others)
	case WorkflowNVLinkErr:
		return decode74(e)
	case WorkflowNVLink5Err:
		return decodeNVLink5(e)
	case WorkflowXID154:
		return decode154(e)
	}
	v := bucketVerdicts[entry.Immediate]
	v.Message = describe(e.XID)
	return v
}

// decode45: "Solo: RESTART_FM; Not Solo: IGNORE (follow other Xid)"
// (the catalogue's investigatory action for 45). The preemptive cleanup
// after another XID on the same GPU is that XID's consequence, and that
// XID carries the verdict; alone it is reported. A line that names the
// XID it follows ("... caused by previous Xid 149", open-gpu-kernel-
// modules) is not solo whatever the batch holds: that XID may have been
// judged in an earlier run.
func decode45(e Event, others neighbours) Verdict {
	if m := previousXID.FindStringSubmatch(e.Text); m != nil {
		return Verdict{Status: check.OK, Message: fmt.Sprintf("%s (follows XID %s)", describe(45), m[1])}
	}
	if others.other != 0 {
		return Verdict{Status: check.OK, Message: fmt.Sprintf("%s (follows XID %d)", describe(45), others.other)}
	}
	return Verdict{Status: check.Warn, Message: describe(45)}
}

// previousXID is how a 45 names the XID it cleans up after.
var previousXID = lazyre.New(`\bcaused by previous Xid ([0-9]{1,3})\b`)

// decode48: a double-bit ECC error. On GPUs with error containment
// (Ampere and later) the driver follows it with XID 94 (contained: the
// application restarts, the GPU stays) or XID 95 (uncontained: reset the
// GPU), per NVIDIA's "GPU Memory Error Management"
// (https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/, "User
// Visible Statistics"). A 48 with a 94 and no 95 follows the 94; any
// other 48 needs a GPU reset, as on GPUs without containment.
func decode48(e Event, others neighbours) Verdict {
	if others.has94 && !others.has95 {
		return Verdict{Status: check.Warn, Message: describe(48) + " (contained: XID 94)"}
	}
	return Verdict{Status: check.Fail, Action: check.ActionResetGPU, Message: describe(48)}
}

// nvlinkRegs is XID 74's seven error registers after its link:
//
//	NVLink: fatal error detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)
var nvlinkRegs = lazyre.New(`(?i)\blink\s*[0-9]{1,3}\s*\(\s*(0x[0-9a-f]{1,8}(?:\s*,\s*0x[0-9a-f]{1,8}){6})\s*\)`)

// bits is a mask of the given bit numbers.
func bits(n ...int) uint32 {
	var m uint32
	for _, b := range n {
		m |= 1 << b
	}
	return m
}

// The catalogue's WORKFLOW_NVLINK_ERR (XID 74; quoted in
// tanishagoyal2/NVSentinel docs/designs/019-workflow-nvlink-err.md
// @ed9e947): per register (the first, third, fourth and fifth are valid
// on Hopper), the bits that "can be safely ignored" or mean "continue
// operation", and those to act on only when repeated ("if seen
// repeatedly", "more than 2 times on the same link": counted, so one
// sighting is reported). Every other bit (mechanical, signal-integrity,
// "not expected", the sympathetic bits seen solo) and any bit in a
// register the workflow does not read keeps the reset.
var (
	nvlinkIgnore = [7]uint32{0: bits(0, 23, 30), 4: bits(20, 23, 26, 29)}
	nvlinkRepeat = [7]uint32{0: bits(4, 5, 27, 29), 2: bits(0, 1, 2, 6, 16, 17, 18, 19), 4: bits(18, 19, 21, 22, 24, 25, 27, 28)}
)

// decode74 judges XID 74 by its registers: only ignorable bits -> OK,
// only bits NVIDIA acts on when repeated -> WARN, anything else (or no
// registers to read) -> reset the GPU.
func decode74(e Event) Verdict {
	reset := Verdict{Status: check.Fail, Action: check.ActionResetGPU, Message: describe(74) + linkOf(e.Text)}
	m := nvlinkRegs.FindStringSubmatch(e.Text)
	if m == nil {
		return reset
	}
	repeat, any := false, false
	for i, f := range strings.Split(m[1], ",") {
		v, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(strings.TrimSpace(f)), "0x"), 16, 32)
		if err != nil {
			return reset
		}
		r := uint32(v)
		any = any || r != 0
		if r&^(nvlinkIgnore[i]|nvlinkRepeat[i]) != 0 {
			return reset
		}
		repeat = repeat || r&nvlinkRepeat[i] != 0
	}
	switch {
	case !any:
		return reset
	case repeat:
		return Verdict{Status: check.Warn, Message: describe(74) + linkOf(e.Text) + " (NVIDIA acts on these bits only when they repeat)"}
	}
	return Verdict{Status: check.OK, Message: describe(74) + linkOf(e.Text) + " (bits NVIDIA says to ignore)"}
}

var linkNumber = lazyre.New(`(?i)\blink\s*#?\s*([0-9]{1,3})\b`)

// linkOf is ": link N" when the line names one.
func linkOf(text string) string {
	if m := linkNumber.FindStringSubmatch(text); m != nil {
		return ": link " + strings.TrimLeft(m[1], "0")
	}
	return ""
}

// recoveryChange is XID 154's words:
//
//	GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)
var recoveryChange = lazyre.New(`(?i)recovery action changed from 0x([0-9a-f]+)(?: \(([^)]*)\))? to 0x([0-9a-f]+)(?: \(([^)]*)\))?`)

// decode154 takes the new recovery action from the line, judged as
// gpu.recovery judges NVML's (gpu.RecoveryAction). The driver's own name
// for it is kept when the line gives one.
func decode154(e Event) Verdict {
	m := recoveryChange.FindStringSubmatch(e.Text)
	if m == nil {
		return Verdict{Status: check.Warn, Message: describe(154) + ": recovery action not decoded"}
	}
	to, err := strconv.ParseUint(m[3], 16, 32)
	if err != nil {
		return Verdict{Status: check.Warn, Message: describe(154) + ": recovery action not decoded"}
	}
	st, act, name := gpu.RecoveryAction(to).Judge()
	if m[4] != "" {
		name = m[4]
	}
	return Verdict{Status: st, Action: act, Message: describe(154) + ": " + name}
}

// nvlink5Line is the decoded part of an XID 144 to 150 line:
//
//	RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000000 …)
var nvlink5Line = lazyre.New(`^([A-Za-z0-9_/]+)\s+(Fatal|Nonfatal|Non-fatal)\b.*?\bLink\s+([0-9]+)\s*\(\s*0x([0-9a-fA-F]{1,8})[\s,]+0x([0-9a-fA-F]{1,8})`)

type nvlink5Rule struct {
	xid        int
	unit       string // "RLW_RXPIPE", or alternatives "TLW_RX/TLW_RX_PIPE0"
	infoV1     string // bit pattern of the interrupt info word (the table's V1)
	infoV2     string // the same, the table's V2 encoding
	status     uint32 // the error status
	immediate  Bucket // IGNORE, RESET_GPU or XID_154_EVAL
	severity   string // NVIDIA's: "Fatal", "Non-fatal", "Link Fatal", …
	secondStep string // NVIDIA's "Action 2", if any
}

// matches reports whether the rule covers the info word and status.
func (r nvlink5Rule) matches(info, status uint32) bool {
	return r.status == status && (bitsMatch(r.infoV2, info) || bitsMatch(r.infoV1, info))
}

// namesUnit reports whether the line's unit is one the rule names.
func (r nvlink5Rule) namesUnit(unit string) bool {
	return r.unit == unit || strings.Contains("/"+r.unit+"/", "/"+unit+"/")
}

// bitsMatch compares v with a 32-character pattern, bit 31 first, where
// '-' matches either bit.
func bitsMatch(pattern string, v uint32) bool {
	if len(pattern) != 32 {
		return false
	}
	for i := range 32 {
		bit := v>>(31-i)&1 == 1
		switch pattern[i] {
		case '1':
			if !bit {
				return false
			}
		case '0':
			if bit {
				return false
			}
		}
	}
	return true
}

// lookupNVLink5 finds the decode table's row for an XID's info word and
// status, preferring one that names the line's unit.
func lookupNVLink5(x int, unit string, info, status uint32) (nvlink5Rule, bool) {
	var found *nvlink5Rule
	for i := range nvlink5Rules {
		r := &nvlink5Rules[i]
		if r.xid != x || !r.matches(info, status) {
			continue
		}
		if r.namesUnit(unit) {
			return *r, true
		}
		if found == nil {
			found = r
		}
	}
	if found == nil {
		return nvlink5Rule{}, false
	}
	return *found, true
}

// decodeNVLink5 applies NVIDIA's decode table (WORKFLOW_NVLINK5_ERR). A
// combination the table lacks follows the driver's own word: Fatal
// resets the GPU (as every Fatal row of the table does but one), Nonfatal
// is reported. XID_154_EVAL rows leave the verdict to the XID 154 the
// driver logs when it wants something done (and to gpu.recovery, which
// reads the same from NVML should that line be lost).
func decodeNVLink5(e Event) Verdict {
	head := describe(e.XID)
	m := nvlink5Line.FindStringSubmatch(strings.TrimSpace(e.Text))
	if m == nil {
		if fatalWord(e.Text) {
			return Verdict{Status: check.Fail, Action: check.ActionResetGPU, Message: head + ": Fatal (not decoded)"}
		}
		return Verdict{Status: check.Warn, Message: head + " (not decoded)"}
	}
	unit, word, link := m[1], m[2], strings.TrimLeft(m[3], "0")
	if link == "" {
		link = "0"
	}
	info, _ := strconv.ParseUint(m[4], 16, 32)
	status, _ := strconv.ParseUint(m[5], 16, 32)
	what := fmt.Sprintf("%s: %s %s, link %s, status 0x%08x", head, unit, word, link, status)
	r, ok := lookupNVLink5(e.XID, unit, uint32(info), uint32(status))
	switch {
	case !ok && strings.EqualFold(word, "Fatal"):
		return Verdict{Status: check.Fail, Action: check.ActionResetGPU, Message: what + " (not in NVIDIA's decode table)"}
	case !ok:
		return Verdict{Status: check.Warn, Message: what + " (not in NVIDIA's decode table)"}
	case r.immediate == ResetGPU:
		return Verdict{Status: check.Fail, Action: check.ActionResetGPU, Message: what}
	case r.immediate == XID154Eval:
		return Verdict{Status: check.OK, Message: what + " (the driver's XID 154 decides)"}
	}
	return Verdict{Status: check.OK, Message: what}
}

var fatalToken = lazyre.New(`\bFatal\b`)

// fatalWord: the line says Fatal (and not Nonfatal).
func fatalWord(text string) bool { return fatalToken.MatchString(text) }
