package xid

import (
	"github.com/gpuhc/gpuhc/internal/check"
)

// stateFile is the check's record in the state directory.
const stateFile = "gpu-xid.json"

// state is what the check keeps between runs: what this boot's XIDs left
// behind per GPU. The cursor into the kernel log is the kernel-log pass's
// (kmsg.Log, state_dir/kmsg-cursor.json), shared by every rule over the
// log: each XID is judged by the one run whose snapshot holds it.
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
// The cursor is not in it, so the XID still in the kernel's buffer does
// not drain the node again, and XIDs logged meanwhile are still judged.
// What that costs: every GPU's sticky FAIL and warn count go. Removing
// only the GPU's entry under "gpus" (keyed by PCI address) clears that
// GPU alone, but needs an editor or jq:
//
//	jq 'del(.gpus["0000:5d:00.0"])' gpu-xid.json > gpu-xid.new && mv gpu-xid.new gpu-xid.json
type state struct {
	BootID string `json:"boot_id"`
	// Through is the sequence number after the last line judged this boot
	// (kmsg.Snapshot.Unjudged): lines read again are not counted again.
	Through uint64 `json:"judged_through,omitempty"`
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

// failing reports whether a GPU has a sticky FAIL this boot.
func (s *state) failing() bool {
	for _, g := range s.GPUs {
		if g.Fail != nil {
			return true
		}
	}
	return false
}
