package sysfsfix

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// entry is one file or symlink of a tree. Trees hold no empty directories:
// git would not keep them, and the committed copy must equal the generated.
type entry struct {
	link    bool
	content string // file bytes, or the link target relative to the tree root
}

type tree struct {
	entries map[string]entry
	err     error
}

func (t *tree) put(rel string, e entry) {
	if _, dup := t.entries[rel]; dup && t.err == nil {
		t.err = fmt.Errorf("generator writes %s twice", rel)
	}
	t.entries[rel] = e
}

// attr is a sysfs attribute: the kernel ends every one with a newline.
func (t *tree) attr(rel, value string) { t.put(rel, entry{content: value + "\n"}) }

// raw is a file written byte for byte (an attribute whose read yields
// nothing, proc files).
func (t *tree) raw(rel, content string) { t.put(rel, entry{content: content}) }

// link records a symlink at rel to target (both relative to the root); it
// is written relative to rel's directory, as the kernel's sysfs links are.
func (t *tree) link(rel, target string) { t.put(rel, entry{link: true, content: target}) }

// write lays the tree out under dir.
func (t *tree) write(dir string) error {
	paths := make([]string, 0, len(t.entries))
	for p := range t.entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		e := t.entries[p]
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", filepath.Dir(full), err)
		}
		if !e.link {
			if err := os.WriteFile(full, []byte(e.content), 0o644); err != nil {
				return fmt.Errorf("write %s: %w", full, err)
			}
			continue
		}
		if err := os.Symlink(relTarget(p, e.content), full); err != nil {
			return fmt.Errorf("symlink %s: %w", full, err)
		}
	}
	return nil
}

// relTarget is the target of a link at link (both root-relative, slash
// separated) as kernfs writes it: up to the nearest common ancestor that is
// a strict ancestor of the target, then down by name. So a link to an
// ancestor reads "../../../0000:19:00.0", never "../..".
func relTarget(link, target string) string {
	from := strings.Split(path.Dir(link), "/")
	to := strings.Split(target, "/")
	k := 0
	for k < len(from) && k < len(to)-1 && from[k] == to[k] {
		k++
	}
	return strings.Repeat("../", len(from)-k) + strings.Join(to[k:], "/")
}

// builder turns a node spec into a tree.
type builder struct {
	t     *tree
	n     node
	hwmon int // next hwmonN, in probe order: CPU sensors, then HCAs
}

func build(n node) (*tree, error) {
	b := &builder{t: &tree{entries: map[string]entry{}}, n: n}
	b.system()
	b.cpuTemps()
	b.rootPortsAndDevices()
	b.t.raw("proc/modules", strings.Join(n.modules, "\n")+"\n")
	b.sysModules()
	// The ib.counters baseline is keyed by boot id, and host.memory reads
	// MemTotal; a whole-node run over a tree needs both.
	b.t.raw("proc/sys/kernel/random/boot_id", bootID(n.hostname)+"\n")
	b.t.raw("proc/meminfo", meminfo)
	return b.t, b.t.err
}

// sysModules writes /sys/module/<name> for every loaded module, as the
// kernel does: initstate "live" and refcnt (the third /proc/modules field).
// Checks that find a module through /sys (where /proc/modules is missing
// or unreadable) see the same modules.
func (b *builder) sysModules() {
	for _, line := range b.n.modules {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		b.t.raw("sys/module/"+f[0]+"/initstate", "live\n")
		b.t.raw("sys/module/"+f[0]+"/refcnt", f[2]+"\n")
	}
}

// bootID is a fixed, well-formed boot id per tree, as the kernel writes it.
func bootID(host string) string {
	h := sha256.Sum256([]byte(host))
	x := hex.EncodeToString(h[:16])
	return x[0:8] + "-" + x[8:12] + "-4" + x[13:16] + "-8" + x[17:20] + "-" + x[20:32]
}

// meminfo is the head of /proc/meminfo on a 2 TiB node.
const meminfo = `MemTotal:       2113389876 kB
MemFree:        2041225664 kB
MemAvailable:   2071004532 kB
Buffers:          118272 kB
Cached:          31458740 kB
SwapCached:            0 kB
`

func (b *builder) system() {
	n := b.n
	last := len(n.numaCPUs) - 1
	nodes := fmt.Sprintf("0-%d", last)
	if last == 0 {
		nodes = "0"
	}
	for _, f := range []string{"online", "possible", "has_cpu", "has_normal_memory"} {
		b.t.attr("sys/devices/system/node/"+f, nodes)
	}
	for i, cl := range n.numaCPUs {
		d := fmt.Sprintf("sys/devices/system/node/node%d/", i)
		b.t.attr(d+"cpulist", cl)
		b.t.attr(d+"cpumap", cpuMask(cl, n.ncpu))
	}
	all := fmt.Sprintf("0-%d", n.ncpu-1)
	for _, f := range []string{"online", "possible", "present"} {
		b.t.attr("sys/devices/system/cpu/"+f, all)
	}
	b.t.attr("sys/devices/system/cpu/offline", "")
	// One NUMA node per socket on these machines: each CPU's package is
	// its node, as topology reads it to tell sockets apart.
	for node, cl := range n.numaCPUs {
		for _, cpu := range cpuList(cl) {
			b.t.attr(fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu), strconv.Itoa(node))
		}
	}
}

// cpuList expands a kernel cpulist ("0-55,112-167").
func cpuList(s string) []int {
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out
}

// cpuTemps lays out the CPU package sensors: Intel coretemp platform
// devices, or AMD k10temp on the data-fabric PCI functions 00:18.3/00:19.3.
func (b *builder) cpuTemps() {
	ct := b.n.cpuTemp
	for s := range b.n.numaCPUs {
		switch ct.driver {
		case "coretemp":
			dev := fmt.Sprintf("sys/devices/platform/coretemp.%d", s)
			b.t.link(dev+"/driver", "sys/bus/platform/drivers/coretemp")
			b.t.link(fmt.Sprintf("sys/bus/platform/drivers/coretemp/coretemp.%d", s), dev)
			b.t.link(fmt.Sprintf("sys/bus/platform/devices/coretemp.%d", s), dev)
			h := b.hwmonDir(dev, "coretemp")
			b.coretempSensor(h, 1, fmt.Sprintf("Package id %d", s), 41000+s*2000)
			for c := 0; c < ct.cores; c++ {
				b.coretempSensor(h, c+2, fmt.Sprintf("Core %d", c), 38000+s*2000+(c%4)*1000)
			}
		case "k10temp":
			dev := b.pci("sys/devices/pci0000:00", pciAddr(0, 0x18+s, 3), pciAttrs{
				vendor: vendorAMD, device: 0x1493, subVendor: vendorAMD, subDevice: 0x1493,
				class: classHostBridge, numa: 0, driver: "k10temp"})
			h := b.hwmonDir(dev, "k10temp")
			b.t.attr(h+"/temp1_label", "Tctl")
			b.t.attr(h+"/temp1_input", strconv.Itoa(47125+s*1500))
			for c := 0; c < ct.ccds; c++ {
				b.t.attr(fmt.Sprintf("%s/temp%d_label", h, c+3), fmt.Sprintf("Tccd%d", c+1))
				b.t.attr(fmt.Sprintf("%s/temp%d_input", h, c+3), strconv.Itoa(43500+s*1500+(c%3)*750))
			}
		}
	}
}

func (b *builder) coretempSensor(h string, i int, label string, milliC int) {
	p := fmt.Sprintf("%s/temp%d_", h, i)
	b.t.attr(p+"label", label)
	b.t.attr(p+"input", strconv.Itoa(milliC))
	b.t.attr(p+"max", "80000")
	b.t.attr(p+"crit", "100000")
	b.t.attr(p+"crit_alarm", "0")
}

// hwmonDir registers the next hwmonN under dev, with its class link and
// the device link back to its parent, and returns its directory.
func (b *builder) hwmonDir(dev, name string) string {
	hw := fmt.Sprintf("hwmon%d", b.hwmon)
	b.hwmon++
	h := dev + "/hwmon/" + hw
	b.t.attr(h+"/name", name)
	b.t.link(h+"/device", dev)
	b.t.link("sys/class/hwmon/"+hw, h)
	return h
}

type pciAttrs struct {
	vendor, device, subVendor, subDevice uint16
	class                                uint32
	numa                                 int
	speed                                string // "" for functions without a PCIe link (AMD DF)
	width                                int
	driver                               string
	// secondary/subordinate bus numbers, for bridges
	secondary, subordinate int
}

func pciAddr(bus, dev, fn int) string { return fmt.Sprintf("0000:%02x:%02x.%d", bus, dev, fn) }

// pci lays out one PCI function under parent and its bus and driver links.
func (b *builder) pci(parent, addr string, a pciAttrs) string {
	dir := parent + "/" + addr
	at := func(k, v string) { b.t.attr(dir+"/"+k, v) }
	at("vendor", fmt.Sprintf("0x%04x", a.vendor))
	at("device", fmt.Sprintf("0x%04x", a.device))
	at("class", fmt.Sprintf("0x%06x", a.class))
	// Bridges get the attributes a topology walk reads and no more: each
	// file costs a create in every test's copy.
	if a.class != classPCIBridge {
		at("subsystem_vendor", fmt.Sprintf("0x%04x", a.subVendor))
		at("subsystem_device", fmt.Sprintf("0x%04x", a.subDevice))
		at("revision", "0x00")
		at("enable", "1")
	}
	at("numa_node", strconv.Itoa(a.numa))
	cl := b.n.numaCPUs[a.numa]
	at("local_cpulist", cl)
	at("local_cpus", cpuMask(cl, b.n.ncpu))
	if a.speed != "" {
		at("current_link_speed", a.speed)
		at("current_link_width", strconv.Itoa(a.width))
		at("max_link_speed", a.speed)
		at("max_link_width", strconv.Itoa(a.width))
	}
	if a.class == classPCIBridge {
		at("secondary_bus_number", strconv.Itoa(a.secondary))
		at("subordinate_bus_number", strconv.Itoa(a.subordinate))
	}
	b.t.link("sys/bus/pci/devices/"+addr, dir)
	if a.driver != "" {
		b.t.link(dir+"/driver", "sys/bus/pci/drivers/"+a.driver)
		b.t.link("sys/bus/pci/drivers/"+a.driver+"/"+addr, dir)
	}
	return dir
}

// rootPort lays out a root complex and its root port at bus; what is
// behind it lives on bus+1 and up to subordinate.
func (b *builder) rootPort(bus, subordinate, numa int, speed string) string {
	vendor, device := uint16(0x8086), uint16(0x352a) // Sapphire Rapids root port
	if b.n.cpuTemp.driver == "k10temp" {
		vendor, device = vendorAMD, 0x1483 // Rome GPP bridge
	}
	return b.pci(fmt.Sprintf("sys/devices/pci0000:%02x", bus), pciAddr(bus, 1, 0), pciAttrs{
		vendor: vendor, device: device, subVendor: vendor, subDevice: device,
		class: classPCIBridge, numa: numa, speed: speed, width: 16, driver: "pcieport",
		secondary: bus + 1, subordinate: subordinate})
}

func (b *builder) switchPort(parent string, bus, dev, secondary, subordinate, numa int, speed string) string {
	sw := b.n.gpu.switchDevice
	return b.pci(parent, pciAddr(bus, dev, 0), pciAttrs{
		vendor: switchVendor, device: sw, subVendor: switchVendor, subDevice: 0xa064,
		class: classPCIBridge, numa: numa, speed: speed, width: 16, driver: "pcieport",
		secondary: secondary, subordinate: subordinate})
}

func (b *builder) rootPortsAndDevices() {
	n := b.n
	nicOf := map[int]hcaSlot{}
	for _, h := range n.hcas {
		if h.gpu >= 0 {
			nicOf[h.gpu] = h
		}
	}
	nicDirs := map[string]string{}
	for i, g := range n.gpus {
		G := int(g.bus)
		h, hasNIC := nicOf[i]
		sub := G
		if hasNIC && int(h.bus) > sub {
			sub = int(h.bus)
		}
		rp := b.rootPort(G-3, sub, g.numa, n.gpu.speed)
		up := b.switchPort(rp, G-2, 0, G-1, sub, g.numa, n.gpu.speed)
		dn := b.switchPort(up, G-1, 0, G, G, g.numa, n.gpu.speed)
		b.pci(dn, pciAddr(G, 0, 0), pciAttrs{
			vendor: vendorNVIDIA, device: n.gpu.device, subVendor: vendorNVIDIA, subDevice: n.gpu.subDevice,
			class: class3D, numa: g.numa, speed: n.gpu.speed, width: 16, driver: "nvidia"})
		if hasNIC {
			dn1 := b.switchPort(up, G-1, 1, int(h.bus), int(h.bus), g.numa, n.gpu.speed)
			nicDirs[h.name] = b.hcaPCI(dn1, h, g.numa)
		}
	}
	for _, h := range n.hcas {
		if h.gpu < 0 {
			rp := b.rootPort(int(h.bus)-1, int(h.bus), h.numa, h.model.speed)
			nicDirs[h.name] = b.hcaPCI(rp, h, h.numa)
		}
	}
	for _, s := range n.nvswitches {
		rp := b.rootPort(int(s.bus)-1, int(s.bus), s.numa, n.nvswitch.speed)
		b.pci(rp, pciAddr(int(s.bus), 0, 0), pciAttrs{
			vendor: vendorNVIDIA, device: n.nvswitch.device, subVendor: vendorNVIDIA, subDevice: 0x1796,
			class: classBridgeOth, numa: s.numa, speed: n.nvswitch.speed, width: n.nvswitch.width, driver: "nvidia"})
	}
	// HCA hwmon numbers follow mlx5_N order (the probe order), whatever
	// the PCI layout order above.
	for i, h := range n.hcas {
		b.hcaRDMA(nicDirs[h.name], h, i)
	}
	b.t.attr("sys/class/infiniband_verbs/abi_version", "6")
}

func (b *builder) hcaPCI(parent string, h hcaSlot, numa int) string {
	class := uint32(classEthernet)
	if h.ib {
		class = classIB
	}
	dir := b.pci(parent, pciAddr(int(h.bus), 0, 0), pciAttrs{
		vendor: vendorMellanox, device: h.model.device, subVendor: vendorMellanox, subDevice: h.model.subDev,
		class: class, numa: numa, speed: h.model.speed, width: 16, driver: "mlx5_core"})
	if h.vpd != "" {
		b.t.raw(dir+"/vpd", h.vpd)
	}
	return dir
}

// mac is HCA i's (made-up, Mellanox OUI) MAC; its node GUID is the MAC
// with 03:00 inserted after the OUI, as mlx5 derives it.
func mac(i int) [6]byte { return [6]byte{0xb8, 0x3f, 0xd2, 0xa1, byte(0x2b + i), 0x3c} }

func guid(m [6]byte) string {
	return fmt.Sprintf("%02x%02x:%02x03:00%02x:%02x%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}

func hexColons(bs []byte) string {
	parts := make([]string, len(bs))
	for i, x := range bs {
		parts[i] = fmt.Sprintf("%02x", x)
	}
	return strings.Join(parts, ":")
}

// hcaRDMA lays out the RDMA side of HCA h (index i): the infiniband class
// device and port, its netdev, its ASIC temperature and its uverbs device.
func (b *builder) hcaRDMA(pciDir string, h hcaSlot, i int) {
	m := mac(i)
	g := guid(m)
	ib := pciDir + "/infiniband/" + h.name
	at := func(k, v string) { b.t.attr(ib+"/"+k, v) }
	at("node_type", "1: CA")
	at("node_guid", g)
	at("sys_image_guid", g)
	at("fw_ver", h.model.fwVer)
	at("hca_type", h.model.hcaType)
	at("hw_rev", "0x0")
	at("board_id", h.model.boardID)
	at("node_desc", b.n.hostname+" "+h.name)
	b.t.link(ib+"/device", pciDir)
	b.t.link("sys/class/infiniband/"+h.name, ib)

	netdev := h.netdev
	if h.ib {
		netdev = fmt.Sprintf("ibp%ds0", h.bus)
	}
	port := ib + "/ports/1"
	pa := func(k, v string) { b.t.attr(port+"/"+k, v) }
	pa("state", "4: ACTIVE")
	pa("phys_state", "5: LinkUp")
	pa("rate", h.rate)
	pa("sm_sl", "0")
	pa("pkeys/0", "0xffff")
	if h.ib {
		pa("link_layer", "InfiniBand")
		pa("lid", fmt.Sprintf("0x%x", 0x11+i))
		pa("sm_lid", "0x1")
		pa("lid_mask_count", "0")
		pa("cap_mask", "0xa751e848")
		pa("has_smi", "1")
		pa("gids/0", "fe80:0000:0000:0000:"+g)
		pa("gid_attrs/types/0", "IB/RoCE v1")
		// An IB GID has no netdev: the kernel's read fails, a copy reads
		// nothing.
		b.t.raw(port+"/gid_attrs/ndevs/0", "")
	} else {
		pa("link_layer", "Ethernet")
		pa("lid", "0x0")
		pa("sm_lid", "0x0")
		pa("lid_mask_count", "0")
		pa("cap_mask", "0x04010000")
		pa("has_smi", "0")
		eui := fmt.Sprintf("%02x%02x:%02xff:fe%02x:%02x%02x", m[0]^2, m[1], m[2], m[3], m[4], m[5])
		for gi, typ := range []string{"IB/RoCE v1", "RoCE v2"} {
			pa(fmt.Sprintf("gids/%d", gi), "fe80:0000:0000:0000:"+eui)
			pa(fmt.Sprintf("gid_attrs/types/%d", gi), typ)
			pa(fmt.Sprintf("gid_attrs/ndevs/%d", gi), netdev)
		}
	}
	b.counters(port, i)
	b.hwCounters(port, h.ib)

	nd := pciDir + "/net/" + netdev
	na := func(k, v string) { b.t.attr(nd+"/"+k, v) }
	if h.ib {
		// IPoIB hardware address: flags+QPN, then the port GID.
		na("address", hexColons(append([]byte{0x00, 0x00, 0x10, byte(0x29 + i*0x10), 0xfe, 0x80, 0, 0, 0, 0, 0, 0},
			m[0], m[1], m[2], 0x03, 0x00, m[3], m[4], m[5])))
		na("type", "32")
		na("mtu", "4092")
	} else {
		na("address", hexColons(m[:]))
		na("type", "1")
		na("mtu", "9000")
	}
	na("operstate", "up")
	na("carrier", "1")
	na("speed", strconv.Itoa(h.mbps))
	na("duplex", "full")
	na("ifindex", strconv.Itoa(4+i))
	na("dev_port", "0")
	b.t.link(nd+"/device", pciDir)
	b.t.link("sys/class/net/"+netdev, nd)

	hw := b.hwmonDir(pciDir, "mlx5")
	b.t.attr(hw+"/temp1_label", "asic")
	b.t.attr(hw+"/temp1_input", strconv.Itoa(52000+(i%4)*1250))
	b.t.attr(hw+"/temp1_highest", strconv.Itoa(56000+(i%4)*1250))
	b.t.attr(hw+"/temp1_crit", "105000")

	uv := fmt.Sprintf("uverbs%d", h.uverbs)
	ud := pciDir + "/infiniband_verbs/" + uv
	b.t.attr(ud+"/ibdev", h.name)
	b.t.attr(ud+"/abi_version", "1")
	b.t.attr(ud+"/dev", fmt.Sprintf("231:%d", 192+h.uverbs))
	b.t.link(ud+"/device", pciDir)
	b.t.link("sys/class/infiniband_verbs/"+uv, ud)
}

// counters writes the IB PMA port counters (drivers/infiniband/core/
// sysfs.c) with healthy values: no errors, a link_downed of 1 on some
// ports (links retrain once at boot), plausible traffic.
func (b *builder) counters(port string, i int) {
	c := port + "/counters/"
	zero := []string{"symbol_error", "link_error_recovery", "port_rcv_errors",
		"port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors", "port_xmit_discards",
		"port_xmit_constraint_errors", "port_rcv_constraint_errors", "local_link_integrity_errors",
		"excessive_buffer_overrun_errors", "VL15_dropped"}
	for _, k := range zero {
		b.t.attr(c+k, "0")
	}
	b.t.attr(c+"link_downed", strconv.Itoa(i%2))
	base := uint64(i+1) * 7919
	vals := map[string]uint64{
		"port_xmit_data":         48213765120 + base*1000,
		"port_rcv_data":          47993210880 + base*1000,
		"port_xmit_packets":      96427530 + base,
		"port_rcv_packets":       95986421 + base,
		"unicast_xmit_packets":   96421877 + base,
		"unicast_rcv_packets":    95980313 + base,
		"multicast_xmit_packets": 5653,
		"multicast_rcv_packets":  6108,
		"port_xmit_wait":         184467 + base,
	}
	for k, v := range vals {
		b.t.attr(c+k, strconv.FormatUint(v, 10))
	}
}

// hwCounters writes a few of mlx5's hw_counters (RoCE ports add the
// congestion-control ones).
func (b *builder) hwCounters(port string, ib bool) {
	c := port + "/hw_counters/"
	for _, k := range []string{"duplicate_request", "implied_nak_seq_err", "local_ack_timeout_err",
		"out_of_buffer", "out_of_sequence", "packet_seq_err", "req_cqe_error", "req_cqe_flush_error",
		"req_remote_access_errors", "req_remote_invalid_request", "resp_cqe_error", "resp_cqe_flush_error",
		"resp_local_length_error", "resp_remote_access_errors", "rnr_nak_retry_err", "rx_atomic_requests"} {
		b.t.attr(c+k, "0")
	}
	b.t.attr(c+"lifespan", "10")
	b.t.attr(c+"rx_read_requests", "1048576")
	b.t.attr(c+"rx_write_requests", "8388608")
	if !ib {
		b.t.attr(c+"np_cnp_sent", "1207")
		b.t.attr(c+"np_ecn_marked_roce_packets", "1311")
		b.t.attr(c+"rp_cnp_handled", "1189")
		b.t.attr(c+"rp_cnp_ignored", "0")
		b.t.attr(c+"rx_icrc_encapsulated", "0")
	}
}

// cpuMask writes a cpulist as the kernel's cpumask: 32-bit hex groups,
// most significant first, the first group only as wide as nbits needs.
func cpuMask(cpulist string, nbits int) string {
	bits := make([]bool, nbits)
	for _, r := range strings.Split(cpulist, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, _ := strconv.Atoi(lo)
		z := a
		if isRange {
			z, _ = strconv.Atoi(hi)
		}
		for c := a; c <= z && c < nbits; c++ {
			bits[c] = true
		}
	}
	groups := (nbits + 31) / 32
	out := make([]string, 0, groups)
	for gi := groups - 1; gi >= 0; gi-- {
		var v uint32
		for k := 0; k < 32; k++ {
			if c := gi*32 + k; c < nbits && bits[c] {
				v |= 1 << k
			}
		}
		width := 8
		if gi == groups-1 && nbits%32 != 0 {
			width = (nbits%32 + 3) / 4
		}
		out = append(out, fmt.Sprintf("%0*x", width, v))
	}
	return strings.Join(out, ",")
}
