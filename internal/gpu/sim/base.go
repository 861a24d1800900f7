package sim

import (
	"crypto/sha256"
	"fmt"
	"reflect"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuhc/gpuhc/internal/pciaddr"
)

// Model is what a simulated server is, beyond NVIDIA's mock: the facts the
// checks judge against and the simulator's parts answer from. Values follow
// the public spec sheets and what nvidia-smi -q shows on these systems.
// Field names are stable: the other parts read them.
type Model struct {
	// Name is the system: "DGX H100".
	Name string
	// GPUName is what nvmlDeviceGetName answers: "NVIDIA H100 80GB HBM3".
	GPUName string
	// Arch is the GPU architecture.
	Arch nvml.DeviceArchitecture
	// SerialPrefix is the first 10 of the board serial's 13 digits; the
	// last 3 are the GPU index (see Serial).
	SerialPrefix string
	// PCIBus holds each GPU's PCI bus number, by NVML index (NVML orders
	// GPUs by PCI address). Domain 0, device 0, function 0.
	PCIBus []uint8
	// PCIeMaxGen and PCIeMaxWidth are the GPU's maximum PCIe link.
	PCIeMaxGen, PCIeMaxWidth int
	// NVLinks is the number of NVLinks per GPU.
	NVLinks int
	// HasNVSwitch: the GPUs are joined by NVSwitches (fabric manager, GPU
	// fabric state); NVSwitches is how many switch chips the board has.
	HasNVSwitch bool
	NVSwitches  int
	// Temperature thresholds in °C, as nvmlDeviceGetTemperatureThreshold
	// gives them: shutdown, slowdown, GPU max operating, memory max.
	TempShutdownC, TempSlowdownC, TempGPUMaxC, TempMemMaxC int
	// Power limits in milliwatts: default (= enforced when healthy), min, max.
	PowerDefaultLimitMW, PowerMinLimitMW, PowerMaxLimitMW uint32
	// Maximum clocks in MHz (application clock ceiling).
	MaxSMClockMHz, MaxMemClockMHz uint32
	// DriverVersion is what nvmlSystemGetDriverVersion answers; CUDAVersion
	// is nvmlSystemGetCudaDriverVersion's (12040 = 12.4).
	DriverVersion string
	CUDAVersion   int
	// PCISubsystemID is the board's subsystem id (device << 16 | vendor).
	PCISubsystemID uint32

	build func() *server.Server
}

// Serial is GPU i's board serial: 13 digits, as nvmlDeviceGetSerial.
func (m Model) Serial(i int) string { return fmt.Sprintf("%s%03d", m.SerialPrefix, i) }

// UUID is GPU i's stable UUID, "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx",
// hashed from the model and index so runs and tests agree.
func (m Model) UUID(i int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("gpuhc-sim/%s/%d", m.Name, i)))
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// PCIBusID is GPU i's address as sysfs writes it: "0000:18:00.0".
func (m Model) PCIBusID(i int) string { return fmt.Sprintf("0000:%02x:00.0", m.PCIBus[i]) }

// NVMLBusID is GPU i's address as NVML writes it: "00000000:18:00.0".
func (m Model) NVMLBusID(i int) string { return fmt.Sprintf("00000000:%02X:00.0", m.PCIBus[i]) }

var models = map[string]Model{
	"dgxa100": {
		Name: "DGX A100", GPUName: "NVIDIA A100-SXM4-40GB", Arch: nvml.DEVICE_ARCH_AMPERE,
		SerialPrefix: "1564720004",
		PCIBus:       []uint8{0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd},
		PCIeMaxGen:   4, PCIeMaxWidth: 16, NVLinks: 12, HasNVSwitch: true, NVSwitches: 6,
		TempShutdownC: 92, TempSlowdownC: 89, TempGPUMaxC: 85, TempMemMaxC: 95,
		PowerDefaultLimitMW: 400000, PowerMinLimitMW: 100000, PowerMaxLimitMW: 400000,
		MaxSMClockMHz: 1410, MaxMemClockMHz: 1215,
		DriverVersion: "550.54.15", CUDAVersion: 12040, PCISubsystemID: 0x134f10de,
		build: dgxa100.New,
	},
	"dgxh100": {
		Name: "DGX H100", GPUName: "NVIDIA H100 80GB HBM3", Arch: nvml.DEVICE_ARCH_HOPPER,
		SerialPrefix: "1654922000",
		PCIBus:       []uint8{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb},
		PCIeMaxGen:   5, PCIeMaxWidth: 16, NVLinks: 18, HasNVSwitch: true, NVSwitches: 4,
		TempShutdownC: 92, TempSlowdownC: 89, TempGPUMaxC: 87, TempMemMaxC: 95,
		PowerDefaultLimitMW: 700000, PowerMinLimitMW: 200000, PowerMaxLimitMW: 700000,
		MaxSMClockMHz: 1980, MaxMemClockMHz: 2619,
		DriverVersion: "550.54.15", CUDAVersion: 12040, PCISubsystemID: 0x16c110de,
		build: dgxh100.New,
	},
	"dgxh200": {
		Name: "DGX H200", GPUName: "NVIDIA H200", Arch: nvml.DEVICE_ARCH_HOPPER,
		SerialPrefix: "1655024000",
		PCIBus:       []uint8{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb},
		PCIeMaxGen:   5, PCIeMaxWidth: 16, NVLinks: 18, HasNVSwitch: true, NVSwitches: 4,
		TempShutdownC: 92, TempSlowdownC: 89, TempGPUMaxC: 87, TempMemMaxC: 95,
		PowerDefaultLimitMW: 700000, PowerMinLimitMW: 200000, PowerMaxLimitMW: 700000,
		MaxSMClockMHz: 1980, MaxMemClockMHz: 3201,
		DriverVersion: "550.54.15", CUDAVersion: 12040, PCISubsystemID: 0x18fe10de,
		build: dgxh200.New,
	},
	"dgxb200": {
		Name: "DGX B200", GPUName: "NVIDIA B200", Arch: nvml.DEVICE_ARCH_BLACKWELL,
		SerialPrefix: "1795124000",
		PCIBus:       []uint8{0x1b, 0x43, 0x52, 0x61, 0x9d, 0xc3, 0xd1, 0xdf},
		PCIeMaxGen:   5, PCIeMaxWidth: 16, NVLinks: 18, HasNVSwitch: true, NVSwitches: 2,
		TempShutdownC: 90, TempSlowdownC: 87, TempGPUMaxC: 85, TempMemMaxC: 95,
		PowerDefaultLimitMW: 1000000, PowerMinLimitMW: 200000, PowerMaxLimitMW: 1000000,
		MaxSMClockMHz: 1965, MaxMemClockMHz: 3996,
		DriverVersion: "570.124.06", CUDAVersion: 12080, PCISubsystemID: 0x199910de,
		build: dgxb200.New,
	},
}

// basePart: identity (serial, UUID, PCI bus id), count, driver, lost.
var basePart = part{
	name:     "base",
	defaults: baseDefaults,
	faults: map[string]func(m *Machine, d *server.Device, i int, value string) error{
		"lost":           faultLost,
		"reset-required": faultResetRequired,
		"missing":        faultMissing,
		"hang":           faultHang,
		"nvml-init":      faultNVMLInit,
		"serial":         faultSerial,
	},
}

// OnBus lists the PCI addresses ("0000:18:00.0") of the machine's GPUs as
// the simulated PCI bus shows them, including any NVML no longer sees.
func (m *Machine) OnBus() ([]string, error) {
	out := make([]string, len(m.Devices))
	for i := range m.Devices {
		out[i] = m.Model.PCIBusID(i)
	}
	return out, nil
}

func baseDefaults(m *Machine, d *server.Device, i int) {
	mdl := m.Model
	if i == 0 {
		serverDefaults(m)
	}
	d.UUID = mdl.UUID(i)
	d.PciBusID = mdl.NVMLBusID(i)
	serial, name := mdl.Serial(i), mdl.GPUName
	d.GetSerialFunc = func() (string, nvml.Return) { return serial, nvml.SUCCESS }
	d.GetNameFunc = func() (string, nvml.Return) { return name, nvml.SUCCESS }
	d.GetArchitectureFunc = func() (nvml.DeviceArchitecture, nvml.Return) { return mdl.Arch, nvml.SUCCESS }
	pci := pciInfo(mdl, i, d.Config.PciDeviceId)
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return pci, nvml.SUCCESS }
	// DGX OS runs nvidia-persistenced; the config part may set its own
	// answer later. (gpu.lost probes the GPU temperature, thermal part.)
	d.GetPersistenceModeFunc = func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_ENABLED, nvml.SUCCESS }
}

// serverDefaults sets the node-wide answers once per machine.
func serverDefaults(m *Machine) {
	s := m.Server
	s.DriverVersion = m.Model.DriverVersion
	s.NvmlVersion = "12." + m.Model.DriverVersion
	s.CudaDriverVersion = m.Model.CUDAVersion
	// NVIDIA's mock matches the bus id string exactly; NVML accepts any case
	// and a 4- or 8-digit domain.
	s.DeviceGetHandleByPciBusIdFunc = func(busID string) (nvml.Device, nvml.Return) {
		want := pciaddr.Normalize(busID)
		for _, dev := range s.Devices {
			if pciaddr.Normalize(dev.(*server.Device).PciBusID) == want {
				return dev, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
}

func pciInfo(mdl Model, i int, deviceID uint32) nvml.PciInfo {
	p := nvml.PciInfo{Domain: 0, Bus: uint32(mdl.PCIBus[i]), Device: 0,
		PciDeviceId: deviceID, PciSubSystemId: mdl.PCISubsystemID}
	copyCString(p.BusId[:], mdl.NVMLBusID(i))
	copyCString(p.BusIdLegacy[:], fmt.Sprintf("0000:%02X:00.0", mdl.PCIBus[i]))
	return p
}

func copyCString(dst []int8, s string) {
	for j := 0; j < len(s) && j < len(dst)-1; j++ {
		dst[j] = int8(s[j])
	}
}

// identityFuncs still answer on a GPU that requires a reset (or was lost
// after enumeration): NVML caches them when it attaches the GPU.
var identityFuncs = map[string]bool{
	"GetUUIDFunc": true, "GetSerialFunc": true, "GetPciInfoFunc": true, "GetNameFunc": true,
	"GetIndexFunc": true, "GetMinorNumberFunc": true, "GetArchitectureFunc": true,
	"GetBrandFunc": true, "GetCudaComputeCapabilityFunc": true, "GetBoardPartNumberFunc": true,
}

// faultLost: "gpuN:lost" — the GPU fell off the bus before NVML enumerated
// it: its handle and every call on it answer ERROR_GPU_IS_LOST, so it ends
// up in Inventory.Lost. "gpuN:lost=late": it was lost after enumeration:
// identity still answers, every other call is ERROR_GPU_IS_LOST.
func faultLost(m *Machine, d *server.Device, i int, value string) error {
	switch value {
	case "":
		failDevice(d, nil, nvml.ERROR_GPU_IS_LOST)
		failHandle(m, d, nvml.ERROR_GPU_IS_LOST)
	case "late":
		failDevice(d, identityFuncs, nvml.ERROR_GPU_IS_LOST)
	default:
		return fmt.Errorf("want no value or \"late\", got %q", value)
	}
	return nil
}

// faultSerial: "gpuN:serial=1654922000099" — a healthy GPU with another
// board serial, as after a swap: the fire drill for a GPU moved between
// nodes, whose operating hours follow its serial. The value is what NVML
// would answer, so it must look like a board serial.
func faultSerial(m *Machine, d *server.Device, i int, value string) error {
	if value == "" || len(value) > 30 || strings.IndexFunc(value, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return fmt.Errorf("want the board serial, up to 30 digits, got %q", value)
	}
	d.GetSerialFunc = func() (string, nvml.Return) { return value, nvml.SUCCESS }
	return nil
}

// faultResetRequired: "gpuN:reset-required" — identity answers, every
// other call is ERROR_RESET_REQUIRED (what NVML does after XID 79 or 95
// until the GPU is reset).
func faultResetRequired(m *Machine, d *server.Device, i int, value string) error {
	if value != "" {
		return fmt.Errorf("takes no value, got %q", value)
	}
	failDevice(d, identityFuncs, nvml.ERROR_RESET_REQUIRED)
	return nil
}

// faultHang: "gpuN:hang" — every NVML call on the GPU blocks forever, its
// handle lookup included, so enumeration itself hangs. "gpuN:hang=late":
// identity answers (the GPU enumerates), every other call blocks.
func faultHang(m *Machine, d *server.Device, i int, value string) error {
	switch value {
	case "":
		hangDevice(d, nil)
		hangHandle(m, d)
	case "late":
		hangDevice(d, identityFuncs)
	default:
		return fmt.Errorf("want no value or \"late\", got %q", value)
	}
	return nil
}

// faultMissing: "gpuN:missing" — the GPU is still on the PCI bus (OnBus)
// but NVML does not see it: the device count is one less and the later
// GPUs' NVML indexes shift down, as on a node where a GPU fell off.
func faultMissing(m *Machine, d *server.Device, i int, value string) error {
	if value != "" {
		return fmt.Errorf("takes no value, got %q", value)
	}
	var kept []nvml.Device
	for _, dev := range m.Server.Devices {
		if dev != nvml.Device(d) {
			kept = append(kept, dev)
		}
	}
	if len(kept) == len(m.Server.Devices) {
		return fmt.Errorf("gpu%d is already missing", i)
	}
	m.Server.Devices = kept
	for j, dev := range kept {
		sd := dev.(*server.Device)
		sd.Index, sd.Minor = j, j
	}
	return nil
}

// faultNVMLInit: "gpuN:nvml-init[=driver-not-loaded|library-not-found|
// unknown]" — a node-level fault (N is ignored): nvmlInit fails, as when
// the kernel module is not loaded or is mismatched with the library.
func faultNVMLInit(m *Machine, d *server.Device, i int, value string) error {
	rets := map[string]nvml.Return{
		"": nvml.ERROR_DRIVER_NOT_LOADED, "driver-not-loaded": nvml.ERROR_DRIVER_NOT_LOADED,
		"library-not-found": nvml.ERROR_LIBRARY_NOT_FOUND, "unknown": nvml.ERROR_UNKNOWN,
		"no-permission": nvml.ERROR_NO_PERMISSION,
	}
	ret, ok := rets[value]
	if !ok {
		return fmt.Errorf("want driver-not-loaded, library-not-found, no-permission or unknown, got %q", value)
	}
	m.Server.InitFunc = func() nvml.Return { return ret }
	m.Server.InitWithFlagsFunc = func(uint32) nvml.Return { return ret }
	return nil
}

// failHandle makes the server's handle lookups for d answer ret.
func failHandle(m *Machine, d *server.Device, ret nvml.Return) {
	s := m.Server
	byIndex, byUUID, byPCI := s.DeviceGetHandleByIndexFunc, s.DeviceGetHandleByUUIDFunc, s.DeviceGetHandleByPciBusIdFunc
	s.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) { return guard(d, ret)(byIndex(i)) }
	s.DeviceGetHandleByUUIDFunc = func(u string) (nvml.Device, nvml.Return) { return guard(d, ret)(byUUID(u)) }
	s.DeviceGetHandleByPciBusIdFunc = func(p string) (nvml.Device, nvml.Return) { return guard(d, ret)(byPCI(p)) }
}

func guard(d *server.Device, ret nvml.Return) func(nvml.Device, nvml.Return) (nvml.Device, nvml.Return) {
	return func(dev nvml.Device, r nvml.Return) (nvml.Device, nvml.Return) {
		if r == nvml.SUCCESS && dev == nvml.Device(d) {
			return nil, ret
		}
		return dev, r
	}
}

// hangHandle makes the server's handle lookups for d block forever.
func hangHandle(m *Machine, d *server.Device) {
	s := m.Server
	byIndex := s.DeviceGetHandleByIndexFunc
	s.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		dev, r := byIndex(i)
		if dev == nvml.Device(d) {
			select {}
		}
		return dev, r
	}
}

// failDevice sets every NVML call on d, except those in keep, to answer
// ret (and zero values). Reflection covers all of mock.Device's several
// hundred Func fields, including ones no part has set.
func failDevice(d *server.Device, keep map[string]bool, ret nvml.Return) {
	setAll(d, keep, func(t reflect.Type) func([]reflect.Value) []reflect.Value {
		return func([]reflect.Value) []reflect.Value { return zeroResults(t, ret) }
	})
}

// hangDevice sets every NVML call on d, except those in keep, to block
// forever, as NVML does on some sick GPUs.
func hangDevice(d *server.Device, keep map[string]bool) {
	setAll(d, keep, func(t reflect.Type) func([]reflect.Value) []reflect.Value {
		return func([]reflect.Value) []reflect.Value { select {} }
	})
}

func setAll(d *server.Device, keep map[string]bool, impl func(reflect.Type) func([]reflect.Value) []reflect.Value) {
	v := reflect.ValueOf(&d.Device).Elem()
	t := v.Type()
	for j := 0; j < t.NumField(); j++ {
		f := t.Field(j)
		if f.Type.Kind() != reflect.Func || !strings.HasSuffix(f.Name, "Func") || keep[f.Name] {
			continue
		}
		v.Field(j).Set(reflect.MakeFunc(f.Type, impl(f.Type)))
	}
}

var returnType = reflect.TypeOf(nvml.SUCCESS)

func zeroResults(t reflect.Type, ret nvml.Return) []reflect.Value {
	out := make([]reflect.Value, t.NumOut())
	for k := range out {
		if t.Out(k) == returnType {
			out[k] = reflect.ValueOf(ret)
		} else {
			out[k] = reflect.Zero(t.Out(k))
		}
	}
	return out
}
