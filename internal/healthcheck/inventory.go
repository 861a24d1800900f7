package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/catalog"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/ib"
	"github.com/gpuhc/gpuhc/internal/pcibus"
	"github.com/gpuhc/gpuhc/internal/topology"
)

// inventoryWait bounds --print-inventory: NVML start plus a sysfs walk.
const inventoryWait = 30 * time.Second

// printInventory writes, for bring-up, the configuration a known-good node
// satisfies now: its GPU count, its HCAs and ports, and each GPU's nearest
// HCA. Pasted into gpuhc.toml (or a [[host]] section for nodes of this
// shape), it turns the checks from reporting into requiring. Nothing is
// judged, drained or saved.
func (p Program) printInventory(node string, cfg config.Config, o options) int {
	cfg.Policy.DryRun = true // the environment's state directory stays read-only
	env, err := checkEnv(cfg, o, nil)
	if err != nil {
		fmt.Fprintf(p.Stderr, "gpuhc-healthcheck: %v\n", err)
		return ExitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), inventoryWait)
	defer cancel()
	frag, err := inventory(ctx, cfg, env)
	if err != nil {
		fmt.Fprintf(p.Stderr, "gpuhc-healthcheck: inventory: %v\n", err)
		return ExitInternal
	}
	sim := ""
	if o.Simulate != "" {
		sim = fmt.Sprintf(" (GPUs simulated: %s)", o.Simulate)
	}
	fmt.Fprintf(p.Stdout, "# gpuhc inventory of %s at %s%s.\n", node, p.Clock().UTC().Format(time.RFC3339), sim)
	fmt.Fprintf(p.Stdout, "# Check it, then paste it into %s (or, as [host.checks...] tables,\n", config.DefaultPath)
	fmt.Fprintf(p.Stdout, "# into a [[host]] section matching the nodes of this shape; rename any\n")
	fmt.Fprintf(p.Stdout, "# [[checks.ib.port.group]] to [[host.checks.ib.port.group]] as well).\n\n%s", frag)
	return ExitHealthy
}

// inventory is the fragment itself: [checks.gpu.count], [checks.ib.port]
// and [checks.topology], each loadable as it stands.
func inventory(ctx context.Context, cfg config.Config, env catalog.Env) (string, error) {
	n := env.GPU
	var b strings.Builder
	pci := env.PCI
	if pci == nil {
		pci = pcibus.NewGather(cfg.Root)
	}
	gpus := topology.FromBus(pci)
	b.WriteString("[checks.gpu.count]\n")
	if n != nil {
		gpus = topology.FromNode(n)
		inv, err := n.Inventory(ctx)
		switch {
		case errors.Is(err, gpu.ErrNoGPUs):
			b.WriteString("expected = 0\n")
		case err != nil:
			fmt.Fprintf(&b, "# expected not written: NVML: %s\n", oneLine(err.Error()))
		default:
			fmt.Fprintf(&b, "# %s driver %s\nexpected = %d\n", gpuNames(inv), inv.Driver, len(inv.GPUs))
		}
	}
	// Both fragments describe one scan of the RDMA devices.
	devs := env.IB
	if devs == nil {
		devs = ib.NewGather(cfg.Root)
	}
	ibFrag, err := ib.Fragment(ctx, devs, cfg.Checks.IB.Exclude)
	if err != nil {
		return "", err
	}
	topoFrag, err := topology.Fragment(ctx, cfg.Root, devs, cfg.Checks.IB.Exclude, gpus)
	if err != nil {
		return "", fmt.Errorf("GPU/NIC pairing: %w", err)
	}
	fmt.Fprintf(&b, "\n%s\n%s", ibFrag, topoFrag)
	return b.String(), nil
}

// gpuNames summarises the models: "8 x NVIDIA H100 80GB HBM3".
func gpuNames(inv *gpu.Inventory) string {
	count := map[string]int{}
	var order []string
	for _, g := range inv.GPUs {
		if count[g.Name] == 0 {
			order = append(order, g.Name)
		}
		count[g.Name]++
	}
	var parts []string
	for _, name := range order {
		parts = append(parts, fmt.Sprintf("%d x %s", count[name], oneLine(name)))
	}
	if len(parts) == 0 {
		return "no GPUs listed by NVML,"
	}
	return strings.Join(parts, ", ") + ","
}

// oneLine keeps text from NVML or an error on one comment line.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}
