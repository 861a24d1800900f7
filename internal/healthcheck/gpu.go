package healthcheck

import (
	"path/filepath"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/catalog"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
	"github.com/gpuhc/gpuhc/internal/statefile"
	"github.com/gpuhc/gpuhc/internal/xid"
)

// checkEnv gives the checks the real NVML library and /dev/kmsg, or, with
// --simulate, one of NVIDIA's simulated servers with its faults. Nothing
// is loaded here: NVML is opened by the first GPU check that asks.
func checkEnv(cfg config.Config, o options) (catalog.Env, error) {
	st := statefile.Dir{Path: cfg.StateDir, ReadOnly: cfg.Policy.DryRun}
	g := cfg.Checks.GPU
	if o.simulate == "" {
		return catalog.Env{
			GPU:   gpu.NewNode(nvml.New(), cfg.Root, g.Count.Expected, ""),
			Kmsg:  xid.KmsgSource(cfg.Root, g.XID.Kmsg),
			State: st,
		}, nil
	}
	m, err := sim.Build(o.simulate, o.inject)
	if err != nil {
		return catalog.Env{}, err
	}
	// A fire drill's counters and kernel-log cursor must not mix with the
	// real GPUs' (a simulated boot id would reset the real cursor).
	st.Path = filepath.Join(cfg.StateDir, "simulated")
	return catalog.Env{
		GPU:   gpu.NewNode(m.Server, cfg.Root, g.Count.Expected, o.simulate, gpu.WithBus(m.OnBus)),
		Kmsg:  xid.SimulatedSource(m.Kmsg, m.BootID, m.KmsgWatchedFrom()),
		State: st,
	}, nil
}
