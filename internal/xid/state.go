package xid

import (
	"github.com/gpuhc/gpuhc/internal/check"
)

// stateFile is the check's record in the state directory.
const stateFile = "gpu-xid.json"

// state is what the check keeps between runs: the cursor into the
// kernel log, and what this boot's XIDs left behind per GPU.
//
// The cursor is {boot id, next sequence number}. Sequence numbers restart
// at 0 every boot, so on a new boot id the old cursor means nothing and
// the whole log is read: every record in it is from this boot. Within a
// boot only records at or after Next are acted on, so each XID is
// reported by exactly one run (a dry run saves nothing, so it shows the
// same XIDs again next time).
//
// Reporting a drain-class XID once is not enough, though: the policy
// resumes a node after resume_after healthy runs, and the run after the
// XID would be "healthy" with the XID behind the cursor. A GPU that fell
// off the bus or took an uncontained ECC error stays broken until it is
// reset or the node reboots, so the FAIL is kept here ("sticky") and
// repeated, word for word, by every run for the rest of the boot. A new
// boot id clears it. A GPU reset without a reboot does not (nothing in
// the kernel log says reliably that it worked): after an `nvidia-smi -r`
// an admin clears it by deleting the GPU's entry under "gpus" in
// <state_dir>/gpu-xid.json, or the whole file, which also makes the next
// run read the log from the start (its warn-class XIDs are reported again).
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
