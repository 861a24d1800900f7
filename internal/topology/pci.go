package topology

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpuhc/gpuhc/internal/lazyre"
	"github.com/gpuhc/gpuhc/internal/pciaddr"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// maxNumber caps a one-number sysfs attribute (numa_node,
// physical_package_id): a few bytes, and a garbage tree must not make us
// read more.
const maxNumber = 64

// maxNUMANode is the kernel's largest node count (NODES_SHIFT 10); a
// numa_node beyond it is garbage, not a node.
const maxNUMANode = 1 << 10

var (
	// hostBridgeRE is a root complex's directory under /sys/devices.
	hostBridgeRE = lazyre.New(`^pci[0-9a-f]{4,8}:[0-9a-f]{2}$`)
)

// device is one PCI device's place in the hierarchy, as the resolved
// /sys/bus/pci/devices/<addr> link shows it: devices/pci0000:15/
// 0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0 is complex
// "pci0000:15" and chain [0000:15:01.0 0000:16:00.0 0000:17:00.0 0000:18:00.0].
type device struct {
	addr string
	// complex is the path up to the last host bridge, so that a VMD
	// domain (a host bridge below a root port) counts as its own complex.
	complex string
	// chain is the PCI devices below the host bridge, root port first,
	// ending with the device itself.
	chain []string
	// numa is the device's NUMA node, -1 when the kernel does not know.
	numa int
	// numaErr is why numa_node could not be read; it only matters when
	// the NUMA node is needed (devices on different root complexes).
	numaErr error
	// err is why the device could not be placed at all.
	err error
}

// locate places the PCI device addr ("0000:18:00.0") under root.
func locate(root, addr string) device {
	d := device{addr: addr, numa: -1}
	if !pciaddr.IsSysfs(addr) {
		d.err = fmt.Errorf("%q is not a PCI address", addr)
		return d
	}
	link := filepath.Join(root, "sys/bus/pci/devices", addr)
	dir, err := filepath.EvalSymlinks(link)
	if err != nil {
		d.err = fmt.Errorf("resolve %s: %w", link, sysread.Bare(err))
		return d
	}
	base := filepath.Join(root, "sys/devices")
	if b, err := filepath.EvalSymlinks(base); err == nil {
		base = b
	}
	rel, err := filepath.Rel(base, dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		d.err = fmt.Errorf("%s resolves to %s, outside %s", link, dir, base)
		return d
	}
	d.complex, d.chain, d.err = split(rel, addr)
	if d.err != nil {
		d.err = fmt.Errorf("%s: %w", link, d.err)
		return d
	}
	d.numa, d.numaErr = readNUMA(filepath.Join(dir, "numa_node"))
	return d
}

// split cuts a device path below /sys/devices into its root complex and
// the chain of PCI devices under it.
func split(rel, addr string) (string, []string, error) {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	last := -1
	for i, p := range parts {
		if hostBridgeRE.MatchString(p) {
			last = i
		}
	}
	if last < 0 {
		return "", nil, fmt.Errorf("no PCI host bridge in %s", rel)
	}
	chain := parts[last+1:]
	for _, p := range chain {
		if !pciaddr.IsSysfs(p) {
			return "", nil, fmt.Errorf("%q in %s is not a PCI address", p, rel)
		}
	}
	if len(chain) == 0 || chain[len(chain)-1] != addr {
		return "", nil, fmt.Errorf("%s does not end in %s", rel, addr)
	}
	return strings.Join(parts[:last+1], "/"), chain, nil
}

// readNUMA reads a device's numa_node: -1 (or no file, as on a kernel
// without NUMA) is "unknown", which is not an error.
func readNUMA(path string) (int, error) {
	s, err := sysread.Text(path, maxNumber)
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return -1, err
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < -1 || n >= maxNUMANode {
		return -1, fmt.Errorf("%s: %s is not a NUMA node", path, sysread.QuoteShort(s))
	}
	return n, nil
}

// cpuListRE is a non-empty cpulist as the kernel writes it: "0-55,112-167".
var cpuListRE = lazyre.New(`^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$`)

// socketRel is whether two NUMA nodes are on one CPU package.
type socketRel int

const (
	socketUnknown socketRel = iota
	socketSame
	socketOther
)

// sockets tells whether two NUMA nodes are on one CPU package, from the
// first CPU of each node. Sub-NUMA clustering (AMD NPS2/NPS4, Intel SNC)
// splits a socket into several nodes, and an HCA on another node of the
// GPU's own socket is not "across sockets". Anything unreadable is
// "don't know", which never fails a node.
type sockets struct {
	root string
	pkg  map[int]int // NUMA node -> package; -1 unknown
}

func (s *sockets) relate(a, b int) socketRel {
	pa, pb := s.of(a), s.of(b)
	switch {
	case pa < 0 || pb < 0:
		return socketUnknown
	case pa == pb:
		return socketSame
	}
	return socketOther
}

func (s *sockets) of(node int) int {
	if p, ok := s.pkg[node]; ok {
		return p
	}
	p := s.lookup(node)
	s.pkg[node] = p
	return p
}

// lookup finds a node's package; a node without CPUs (memory only, as
// CXL or HBM nodes are) has none, so -1.
func (s *sockets) lookup(node int) int {
	if node < 0 {
		return -1
	}
	// A machine numbering CPUs round-robin across sockets writes a
	// cpulist of "0,2,4,...", hundreds of bytes, still within one page.
	list, err := sysread.Attr(filepath.Join(s.root, "sys/devices/system/node", fmt.Sprintf("node%d", node), "cpulist"))
	if err != nil || !cpuListRE.MatchString(list) {
		return -1
	}
	first, _, _ := strings.Cut(list, ",")
	first, _, _ = strings.Cut(first, "-")
	cpu, err := strconv.Atoi(first)
	if err != nil || cpu < 0 {
		return -1
	}
	id, err := sysread.Text(filepath.Join(s.root, "sys/devices/system/cpu", fmt.Sprintf("cpu%d", cpu), "topology/physical_package_id"), maxNumber)
	if err != nil {
		return -1
	}
	p, err := strconv.Atoi(id)
	if err != nil || p < 0 {
		return -1
	}
	return p
}
