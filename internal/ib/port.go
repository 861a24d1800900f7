package ib

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/lazyre"
)

type portCheck struct {
	devs *Gather
	cfg  config.IB
}

// NewPort checks each port of a physical RDMA device that is not
// excluded: state ACTIVE and phys_state LinkUp, rate at least
// min_rate_gbps, the configured link layer; each HCA's firmware against
// the pin; and the node's HCA and active-port counts. Virtual devices
// (HCA.Virtual) are only mentioned in the count's message. devs is the
// run's scan of the RDMA devices.
func NewPort(devs *Gather, c config.IB) check.Check {
	return &portCheck{devs: devs, cfg: c}
}

func (c *portCheck) Name() string { return namePort }

func (c *portCheck) Run(ctx context.Context) []check.Result {
	devs, stop, ok := listHCAs(ctx, c.devs, namePort)
	if !ok {
		return []check.Result{stop}
	}
	all := devs.HCAs
	incl := included(all, c.cfg.Exclude)
	hcas, virt := physical(incl)
	p := c.cfg.Port
	if len(hcas) == 0 && p.ExpectedHCAs <= 0 && p.ExpectedActivePorts <= 0 {
		return []check.Result{noDevices(namePort, len(all)-len(incl), virt)}
	}
	var out []check.Result
	var n portCount
	for _, h := range hcas {
		if h.PortsErr != nil {
			n.unlisted = append(n.unlisted, h.Name)
		}
		if p.Firmware != "" || h.PortsErr != nil {
			out = append(out, c.judgeHCA(h))
		}
		for _, pt := range h.Ports {
			n.add(h.Name, pt)
			out = append(out, c.judgePort(h, pt))
		}
	}
	note := unjudgedNote(len(all)-len(incl), virt) + switchNote(len(devs.SwitchMgmt))
	// The management devices keep their mlx5_N numbers: they are no gap.
	named := append(slices.Clone(all), devs.SwitchMgmt...)
	return append(out, c.judgeCounts(named, hcas, n, note))
}

// portCount tallies the judged ports by state. A port whose state could
// not be read is neither active nor inactive, and an HCA whose ports could
// not be listed may have any number of them: neither may turn a count
// into a FAIL.
type portCount struct {
	all, active, unknown int
	inactive             []string
	unlisted             []string // HCAs whose ports directory was unreadable
	// byLayer counts the ports of each link layer alike, for the groups.
	byLayer map[string]*portCount
}

func (n *portCount) add(dev string, p Port) {
	n.tally(dev, p)
	if n.byLayer == nil {
		n.byLayer = map[string]*portCount{}
	}
	l := n.byLayer[p.LinkLayer]
	if l == nil {
		l = &portCount{}
		n.byLayer[p.LinkLayer] = l
	}
	l.tally(dev, p)
}

func (n *portCount) tally(dev string, p Port) {
	n.all++
	switch {
	case isActive(p):
		n.active++
	case isInactive(p):
		n.inactive = append(n.inactive, portName(dev, p.Num))
	default:
		n.unknown++
	}
}

// layer is the count of one link layer's ports. A port whose link layer
// could not be read is in none of them: it counts as unknown in each, so
// that it may not turn a group's count into a FAIL.
func (n *portCount) layer(ll string) portCount {
	var c portCount
	if l := n.byLayer[ll]; l != nil {
		c = *l
	}
	if u := n.byLayer[""]; u != nil {
		c.unknown += u.all
	}
	c.unlisted = n.unlisted
	return c
}

// included drops excluded devices, and excluded ports of the others.
func included(all []HCA, exclude []string) []HCA {
	var out []HCA
	for _, h := range all {
		if Excluded(exclude, h.Name, 0) {
			continue
		}
		h.Ports = slices.DeleteFunc(slices.Clone(h.Ports), func(p Port) bool { return Excluded(exclude, h.Name, p.Num) })
		out = append(out, h)
	}
	return out
}

// physical drops the virtual devices (HCA.Virtual) and counts them. A VF's
// or SF's port follows the physical port's state (ip-link(8) can even
// force a VF up while the PF link is down), and the device may be gone
// after a reboot: counting it could hide a dead physical port, or fail a
// node for a VF nobody recreated.
func physical(hcas []HCA) ([]HCA, int) {
	var out []HCA
	for _, h := range hcas {
		if !h.Virtual {
			out = append(out, h)
		}
	}
	return out, len(hcas) - len(out)
}

// unjudgedNote says how many of the devices found are left out of the
// judging: " (1 excluded)", " (2 virtual not judged)", or both.
func unjudgedNote(excluded, virtual int) string {
	var parts []string
	if excluded > 0 {
		parts = append(parts, fmt.Sprintf("%d excluded", excluded))
	}
	if virtual > 0 {
		parts = append(parts, fmt.Sprintf("%d virtual not judged", virtual))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// switchNote says how many NVSwitch management devices were set apart:
// " (4 NVSwitch management devices not HCAs)".
func switchNote(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return " (1 NVSwitch management device, not an HCA)"
	}
	return fmt.Sprintf(" (%d NVSwitch management devices, not HCAs)", n)
}

// listHCAs starts every ib check's run: the run's RDMA devices, or, when
// they cannot be listed, the one result check name reports instead.
func listHCAs(ctx context.Context, devs *Gather, name string) (Devices, check.Result, bool) {
	d, err := devs.Devices(ctx)
	switch {
	case err == nil:
		return d, check.Result{}, true
	case ctx.Err() != nil:
		return Devices{}, interrupted(ctx, name), false
	}
	return Devices{}, result(name, componentHost, check.Error, "cannot list RDMA devices: %s", errText(err)), false
}

// noDevices is the SKIP of a node with nothing to judge.
func noDevices(name string, excluded, virtual int) check.Result {
	what := "RDMA devices"
	if virtual > 0 {
		what = "physical RDMA devices"
	}
	return result(name, componentHost, check.Skip, "no %s%s", what, unjudgedNote(excluded, virtual))
}

func portName(dev string, num int) string { return dev + "/" + strconv.Itoa(num) }

func isActive(p Port) bool { return p.State == "ACTIVE" && p.PhysState == "LinkUp" }

// isInactive is true when what could be read shows the port is not up.
func isInactive(p Port) bool {
	return (p.State != "" && p.State != "ACTIVE") || (p.PhysState != "" && p.PhysState != "LinkUp")
}

func (c *portCheck) judgePort(h HCA, p Port) check.Result {
	v := verdict{name: namePort, comp: portName(h.Name, p.Num)}
	cfg := c.cfg.Port
	if isInactive(p) {
		st := check.Warn
		if cfg.Inactive == "fail" {
			st = check.Fail
		}
		v.add(st, fmt.Sprintf("state %s (phys %s)", orUnknown(p.State), orUnknown(p.PhysState)))
	}
	if p.Err != nil {
		v.add(check.Error, "cannot read: "+errText(p.Err))
	}
	floor := cfg.MinRateGbps
	if p.LinkLayer != "" {
		g, inGroup := cfg.Group(p.LinkLayer)
		switch {
		case cfg.LinkLayer != "" && p.LinkLayer != cfg.LinkLayer:
			v.add(check.Fail, fmt.Sprintf("link_layer %s, expected %s", p.LinkLayer, cfg.LinkLayer))
		case len(cfg.Groups) > 0 && !inGroup:
			v.add(check.Fail, fmt.Sprintf("link_layer %s, expected %s", p.LinkLayer, groupLayers(cfg.Groups)))
		}
		floor = max(floor, g.MinRateGbps)
	}
	// A port that is down reports some rate; only a live link's matters.
	if floor > 0 && p.State == "ACTIVE" && p.RateText != "" && p.RateGbps < floor {
		v.add(check.Fail, fmt.Sprintf("rate %s Gb/sec < expected %s", fmtGbps(p.RateGbps), fmtGbps(floor)))
	}
	r := v.result(fmt.Sprintf("%s, %s, %s", p.State, p.RateText, p.LinkLayer))
	r.IDs.PCIBusID = h.PCIAddr
	return r
}

// groupLayers names the configured link layers: "InfiniBand or Ethernet".
func groupLayers(gs []config.IBPortGroup) string {
	names := make([]string, len(gs))
	for i, g := range gs {
		names[i] = g.LinkLayer
	}
	return strings.Join(names, " or ")
}

func orUnknown(s string) string {
	if s == "" {
		return "unreadable"
	}
	return s
}

// judgeHCA is the device's own result: its firmware against the pin, and
// whether its ports could be listed at all.
func (c *portCheck) judgeHCA(h HCA) check.Result {
	v := verdict{name: namePort, comp: h.Name}
	ok := "ports listed"
	if want := c.cfg.Port.Firmware; want != "" {
		switch ok = "firmware " + h.FW; {
		case h.FW == "":
			v.add(check.Error, fmt.Sprintf("cannot read fw_ver (firmware %s expected)", want))
		case h.FW != want:
			v.add(check.Fail, fmt.Sprintf("firmware %s, expected %s", h.FW, want))
		}
	}
	if h.PortsErr != nil {
		v.add(check.Error, "cannot list its ports: "+errText(h.PortsErr))
	}
	r := v.result(ok)
	r.IDs.PCIBusID = h.PCIAddr
	return r
}

// judgeCounts compares the node's physical HCAs and their active ports
// with what is expected. all includes the excluded and virtual devices,
// whose numbers are not gaps; note says how many those are.
func (c *portCheck) judgeCounts(all, hcas []HCA, pc portCount, note string) check.Result {
	cfg := c.cfg.Port
	v := verdict{name: namePort, comp: componentHost}
	n := len(hcas)
	switch want := cfg.ExpectedHCAs; {
	case want < 0:
	case n < want:
		msg := fmt.Sprintf("%d HCAs, expected %d", n, want)
		if miss := missingNames(all, want-n); len(miss) > 0 {
			msg += " (missing: " + strings.Join(miss, ", ") + ")"
		}
		v.add(check.Fail, msg)
	case n > want:
		v.add(check.Warn, fmt.Sprintf("%d HCAs, expected %d", n, want))
	}
	judgeActive(&v, "", cfg.ExpectedActivePorts, pc)
	for _, g := range cfg.Groups {
		judgeActive(&v, g.LinkLayer+" ", g.ExpectedActivePorts, pc.layer(g.LinkLayer))
	}
	return v.result(fmt.Sprintf("%d HCAs, %d of %d ports active%s", n, pc.active, pc.all, note))
}

// judgeActive compares the active ports of pc (what, "" or
// "InfiniBand ", names them) with the least number wanted; want <= 0
// does not check.
func judgeActive(v *verdict, what string, want int, pc portCount) {
	switch {
	case want <= 0 || pc.active >= want:
	case len(pc.unlisted) > 0:
		v.add(check.Error, fmt.Sprintf("%d active %sports, expected %d; the ports of %s could not be listed", pc.active, what, want, strings.Join(pc.unlisted, ", ")))
	case pc.active+pc.unknown >= want:
		v.add(check.Error, fmt.Sprintf("%d active %sports, expected %d; %d unreadable", pc.active, what, want, pc.unknown))
	default:
		msg := fmt.Sprintf("%d active %sports, expected %d", pc.active, what, want)
		if len(pc.inactive) > 0 {
			msg += " (inactive: " + strings.Join(pc.inactive, ", ") + ")"
		}
		v.add(check.Fail, msg)
	}
}

var numbered = lazyre.New(`^(.*?)([0-9]+)$`)

// missingNames guesses which devices are gone from the gaps in their
// numbering (mlx5_0..mlx5_7 without mlx5_3). The kernel renumbers devices
// found at the next boot, so it names them only when the gaps account for
// every missing device; otherwise nil.
func missingNames(all []HCA, missing int) []string {
	have := map[string]map[int]bool{}
	for _, h := range all {
		m := numbered.FindStringSubmatch(h.Name)
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[2])
		if err != nil || n > 1024 {
			continue
		}
		if have[m[1]] == nil {
			have[m[1]] = map[int]bool{}
		}
		have[m[1]][n] = true
	}
	var gaps []string
	for prefix, nums := range have {
		top := -1
		for n := range nums {
			top = max(top, n)
		}
		for n := 0; n < top; n++ {
			if !nums[n] {
				gaps = append(gaps, prefix+strconv.Itoa(n))
			}
		}
	}
	if len(gaps) != missing {
		return nil
	}
	slices.Sort(gaps)
	return gaps
}
