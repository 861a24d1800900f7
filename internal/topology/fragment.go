package topology

import (
	"context"
	"fmt"
	"strings"

	"github.com/gpuhc/gpuhc/internal/ib"
	"github.com/gpuhc/gpuhc/internal/pcibus"
)

// Fragment writes the [checks.topology] section that pins every GPU to
// its current nearest active HCA, for bring-up (gpuhc-healthcheck
// --print-inventory): once a node is known good, the pins catch a later
// change of pairing. Each pin carries a comment naming the relation, so
// that a bad pairing (across sockets) is seen before it is pinned. devs
// is the run's scan of the RDMA devices (the ib fragment's too).
func Fragment(ctx context.Context, root string, devs *ib.Gather, exclude []string, gpus func(context.Context) ([]GPU, error)) (string, error) {
	if gpus == nil {
		gpus = FromBus(pcibus.NewGather(root))
	}
	s, err := scan(ctx, root, devs, exclude, gpus)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("[checks.topology]\n")
	if s.skip != "" {
		fmt.Fprintf(&b, "# %s: nothing to pin.\npairs = []\n", s.skip)
		return b.String(), nil
	}
	b.WriteString("# Each GPU's nearest active HCA now.\npairs = [\n")
	for _, g := range s.gpus {
		best := g.best()
		switch {
		case g.dev.err != nil:
			fmt.Fprintf(&b, "  # %s %s not pinned: %s\n", printable(g.Component), g.PCIAddr, printable(g.dev.err.Error()))
		case best == nil:
			fmt.Fprintf(&b, "  # %s %s not pinned: no active HCA\n", printable(g.Component), g.PCIAddr)
		default:
			fmt.Fprintf(&b, "  %q, # %s: %s\n", g.PCIAddr+"="+best.hca.name, printable(g.Component), best.short())
		}
	}
	b.WriteString("]\n")
	return b.String(), nil
}
