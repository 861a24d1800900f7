package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/atomicfile"
	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/pause"
	"github.com/gpuhc/gpuhc/internal/slurm"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// The storm guard (docs/architecture.md#storm-guard). A bad config push or
// a hung shared filesystem makes every node fail at once; draining them all
// would take the cluster down for a fault that is not theirs. So before
// draining, the policy counts the other nodes already drained by gpuhc and
// refuses when the count has reached the limit.

// StormFileName is the guard's cache in the state directory.
const StormFileName = "storm.json"

// StormFile is the cache path for a state directory.
func StormFile(stateDir string) string { return filepath.Join(stateDir, StormFileName) }

// stormCount is what one node list showed, as cached in storm.json.
type stormCount struct {
	// Node is the node that counted; Drained excludes it.
	Node string `json:"node"`
	// Drained is how many other nodes carried DRAIN and a gpuhc reason.
	Drained int `json:"drained"`
	// Total is how many nodes the cluster has.
	Total int       `json:"total"`
	Time  time.Time `json:"time"`
}

// stormVerdict is the guard's decision on one drain.
type stormVerdict struct {
	count    stormCount
	limit    int
	suppress bool
	cached   bool // the count came from storm.json
}

// stormOn reports whether any limit is set; with none the guard lists
// nothing.
func (e Engine) stormOn() bool {
	return e.Policy.MaxDrainedFraction > 0 || e.Policy.MaxDrainedNodes > 0
}

// stormLimit is how many nodes gpuhc may hold drained at once in a cluster
// of total nodes: the tighter of the two limits, and never below one, so a
// small cluster can still drain its first failing node.
func stormLimit(fraction float64, nodes, total int) int {
	limit := math.MaxInt
	if nodes > 0 {
		limit = nodes
	}
	if fraction > 0 {
		// The epsilon keeps 0.1 × 30 at 3, not 2.9999….
		limit = min(limit, int(math.Floor(fraction*float64(total)+1e-9)))
	}
	return max(limit, 1)
}

// storm decides whether draining this node would exceed the limit. A
// cached count is only trusted to refuse: a count that would allow the
// drain is fetched afresh, since in a storm the count grows by the second
// and a stale one errs towards draining.
func (e Engine) storm(ctx context.Context, now time.Time) (stormVerdict, error) {
	if c, ok := e.cachedCount(now); ok {
		v := e.judge(c)
		if v.suppress {
			v.cached = true
			return v, nil
		}
	}
	if err := e.spread(ctx); err != nil {
		return stormVerdict{}, err
	}
	nodes, err := e.Ctl.Nodes(ctx)
	if err != nil {
		return stormVerdict{}, fmt.Errorf("list nodes: %w", err)
	}
	c := stormCount{Node: e.Node, Total: len(nodes), Time: now}
	for _, n := range nodes {
		if n.Name != e.Node && n.Drained() && Owned(n.Reason) {
			c.Drained++
		}
	}
	if c.Total == 0 {
		return stormVerdict{}, fmt.Errorf("list nodes: Slurm listed no nodes")
	}
	// A cache that cannot be written only costs the next run a list call;
	// an unwritable state directory is reported when the state is saved.
	_ = e.saveCount(c)
	return e.judge(c), nil
}

// CachedRefusal reports whether the storm guard's cached count, fresh
// (younger than storm_cache, this node's), shows the drain limit reached,
// so that it would refuse to drain for reason now; detail says so. It
// reads only storm.json, never Slurm: it is for a job run whose drain
// could not be made at all (Slurm unreachable), to decide whether its
// exit status may leave the drain to slurmd (see jobrun.Outcome.FailExit).
func (e Engine) CachedRefusal(reason string) (detail string, refuse bool) {
	if !e.stormOn() {
		return "", false
	}
	now := e.now()
	c, ok := e.cachedCount(now)
	if !ok {
		return "", false
	}
	v := e.judge(c)
	if !v.suppress {
		return "", false
	}
	v.cached = true
	return e.describe(v, reason, now), true
}

func (e Engine) judge(c stormCount) stormVerdict {
	limit := stormLimit(e.Policy.MaxDrainedFraction, e.Policy.MaxDrainedNodes, c.Total)
	return stormVerdict{count: c, limit: limit, suppress: c.Drained+1 > limit}
}

// describe is the outcome detail: "12 of 100 nodes already drained by
// gpuhc (limit 10%, at most 10 nodes); not draining: gpuhc: …".
func (e Engine) describe(v stormVerdict, reason string, now time.Time) string {
	var lim []string
	if f := e.Policy.MaxDrainedFraction; f > 0 {
		lim = append(lim, fmt.Sprintf("%.4g%%", f*100))
	}
	if n := e.Policy.MaxDrainedNodes; n > 0 {
		lim = append(lim, fmt.Sprintf("%d nodes", n))
	}
	unit := "nodes"
	if v.limit == 1 {
		unit = "node"
	}
	s := fmt.Sprintf("%d of %d nodes already drained by gpuhc (limit %s", v.count.Drained, v.count.Total, strings.Join(lim, " and "))
	if e.Policy.MaxDrainedFraction > 0 {
		// The fraction makes the number of nodes less obvious: spell it out.
		s += fmt.Sprintf(", at most %d %s", v.limit, unit)
	}
	s += ")"
	if v.cached {
		s += fmt.Sprintf(", counted %s ago", now.Sub(v.count.Time).Round(time.Second))
	}
	return s + "; not draining: " + reason
}

// cachedCount reads storm.json if it is this node's, younger than
// storm_cache and not from the future (a clock step back must not make a
// count live forever). Anything else, a broken file included, is a miss.
func (e Engine) cachedCount(now time.Time) (stormCount, bool) {
	ttl := e.Policy.StormCache.Duration
	if e.StormFile == "" || ttl <= 0 {
		return stormCount{}, false
	}
	b, err := sysread.Regular(e.StormFile, maxStateFile)
	if err != nil {
		return stormCount{}, false
	}
	var c stormCount
	if json.Unmarshal(b, &c) != nil || c.Node != e.Node || c.Total <= 0 || c.Drained < 0 {
		return stormCount{}, false
	}
	if age := now.Sub(c.Time); age < 0 || age >= ttl {
		return stormCount{}, false
	}
	return c, true
}

func (e Engine) saveCount(c stormCount) error {
	if e.StormFile == "" || e.Policy.StormCache.Duration <= 0 {
		return nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return atomicfile.Write(e.StormFile, append(b, '\n'), atomicfile.State(".storm-*.json"))
}

// spread waits a random part of storm_jitter, so that nodes whose health
// checks slurmd started together do not count the cluster at the same
// instant (and do not all list it from slurmctld at once).
func (e Engine) spread(ctx context.Context) error {
	max := e.Policy.StormJitter.Duration
	if max <= 0 {
		return nil
	}
	r := rand.Float64
	if e.Jitter != nil {
		r = e.Jitter
	}
	return e.wait(ctx, time.Duration(r()*float64(max)))
}

// wait sleeps d (through Engine.Sleep when set) or until ctx ends.
func (e Engine) wait(ctx context.Context, d time.Duration) error {
	if e.Sleep != nil {
		return e.Sleep(ctx, d)
	}
	if err := pause.For(ctx, d); err != nil {
		return fmt.Errorf("storm guard: %w", err)
	}
	return nil
}

// clockSkew is how far the controller's clock may be behind ours when the
// recount waits for the second of our drain to end (NTP keeps clocks
// within milliseconds; on the test beds they are the same clock).
const clockSkew = 250 * time.Millisecond

// settle waits until slurmctld's clock has left the second in which it
// stamped our drain. slurmctld keeps reason times in whole seconds
// (verified on 24.11 and 26.05: ReasonTime, reason_changed_at), so drains
// made in the same second tie and are ranked by name; a node that
// recounted before a tie with a smaller name had drained would keep its
// drain, and so would that node: 200 runs at once on a real 26.05 cluster
// drained more than the limit. After the settle every drain that ranks
// before ours is visible, and every later one has a later reason time.
// drainedAt is our clock after slurmctld answered the drain, so the stamp
// is no later than it.
func (e Engine) settle(ctx context.Context, drainedAt time.Time) error {
	end := drainedAt.Truncate(time.Second).Add(time.Second + clockSkew)
	if d := end.Sub(e.now()); d > 0 {
		return e.wait(ctx, d)
	}
	return nil
}

// recount lists the nodes again after our drain (made at drainedAt, our
// clock) and ranks gpuhc's drains by reason time, then name. If this node
// comes at or past the limit, it drained alongside others that all saw
// room, and should give its drain back. Every node ranks the same way and,
// after the settle, sees every drain ranked before its own, so the
// earliest drains stay and exactly the limit is kept: the first limit
// nodes in that order never see limit nodes before them, and every later
// one sees all of those. A list that fails, or a settle cut short, leaves
// the drain uncounted (counted false): the caller keeps it and the next
// run counts it, since a give-back on a list that failed would undrain a
// lone bad node whenever slurmrestd hiccups. A list that does not show our
// drain keeps it, counted.
func (e Engine) recount(ctx context.Context, reason string, drainedAt time.Time) (detail string, over, counted bool) {
	if e.settle(ctx, drainedAt) != nil {
		return "", false, false
	}
	nodes, err := e.Ctl.Nodes(ctx)
	if err != nil || len(nodes) == 0 {
		return "", false, false
	}
	var ours []slurm.Node
	for _, n := range nodes {
		if n.Drained() && Owned(n.Reason) {
			ours = append(ours, n)
		}
	}
	sort.SliceStable(ours, func(i, j int) bool {
		if !ours[i].ReasonTime.Equal(ours[j].ReasonTime) {
			return ours[i].ReasonTime.Before(ours[j].ReasonTime)
		}
		return ours[i].Name < ours[j].Name
	})
	rank := slices.IndexFunc(ours, func(n slurm.Node) bool { return n.Name == e.Node })
	limit := stormLimit(e.Policy.MaxDrainedFraction, e.Policy.MaxDrainedNodes, len(nodes))
	if rank < 0 || rank < limit {
		return "", false, true
	}
	return fmt.Sprintf("%d of %d nodes drained by gpuhc at once (limit %d); gave back this drain, the %s: %s",
		len(ours), len(nodes), limit, check.Ordinal(rank+1), reason), true, true
}
