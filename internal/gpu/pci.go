package gpu

import (
	"context"

	"github.com/gpuhc/gpuhc/internal/pcibus"
)

// NVIDIAOnBus lists the PCI addresses of NVIDIA VGA (0x0300) and 3D
// (0x0302) controllers in sysfs under root: the GPUs the node has whatever
// NVML says, so that one which fell off the bus can be named. It scans the
// bus itself; a run shares one scan through pcibus.Gather (WithBus).
//
// A device whose vendor or class cannot be read might be a GPU: the list
// is then unknown, an error, never a shorter list (it would lower the
// count a GPU is expected against). A device gone between the listing and
// the read (it left the bus) is not on it.
func NVIDIAOnBus(root string) ([]string, error) {
	b, err := pcibus.Scan(context.Background(), root)
	if err != nil {
		return nil, err
	}
	return b.GPUs()
}
