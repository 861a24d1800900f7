package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpuhc/gpuhc/internal/lazyre"
	"github.com/gpuhc/gpuhc/internal/pciaddr"
)

// sensorClass picks the limits a sensor is judged against: CPUs and HCA
// ASICs run hotter than the board sensors the general limits are set for.
type sensorClass int

const (
	classOther sensorClass = iota
	classCPU
	classHCA
)

// rdmaName is what we accept as an RDMA device name in a component.
var rdmaName = lazyre.New(`^[A-Za-z0-9_.-]{1,64}$`)

// classify sets the class, component and message prefix of one hwmon
// device's sensors. dir is the hwmonN directory, name its hwmon name.
func classify(root, dir, name string, ss []sensor) {
	switch name {
	case "coretemp":
		classifyCoretemp(ss)
	case "k10temp", "zenpower":
		classifyAMD(root, dir, ss)
	default:
		if h, ok := findHCA(root, dir, name); ok {
			classifyHCA(h, ss)
		}
	}
}

// classifyCoretemp names Intel package sensors after their socket. The
// package sensor reads the hottest point of the die, so it is the one
// that matters; per-core sensors are judged with the same CPU limits (a
// core never reads above its package, so they add no drains of their own)
// and keep their names.
func classifyCoretemp(ss []sensor) {
	for i := range ss {
		ss[i].class = classCPU
		for _, p := range []string{"Package id ", "Physical id "} { // the latter before Linux 3.x
			if n, ok := strings.CutPrefix(ss[i].label, p); ok && isSmallNumber(n) {
				ss[i].component = "cpu" + n
				ss[i].what = "package"
			}
		}
	}
}

// classifyAMD handles k10temp and the out-of-tree zenpower. Tctl is a
// control value that some parts offset from the die temperature (+27 °C on
// early Threadrippers); where the driver also exports Tdie, Tdie is the
// real temperature and is the one judged, so an offset never drains.
func classifyAMD(root, dir string, ss []sensor) {
	socket := -1
	if dev, ok := deviceDir(root, dir); ok {
		socket = amdNode(filepath.Base(dev))
	}
	hasTdie := false
	for _, s := range ss {
		hasTdie = hasTdie || s.label == "Tdie"
	}
	for i := range ss {
		ss[i].class = classCPU
		switch l := ss[i].label; {
		case l == "Tdie", !hasTdie && (l == "Tctl" || l == "temp1"):
			ss[i].what = l
			if socket >= 0 {
				ss[i].component = fmt.Sprintf("cpu%d", socket)
			}
		case l == "Tctl":
			ss[i].control = true
		}
	}
}

// amdNode returns the node number of an AMD northbridge / data fabric
// function: the kernel's amd_nb puts node N at device 0x18+N of bus 00
// ("0000:00:19.3" is node 1, the second socket on Zen), or -1.
func amdNode(addr string) int {
	if !pciaddr.IsSysfs(addr) {
		return -1
	}
	parts := strings.Split(addr, ":")
	if parts[1] != "00" {
		return -1
	}
	dev, err := strconv.ParseUint(parts[2][:2], 16, 8)
	if err != nil || dev < 0x18 || dev > 0x1f {
		return -1
	}
	return int(dev - 0x18)
}

// hca is what we could learn about an mlx5 adapter behind an hwmon device.
type hca struct {
	pci  string // PCI address, "" when unknown
	rdma string // RDMA device, "" when unknown
}

// findHCA says whether an hwmon device belongs to an mlx5 adapter: mlx5
// registers it as "mlx5" under the PCI function it drives.
func findHCA(root, dir, name string) (hca, bool) {
	dev, ok := deviceDir(root, dir)
	driver := ""
	if ok {
		if l, err := os.Readlink(filepath.Join(dev, "driver")); err == nil {
			driver = filepath.Base(l)
		}
	}
	if name != "mlx5" && driver != "mlx5_core" {
		return hca{}, false
	}
	var h hca
	if !ok {
		return h, true
	}
	if b := filepath.Base(dev); pciaddr.IsSysfs(b) {
		h.pci = b
	}
	// One PCI function carries one RDMA device; listDir sorts, so a
	// surprise second one cannot make the name change between runs.
	if ents, err := listDir(filepath.Join(dev, "infiniband"), ""); err == nil {
		for _, e := range ents {
			if rdmaName.MatchString(e) {
				h.rdma = e
				break
			}
		}
	}
	return h, true
}

// classifyHCA names an adapter's sensors after its RDMA device (else its
// PCI address): the first sensor, the ASIC, is "mlx5_3"; any other (the
// cable module's) is "mlx5_3/<label>". Without either name the sensors
// keep their hwmon names.
func classifyHCA(h hca, ss []sensor) {
	base := h.rdma
	if base == "" {
		base = h.pci
	}
	first := -1
	for i, s := range ss {
		if first < 0 || s.index < ss[first].index {
			first = i
		}
	}
	for i := range ss {
		ss[i].class = classHCA
		ss[i].pci = h.pci
		switch {
		case base == "":
		case i == first:
			ss[i].component = base
			ss[i].what = ss[i].label
		default:
			ss[i].component = base + "/" + ss[i].label
		}
	}
}

// deviceDir returns the device an hwmon directory belongs to: the
// hwmonN/device link, or, where that is missing, the directory holding
// hwmon/hwmonN. Links that lead outside root are ignored, so a fixture
// never reads the real /sys.
func deviceDir(root, dir string) (string, bool) {
	if p, err := filepath.EvalSymlinks(filepath.Join(dir, "device")); err == nil && within(root, p) {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return p, true
		}
	}
	// Only a class entry that is a link leads to its device; a plain
	// directory (an old kernel, a hand-made fixture) sits in the class
	// directory itself, which is no device.
	p, err := filepath.EvalSymlinks(dir)
	if err != nil || p == filepath.Clean(dir) || filepath.Base(filepath.Dir(p)) != "hwmon" || !within(root, p) {
		return "", false
	}
	return filepath.Dir(filepath.Dir(p)), true
}

// within reports whether path p lies under root (both resolved).
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func isSmallNumber(s string) bool {
	return s != "" && len(s) <= 4 && strings.Trim(s, "0123456789") == ""
}
