package remedy

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gpuhc/gpuhc/internal/pause"
	"github.com/gpuhc/gpuhc/internal/policy"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

// budget says which budget holds a remediation back now ("" when none):
// the node's own in 24 hours, then the cluster's at once. The cluster
// count lists the nodes, so it comes last and only when the rest allow.
//
// The words are stable (no live counts): the reason says them once.
// A node list that cannot be read holds back too: not remediating is the
// safe side, and the next run tries again.
func (e Engine) budget(ctx context.Context, rec *record, now time.Time) string {
	if rec.today(now) >= e.Cfg.MaxPerDay {
		return fmt.Sprintf("daily budget spent (max_per_day %d)", e.Cfg.MaxPerDay)
	}
	nodes, err := e.Ctl.Nodes(ctx)
	if err != nil {
		return "cluster budget unknown (node list: " + err.Error() + ")"
	}
	others, total := remediating(nodes, e.Node)
	if limit := e.clusterLimit(total); others+1 > limit {
		return fmt.Sprintf("cluster budget spent (%d at once)", limit)
	}
	return ""
}

// clusterLimit is how many nodes may remediate at once in a cluster of
// total nodes: max(1, min(max_nodes, floor(max_fraction * total))), a
// limit of 0 left out, as the storm guard counts.
func (e Engine) clusterLimit(total int) int {
	limit := math.MaxInt
	if e.Cfg.MaxNodes > 0 {
		limit = e.Cfg.MaxNodes
	}
	if e.Cfg.MaxFraction > 0 {
		limit = min(limit, int(math.Floor(e.Cfg.MaxFraction*float64(total)+1e-9)))
	}
	return max(1, limit)
}

// remediating counts the nodes other than ours with a gpuhc remediation
// in progress: a reset-gpu or reboot reason of ours, or a reboot pending
// under a gpuhc reason.
func remediating(nodes []slurm.Node, self string) (others int, total int) {
	for _, n := range nodes {
		if n.Name == "" {
			continue
		}
		total++
		if n.Name == self || !n.Drained() || !policy.Owned(n.Reason) {
			continue
		}
		if policy.Remediating(n.Reason) || n.HasPrefix("REBOOT") {
			others++
		}
	}
	return others, total
}

// hold leaves the node drained, its reason saying once which budget
// holds the remediation back; a later run tries again.
func (e Engine) hold(ctx context.Context, st *policy.State, rec *record, why string) (Result, error) {
	out := Result{Outcome: Outcome{Held, "remediation held back: " + why}}
	if e.dry() || rec.Held == why {
		return out, nil
	}
	d := st.Drained
	reason := policy.Sanitize(fmt.Sprintf("%s %s: %s: %s%s%s]", policy.Prefix, d.Check, policy.Component(named(d)), message(d), heldMark, why))
	if err := e.setReason(ctx, st, reason); err != nil {
		return out, err
	}
	rec.Held = why
	return out, nil
}

// settle is how long recount waits before it lists the nodes: slurmd
// starts the health check on every node at once, and nodes that start
// remediating together must all show their reasons before any counts.
const settle = time.Second

// recount lists the nodes again once our remediation reason is set, and
// backs off when the cluster is now over its limit and we are not among
// the first nodes by name: nodes that counted at the same moment all saw
// room, and the name order lets exactly the limit of them go on, the same
// ones whichever counts first ("" when we go on). A list that fails lets
// us go on: the first count allowed it.
func (e Engine) recount(ctx context.Context) string {
	if e.Cfg.MaxFraction == 0 && e.Cfg.MaxNodes == 0 {
		return ""
	}
	sleep := e.Sleep
	if sleep == nil {
		sleep = pause.For
	}
	if err := sleep(ctx, settle); err != nil {
		return ""
	}
	nodes, err := e.Ctl.Nodes(ctx)
	if err != nil {
		return ""
	}
	var names []string
	for _, n := range nodes {
		if n.Name == e.Node || (n.Drained() && policy.Owned(n.Reason) && (policy.Remediating(n.Reason) || n.HasPrefix("REBOOT"))) {
			names = append(names, n.Name)
		}
	}
	_, total := remediating(nodes, e.Node)
	limit := e.clusterLimit(total)
	slices.Sort(names)
	if i := slices.Index(names, e.Node); i >= limit {
		return fmt.Sprintf("cluster budget spent (%d at once)", limit)
	}
	return ""
}
