// Package sim builds simulated GPU servers for --simulate and the tests:
// NVIDIA's own mock DGX servers (go-nvml pkg/nvml/mock/dgx*), with every
// NVML call the gpu.* checks make answered by realistic healthy values,
// and faults injected by --inject specs such as "gpu3:xid=79".
//
// Each area of the checks owns one part (one file here): the healthy
// defaults for its NVML calls and the faults it knows. The parts are
// listed explicitly in parts, in the order they are applied.
package sim

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuhc/gpuhc/internal/sysread"
)

// Machine is one simulated node.
type Machine struct {
	Model   Model
	Server  *server.Server
	Devices []*server.Device
	// Kmsg holds the kernel log records the simulated node has, in
	// /dev/kmsg's format ("3,1042,5123456,-;NVRM: Xid (PCI:0000:4e:00): 79, ...").
	Kmsg []string
	// BootID is the simulated kernel's boot id.
	BootID string
}

// part is one area of the simulator.
type part struct {
	name string
	// defaults sets healthy answers on device i.
	defaults func(m *Machine, d *server.Device, i int)
	// faults maps an --inject key ("xid", "remap-pending") to what it does
	// to one device; value is "" for a flag such as "remap-pending".
	faults map[string]func(m *Machine, d *server.Device, i int, value string) error
}

// parts are applied in this order; later parts may rely on earlier ones.
var parts = []part{basePart, memoryPart, pciePart, thermalPart, powerPart, configPart, nvlinkPart, fabricPart, xidPart, processesPart, recoveryPart}

// Spec is one parsed --inject item: "gpu3:xid=79".
type Spec struct {
	GPU   int
	Key   string
	Value string
}

// ParseSpecs reads --inject values; each may hold several specs separated
// by commas.
//
// A value "@FILE" stands for the faults FILE lists (comma- or
// space-separated), read when the machine is built: a missing FILE lists
// none. It is the simulated state a test bed's stand-ins change between
// runs, and within one (a fake nvidia-smi's reset clears the fault before
// the checks see the GPUs).
func ParseSpecs(values []string) ([]Spec, error) {
	var out []Spec
	for _, v := range values {
		if file, ok := strings.CutPrefix(v, "@"); ok {
			listed, err := specFile(file)
			if err != nil {
				return nil, err
			}
			v = listed
		}
		for _, item := range strings.Split(v, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			s, err := parseSpec(item)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// maxSpecFile caps an @FILE of faults.
const maxSpecFile = 64 << 10

func specFile(path string) (string, error) {
	b, err := sysread.Regular(path, maxSpecFile)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("inject @%s: %w", path, err)
	}
	return strings.Join(strings.Fields(string(b)), ","), nil
}

func parseSpec(item string) (Spec, error) {
	target, fault, ok := strings.Cut(item, ":")
	idx, err := strconv.Atoi(strings.TrimPrefix(target, "gpu"))
	if !ok || !strings.HasPrefix(target, "gpu") || err != nil || idx < 0 {
		return Spec{}, fmt.Errorf("inject %q: want gpuN:fault[=value], e.g. gpu3:xid=79", item)
	}
	key, value, _ := strings.Cut(fault, "=")
	if key == "" {
		return Spec{}, fmt.Errorf("inject %q: no fault named", item)
	}
	return Spec{GPU: idx, Key: key, Value: value}, nil
}

// Build reads --inject values and builds the model's machine with them.
func Build(model string, inject []string) (*Machine, error) {
	specs, err := ParseSpecs(inject)
	if err != nil {
		return nil, err
	}
	return New(model, specs)
}

// New builds the model's machine, healthy, then applies specs.
func New(model string, specs []Spec) (*Machine, error) {
	mdl, ok := models[model]
	if !ok {
		return nil, fmt.Errorf("simulate %q: want one of %s", model, strings.Join(Models(), ", "))
	}
	m := &Machine{Model: mdl, Server: mdl.build(), BootID: "5e1a7ed0-0000-4000-8000-000000000001"}
	for i, d := range m.Server.Devices {
		sd := d.(*server.Device)
		m.Devices = append(m.Devices, sd)
		for _, p := range parts {
			if p.defaults != nil {
				p.defaults(m, sd, i)
			}
		}
	}
	for _, s := range specs {
		if err := m.inject(s); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Machine) inject(s Spec) error {
	if s.GPU >= len(m.Devices) {
		return fmt.Errorf("inject gpu%d:%s: %s has GPUs 0 to %d", s.GPU, s.Key, m.Model.Name, len(m.Devices)-1)
	}
	for _, p := range parts {
		if f, ok := p.faults[s.Key]; ok {
			if err := f(m, m.Devices[s.GPU], s.GPU, s.Value); err != nil {
				return fmt.Errorf("inject gpu%d:%s: %w", s.GPU, s.Key, err)
			}
			return nil
		}
	}
	return fmt.Errorf("inject gpu%d:%s: unknown fault; known: %s", s.GPU, s.Key, strings.Join(Faults(), ", "))
}

// Faults lists every --inject key.
func Faults() []string {
	var out []string
	for _, p := range parts {
		for k := range p.faults {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Models lists the --simulate names.
func Models() []string {
	var out []string
	for k := range models {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
