package healthcheck

import (
	"github.com/gpuhc/gpuhc/internal/catalog"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/runenv"
)

// checkEnv gives the checks the real NVML library and /dev/kmsg, or, with
// --simulate, one of NVIDIA's simulated servers with its faults (shared
// with gpuhc-prolog and gpuhc-epilog in runenv).
func checkEnv(cfg config.Config, o options) (catalog.Env, error) {
	return runenv.Checks(cfg, o.Simulate, o.Inject, cfg.Policy.DryRun)
}
