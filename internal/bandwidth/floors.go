package bandwidth

import (
	"fmt"
	"path"
	"strings"

	"github.com/gpuhc/gpuhc/internal/config"
)

// model is a GPU's floors as the configuration gives them for its CUDA
// device name.
type model struct {
	name  string // CUDA device name, "NVIDIA H100 80GB HBM3"
	floor config.BandwidthFloor
	known bool // some floor table matched the name
}

// floors are the configured floor tables, or the built-in ones when the
// configuration lists none.
func floors(c config.Bandwidth) []config.BandwidthFloor {
	if len(c.Floor) == 0 {
		return config.DefaultBandwidthFloors()
	}
	return c.Floor
}

// modelFor picks the first floor table whose glob matches the CUDA device
// name. Globs were validated with the configuration; one that does not
// compile simply matches nothing.
func modelFor(floors []config.BandwidthFloor, name string) model {
	for _, f := range floors {
		if ok, err := path.Match(f.Model, name); err == nil && ok {
			return model{name: name, floor: f, known: true}
		}
	}
	return model{name: name}
}

// short is the model as a FAIL names it: without the vendor prefix.
func (m model) short() string {
	s := strings.TrimSpace(strings.TrimPrefix(m.name, "NVIDIA "))
	if s == "" {
		return "unknown model"
	}
	return printable(s)
}

// floorOf is the floor for one kind of figure, 0 when none. Tools' kinds
// share the in-process floors: nvbandwidth measures the same copies.
func (m model) floorOf(kind string) float64 {
	if !m.known {
		return 0
	}
	switch kind {
	case KindH2D, KindNVBandwidthH2D:
		return m.floor.H2DGBps
	case KindD2H, KindNVBandwidthD2H:
		return m.floor.D2HGBps
	case KindD2D, KindNVBandwidthD2D:
		return m.floor.D2DGBps
	case KindP2P, KindNVBandwidthP2P:
		return m.floor.P2PGBps
	}
	return 0
}

// noFloor says why a figure of this kind gets no verdict.
func (m model) noFloor(kind string) string {
	if !m.known {
		name := m.name
		if name == "" {
			name = "an unnamed GPU"
		}
		return "no floor for " + printable(name)
	}
	return fmt.Sprintf("no %s floor for %s", kindLabel(kind), m.short())
}

// kindLabel names a GPU figure's kind in messages.
func kindLabel(kind string) string {
	switch kind {
	case KindH2D, KindNVBandwidthH2D:
		return "H2D"
	case KindD2H, KindNVBandwidthD2H:
		return "D2H"
	case KindD2D, KindNVBandwidthD2D:
		return "D2D"
	case KindP2P, KindNVBandwidthP2P:
		return "P2P"
	}
	return kind
}

// judge builds the verdict input for a GPU figure.
func (m model) judge(component string, kind, label string, value float64) judged {
	return judged{
		component: component, kind: kind, label: label, unit: "GB/s", value: value,
		floor: m.floorOf(kind), model: m.short(), noFloor: m.noFloor(kind),
	}
}
