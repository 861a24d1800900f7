package kernlog

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/gpuhc/gpuhc/internal/pciaddr"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// Paths tells whether a PCI device is on the path of one of the node's
// GPUs, HCAs or NVSwitches: one of them, or a bridge above one. It reads
// sysfs only when asked, which is only when an AER line names a device:
// the healthy path costs nothing.
type Paths struct {
	root    string
	devices func(context.Context) ([]string, error)

	once  sync.Once
	on    map[string]bool
	known bool
}

// NewPaths resolves paths under root; devices lists the GPUs', HCAs' and
// NVSwitches' PCI addresses (nil: BusDevices).
func NewPaths(root string, devices func(context.Context) ([]string, error)) *Paths {
	if devices == nil {
		devices = BusDevices(root)
	}
	return &Paths{root: root, devices: devices}
}

// On reports whether addr is on such a path; known is false when the
// devices or their sysfs links could not be read. A nil Paths knows
// nothing.
func (p *Paths) On(ctx context.Context, addr string) (on, known bool) {
	if p == nil {
		return false, false
	}
	p.once.Do(func() { p.on, p.known = p.resolve(ctx) })
	return p.on[pciaddr.Normalize(addr)], p.known
}

// resolve collects every device and bridge on the devices' paths. The
// link root/sys/bus/pci/devices/<addr> points to
// ../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/…/<addr>: its
// PCI-named elements are the bridge chain from the root port down.
func (p *Paths) resolve(ctx context.Context) (map[string]bool, bool) {
	devs, err := p.devices(ctx)
	if err != nil || len(devs) == 0 {
		return nil, false
	}
	on := map[string]bool{}
	for _, d := range devs {
		d = pciaddr.Normalize(d)
		on[d] = true
		target, err := os.Readlink(filepath.Join(p.root, "sys/bus/pci/devices", d))
		if err != nil {
			continue
		}
		for _, el := range strings.Split(target, "/") {
			if pciaddr.IsSysfs(el) {
				on[el] = true
			}
		}
	}
	return on, true
}

// Vendors whose devices count: NVIDIA (GPUs and NVSwitches, and their
// functions) and Mellanox/NVIDIA networking (ConnectX HCAs).
var pathVendors = map[string]bool{"0x10de": true, "0x15b3": true}

// BusDevices lists the PCI devices under root whose vendor is NVIDIA or
// Mellanox.
func BusDevices(root string) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		dir := filepath.Join(root, "sys/bus/pci/devices")
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, e := range ents {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if !pciaddr.IsSysfs(e.Name()) {
				continue
			}
			v, err := sysread.Attr(filepath.Join(dir, e.Name(), "vendor"))
			if err == nil && pathVendors[strings.ToLower(v)] {
				out = append(out, e.Name())
			}
		}
		return out, nil
	}
}
