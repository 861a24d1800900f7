// Package gpu holds the gpu.* checks, built on NVML through go-nvml's
// nvml.Interface, so that tests and --simulate can supply NVIDIA's
// simulated DGX servers instead of the real library.
package gpu

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/pciaddr"
)

// GPU is one device as the checks name it in results and reasons.
type GPU struct {
	Index    int
	UUID     string
	Serial   string
	PCIBusID string // "0000:4e:00.0": as sysfs writes it (NormalizePCI)
	Name     string
	Device   nvml.Device
}

// Component is the result component: "gpu3".
func (g GPU) Component() string { return fmt.Sprintf("gpu%d", g.Index) }

// IDs are the identifiers every GPU result carries.
func (g GPU) IDs() check.IDs {
	i := g.Index
	return check.IDs{GPUIndex: &i, UUID: g.UUID, Serial: g.Serial, PCIBusID: g.PCIBusID}
}

// Inventory is what NVML showed at the start of the run.
type Inventory struct {
	Driver string
	GPUs   []GPU
	// OnBus lists the PCI addresses of NVIDIA GPUs sysfs shows.
	OnBus []string
	// BusErr is why the PCI bus could not be read (OnBus is then empty).
	BusErr error
	// Lost maps a GPU index to NVML's error when its handle or identity
	// could not be read (GPU is lost, requires reset, ...).
	Lost map[int]error
}

// ByPCI finds the GPU at a PCI address (any case, 4- or 8-digit domain).
func (inv *Inventory) ByPCI(addr string) (GPU, bool) {
	want := NormalizePCI(addr)
	for _, g := range inv.GPUs {
		if g.PCIBusID == want {
			return g, true
		}
	}
	return GPU{}, false
}

// Errors that decide how a check reports a node without usable NVML.
var (
	// ErrNoGPUs: no NVIDIA GPU on the bus and none expected; checks SKIP.
	ErrNoGPUs = errors.New("no NVIDIA GPU on this node")
	// ErrHung: an NVML call did not return in time.
	ErrHung = errors.New("NVML did not answer")
)

// NVMLError is NVML failing to initialise or enumerate.
type NVMLError struct {
	Op  string
	Ret nvml.Return
}

func (e *NVMLError) Error() string { return fmt.Sprintf("%s: %s", e.Op, nvml.ErrorString(e.Ret)) }

// Node is the GPU side of this node, shared by every gpu.* check of a run:
// NVML is initialised and the devices enumerated once.
type Node struct {
	lib       nvml.Interface
	root      string
	expected  int // checks.gpu.count.expected
	Simulated string
	bus       BusLister

	once    sync.Once
	done    chan struct{}
	inv     *Inventory
	err     error
	started time.Time   // when initialisation began; set inside once
	gaveUp  atomic.Bool // Warm's budget ran out before NVML answered
}

// HungError is NVML not answering; Since is when the call began, so that
// the message gives the whole wait, not one check's share of it.
type HungError struct{ Since time.Time }

func (e *HungError) Error() string { return ErrHung.Error() }

// Unwrap makes errors.Is(err, ErrHung) hold.
func (e *HungError) Unwrap() error { return ErrHung }

// BusLister lists the PCI addresses ("0000:18:00.0") of the NVIDIA GPUs
// on the PCI bus, whatever NVML says.
type BusLister func() ([]string, error)

// Option adjusts a Node.
type Option func(*Node)

// WithBus replaces the sysfs bus scan, e.g. by a simulated machine's OnBus,
// so that --simulate can show a GPU that NVML does not see.
func WithBus(l BusLister) Option { return func(n *Node) { n.bus = l } }

// NewNode prepares the shared view; nothing is called until a check asks.
// expected is checks.gpu.count.expected (-1: count the PCI bus).
func NewNode(lib nvml.Interface, root string, expected int, simulated string, opts ...Option) *Node {
	n := &Node{lib: lib, root: root, expected: expected, Simulated: simulated, done: make(chan struct{})}
	for _, o := range opts {
		o(n)
	}
	return n
}

// Expected is checks.gpu.count.expected as the node was built with.
func (n *Node) Expected() int { return n.expected }

// Lib is the NVML interface, for checks' per-device calls.
func (n *Node) Lib() nvml.Interface { return n.lib }

// Inventory initialises NVML and enumerates the GPUs, once per run. The
// first caller does the work in the background; every caller waits for it
// only as long as its own ctx allows, so a hung NVML init costs each check
// its own deadline, no more.
func (n *Node) Inventory(ctx context.Context) (*Inventory, error) {
	n.start()
	if n.gaveUp.Load() {
		select {
		case <-n.done:
			return n.inv, n.err
		default:
			return nil, &HungError{Since: n.started}
		}
	}
	select {
	case <-n.done:
		return n.inv, n.err
	case <-ctx.Done():
		return nil, &HungError{Since: n.started}
	}
}

func (n *Node) start() {
	n.once.Do(func() {
		n.started = time.Now()
		go func() {
			n.inv, n.err = n.enumerate()
			close(n.done)
		}()
	})
}

// Warm initialises NVML before the checks start, within ctx. Without
// persistence mode, NVML takes tens of seconds to start on an 8-GPU node;
// a check's own timeout (10 s by default) is far too short for that, and
// a slow start reported as a hang would drain a healthy node on every run.
// If ctx ends first, NVML is declared hung and every check says so at
// once, rather than each waiting out its own timeout again.
func (n *Node) Warm(ctx context.Context) {
	if _, err := n.Inventory(ctx); errors.Is(err, ErrHung) {
		n.gaveUp.Store(true)
	}
}

func (n *Node) enumerate() (*Inventory, error) {
	bus, busErr := n.scanBus()
	inv := &Inventory{OnBus: bus, BusErr: busErr, Lost: map[int]error{}}
	if ret := n.lib.Init(); ret != nvml.SUCCESS {
		if len(bus) == 0 && n.expected <= 0 && n.Simulated == "" {
			return inv, ErrNoGPUs
		}
		return inv, &NVMLError{Op: "nvmlInit", Ret: ret}
	}
	if v, ret := n.lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		inv.Driver = v
	}
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return inv, &NVMLError{Op: "nvmlDeviceGetCount", Ret: ret}
	}
	for i := 0; i < count; i++ {
		g, err := describe(n.lib, i)
		if err != nil {
			inv.Lost[i] = err
			continue
		}
		inv.GPUs = append(inv.GPUs, g)
	}
	if count == 0 && len(bus) == 0 && n.expected <= 0 && busErr == nil {
		return inv, ErrNoGPUs
	}
	return inv, nil
}

// scanBus lists the GPUs on the PCI bus: the bus lister if one was given,
// nothing for a simulation without one (the host's sysfs is not the
// simulated machine's), else sysfs under root.
func (n *Node) scanBus() ([]string, error) {
	switch {
	case n.bus != nil:
		return n.bus()
	case n.Simulated != "":
		return nil, nil
	}
	return NVIDIAOnBus(n.root)
}

func describe(lib nvml.Interface, i int) (GPU, error) {
	d, ret := lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return GPU{}, &NVMLError{Op: fmt.Sprintf("nvmlDeviceGetHandleByIndex(%d)", i), Ret: ret}
	}
	g := GPU{Index: i, Device: d}
	uuid, ret := d.GetUUID()
	if ret != nvml.SUCCESS {
		return GPU{}, &NVMLError{Op: fmt.Sprintf("nvmlDeviceGetUUID(%d)", i), Ret: ret}
	}
	g.UUID = uuid
	pci, ret := d.GetPciInfo()
	if ret != nvml.SUCCESS {
		return GPU{}, &NVMLError{Op: fmt.Sprintf("nvmlDeviceGetPciInfo(%d)", i), Ret: ret}
	}
	g.PCIBusID = NormalizePCI(cString(pci.BusId[:]))
	if s, ret := d.GetSerial(); ret == nvml.SUCCESS {
		g.Serial = s
	}
	if name, ret := d.GetName(); ret == nvml.SUCCESS {
		g.Name = name
	}
	return g, nil
}

func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// NormalizePCI writes a PCI address as sysfs does: "0000:4e:00.0". NVML
// reports "00000000:4E:00.0"; the kernel log "0000:4e:00". The domain is
// a number, at least 4 hex digits: a VMD domain NVML writes "00010000" is
// "10000" to sysfs. Anything not an address comes back lower case, for
// the caller to refuse.
func NormalizePCI(addr string) string { return pciaddr.Normalize(addr) }
