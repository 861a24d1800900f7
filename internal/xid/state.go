package xid

import (
	"github.com/gpuhc/gpuhc/internal/check"
)

// stateFile is the check's record in the state directory.
const stateFile = "gpu-xid.json"

// state is what the check keeps between runs: the cursor into the
// kernel log, and what this boot's XIDs left behind per GPU.
//
// The cursor is {boot id, next sequence number}. Within a boot only
// records at or after Next are acted on, so each XID is reported by
// exactly one run (a dry run saves nothing, so it shows the same XIDs
// again next time).
//
// Where the cursor starts:
//   - No record (gpuhc's first run on the node, or the file was deleted)
//     or a corrupt one: at the end of the log. The XIDs already in the
//     kernel's buffer are from earlier in this boot, before gpuhc watched
//     or before the record was deleted; acting on them would drain every
//     node of a fleet that ever had, say, an XID 74 this boot, GPU reset
//     since or not. That run reports OK "XID cursor started at the end of
//     the kernel log".
//   - A record of another boot (the boot id changed: a reboot): at the
//     start of the log. Sequence numbers restart at 0 every boot, the old
//     cursor means nothing, and every record in the log is from the new
//     boot, which gpuhc has watched since it started.
//   - No boot id can be read: the cursor is kept, and a log whose newest
//     record is older than it is taken for a reboot (see restarted).
//   - A record that cannot be read at all (an I/O error, not corruption):
//     at the start of the log, with an ERROR saying so.
//
// Reporting a drain-class XID once is not enough, though: the policy
// resumes a node after resume_after healthy runs, and the run after the
// XID would be "healthy" with the XID behind the cursor. A GPU that fell
// off the bus or took an uncontained ECC error stays broken until it is
// reset or the node reboots, so the FAIL is kept here ("sticky") and
// repeated, word for word, by every run for the rest of the boot. A new
// boot id clears it. A GPU reset without a reboot does not (nothing in
// the kernel log says reliably that it worked). After an `nvidia-smi -r`
// and a check by hand, an admin clears it by removing the record:
//
//	rm <state_dir>/gpu-xid.json        (by default /var/lib/gpuhc/gpu-xid.json)
//
// The next run starts at the end of the log, so the XID still in the
// kernel's buffer does not drain the node again. What that costs: every
// GPU's sticky FAIL and warn count go, and XIDs the driver logs between
// the last run and the next one are not acted on; run
// `gpuhc-healthcheck` by hand right after the rm to make that window
// small. Removing only the GPU's entry under "gpus" (keyed by PCI
// address) keeps the cursor and clears that GPU alone, but needs an
// editor or jq:
//
//	jq 'del(.gpus["0000:5d:00.0"])' gpu-xid.json > gpu-xid.new && mv gpu-xid.new gpu-xid.json
type state struct {
	BootID string `json:"boot_id"`
	Next   uint64 `json:"next_seq"`
	// GPUs is keyed by PCI address ("0000:4e:00.0"), which is what an XID
	// names and which stays put for a boot; a GPU that fell off the bus
	// may have no UUID NVML can tell. Entries only live for one boot.
	GPUs map[string]*gpuState `json:"gpus,omitempty"`
}

type gpuState struct {
	// Component and IDs as last seen in NVML's inventory, so that a GPU
	// which has since dropped out of it is still named by its serial.
	Component string    `json:"component,omitempty"`
	IDs       check.IDs `json:"ids"`
	// Count is the classified (drain or warn) XIDs this boot.
	Count int `json:"count"`
	// Fail is the drain-class XID repeated until the next boot.
	Fail *sticky `json:"fail,omitempty"`
}

type sticky struct {
	XID     int          `json:"xid"`
	Seq     uint64       `json:"seq"`
	Action  check.Action `json:"action"`
	Message string       `json:"message"`
}

func newState(boot string) *state {
	return &state{BootID: boot, GPUs: map[string]*gpuState{}}
}

func (s *state) gpu(pci string) *gpuState {
	if s.GPUs == nil {
		s.GPUs = map[string]*gpuState{}
	}
	g := s.GPUs[pci]
	if g == nil {
		g = &gpuState{}
		s.GPUs[pci] = g
	}
	return g
}

// advance moves the cursor past what was read, except to an XID line the
// driver was still writing (hold), which the next run reads again whole.
func (s *state) advance(b Batch, hold *uint64) {
	switch {
	case hold != nil:
		s.Next = *hold
	case len(b.Records) > 0:
		s.Next = b.Records[len(b.Records)-1].Seq + 1
	}
}

// restarted: the log's newest record is older than the cursor, which
// within one boot cannot happen. Without a boot id it means a reboot; with
// one, a log that was swapped under us (a fixture). Either way the cursor
// is wrong and the log is read again from the start.
func (s *state) restarted(b Batch) bool {
	if s.Next == 0 || !b.Complete {
		return false
	}
	return b.Seen == 0 || b.Newest+1 < s.Next
}
