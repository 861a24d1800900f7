package ib

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/Mellanox/rdmamap"

	"github.com/gpuhc/gpuhc/internal/lazyre"
	"github.com/gpuhc/gpuhc/internal/pciaddr"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// Port is one port of an RDMA device as sysfs shows it. A field that could
// not be read or made sense of is left zero and its error joined into Err,
// so that a readable "state DOWN" is still judged when "rate" is garbage.
type Port struct {
	Num       int
	State     string // "ACTIVE", from "4: ACTIVE"
	PhysState string // "LinkUp", from "5: LinkUp"
	RateGbps  float64
	RateText  string // "400 Gb/sec (4X NDR)"
	LinkLayer string // "InfiniBand" or "Ethernet"
	Netdevs   []string
	Err       error // attribute unreadable or garbage
}

// HCA is one RDMA device.
type HCA struct {
	Name    string // "mlx5_0"
	PCIAddr string // "0000:19:00.0", lower case; "" if unknown (an SF, a soft device)
	FW      string // fw_ver; "" if unreadable
	// Virtual marks a device made at run time on top of a physical one:
	// an SR-IOV virtual function, or a device without a PCI function of
	// its own (an mlx5 sub-function on the auxiliary bus, rxe, siw). It
	// may be gone after a reboot, and its port follows the physical
	// port's, so it is neither counted nor judged.
	Virtual bool
	Ports   []Port
	// PortsErr is why the ports directory could not be listed. Ports is
	// then empty for want of reading, not because the device has none:
	// a check must say so (an ERROR), never count it as no ports.
	PortsErr error
}

// classDir is where the kernel lists RDMA devices, relative to the root.
const classDir = "sys/class/infiniband"

// maxNetdevIndex bounds how many GID entries are read for netdev names: a
// RoCE port has 255 and every unused one answers EINVAL, which would cost
// a thousand reads a run. The kernel fills the default GIDs from index 0,
// so the port's own netdev is always among the first.
const maxNetdevIndex = 8

// Devices is what one walk of the RDMA class finds.
type Devices struct {
	// HCAs are the node's host channel adapters: what every ib check,
	// the topology check and the inventory judge or count.
	HCAs []HCA
	// SwitchMgmt are the NVSwitch management functions of an NVLink5
	// baseboard (VPD SMDL=SW_MNG, see vpd.go). They are mlx5 devices
	// with IB ports, but their links go to the NVSwitches, not to the
	// network: no job uses them, and a GPU is never paired with one.
	SwitchMgmt []HCA
	// VPDErrs are the VPD reads that failed; such a device is kept
	// among the HCAs (a sick HCA must not vanish from the counts).
	VPDErrs []error
}

// Scan lists RDMA devices and their ports under root, sorted by name
// and port, and sets the NVSwitch management devices apart. With root "/"
// the device and port lists come from github.com/Mellanox/rdmamap; any
// other root (fixtures) is walked with the same rules under
// root/sys/class/infiniband. Attributes are read here in both cases,
// because rdmamap swallows read errors. A node without
// /sys/class/infiniband has no HCAs.
//
// This is the one place devices are told apart, so that no check counts
// an NVSwitch management port as an HCA. A run scans once, through a
// Gather that every consumer shares.
func Scan(ctx context.Context, root string) (Devices, error) {
	class := filepath.Join(root, classDir)
	if _, err := os.Stat(class); errors.Is(err, fs.ErrNotExist) {
		return Devices{}, nil
	} else if err != nil {
		return Devices{}, fmt.Errorf("stat %s: %w", class, sysread.Bare(err))
	}
	live := filepath.Clean(root) == "/"
	var names []string
	if live {
		names = rdmamap.GetRdmaDeviceList()
	} else {
		var err error
		if names, err = listDevices(class); err != nil {
			return Devices{}, err
		}
	}
	slices.Sort(names)
	var out Devices
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return Devices{}, fmt.Errorf("discover RDMA devices: %w", err)
		}
		if !validName(name) {
			continue
		}
		ports, portsErr := listPorts(filepath.Join(class, name, "ports"))
		if live && portsErr == nil {
			ports = rdmamap.GetPorts(name)
		}
		h := readHCA(class, name, ports)
		h.PortsErr = portsErr
		mgmt, err := isSwitchMgmt(root, h)
		switch {
		case err != nil:
			out.VPDErrs = append(out.VPDErrs, err)
			out.HCAs = append(out.HCAs, h)
		case mgmt:
			out.SwitchMgmt = append(out.SwitchMgmt, h)
		default:
			out.HCAs = append(out.HCAs, h)
		}
	}
	return out, nil
}

// isSwitchMgmt reads h's VPD, once per device per walk. A virtual device
// is never one: the management functions are physical ones on the
// baseboard, and a VF's VPD is its PF's. Nor is a device of another
// vendor than NVIDIA's networking (Mellanox, 0x15b3): its VPD, slow to
// read, is left alone. A vendor that cannot be read does not spare the
// read.
func isSwitchMgmt(root string, h HCA) (bool, error) {
	if h.Virtual || h.PCIAddr == "" {
		return false, nil
	}
	v, err := sysread.Attr(filepath.Join(root, "sys/bus/pci/devices", h.PCIAddr, "vendor"))
	if err == nil && !strings.EqualFold(v, vendorMellanox) {
		return false, nil
	}
	return switchMgmt(root, h.PCIAddr)
}

// vendorMellanox is the PCI vendor id of every ConnectX.
const vendorMellanox = "0x15b3"

// listDevices follows rdmamap.GetRdmaDeviceList: the class directory's
// entries that are not directories (the kernel makes them symlinks).
func listDevices(class string) ([]string, error) {
	ents, err := os.ReadDir(class)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", class, sysread.Bare(err))
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// listPorts follows rdmamap.GetPorts: every entry of ports/. Unlike
// rdmamap, which answers "no ports" to a directory it cannot read, it
// returns the error: an unreadable value is an ERROR, never a zero. On a
// live node it is also the check that the directory can be read, before
// rdmamap lists it.
func listPorts(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list ports %s: %w", dir, sysread.Bare(err))
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, nil
}

func readHCA(class, name string, portNames []string) HCA {
	dev := filepath.Join(class, name)
	h := HCA{Name: name, PCIAddr: pciAddr(dev)}
	h.Virtual = h.PCIAddr == "" || isVF(dev)
	if fw, err := sysread.Attr(filepath.Join(dev, "fw_ver")); err == nil && printableValue(fw) {
		h.FW = fw
	}
	for _, p := range portNames {
		// The kernel names ports 1..N; anything else is not a port.
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 255 || strconv.Itoa(n) != p {
			continue
		}
		h.Ports = append(h.Ports, readPort(filepath.Join(dev, "ports", p), n))
	}
	slices.SortFunc(h.Ports, func(a, b Port) int { return a.Num - b.Num })
	return h
}

// pciAddr finds the PCI function behind a device. The class entry links to
// .../<pci>/infiniband/<dev>; the device/ link, where present, names the
// parent directly. Neither is read through, so a fixture's links need not
// resolve outside it.
func pciAddr(dev string) string {
	if target, err := os.Readlink(dev); err == nil {
		parts := strings.Split(filepath.ToSlash(target), "/")
		if n := len(parts); n >= 3 && parts[n-2] == "infiniband" {
			if a := strings.ToLower(parts[n-3]); pciaddr.IsSysfs(a) {
				return a
			}
		}
	}
	if target, err := os.Readlink(filepath.Join(dev, "device")); err == nil {
		if a := strings.ToLower(path.Base(filepath.ToSlash(target))); pciaddr.IsSysfs(a) {
			return a
		}
	}
	return ""
}

// isVF reports whether the PCI function behind dev is an SR-IOV virtual
// function: the kernel gives a VF's function a physfn link to its PF. It
// is looked for beside the class link's target and through the device/
// link, whichever the tree has.
func isVF(dev string) bool {
	if target, err := os.Readlink(dev); err == nil {
		// dev's directory, the class directory, is a real one, so a
		// relative target joins onto it lexically.
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(dev), target)
		}
		pci := filepath.Dir(filepath.Dir(target))
		if _, err := os.Lstat(filepath.Join(pci, "physfn")); err == nil {
			return true
		}
	}
	_, err := os.Lstat(filepath.Join(dev, "device", "physfn"))
	return err == nil
}

func readPort(dir string, num int) Port {
	p := Port{Num: num}
	var errs []error
	var err error
	if p.State, err = readEnumAttr(filepath.Join(dir, "state")); err != nil {
		errs = append(errs, err)
	}
	if p.PhysState, err = readEnumAttr(filepath.Join(dir, "phys_state")); err != nil {
		errs = append(errs, err)
	}
	if p.RateText, p.RateGbps, err = readRate(filepath.Join(dir, "rate")); err != nil {
		errs = append(errs, err)
	}
	if p.LinkLayer, err = sysread.Attr(filepath.Join(dir, "link_layer")); err != nil {
		errs = append(errs, err)
	} else if p.LinkLayer != "InfiniBand" && p.LinkLayer != "Ethernet" {
		errs = append(errs, fmt.Errorf("%s: unknown link layer %s", filepath.Join(dir, "link_layer"), sysread.QuoteShort(p.LinkLayer)))
		p.LinkLayer = ""
	}
	p.Netdevs = readNetdevs(filepath.Join(dir, "gid_attrs", "ndevs"))
	p.Err = errors.Join(errs...)
	return p
}

// enumRe matches "4: ACTIVE" and "5: LinkUp"; phys_state names may hold
// spaces ("7: Phy Test") or dashes, and a phys_state the kernel has no
// name for (0, or beyond 7) reads "<unknown>" (phys_state_to_str), which
// is a state that is not LinkUp, not garbage.
var enumRe = lazyre.New(`^[0-9]{1,3}: ([A-Za-z][A-Za-z0-9 _-]{0,39}|<unknown>)$`)

// readEnumAttr reads a "<number>: <name>" attribute and returns the name.
func readEnumAttr(p string) (string, error) {
	s, err := sysread.Attr(p)
	if err != nil {
		return "", err
	}
	m := enumRe.FindStringSubmatch(s)
	if m == nil {
		return "", fmt.Errorf("%s: not a port state: %s", p, sysread.QuoteShort(s))
	}
	return m[1], nil
}

// readRate reads "400 Gb/sec (4X NDR)" (or "2.5 Gb/sec (1X SDR)", or the
// bare "0 GB/sec" some kernels write for a link without speed).
func readRate(p string) (string, float64, error) {
	s, err := sysread.Attr(p)
	if err != nil {
		return "", 0, err
	}
	f := strings.Fields(s)
	if len(f) < 2 || !strings.EqualFold(f[1], "Gb/sec") || !printableValue(s) {
		return "", 0, fmt.Errorf("%s: not a rate: %s", p, sysread.QuoteShort(s))
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) || v > 1e6 {
		return "", 0, fmt.Errorf("%s: not a rate: %s", p, sysread.QuoteShort(s))
	}
	return s, v, nil
}

// readNetdevs reads the netdev names of the port's first GIDs. They are
// for display and for the topology check, never judged: an IB port has
// none, and an unused GID answers EINVAL, so errors end the scan quietly.
func readNetdevs(dir string) []string {
	var out []string
	for i := range maxNetdevIndex {
		s, err := sysread.Attr(filepath.Join(dir, strconv.Itoa(i)))
		if err != nil {
			break
		}
		if validName(s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// validName accepts a device or netdev name: one short printable word.
func validName(s string) bool {
	if s == "" || len(s) > 64 || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r >= 0x7f || r == '/' {
			return false
		}
	}
	return true
}

// printableValue accepts a one-line ASCII attribute such as fw_ver.
func printableValue(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if r < ' ' || r >= 0x7f {
			return false
		}
	}
	return true
}

// Excluded reports whether device dev, or its port "dev/port", matches
// one of the exclude globs ("mlx5_8", "mlx5_8/1", "mlx5_*"). A glob that
// names a device excludes all its ports; port 0 asks about the device
// alone. Globs are path.Match patterns, so "*" does not cross the "/".
func Excluded(exclude []string, dev string, port int) bool {
	for _, g := range exclude {
		if ok, _ := path.Match(g, dev); ok {
			return true
		}
		if port > 0 {
			if ok, _ := path.Match(g, dev+"/"+strconv.Itoa(port)); ok {
				return true
			}
		}
	}
	return false
}
