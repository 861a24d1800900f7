package xid

import (
	"errors"
	"fmt"

	"github.com/gpuhc/gpuhc/internal/pciaddr"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

// ClearAfterReset drops the sticky FAIL and warn count of the GPUs at
// pcis (every GPU when pcis is empty) from the check's record: what the
// record's comment tells an admin to do by hand after `nvidia-smi -r`,
// done by remediation once nvidia-smi reported the reset, so that the
// checks after it judge those GPUs afresh (NVML's recovery action, lost
// and memory checks judge the GPU itself). The kernel-log cursor is the
// pass's, not in this record, so the XID still in the kernel's buffer is
// not judged again. No record is nothing to clear.
func ClearAfterReset(dir statefile.Dir, pcis []string) error {
	var st state
	err := dir.Load(stateFile, &st)
	if errors.Is(err, statefile.ErrCorrupt) {
		// The check starts a corrupt record afresh anyway.
		return nil
	}
	if err != nil {
		return fmt.Errorf("xid record: %w", err)
	}
	if len(st.GPUs) == 0 {
		return nil
	}
	if len(pcis) == 0 {
		st.GPUs = nil
	}
	for _, p := range pcis {
		delete(st.GPUs, p)
		delete(st.GPUs, pciaddr.Normalize(p))
	}
	if err := dir.Save(stateFile, &st); err != nil {
		return fmt.Errorf("xid record: %w", err)
	}
	return nil
}
