package healthcheck

import (
	"github.com/gpuhc/gpuhc/internal/bootid"
	"github.com/gpuhc/gpuhc/internal/catalog"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/runenv"
)

// checkEnv gives the checks the real NVML library and /dev/kmsg, or, with
// --simulate, one of NVIDIA's simulated servers with its faults (shared
// with gpuhc-prolog and gpuhc-epilog in runenv); with --kernel-log, the
// saved log in place of the kernel's.
func checkEnv(cfg config.Config, o options, boot *bootid.Once) (catalog.Env, error) {
	return runenv.World{Simulate: o.Simulate, Inject: o.Inject, KernelLog: o.KernelLog, ReadOnly: cfg.Policy.DryRun, Boot: boot}.Env(cfg)
}
