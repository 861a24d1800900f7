package ib

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Fragment describes the node for bring-up: a [checks.ib.port] table of
// the values this node satisfies now (with exclude applied, virtual
// devices left out as ib.port leaves them out), and a comment per HCA. Pasted into a [[host]] section for nodes of this kind, it turns
// ib.port from reporting into requiring: fewer HCAs or active ports, a
// slower link, another link layer or firmware then FAIL. A node without
// RDMA devices gets expected_hcas = 0.
func Fragment(ctx context.Context, root string, exclude []string) (string, error) {
	all, err := Discover(ctx, root)
	if err != nil {
		return "", fmt.Errorf("inventory of RDMA devices: %w", err)
	}
	hcas, _ := physical(included(all, exclude))
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
		fmt.Fprintf(&b, "# %s %s fw %s%s\n", h.Name, orDash(h.PCIAddr), orDash(h.FW), note)
		for _, p := range h.Ports {
			pnote := note
			if pnote == "" && Excluded(exclude, h.Name, p.Num) {
				pnote = " (excluded)"
			}
			fmt.Fprintf(&b, "#   port %d: %s %s, %s, %s%s\n", p.Num, orDash(p.State), orDash(p.PhysState),
				orDash(p.RateText), orDash(p.LinkLayer), pnote)
		}
	}

	active := 0
	var inactive []string
	minRate := 0.0
	layers, fws := map[string]bool{}, map[string]bool{}
	for _, h := range hcas {
		fws[h.FW] = true
		for _, p := range h.Ports {
			layers[p.LinkLayer] = true
			if !isActive(p) {
				inactive = append(inactive, portName(h.Name, p.Num))
				continue
			}
			active++
			if p.RateText != "" && (minRate == 0 || p.RateGbps < minRate) {
				minRate = p.RateGbps
			}
		}
	}
	b.WriteString("[checks.ib.port]\n")
	fmt.Fprintf(&b, "expected_hcas = %d\n", len(hcas))
	fmt.Fprintf(&b, "expected_active_ports = %d\n", active)
	fmt.Fprintf(&b, "min_rate_gbps = %s\n", tomlFloat(minRate))
	fmt.Fprintf(&b, "link_layer = %s\n", strconv.Quote(only(layers)))
	fmt.Fprintf(&b, "firmware = %s\n", strconv.Quote(only(fws)))
	if len(inactive) == 0 {
		b.WriteString("inactive = \"fail\"\n")
	} else {
		fmt.Fprintf(&b, "# Not ACTIVE: %s. Exclude the unused ones, then set inactive = \"fail\".\n", strings.Join(inactive, ", "))
		b.WriteString("inactive = \"warn\"\n")
	}
	return b.String(), nil
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
