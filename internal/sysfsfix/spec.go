package sysfsfix

import "fmt"

// node is one modelled server: what the generator lays out under sys/ and
// proc/. Everything else (paths, symlinks, counters) is derived from it so
// the three trees cannot disagree with themselves.
type node struct {
	hostname string
	// numaCPUs is each NUMA node's cpulist, by node number.
	numaCPUs []string
	ncpu     int
	gpu      gpuModel
	gpus     []gpuSlot
	hcas     []hcaSlot
	nvswitch nvswitchModel
	// nvswitches are the buses of the NVSwitch chips; each sits alone
	// under its own root port at bus-1.
	nvswitches []busNUMA
	cpuTemp    cpuTempModel
	modules    []string
}

type busNUMA struct {
	bus  uint8
	numa int
}

type gpuModel struct {
	device, subDevice uint16
	speed             string // PCIe link speed as sysfs writes it
	switchDevice      uint16 // the PCIe switch (vendor switchVendor) in front of it
}

// gpuSlot is a GPU behind its own PCIe switch: root complex and root port on
// bus-3, switch upstream port on bus-2, downstream ports on bus-1 (device 0
// leads to the GPU, device 1 to the HCA that shares the switch).
type gpuSlot struct {
	bus  uint8
	numa int
}

type hcaModel struct {
	device  uint16
	hcaType string // hca_type: the chip's MT number
	fwVer   string
	boardID string
	speed   string // PCIe link speed
	subDev  uint16
}

type hcaSlot struct {
	name  string // mlx5_N
	bus   uint8
	gpu   int // index into node.gpus whose switch it shares; -1: own root port at bus-1
	numa  int // used when gpu < 0; otherwise the GPU's node
	model hcaModel
	// ib: link_layer InfiniBand (IPoIB netdev ibp<bus>s0); else Ethernet.
	ib     bool
	rate   string
	netdev string // Ethernet netdev name; IPoIB names are derived
	mbps   int    // netdev speed in Mb/s
	uverbs int    // uverbsN index
	// vpd is the PCI function's Vital Product Data file, byte for byte
	// (see vpd.go); "" writes none.
	vpd string
}

type nvswitchModel struct {
	device uint16
	speed  string
	width  int
}

type cpuTempModel struct {
	driver string // "coretemp" or "k10temp"
	// per socket for coretemp: how many cores to show (the real count is
	// larger; a handful per socket is enough for any check and keeps the
	// tree readable).
	cores int
	// k10temp: CCD count per socket (temp3..temp(2+ccds) = Tccd1..).
	ccds int
}

// PCI identities. Sources: the PCI ID repository (pci.ids) and the
// NVIDIA/Mellanox product briefs.
const (
	vendorNVIDIA   = 0x10de
	vendorMellanox = 0x15b3
	vendorAMD      = 0x1022
	// Broadcom's PEX880xx (Gen4) and PEX890xx (Gen5) switches carry the
	// LSI vendor id 0x1000, not PLX's old 0x10b5.
	switchVendor = 0x1000

	classIB         = 0x020700
	classEthernet   = 0x020000
	class3D         = 0x030200
	classBridgeOth  = 0x068000
	classPCIBridge  = 0x060400
	classHostBridge = 0x060000
)

const (
	gen4 = "16.0 GT/s PCIe"
	gen5 = "32.0 GT/s PCIe"
)

var (
	cx7   = hcaModel{device: 0x1021, hcaType: "MT4129", fwVer: "28.39.2048", boardID: "MT_0000000838", speed: gen5, subDev: 0x0040}
	cx6   = hcaModel{device: 0x101b, hcaType: "MT4123", fwVer: "20.39.1002", boardID: "MT_0000000223", speed: gen4, subDev: 0x0007}
	cx6dx = hcaModel{device: 0x101d, hcaType: "MT4125", fwVer: "22.39.1002", boardID: "MT_0000000359", speed: gen4, subDev: 0x0016}
	// cx7mgmt is a ConnectX-7 function on an NVLink5 baseboard that
	// manages the NVSwitches: the same chip and ids as an HCA, told apart
	// only by its VPD (SMDL=SW_MNG). Board id and firmware are made up.
	cx7mgmt = hcaModel{device: 0x1021, hcaType: "MT4129", fwVer: "28.43.1014", boardID: "NVD0000000054", speed: gen5, subDev: 0x0040}
)

const (
	rateNDR = "400 Gb/sec (4X NDR)"
	rateHDR = "200 Gb/sec (4X HDR)"
	rateEDR = "100 Gb/sec (4X EDR)"
)

// Module lists as /proc/modules shows them on these nodes (refcount and
// users consistent with each other; sizes from a DGX OS 6 kernel).
var (
	modsNVIDIA = []string{
		"nvidia_uvm 1794048 0 - Live 0xffffffffc2e2b000 (POE)",
		"nvidia_drm 126976 0 - Live 0xffffffffc2e0b000 (POE)",
		"nvidia_modeset 1458176 1 nvidia_drm, Live 0xffffffffc2ca4000 (POE)",
		"nvidia_peermem 16384 0 - Live 0xffffffffc2c9f000 (POE)",
		"nvidia 56700928 3 nvidia_uvm,nvidia_modeset,nvidia_peermem, Live 0xffffffffbf6a0000 (POE)",
	}
	modsRDMA = []string{
		"ib_ipoib 155648 0 - Live 0xffffffffc0bd2000",
		"rdma_ucm 28672 0 - Live 0xffffffffc0b9d000",
		"rdma_cm 139264 1 rdma_ucm, Live 0xffffffffc0b6e000",
		"iw_cm 53248 1 rdma_cm, Live 0xffffffffc0b5c000",
		"ib_cm 131072 2 ib_ipoib,rdma_cm, Live 0xffffffffc0b3b000",
		"ib_umad 40960 0 - Live 0xffffffffc0b2f000",
		"ib_uverbs 188416 2 nvidia_peermem,rdma_ucm, Live 0xffffffffc0af4000",
		"mlx5_ib 487424 0 - Live 0xffffffffc0a7d000",
		"ib_core 479232 8 ib_ipoib,rdma_ucm,rdma_cm,iw_cm,ib_cm,ib_umad,ib_uverbs,mlx5_ib, Live 0xffffffffc0a08000",
		"mlx5_core 2322432 1 mlx5_ib, Live 0xffffffffc0840000",
		"mlxfw 36864 1 mlx5_core, Live 0xffffffffc0833000",
		"psample 20480 1 mlx5_core, Live 0xffffffffc082d000",
		"tls 139264 1 mlx5_core, Live 0xffffffffc0809000",
		"pci_hyperv_intf 16384 1 mlx5_core, Live 0xffffffffc0804000",
	}
)

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// specs are the three modelled nodes, by tree name.
func specs() map[string]node {
	return map[string]node{H100NDR: h100NDR(), A100HDR: a100HDR(), RoCE: roce(), B200: b200()}
}

// h100NDR is a DGX H100: GPU buses as internal/gpu/sim's dgxh100, one NDR
// HCA beside each GPU, one Ethernet CX-7 for management/storage.
func h100NDR() node {
	n := node{
		hostname: "dgxh100-01",
		numaCPUs: []string{"0-55,112-167", "56-111,168-223"},
		ncpu:     224,
		gpu:      gpuModel{device: 0x2330, subDevice: 0x16c1, speed: gen5, switchDevice: 0xc030},
		nvswitch: nvswitchModel{device: 0x22a3, speed: gen4, width: 2},
		// Own root ports, clear of every GPU switch's bus range.
		nvswitches: []busNUMA{{0x03, 0}, {0x05, 0}, {0xe3, 1}, {0xe5, 1}},
		cpuTemp:    cpuTempModel{driver: "coretemp", cores: 4},
		modules:    concat(modsNVIDIA, modsRDMA, []string{"coretemp 20480 0 - Live 0xffffffffc07fe000"}),
	}
	for i, b := range []uint8{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb} {
		n.gpus = append(n.gpus, gpuSlot{bus: b, numa: i / 4})
		n.hcas = append(n.hcas, hcaSlot{name: fmt.Sprintf("mlx5_%d", i), bus: b + 1, gpu: i,
			model: cx7, ib: true, rate: rateNDR, mbps: 400000, uverbs: i})
	}
	n.hcas = append(n.hcas, hcaSlot{name: "mlx5_8", bus: 0xc1, gpu: -1, numa: 1,
		model: cx7, rate: rateEDR, netdev: "enp193s0np0", mbps: 100000, uverbs: 8})
	return n
}

// b200 is an HGX B200 (NVLink5): GPU buses as internal/gpu/sim's dgxb200,
// one ConnectX-7 NDR HCA beside each GPU, and four ConnectX-7 functions
// that manage the NVSwitches (VPD SMDL=SW_MNG), numbered after the HCAs
// as on the HGX B200 of siderolabs/extensions#893 (mlx5_8..mlx5_11). The
// NVSwitches are not on the PCI bus.
func b200() node {
	n := node{
		hostname: "hgxb200-01",
		numaCPUs: []string{"0-55,112-167", "56-111,168-223"},
		ncpu:     224,
		// 0x2901 is GB100 [B200] in pci.ids; the subsystem is the sim's.
		gpu:     gpuModel{device: 0x2901, subDevice: 0x1999, speed: gen5, switchDevice: 0xc030},
		cpuTemp: cpuTempModel{driver: "coretemp", cores: 4},
		modules: concat(modsNVIDIA, modsRDMA, []string{"coretemp 20480 0 - Live 0xffffffffc07fe000"}),
	}
	for i, b := range []uint8{0x1b, 0x43, 0x52, 0x61, 0x9d, 0xc3, 0xd1, 0xdf} {
		n.gpus = append(n.gpus, gpuSlot{bus: b, numa: i / 4})
		n.hcas = append(n.hcas, hcaSlot{name: fmt.Sprintf("mlx5_%d", i), bus: b + 1, gpu: i,
			model: cx7, ib: true, rate: rateNDR, mbps: 400000, uverbs: i,
			vpd: vpdHCA(fmt.Sprintf("MT2413X%05d", 10+i))})
	}
	// Own root ports, clear of every GPU switch's bus range.
	for i, b := range []uint8{0x08, 0x0a, 0x88, 0x8a} {
		n.hcas = append(n.hcas, hcaSlot{name: fmt.Sprintf("mlx5_%d", 8+i), bus: b, gpu: -1, numa: i / 2,
			model: cx7mgmt, ib: true, rate: rateNDR, mbps: 400000, uverbs: 8 + i,
			vpd: vpdSwitchMgmt(fmt.Sprintf("MT2414X%05d", 20+i))})
	}
	return n
}

// a100HDR is a DGX A100: GPU buses as internal/gpu/sim's dgxa100. Each
// GPU's bus-3..bus+1 range is free on this layout, so every HCA is at G+1.
func a100HDR() node {
	n := node{
		hostname: "dgxa100-01",
		numaCPUs: []string{"0-63,128-191", "64-127,192-255"},
		ncpu:     256,
		// 0x20b0 (A100-SXM4-40GB, subsystem 0x134f) as go-nvml's dgxa100
		// mock and so the sim answer.
		gpu:        gpuModel{device: 0x20b0, subDevice: 0x134f, speed: gen4, switchDevice: 0xc010},
		nvswitch:   nvswitchModel{device: 0x1af1, speed: "8.0 GT/s PCIe", width: 2},
		nvswitches: []busNUMA{{0xc1, 1}, {0xc3, 1}, {0xc5, 1}, {0xc7, 1}, {0xc9, 1}, {0xcb, 1}},
		cpuTemp:    cpuTempModel{driver: "k10temp", ccds: 8},
		modules:    concat(modsNVIDIA, modsRDMA, []string{"k10temp 16384 0 - Live 0xffffffffc07fe000"}),
	}
	for i, b := range []uint8{0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd} {
		n.gpus = append(n.gpus, gpuSlot{bus: b, numa: i / 4})
		n.hcas = append(n.hcas, hcaSlot{name: fmt.Sprintf("mlx5_%d", i), bus: b + 1, gpu: i,
			model: cx6, ib: true, rate: rateHDR, mbps: 200000, uverbs: i})
	}
	return n
}

// roce is a PCIe GPU server (no NVSwitch) with one RoCE port per GPU.
func roce() node {
	n := node{
		hostname: "gpu-roce-01",
		numaCPUs: []string{"0-31,64-95", "32-63,96-127"},
		ncpu:     128,
		gpu:      gpuModel{device: 0x2331, subDevice: 0x1626, speed: gen5, switchDevice: 0xc030},
		cpuTemp:  cpuTempModel{driver: "coretemp", cores: 4},
		modules: concat(modsNVIDIA, []string{
			"rdma_ucm 28672 0 - Live 0xffffffffc0b9d000",
			"rdma_cm 139264 1 rdma_ucm, Live 0xffffffffc0b6e000",
			"iw_cm 53248 1 rdma_cm, Live 0xffffffffc0b5c000",
			"ib_cm 131072 1 rdma_cm, Live 0xffffffffc0b3b000",
			"ib_umad 40960 0 - Live 0xffffffffc0b2f000",
			"ib_uverbs 188416 2 nvidia_peermem,rdma_ucm, Live 0xffffffffc0af4000",
			"mlx5_ib 487424 0 - Live 0xffffffffc0a7d000",
			"ib_core 479232 7 rdma_ucm,rdma_cm,iw_cm,ib_cm,ib_umad,ib_uverbs,mlx5_ib, Live 0xffffffffc0a08000",
			"mlx5_core 2322432 1 mlx5_ib, Live 0xffffffffc0840000",
			"mlxfw 36864 1 mlx5_core, Live 0xffffffffc0833000",
			"psample 20480 1 mlx5_core, Live 0xffffffffc082d000",
			"tls 139264 1 mlx5_core, Live 0xffffffffc0809000",
			"pci_hyperv_intf 16384 1 mlx5_core, Live 0xffffffffc0804000",
			"coretemp 20480 0 - Live 0xffffffffc07fe000",
		}),
	}
	for i, b := range []uint8{0x1b, 0x3d, 0x9b, 0xbd} {
		n.gpus = append(n.gpus, gpuSlot{bus: b, numa: i / 2})
		n.hcas = append(n.hcas, hcaSlot{name: fmt.Sprintf("mlx5_%d", i), bus: b + 1, gpu: i,
			model: cx6dx, rate: rateHDR, netdev: fmt.Sprintf("ens%dnp0", i+1), mbps: 200000, uverbs: i})
	}
	return n
}
