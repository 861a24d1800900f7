package healthcheck

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/policy"
	"github.com/gpuhc/gpuhc/internal/remedy"
	"github.com/gpuhc/gpuhc/internal/runenv"
	"github.com/gpuhc/gpuhc/internal/slurm"
	"github.com/gpuhc/gpuhc/internal/statefile"
	"github.com/gpuhc/gpuhc/internal/xid"
)

// remedyEngine is the node's remediation engine (docs/remediation.md).
func (p Program) remedyEngine(node string, cfg config.Config, ctl remedy.Controller) remedy.Engine {
	return remedy.Engine{
		Node: node, Cfg: cfg.Remediate, DryRun: cfg.Policy.DryRun, Ctl: ctl, BootID: p.bootID(cfg),
		Dir: statefile.Dir{Path: cfg.StateDir, ReadOnly: cfg.Policy.DryRun}, Now: p.Clock,
	}
}

// remediate runs before the checks, on a node gpuhc drained: it carries
// out the drain's suggested action when everything allows it, so that
// this run's checks judge the result. A healthy node returns at once,
// having read only the policy state (no Slurm call). Its time comes out
// of the checks' deadline, which counts from start.
func (p Program) remediate(log *logrus.Entry, node string, cfg config.Config, simulated bool, start time.Time) {
	if !cfg.Remediate.Enabled {
		return
	}
	store := policy.NewStore(cfg.StateDir, node)
	st, err := store.Load()
	if err != nil || st.Drained == nil {
		return
	}
	ctl, err := slurm.New(cfg.Slurm, slurm.WithLogger(log), slurm.WithVersionCache(slurm.VersionCacheFile(cfg.StateDir), cfg.Policy.DryRun))
	if err != nil {
		log.WithError(err).Error("remediation: node control")
		return
	}
	// A reset's own limit plus the Slurm calls around it; the checks keep
	// at least a quarter of the deadline.
	end := start.Add(min(cfg.Remediate.ResetTimeout.Duration+3*cfg.Slurm.Timeout.Duration, cfg.Deadline.Duration*3/4))
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	prev := st.Clone()
	eng := p.remedyEngine(node, cfg, ctl)
	eng.Sticky = stickyChecks(checksDir(cfg, simulated))
	res, err := eng.Before(ctx, &st)
	if res.Outcome.Kind != remedy.Nothing {
		fmt.Fprintf(p.Stdout, "remediate: %s: %s (%s)\n", res.Outcome.Kind, res.Outcome.Detail, ctl.Backend())
		log.WithField("remediation", res.Outcome.Kind).Info(res.Outcome.Detail)
	}
	if err != nil {
		log.WithError(err).Error("remediation")
	}
	if cfg.Policy.DryRun || cfg.Remediate.DryRun {
		return
	}
	if err := (events.Log{Path: cfg.Events.File}).Append(ctx, res.Events...); err != nil {
		log.WithError(err).Error("event log")
	}
	if !st.Equal(prev) {
		if err := store.Save(st); err != nil {
			log.WithError(err).Error("remediation: policy state not saved; the next run adopts the reason it finds")
		}
	}
}

// stickyChecks are the checks whose FAIL outlives a GPU reset
// (remedy.Engine.Sticky): the XID check's record of a reset GPU is
// cleared, as its documentation tells an admin to; the host kernel and
// SXid rules keep theirs for the boot, so a reset is never tried for them.
func stickyChecks(dir statefile.Dir) map[string]remedy.Clearer {
	return map[string]remedy.Clearer{
		"gpu.xid":     func(pcis []string) error { return xid.ClearAfterReset(dir, pcis) },
		"fabric.sxid": nil,
		"host.kernel": nil,
	}
}

// checksDir is where the checks keep their records: a simulated run's
// apart from the real GPUs' (runenv.SimulatedStateDir).
func checksDir(cfg config.Config, simulated bool) statefile.Dir {
	if simulated {
		return statefile.Dir{Path: runenv.SimulatedStateDir(cfg.StateDir)}
	}
	return statefile.Dir{Path: cfg.StateDir}
}

// judgeRemediation hands the run's results to remediation once the policy
// has applied them, with the drained GPU's model and the driver from the
// run's inventory (already taken: no NVML call waits here).
func (p Program) judgeRemediation(log *logrus.Entry, node string, cfg config.Config, results []check.Result, st policy.State) {
	if !cfg.Remediate.Enabled || st.Drained == nil {
		return
	}
	eng := p.remedyEngine(node, cfg, nil)
	if err := eng.After(results, st, p.part(st.Drained)); err != nil {
		log.WithError(err).Error("remediation record")
	}
}

// part is the model and driver of the drained GPU, when the run's GPU
// inventory has them.
func (p Program) part(d *policy.Drain) remedy.Part {
	if p.gpus == nil {
		return remedy.Part{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	inv, err := p.gpus.Inventory(ctx)
	if err != nil || inv == nil {
		return remedy.Part{}
	}
	out := remedy.Part{Driver: inv.Driver}
	for _, g := range inv.GPUs {
		if g.Component() == d.Component || (d.Serial != "" && g.Serial == d.Serial) {
			out.Model = g.Name
		}
	}
	return out
}
