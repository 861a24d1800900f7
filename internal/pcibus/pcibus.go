// Package pcibus is one run's look at the PCI bus: the NVIDIA functions
// on it (GPUs and NVSwitches) and the devices that could not be read. The
// GPU inventory, the Fabric Manager check, ib.gdr and the topology check
// all judge the same scan (a Gather) instead of walking
// /sys/bus/pci/devices each.
package pcibus

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/gpuhc/gpuhc/internal/pciaddr"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// vendorNVIDIA is NVIDIA's PCI vendor id.
const vendorNVIDIA = "0x10de"

// Function is one NVIDIA PCI function.
type Function struct {
	Addr  string // as sysfs names it: "0000:18:00.0"
	Class string // "0x030200"
}

// Bus is what one scan found. A device whose vendor, or an NVIDIA one's
// class, could not be read (or was not a PCI id) is in Unreadable: it
// might be a GPU or an NVSwitch, so a judge that counts them must say it
// cannot tell, never count it as absent. A device gone between the
// listing and the read (it left the bus) is in neither.
type Bus struct {
	NVIDIA     []Function // sorted by address
	Unreadable []error
}

// Scan reads the vendor of every device under root/sys/bus/pci/devices,
// and the class of NVIDIA's. A node without that directory has no bus to
// speak of: an empty Bus.
func Scan(ctx context.Context, root string) (Bus, error) {
	dir := filepath.Join(root, "sys/bus/pci/devices")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return Bus{}, nil
	}
	if err != nil {
		return Bus{}, fmt.Errorf("list %s: %w", dir, sysread.Bare(err))
	}
	var b Bus
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return Bus{}, fmt.Errorf("scan the PCI bus: %w", err)
		}
		dev := filepath.Join(dir, e.Name())
		vendor, err := readID(filepath.Join(dev, "vendor"))
		if err == nil && vendor != vendorNVIDIA {
			continue // most devices: no need to read their class
		}
		var class string
		if err == nil {
			class, err = readID(filepath.Join(dev, "class"))
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			b.Unreadable = append(b.Unreadable, err)
		default:
			b.NVIDIA = append(b.NVIDIA, Function{Addr: pciaddr.Normalize(e.Name()), Class: class})
		}
	}
	slices.SortFunc(b.NVIDIA, func(x, y Function) int { return strings.Compare(x.Addr, y.Addr) })
	return b, nil
}

// readID reads a PCI id attribute ("0x10de", "0x030200"), lower-cased;
// anything else is an error.
func readID(path string) (string, error) {
	s, err := sysread.Attr(path)
	if err != nil {
		return "", err
	}
	s = strings.ToLower(s)
	if len(s) < 3 || len(s) > 10 || !strings.HasPrefix(s, "0x") || strings.Trim(s[2:], "0123456789abcdef") != "" {
		return "", fmt.Errorf("%s: %s is not a PCI id", path, sysread.QuoteShort(s))
	}
	return s, nil
}

// Of lists the NVIDIA functions whose class starts with one of prefixes.
func (b Bus) Of(prefixes ...string) []string {
	var out []string
	for _, f := range b.NVIDIA {
		for _, p := range prefixes {
			if strings.HasPrefix(f.Class, p) {
				out = append(out, f.Addr)
				break
			}
		}
	}
	return out
}

// GPUs lists the NVIDIA VGA (0x0300) and 3D (0x0302) controllers. With
// devices unreadable the list is unknown: an error, not one GPU short.
func (b Bus) GPUs() ([]string, error) {
	if err := b.UnreadableErr(); err != nil {
		return nil, err
	}
	return b.Of("0x0300", "0x0302"), nil
}

// Switches lists the NVSwitches: class 0x0680 (bridge, other), as every
// NVSwitch generation shows itself.
func (b Bus) Switches() []string { return b.Of("0x0680") }

// UnreadableErr says how many devices could not be read, and why the
// first could not; nil when all could.
func (b Bus) UnreadableErr() error {
	if len(b.Unreadable) == 0 {
		return nil
	}
	return fmt.Errorf("%d PCI devices unreadable: %w", len(b.Unreadable), b.Unreadable[0])
}

// Gather is one run's scan, made by whichever caller asks first; every
// later one gets the same answer. A scan cut short by its caller's
// context is not kept, so that another caller with time left scans again.
// Safe for concurrent use.
type Gather struct {
	scan func(context.Context) (Bus, error)
	mu   sync.Mutex
	have bool
	bus  Bus
	err  error
}

// NewGather returns the Gather of the bus under root.
func NewGather(root string) *Gather {
	return GatherWith(func(ctx context.Context) (Bus, error) { return Scan(ctx, root) })
}

// GatherWith returns a Gather whose one scan is scan (tests count them).
func GatherWith(scan func(context.Context) (Bus, error)) *Gather { return &Gather{scan: scan} }

// Bus returns the run's scan. Callers must not change what it holds.
func (g *Gather) Bus(ctx context.Context) (Bus, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.have {
		return g.bus, g.err
	}
	b, err := g.scan(ctx)
	if err != nil && ctx.Err() != nil {
		return b, err
	}
	g.have, g.bus, g.err = true, b, err
	return b, err
}

// GPUs is the run's GPU list (Bus.GPUs), for gpu.WithBus.
func (g *Gather) GPUs() ([]string, error) {
	b, err := g.Bus(context.Background())
	if err != nil {
		return nil, err
	}
	return b.GPUs()
}
