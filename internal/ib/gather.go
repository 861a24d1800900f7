package ib

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// Gather is one run's scan of the RDMA devices, shared by every check
// that needs them (ib.port, ib.counters, ib.gdr, topology,
// fabric.manager) and by --print-inventory: the first caller scans, every
// later one gets the same Devices and error. The scan reads each
// ConnectX function's VPD, a slow config-space read byte by byte, and
// would otherwise be repeated by each of them.
//
// A scan cut short by its caller's context is not kept: another check,
// with time left, scans again rather than inheriting an "interrupted"
// that was never about the devices. Any other error is the run's answer
// and reaches every caller.
//
// A Gather is safe for concurrent use; the zero value is not usable.
type Gather struct {
	scan func(context.Context) (Devices, error)

	mu   sync.Mutex
	busy chan struct{} // closed when the scan under way ends; nil when none is
	have bool          // devs and err are the run's answer
	devs Devices
	err  error
}

// NewGather returns the Gather of the RDMA devices under root (Scan).
func NewGather(root string) *Gather {
	return GatherWith(func(ctx context.Context) (Devices, error) { return Scan(ctx, root) })
}

// GatherWith returns a Gather whose one scan is scan: another source of
// devices, or a scan that tests count.
func GatherWith(scan func(context.Context) (Devices, error)) *Gather {
	return &Gather{scan: scan}
}

// Devices returns the run's RDMA devices, scanning them on the first
// call. A caller waiting for another's scan waits no longer than ctx.
// Each caller gets its own copy, so that none can change what the others
// judge.
func (g *Gather) Devices(ctx context.Context) (Devices, error) {
	for {
		g.mu.Lock()
		if g.have {
			d, err := g.devs.clone(), g.err
			g.mu.Unlock()
			return d, err
		}
		if err := ctx.Err(); err != nil {
			g.mu.Unlock()
			return Devices{}, fmt.Errorf("not scanned: %w", err)
		}
		if busy := g.busy; busy != nil {
			g.mu.Unlock()
			select {
			case <-busy:
				continue // kept, or cut short: look again
			case <-ctx.Done():
				return Devices{}, fmt.Errorf("still being scanned for another check: %w", ctx.Err())
			}
		}
		busy := make(chan struct{})
		g.busy = busy
		g.mu.Unlock()
		return g.run(ctx, busy)
	}
}

// run is the scan itself, by the caller that found none under way. busy
// is closed however the scan ends, a panic included, so that no waiter
// is left to its timeout.
func (g *Gather) run(ctx context.Context, busy chan struct{}) (Devices, error) {
	defer func() {
		g.mu.Lock()
		g.busy = nil
		g.mu.Unlock()
		close(busy)
	}()
	d, err := g.scan(ctx)
	if err == nil || ctx.Err() == nil {
		g.mu.Lock()
		g.have, g.devs, g.err = true, d, err
		g.mu.Unlock()
	}
	return d.clone(), err
}

// clone copies the slices a consumer might sort or trim.
func (d Devices) clone() Devices {
	return Devices{HCAs: cloneHCAs(d.HCAs), SwitchMgmt: cloneHCAs(d.SwitchMgmt), VPDErrs: slices.Clone(d.VPDErrs)}
}

func cloneHCAs(hs []HCA) []HCA {
	if hs == nil {
		return nil
	}
	out := make([]HCA, len(hs))
	for i, h := range hs {
		h.Ports = slices.Clone(h.Ports)
		for j := range h.Ports {
			h.Ports[j].Netdevs = slices.Clone(h.Ports[j].Netdevs)
		}
		out[i] = h
	}
	return out
}
