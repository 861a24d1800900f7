package topology

import (
	"cmp"
	"fmt"
)

// relation is how far an HCA is from a GPU, nearest first.
type relation int

const (
	// relSwitch: their nearest common ancestor is below the root port, a
	// PCIe switch (nvidia-smi topo's PIX/PXB).
	relSwitch relation = iota
	// relComplex: the same root complex, not the same switch (PHB).
	relComplex
	// relNUMA: another root complex on the same NUMA node (NODE).
	relNUMA
	// relSocket: another NUMA node of the same CPU package, as sub-NUMA
	// clustering (AMD NPS2/NPS4, Intel SNC) makes them: traffic stays on
	// the socket's own fabric, so it is nearer than across sockets.
	relSocket
	// relUnknown: another root complex, and a NUMA node is unknown.
	relUnknown
	// relOtherNode: another NUMA node whose socket cannot be told; it may
	// be the GPU's own, so it ranks before relCross and never FAILs.
	relOtherNode
	// relCross: another NUMA node on another socket (SYS).
	relCross
)

// link is one GPU-HCA relation.
type link struct {
	hca  *hcaInfo
	rel  relation
	gpuN int // NUMA nodes, for messages; -1 unknown
	hcaN int
	// depth is how many PCI devices below the host bridge both share;
	// it orders HCAs of the same relation (a deeper common switch wins).
	depth int
}

// relate places an HCA relative to a GPU. The NUMA nodes are needed only
// for devices on different root complexes, so a garbage numa_node costs a
// verdict only where it would decide one.
func relate(g, h device, sk *sockets) (link, error) {
	l := link{gpuN: g.numa, hcaN: h.numa}
	if g.err != nil {
		return l, g.err
	}
	if h.err != nil {
		return l, h.err
	}
	if g.complex == h.complex {
		for l.depth < len(g.chain) && l.depth < len(h.chain) && g.chain[l.depth] == h.chain[l.depth] {
			l.depth++
		}
		// Sharing the root port and a bridge below it is sharing a switch.
		if l.depth >= 2 {
			l.rel = relSwitch
		} else {
			l.rel = relComplex
		}
		return l, nil
	}
	if g.numaErr != nil {
		return l, g.numaErr
	}
	if h.numaErr != nil {
		return l, h.numaErr
	}
	switch {
	case g.numa < 0 || h.numa < 0:
		l.rel = relUnknown
	case g.numa == h.numa:
		l.rel = relNUMA
	default:
		switch sk.relate(g.numa, h.numa) {
		case socketSame:
			l.rel = relSocket
		case socketOther:
			l.rel = relCross
		default:
			l.rel = relOtherNode
		}
	}
	return l, nil
}

// nearer orders links: relation, then the deeper common ancestor, then name.
func nearer(a, b link) int {
	if c := cmp.Compare(a.rel, b.rel); c != 0 {
		return c
	}
	if c := cmp.Compare(b.depth, a.depth); c != 0 {
		return c
	}
	return cmp.Compare(a.hca.name, b.hca.name)
}

// asNear reports whether a is as near as b (a tie, or nearer).
func asNear(a, b link) bool {
	return a.rel < b.rel || (a.rel == b.rel && a.depth >= b.depth)
}

// where says where the HCA is, for "nearest active HCA mlx5_2 is <where>".
func (l link) where() string {
	switch l.rel {
	case relSwitch:
		return "on the same PCIe switch"
	case relComplex:
		return "on the same root complex"
	case relNUMA:
		return fmt.Sprintf("on the same NUMA node (%d)", l.gpuN)
	case relUnknown:
		return fmt.Sprintf("on another root complex, NUMA unknown (gpu numa %d, HCA numa %d)", l.gpuN, l.hcaN)
	case relOtherNode:
		return fmt.Sprintf("on another NUMA node, socket unknown (gpu numa %d, HCA numa %d)", l.gpuN, l.hcaN)
	}
	return fmt.Sprintf("%s (gpu numa %d, HCA numa %d)", l.short(), l.gpuN, l.hcaN)
}

// short names the relation in a bring-up comment.
func (l link) short() string {
	switch l.rel {
	case relSwitch:
		return "same PCIe switch"
	case relComplex:
		return "same root complex"
	case relNUMA:
		return "same NUMA node"
	case relSocket:
		return "across NUMA nodes of one socket"
	case relUnknown:
		return "NUMA unknown"
	case relOtherNode:
		return "another NUMA node, socket unknown"
	}
	return "across sockets"
}

// farNode reports a relation to another NUMA node, on another socket or
// perhaps so: what the numa rule and the funnel judge.
func (l link) farNode() bool { return l.rel == relOtherNode || l.rel == relCross }
