package healthcheck

import (
	"fmt"
	"time"

	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/slurmconf"
)

// limit is the time slurmd allows the health check and where that figure
// came from. Sources, in order: [slurm] health_check_timeout; slurm.conf
// or the configless cache under cfg.Root (slurmd does not pass SLURM_CONF
// to HealthCheckProgram, so the standard paths are read); 60 s, the
// default of 26.05 and the fixed kill of 22.05 and 24.11.
type limit struct {
	d      time.Duration
	source string
	note   string
}

func (p Program) limit(cfg config.Config) limit {
	if d := cfg.Slurm.HealthCheckTimeout.Duration; d > 0 {
		return limit{d: d, source: "[slurm] health_check_timeout"}
	}
	paths := p.SlurmConf
	if paths == nil {
		paths = slurmconf.Paths
	}
	l := slurmconf.Find(cfg.Root, paths)
	return limit{d: time.Duration(l.Seconds) * time.Second, source: l.Source, note: l.Note}
}

func (l limit) String() string {
	return fmt.Sprintf("HealthCheckTimeout %s (%s)", l.d, l.source)
}

// budget fits the run inside the limit, clamping the deadline (and with
// it every per-check limit, which the catalog caps at the deadline).
func (p Program) budget(cfg *config.Config) (config.Budget, limit, string) {
	l := p.limit(*cfg)
	b, clamped := config.Fit(l.d, cfg.Deadline.Duration)
	cfg.Deadline.Duration = b.Deadline
	return b, l, clamped
}
