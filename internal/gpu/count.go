package gpu

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

// count is gpu.count: NVML's device count against the node's expected
// count, and every GPU the PCI bus shows but NVML does not, by address.
type count struct {
	n *Node
	c config.GPUCount
}

// NewCount builds gpu.count.
func NewCount(n *Node, c config.GPUCount) check.Check { return count{n, c} }

func (count) Name() string { return "gpu.count" }

func (c count) Run(ctx context.Context) []check.Result {
	ctx, cancel := check.FinishEarly(ctx)
	defer cancel()
	start := time.Now()
	inv, err := c.n.Inventory(ctx)
	if err != nil {
		return []check.Result{NodeResult(err, start)}
	}
	unseen, hung := c.unseen(ctx, inv)
	if hung {
		return []check.Result{Hung("host", check.IDs{}, start)}
	}
	return append(missingResults(inv, unseen), c.total(inv))
}

// total compares NVML's count (lost GPUs included: NVML still counts them)
// with the expected one.
func (c count) total(inv *Inventory) check.Result {
	seen := len(inv.GPUs) + len(inv.Lost)
	host := check.Result{Component: "host"}
	want := c.c.Expected
	if want < 0 {
		switch {
		case inv.BusErr != nil:
			host.Status, host.Message = check.Error, fmt.Sprintf("NVML sees %s; cannot count the PCI bus: %v", gpus(seen), inv.BusErr)
			return host
		case len(inv.OnBus) == 0:
			host.Status, host.Message = check.OK, fmt.Sprintf("NVML sees %s; the PCI bus lists none to compare with", gpus(seen))
			return host
		}
		want = len(inv.OnBus)
	}
	host.Message = fmt.Sprintf("NVML sees %s, expected %d", gpus(seen), want)
	switch {
	case seen < want:
		host.Status, host.Action = check.Fail, check.ActionReboot
	case seen > want:
		// More GPUs than configured hurts no job: a wrong setting, not a
		// sick node.
		host.Status = check.Warn
	default:
		host.Status = check.OK
	}
	return host
}

// unseen lists the bus addresses that no NVML GPU, lost ones included,
// accounts for.
func (c count) unseen(ctx context.Context, inv *Inventory) ([]string, bool) {
	known := map[string]bool{}
	for _, g := range inv.GPUs {
		known[g.PCIBusID] = true
	}
	for _, i := range lostIndexes(inv) {
		g, hung := recoverLost(ctx, c.n, inv, i)
		if hung {
			return nil, true
		}
		known[g.PCIBusID] = true
	}
	var out []string
	for _, a := range inv.OnBus {
		if !known[a] {
			out = append(out, a)
		}
	}
	return out, false
}

// missingResults names each GPU on the bus that NVML does not see. When
// lost GPUs of unknown address are among them, which ones NVML misses
// cannot be told apart, and one result names the candidates.
func missingResults(inv *Inventory, unseen []string) []check.Result {
	missing := len(inv.OnBus) - len(inv.GPUs) - len(inv.Lost)
	if missing <= 0 || len(unseen) == 0 {
		return nil
	}
	if missing < len(unseen) {
		// Component "pci", not "host": the node-wide count is "host".
		return []check.Result{{Component: "pci", Status: check.Fail, Action: check.ActionReboot,
			Message: fmt.Sprintf("%s on the PCI bus but not seen by NVML, %s %s", gpus(missing), oneOf(missing), strings.Join(unseen, ", "))}}
	}
	var out []check.Result
	for _, a := range unseen {
		out = append(out, check.Result{Component: a, IDs: check.IDs{PCIBusID: a}, Status: check.Fail,
			Action: check.ActionReboot, Message: a + " on the PCI bus but not seen by NVML (fallen off the bus?)"})
	}
	return out
}

func gpus(n int) string {
	if n == 1 {
		return "1 GPU"
	}
	return fmt.Sprintf("%d GPUs", n)
}

func oneOf(n int) string {
	if n == 1 {
		return "one of"
	}
	return "among"
}
