package ib

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Fragment describes the node for bring-up: a [checks.ib.port] table of
// the values this node satisfies now (with exclude applied, virtual
// devices and NVSwitch management devices left out as ib.port leaves
// them out), and a comment per device. Pasted into a [[host]] section
// for nodes of this kind, it turns ib.port from reporting into
// requiring: fewer HCAs or active ports, a slower link, another link
// layer or firmware then FAIL. A node without RDMA devices gets
// expected_hcas = 0.
//
// Rate and link layer are pinned per link layer: a node whose ports are
// all of one layer gets the flat link_layer and min_rate_gbps keys, one
// with several (eight NDR ports beside a 200 Gb/s RoCE storage bond) a
// [[checks.ib.port.group]] per layer, so that an NDR port trained at
// 200 Gb/s fails although the bond runs at 200. Where ports of one layer
// differ in rate, the lowest is pinned (the node passes as it is) and a
// WARNING comment names the slow ones: look before pasting.
//
// devs is the run's scan of the RDMA devices (the topology fragment
// shares it).
func Fragment(ctx context.Context, devs *Gather, exclude []string) (string, error) {
	d, err := devs.Devices(ctx)
	if err != nil {
		return "", fmt.Errorf("inventory of RDMA devices: %w", err)
	}
	all := d.HCAs
	hcas, _ := physical(included(all, exclude))
	for _, h := range hcas {
		// Counts printed without its ports would pin a node short of
		// them as the known-good one.
		if h.PortsErr != nil {
			return "", fmt.Errorf("inventory of RDMA devices: %s: cannot list its ports, so the port counts would be too low: %w", h.Name, h.PortsErr)
		}
	}
	var b strings.Builder
	b.WriteString("# RDMA devices and ports as seen now; ib.port passes with these values.\n")
	if len(exclude) > 0 {
		fmt.Fprintf(&b, "# Judged with [checks.ib] exclude = %s.\n", tomlStrings(exclude))
	}
	for _, h := range all {
		note := ""
		switch {
		case Excluded(exclude, h.Name, 0):
			note = " (excluded)"
		case h.Virtual:
			// Made at run time (sriov_numvfs, devlink): it may not be
			// there after a reboot, so it is not required.
			note = " (virtual function, not counted)"
		}
		describe(&b, h, note, exclude)
	}
	for _, h := range d.SwitchMgmt {
		describe(&b, h, " (NVSwitch management, VPD SMDL=SW_MNG: not an HCA, not counted)", nil)
	}
	for _, err := range d.VPDErrs {
		fmt.Fprintf(&b, "# WARNING: %s; counted as an HCA\n", printable(errText(err)))
	}

	active := 0
	var inactive []string
	fws := map[string]bool{}
	layers := map[string]*layerRates{}
	var order []string
	for _, h := range hcas {
		fws[h.FW] = true
		for _, p := range h.Ports {
			l := layers[p.LinkLayer]
			if l == nil {
				l = &layerRates{rates: map[string][]string{}}
				layers[p.LinkLayer] = l
				order = append(order, p.LinkLayer)
			}
			if !isActive(p) {
				inactive = append(inactive, portName(h.Name, p.Num))
				continue
			}
			active++
			l.add(portName(h.Name, p.Num), p)
		}
	}
	slices.Sort(order)
	grouped := len(order) > 1 && !slices.Contains(order, "")
	for _, ll := range order {
		layers[ll].warn(&b, ll)
	}
	if len(fws) > 1 {
		b.WriteString("# WARNING: the HCAs run different firmware; firmware is not pinned.\n")
	}
	b.WriteString("[checks.ib.port]\n")
	fmt.Fprintf(&b, "expected_hcas = %d\n", len(hcas))
	fmt.Fprintf(&b, "expected_active_ports = %d\n", active)
	if grouped {
		b.WriteString("# Ports of several link layers: rate and count are pinned per layer below.\n")
		b.WriteString("min_rate_gbps = 0.0\n")
		b.WriteString("link_layer = \"\"\n")
	} else {
		// One layer, or some link layer unreadable (then nothing per
		// layer can be pinned): the lowest rate of all.
		minRate := 0.0
		for _, l := range layers {
			if len(l.rates) > 0 && (minRate == 0 || l.min < minRate) {
				minRate = l.min
			}
		}
		fmt.Fprintf(&b, "min_rate_gbps = %s\n", tomlFloat(minRate))
		fmt.Fprintf(&b, "link_layer = %s\n", strconv.Quote(onlyKey(layers)))
	}
	fmt.Fprintf(&b, "firmware = %s\n", strconv.Quote(only(fws)))
	if len(inactive) == 0 {
		b.WriteString("inactive = \"fail\"\n")
	} else {
		fmt.Fprintf(&b, "# Not ACTIVE: %s. Exclude the unused ones, then set inactive = \"fail\".\n", strings.Join(inactive, ", "))
		b.WriteString("inactive = \"warn\"\n")
	}
	if grouped {
		for _, ll := range order {
			l := layers[ll]
			fmt.Fprintf(&b, "\n[[checks.ib.port.group]]\nlink_layer = %s\nmin_rate_gbps = %s\nexpected_active_ports = %d\n",
				strconv.Quote(ll), tomlFloat(l.min), l.active)
		}
	}
	return b.String(), nil
}

// describe writes the comment lines of one device and its ports.
func describe(b *strings.Builder, h HCA, note string, exclude []string) {
	fmt.Fprintf(b, "# %s %s fw %s%s\n", h.Name, orDash(h.PCIAddr), orDash(h.FW), note)
	for _, p := range h.Ports {
		pnote := note
		if pnote == "" && Excluded(exclude, h.Name, p.Num) {
			pnote = " (excluded)"
		}
		fmt.Fprintf(b, "#   port %d: %s %s, %s, %s%s\n", p.Num, orDash(p.State), orDash(p.PhysState),
			orDash(p.RateText), orDash(p.LinkLayer), pnote)
	}
}

// layerRates gathers the active ports of one link layer by rate.
type layerRates struct {
	active int
	min    float64
	rates  map[string][]string // rate text -> ports
	top    float64
}

func (l *layerRates) add(port string, p Port) {
	l.active++
	if p.RateText == "" {
		return
	}
	if len(l.rates) == 0 || p.RateGbps < l.min {
		l.min = p.RateGbps
	}
	l.top = max(l.top, p.RateGbps)
	l.rates[p.RateText] = append(l.rates[p.RateText], port)
}

// warn writes a WARNING comment when the layer's active ports differ in
// rate: one port trained down at bring-up (2X instead of 4X) is pinned
// as the floor otherwise, and the degradation passes from then on.
func (l *layerRates) warn(b *strings.Builder, ll string) {
	if len(l.rates) < 2 {
		return
	}
	texts := make([]string, 0, len(l.rates))
	for t := range l.rates {
		texts = append(texts, t)
	}
	slices.Sort(texts)
	var parts []string
	for _, t := range texts {
		parts = append(parts, fmt.Sprintf("%s on %s", t, strings.Join(l.rates[t], " ")))
	}
	fmt.Fprintf(b, "# WARNING: %s ports differ in rate: %s. min_rate_gbps = %s passes them all;\n"+
		"#   if the slower ones are degraded links, fix them before pasting, or pin %s.\n",
		orDash(ll), strings.Join(parts, "; "), tomlFloat(l.min), tomlFloat(l.top))
}

// onlyKey is the one link layer the node's ports have, or "".
func onlyKey(layers map[string]*layerRates) string {
	set := map[string]bool{}
	for k := range layers {
		set[k] = true
	}
	return only(set)
}

// only returns the one value a set holds, or "" when it holds several (or
// only unreadable ones): such a value cannot be pinned.
func only(set map[string]bool) string {
	if len(set) != 1 {
		return ""
	}
	for v := range set {
		if printableValue(v) && !strings.ContainsAny(v, `"\`) {
			return v
		}
	}
	return ""
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return printable(s)
}

// tomlFloat writes a float TOML reads back as one: "400.0", not "400".
func tomlFloat(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

func tomlStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
