package topology

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/pcibus"
)

// FromNode lists the GPUs of the NVML inventory, with their IDs. A node
// without GPUs has none; NVML failing or hanging is an error (gpu.driver
// and the other gpu.* checks carry the verdict on that).
func FromNode(n *gpu.Node) func(context.Context) ([]GPU, error) {
	return func(ctx context.Context) ([]GPU, error) {
		inv, err := n.Inventory(ctx)
		if errors.Is(err, gpu.ErrNoGPUs) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("GPU inventory: %w", err)
		}
		out := make([]GPU, 0, len(inv.GPUs))
		for _, g := range inv.GPUs {
			out = append(out, GPU{Component: g.Component(), PCIAddr: g.PCIBusID, IDs: g.IDs()})
		}
		return out, nil
	}
}

// FromBus lists the NVIDIA GPUs on the run's PCI bus scan, named gpu0,
// gpu1, ... in bus order (NVML's default order), for nodes run without
// NVML.
func FromBus(pci *pcibus.Gather) func(context.Context) ([]GPU, error) {
	return func(ctx context.Context) ([]GPU, error) {
		b, err := pci.Bus(ctx)
		var addrs []string
		if err == nil {
			addrs, err = b.GPUs()
		}
		if err != nil {
			return nil, fmt.Errorf("list GPUs on the PCI bus: %w", err)
		}
		out := make([]GPU, 0, len(addrs))
		for i, a := range addrs {
			out = append(out, GPU{Component: fmt.Sprintf("gpu%d", i), PCIAddr: a, IDs: check.IDs{PCIBusID: a}})
		}
		return out, nil
	}
}
