package policy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

// fleet builds the other nodes of a cluster of total nodes (gpu001, the
// node under test, not among them): ours drained by gpuhc, then foreign
// drained by an admin, then idle ones. Some idle nodes carry the stale
// gpuhc reason 24.11 keeps after RESUME, and one is DOWN with a gpuhc
// reason but no DRAIN flag: neither counts.
func fleet(total, ours, foreign int) []slurm.Node {
	var out []slurm.Node
	for i := 2; i <= total; i++ {
		n := slurm.Node{Name: fmt.Sprintf("gpu%03d", i), State: []string{"IDLE"}}
		switch k := i - 2; {
		case k < ours:
			n.State, n.Reason = []string{"MIXED", "DRAIN"}, "gpuhc: host.mounts: /data: not mounted"
		case k < ours+foreign:
			n.State, n.Reason = []string{"IDLE", "DRAIN"}, "maintenance"
		case k == ours+foreign:
			n.State, n.Reason = []string{"DOWN", "NOT_RESPONDING"}, "gpuhc: old"
		case k%2 == 0:
			n.Reason = "gpuhc: resumed long ago"
		}
		out = append(out, n)
	}
	return out
}

func TestStormGuard(t *testing.T) {
	tests := []struct {
		name      string
		total     int
		ours      int
		foreign   int
		list      []slurm.Node // replaces the built fleet
		fraction  float64
		nodes     int
		wantKind  string
		wantCalls []string
		detail    string
	}{
		{name: "under the limit drains", total: 100, ours: 9, fraction: 0.10, wantKind: Drained},
		{name: "at the limit suppresses", total: 100, ours: 10, fraction: 0.10, wantKind: DrainSuppressed,
			detail: "10 of 100 nodes already drained by gpuhc (limit 10%, at most 10 nodes); not draining: " + ourDrn},
		{name: "over the limit suppresses", total: 100, ours: 12, fraction: 0.10, wantKind: DrainSuppressed,
			detail: "12 of 100 nodes already drained by gpuhc (limit 10%, at most 10 nodes); not draining: " + ourDrn},
		{name: "single-node cluster drains", total: 1, fraction: 0.10, wantKind: Drained},
		{name: "4 nodes: the first drain is allowed", total: 4, fraction: 0.10, wantKind: Drained},
		{name: "4 nodes: the second is suppressed", total: 4, ours: 1, fraction: 0.10, wantKind: DrainSuppressed,
			detail: "1 of 4 nodes already drained by gpuhc (limit 10%, at most 1 node); not draining: " + ourDrn},
		{name: "20 nodes at 10% allow 2", total: 20, ours: 1, fraction: 0.10, wantKind: Drained},
		{name: "fraction 1 allows every node", total: 10, ours: 9, fraction: 1, wantKind: Drained},
		{name: "max_drained_nodes under", total: 1000, ours: 2, nodes: 3, wantKind: Drained},
		{name: "max_drained_nodes reached", total: 1000, ours: 3, nodes: 3, wantKind: DrainSuppressed,
			detail: "3 of 1000 nodes already drained by gpuhc (limit 3 nodes); not draining: " + ourDrn},
		{name: "max_drained_nodes 1 still allows the first", total: 1000, nodes: 1, wantKind: Drained},
		{name: "the tighter of both limits applies", total: 100, ours: 5, fraction: 0.10, nodes: 5, wantKind: DrainSuppressed,
			detail: "5 of 100 nodes already drained by gpuhc (limit 10% and 5 nodes, at most 5 nodes); not draining: " + ourDrn},
		{name: "fraction binds below max_drained_nodes", total: 20, ours: 2, fraction: 0.10, nodes: 5, wantKind: DrainSuppressed},
		{name: "foreign drains are not counted", total: 4, foreign: 3, fraction: 0.10, wantKind: Drained},
		{name: "many foreign drains are not counted", total: 100, ours: 9, foreign: 50, fraction: 0.10, wantKind: Drained},
		{name: "own node is not counted", fraction: 0.10, wantKind: Drained,
			list: []slurm.Node{
				// The list says gpu001 is drained by gpuhc (a drain that
				// landed after the node read): still not one of "the others".
				{Name: "gpu001", State: []string{"IDLE", "DRAIN"}, Reason: ourDrn},
				{Name: "gpu002", State: []string{"IDLE"}}, {Name: "gpu003", State: []string{"IDLE"}}, {Name: "gpu004", State: []string{"IDLE"}},
			}},
		{name: "both limits 0: no guard, no list", total: 4, ours: 3, wantKind: Drained,
			wantCalls: []string{"get gpu001", "drain gpu001 " + ourDrn}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSlurm{node: idle(), others: fleet(tc.total, tc.ours, tc.foreign), list: tc.list}
			e := engine(f)
			e.Policy.MaxDrainedFraction, e.Policy.MaxDrainedNodes = tc.fraction, tc.nodes
			run, err := e.Apply(context.Background(), failing, State{})
			if err != nil {
				t.Fatal(err)
			}
			if run.Outcome.Kind != tc.wantKind {
				t.Fatalf("outcome %s (%s), want %s", run.Outcome.Kind, run.Outcome.Detail, tc.wantKind)
			}
			want := tc.wantCalls
			if want == nil {
				want = []string{"get gpu001", "list", "drain gpu001 " + ourDrn, "list"}
				if tc.wantKind == DrainSuppressed {
					want = want[:2]
				}
			}
			if !slices.Equal(f.calls, want) {
				t.Errorf("calls %q, want %q", f.calls, want)
			}
			if tc.detail != "" && run.Outcome.Detail != tc.detail {
				t.Errorf("detail\n got %q\nwant %q", run.Outcome.Detail, tc.detail)
			}
			got := strings.Join(kinds(run.Events), ",")
			switch tc.wantKind {
			case DrainSuppressed:
				if got != events.KindTransition+","+events.KindDrainSuppressed {
					t.Errorf("events %s", got)
				}
				ev := run.Events[1]
				if ev.Message != run.Outcome.Detail || ev.Node != "gpu001" || ev.Backend != "fake" {
					t.Errorf("event %+v", ev)
				}
				if run.State.Drained != nil || run.State.Suppressed != "host.mounts: /scratch" {
					t.Errorf("state %+v", run.State)
				}
			case Drained:
				if got != events.KindTransition+","+events.KindDrain || run.State.Drained == nil {
					t.Errorf("events %s, state %+v", got, run.State)
				}
			}
		})
	}
}

func TestStormLimit(t *testing.T) {
	for _, c := range []struct {
		fraction     float64
		nodes, total int
		want         int
	}{
		{0.10, 0, 100, 10}, {0.10, 0, 101, 10}, {0.10, 0, 30, 3}, {0.10, 0, 20, 2}, {0.10, 0, 19, 1},
		{0.10, 0, 4, 1}, {0.10, 0, 1, 1}, {0.07, 0, 100, 7}, {0.3, 0, 10, 3}, {1, 0, 50, 50},
		{0.10, 5, 100, 5}, {0.10, 50, 100, 10}, {0, 3, 1000, 3}, {0, 1, 1, 1}, {0.5, 0, 10000, 5000},
	} {
		if got := stormLimit(c.fraction, c.nodes, c.total); got != c.want {
			t.Errorf("stormLimit(%v, %d, %d) = %d, want %d", c.fraction, c.nodes, c.total, got, c.want)
		}
	}
}

// A storm: all four nodes of a cluster fail at once, one after another.
// Only the first is drained; the others record why they were not.
func TestStormOnASmallCluster(t *testing.T) {
	c := &cluster{nodes: map[string]*slurm.Node{}}
	for i := 1; i <= 4; i++ {
		name := fmt.Sprintf("gpu%03d", i)
		c.nodes[name] = &slurm.Node{Name: name, State: []string{"IDLE"}}
	}
	var got []string
	for i := 1; i <= 4; i++ {
		e := engine(nil)
		e.Node, e.Ctl = fmt.Sprintf("gpu%03d", i), c
		run, err := e.Apply(context.Background(), failing, State{})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, run.Outcome.Kind)
	}
	if want := []string{Drained, DrainSuppressed, DrainSuppressed, DrainSuppressed}; !slices.Equal(got, want) {
		t.Errorf("outcomes %q, want %q", got, want)
	}
	if n := c.count("drain "); n != 1 {
		t.Errorf("%d drains", n)
	}
}

// cluster is a whole fake cluster, for several engines at once.
type cluster struct {
	nodes map[string]*slurm.Node
	calls []string
}

func (c *cluster) Backend() string { return "fake" }
func (c *cluster) Node(_ context.Context, name string) (slurm.Node, error) {
	c.calls = append(c.calls, "get "+name)
	return *c.nodes[name], nil
}
func (c *cluster) Nodes(context.Context) ([]slurm.Node, error) {
	c.calls = append(c.calls, "list")
	var out []slurm.Node
	for _, n := range c.nodes {
		out = append(out, *n)
	}
	return out, nil
}
func (c *cluster) Drain(_ context.Context, name, reason string) error {
	c.calls = append(c.calls, "drain "+name)
	n := c.nodes[name]
	n.State, n.Reason = append(n.State, "DRAIN"), reason
	return nil
}
func (c *cluster) Resume(_ context.Context, name string) error {
	c.calls = append(c.calls, "resume "+name)
	return nil
}

func (c *cluster) count(prefix string) int {
	n := 0
	for _, call := range c.calls {
		if strings.HasPrefix(call, prefix) {
			n++
		}
	}
	return n
}

// A node list that cannot be read is no licence to drain: Apply fails,
// nothing is drained, and the next run tries again.
func TestStormGuardListErrorDoesNotDrain(t *testing.T) {
	f := &fakeSlurm{node: idle(), listErr: errors.New("slurm_load_node error: Unable to contact slurm controller")}
	prev := State{Drained: &Drain{Reason: "gpuhc: old", At: t0}}
	run, err := engine(f).Apply(context.Background(), failing, prev)
	if err == nil || !strings.Contains(err.Error(), "storm guard before draining gpu001: list nodes: slurm_load_node error") {
		t.Fatalf("got %v", err)
	}
	if want := []string{"get gpu001", "list"}; !slices.Equal(f.calls, want) {
		t.Errorf("calls %q, want %q", f.calls, want)
	}
	if run.State.Drained == nil || *run.State.Drained != *prev.Drained || run.State.Suppressed != "" {
		t.Errorf("state changed: %+v", run.State)
	}

	f = &fakeSlurm{node: idle(), list: []slurm.Node{}}
	if _, err := engine(f).Apply(context.Background(), failing, State{}); err == nil || slices.Contains(f.calls, "drain gpu001 "+ourDrn) {
		t.Errorf("empty node list: %v, calls %q", err, f.calls)
	}
}

// A node refused run after run records one event, logs (prints) every
// time, and records again for a different reason; once it is drained or
// healthy the memory is cleared.
func TestStormSuppressedEventOnce(t *testing.T) {
	f := &fakeSlurm{node: idle(), others: fleet(4, 1, 0)}
	e := engine(f)
	run1, err := e.Apply(context.Background(), failing, State{})
	if err != nil || run1.Outcome.Kind != DrainSuppressed {
		t.Fatalf("%+v %v", run1.Outcome, err)
	}
	run2, err := e.Apply(context.Background(), failing, run1.State)
	if err != nil || run2.Outcome.Kind != DrainSuppressed || len(run2.Events) != 0 {
		t.Fatalf("second run: %+v, events %v, %v", run2.Outcome, kinds(run2.Events), err)
	}
	if !run2.State.Equal(run1.State) {
		t.Errorf("state changed between identical refusals: %+v", run2.State)
	}
	other := []check.Result{{Check: "host.cpu", Component: "host", Status: check.Fail, Message: "1 CPU"}}
	run3, _ := e.Apply(context.Background(), append(other, failing...), run2.State)
	if k := kinds(run3.Events); !slices.Contains(k, events.KindDrainSuppressed) {
		t.Errorf("new reason not recorded: %v", k)
	}
	run4, _ := e.Apply(context.Background(), healthy, run3.State)
	if run4.State.Suppressed != "" {
		t.Errorf("healthy run kept %q", run4.State.Suppressed)
	}
	// The storm is over: the other node was resumed.
	f.others = fleet(4, 0, 0)
	run5, err := e.Apply(context.Background(), failing, run3.State)
	if err != nil || run5.Outcome.Kind != Drained || run5.State.Suppressed != "" {
		t.Errorf("after the storm: %+v %+v %v", run5.Outcome, run5.State, err)
	}
}

func TestStormCache(t *testing.T) {
	dir := t.TempDir()
	now := t0
	f := &fakeSlurm{node: idle(), others: fleet(100, 12, 0)}
	e := engine(f)
	e.StormFile = StormFile(dir)
	e.Now = func() time.Time { return now }
	apply := func(at time.Duration) Run {
		t.Helper()
		now = t0.Add(at)
		f.calls = nil
		run, err := e.Apply(context.Background(), failing, State{})
		if err != nil {
			t.Fatal(err)
		}
		return run
	}
	listed := func() bool { return slices.Contains(f.calls, "list") }

	run := apply(0)
	if run.Outcome.Kind != DrainSuppressed || !listed() {
		t.Fatalf("first run: %+v, calls %q", run.Outcome, f.calls)
	}
	b, err := os.ReadFile(filepath.Join(dir, "storm.json"))
	if err != nil || !strings.Contains(string(b), `"drained":12,"total":100`) || !strings.Contains(string(b), `"node":"gpu001"`) {
		t.Fatalf("storm.json: %s %v", b, err)
	}

	// Within storm_cache: refused again without a list call.
	run = apply(30 * time.Second)
	if run.Outcome.Kind != DrainSuppressed || listed() || !slices.Equal(f.calls, []string{"get gpu001"}) {
		t.Errorf("cached run: %+v, calls %q", run.Outcome, f.calls)
	}
	if !strings.Contains(run.Outcome.Detail, "12 of 100 nodes already drained by gpuhc (limit 10%, at most 10 nodes), counted 30s ago; not draining: ") {
		t.Errorf("detail %q", run.Outcome.Detail)
	}

	// At storm_cache: listed afresh; the storm is over, so it drains.
	f.others = fleet(100, 3, 0)
	run = apply(60 * time.Second)
	if run.Outcome.Kind != Drained || !listed() {
		t.Errorf("expired cache: %+v, calls %q", run.Outcome, f.calls)
	}

	// A cached count that would allow a drain is not trusted: the fleet
	// may have filled up since, and here it has.
	f.node = idle()
	f.others = fleet(100, 10, 0)
	run = apply(65 * time.Second)
	if run.Outcome.Kind != DrainSuppressed || !listed() {
		t.Errorf("allowing cache: %+v, calls %q", run.Outcome, f.calls)
	}
}

func TestStormCacheMisses(t *testing.T) {
	write := func(t *testing.T, path, text string) {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fresh := `{"node":"gpu001","drained":50,"total":100,"time":"2026-11-30T05:59:50Z"}`
	cases := map[string]func(*Engine, string){
		"another node's count": func(e *Engine, p string) {
			write(t, p, strings.Replace(fresh, "gpu001", "gpu002", 1))
		},
		"corrupt file":       func(e *Engine, p string) { write(t, p, "{torn") },
		"from the future":    func(e *Engine, p string) { write(t, p, strings.Replace(fresh, "05:59:50", "06:00:10", 1)) },
		"no total":           func(e *Engine, p string) { write(t, p, strings.Replace(fresh, `"total":100`, `"total":0`, 1)) },
		"storm_cache 0s":     func(e *Engine, p string) { write(t, p, fresh); e.Policy.StormCache.Duration = 0 },
		"no cache file name": func(e *Engine, p string) { write(t, p, fresh); e.StormFile = "" },
		"missing file":       func(e *Engine, p string) {},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			f := &fakeSlurm{node: idle(), others: fleet(100, 0, 0)}
			e := engine(f)
			e.StormFile = StormFile(t.TempDir())
			setup(&e, StormFile(filepath.Dir(e.StormFile)))
			run, err := e.Apply(context.Background(), failing, State{})
			if err != nil || run.Outcome.Kind != Drained || !slices.Contains(f.calls, "list") {
				t.Errorf("%+v, calls %q, %v", run.Outcome, f.calls, err)
			}
		})
	}
	// The fresh count itself is trusted.
	f := &fakeSlurm{node: idle(), others: fleet(100, 0, 0)}
	e := engine(f)
	e.StormFile = StormFile(t.TempDir())
	write(t, e.StormFile, fresh)
	if run, _ := e.Apply(context.Background(), failing, State{}); run.Outcome.Kind != DrainSuppressed || slices.Contains(f.calls, "list") {
		t.Errorf("fresh cache: %+v, calls %q", run.Outcome, f.calls)
	}
	// storm_cache 0s writes no file either.
	f = &fakeSlurm{node: idle(), others: fleet(100, 50, 0)}
	e = engine(f)
	e.StormFile = StormFile(t.TempDir())
	e.Policy.StormCache.Duration = 0
	e.Apply(context.Background(), failing, State{})
	if _, err := os.Stat(e.StormFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("storm_cache 0s wrote the cache: %v", err)
	}
}

// Only the drain path lists nodes: a healthy node, a node we drained
// already, a foreign drain and a dry run never do, cache or not.
func TestStormGuardOnlyOnTheDrainPath(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name    string
		node    slurm.Node
		prev    State
		results []check.Result
		dry     bool
	}{
		{"healthy", idle(), State{}, healthy, false},
		{"healthy after a refusal", idle(), State{Suppressed: ourDrn}, healthy, false},
		{"already drained by us", slurm.Node{State: []string{"IDLE", "DRAIN"}, Reason: ourDrn}, State{Drained: &Drain{Reason: ourDrn}}, failing, false},
		{"foreign drain", slurm.Node{State: []string{"IDLE", "DRAIN"}, Reason: "maintenance"}, State{}, failing, false},
		{"dry run", idle(), State{}, failing, true},
	}
	for _, c := range cases {
		f := &fakeSlurm{node: c.node, others: fleet(100, 50, 0)}
		e := engine(f)
		e.StormFile, e.DryRun = StormFile(dir), c.dry
		if _, err := e.Apply(context.Background(), c.results, c.prev); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(f.calls, "list") {
			t.Errorf("%s: listed nodes: %q", c.name, f.calls)
		}
	}
	if _, err := os.Stat(StormFile(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("storm.json written off the drain path: %v", err)
	}
}

// cluster is a shared, locked node table: many engines draining at once,
// as when slurmd starts every node's health check together.
type busyCluster struct {
	mu    sync.Mutex
	nodes map[string]*slurm.Node
	calls atomic.Int64
	// seconds makes reason times whole seconds, as slurmctld keeps them
	// (reason_changed_at, "ReasonTime=2026-12-02T14:00:07").
	seconds bool
}

func newBusyCluster(total int, seconds bool) *busyCluster {
	c := &busyCluster{nodes: map[string]*slurm.Node{}, seconds: seconds}
	for i := 1; i <= total; i++ {
		name := fmt.Sprintf("gpu%03d", i)
		c.nodes[name] = &slurm.Node{Name: name, State: []string{"IDLE"}}
	}
	return c
}

type member struct {
	c    *busyCluster
	name string
}

func (m member) slow() { m.c.calls.Add(1); time.Sleep(time.Millisecond) }

func (m member) Backend() string { return "fake" }
func (m member) Node(_ context.Context, name string) (slurm.Node, error) {
	m.slow()
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	return *m.c.nodes[name], nil
}
func (m member) Nodes(context.Context) ([]slurm.Node, error) {
	m.slow()
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	var out []slurm.Node
	for _, n := range m.c.nodes {
		out = append(out, *n)
	}
	return out, nil
}
func (m member) Drain(_ context.Context, name, reason string) error {
	m.slow()
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	n := m.c.nodes[name]
	n.State, n.Reason, n.ReasonTime = []string{"IDLE", "DRAIN"}, reason, time.Now()
	if m.c.seconds {
		n.ReasonTime = n.ReasonTime.Truncate(time.Second)
	}
	return nil
}
func (m member) Resume(_ context.Context, name string) error {
	m.slow()
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	m.c.nodes[name].State = []string{"IDLE"}
	return nil
}

// Many nodes fail at once and all see room; after the recount exactly the
// limit stays drained, and every other node records drain-suppressed. With
// whole-second reason times (as slurmctld gives them) most drains tie, and a
// node that recounted before a tie with a smaller name had drained kept its
// drain: 200 concurrent runs on a real 26.05 cluster kept up to 3× the limit.
func TestStormSimultaneousFailures(t *testing.T) {
	cases := []struct {
		name         string
		total, limit int
		seconds      bool
		jitter       time.Duration
	}{
		{"nanosecond reason times", 60, 5, false, 20 * time.Millisecond},
		{"whole-second reason times, no jitter", 200, 10, true, 0},
		{"whole-second reason times, jitter", 200, 10, true, 300 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stormAtOnce(t, tc.total, tc.limit, tc.seconds, tc.jitter)
		})
	}
}

func stormAtOnce(t *testing.T, total, limit int, seconds bool, jitter time.Duration) {
	c := newBusyCluster(total, seconds)
	var wg sync.WaitGroup
	runs := make([]Run, total)
	for i := range total {
		wg.Go(func() {
			name := fmt.Sprintf("gpu%03d", i+1)
			e := Engine{Node: name, Policy: config.Default().Policy, Ctl: member{c, name}}
			e.Policy.MaxDrainedFraction, e.Policy.MaxDrainedNodes = 0, limit
			e.Policy.StormJitter.Duration = jitter
			run, err := e.Apply(context.Background(), failing, State{})
			if err != nil {
				t.Error(err)
			}
			runs[i] = run
		})
	}
	wg.Wait()
	drained := 0
	for _, n := range c.nodes {
		if n.Drained() {
			drained++
		}
	}
	if drained != limit {
		t.Errorf("%d nodes drained at once, limit %d", drained, limit)
	}
	kept, suppressed := 0, 0
	for i, r := range runs {
		switch k := strings.Join(kinds(r.Events), ","); {
		case r.Outcome.Kind == Drained && k == "transition,drain":
			kept++
		case r.Outcome.Kind == DrainSuppressed && (k == "transition,drain-suppressed" || k == "transition,drain,resume,drain-suppressed"):
			suppressed++
		default:
			t.Errorf("gpu%03d: outcome %+v, events %s", i+1, r.Outcome, k)
		}
	}
	if kept != limit || suppressed != total-limit {
		t.Errorf("%d runs drained and %d suppressed, want %d and %d", kept, suppressed, limit, total-limit)
	}
}

func TestStormRecountGivesBackLateDrain(t *testing.T) {
	// Two other nodes drained a second before us, unseen at our count.
	early := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	f := &fakeSlurm{node: idle()}
	e := engine(f)
	e.Policy.MaxDrainedFraction, e.Policy.MaxDrainedNodes = 0, 2
	lists := 0
	f.listHook = func(nodes []slurm.Node) []slurm.Node {
		lists++
		if lists == 1 {
			return nodes
		}
		for i := range nodes {
			if nodes[i].Name == "gpu001" {
				nodes[i].ReasonTime = early.Add(time.Second)
			}
		}
		for _, name := range []string{"gpu007", "gpu009"} {
			nodes = append(nodes, slurm.Node{Name: name, State: []string{"IDLE", "DRAIN"}, Reason: "gpuhc: host.cpu: host: x", ReasonTime: early})
		}
		return nodes
	}
	run, err := e.Apply(context.Background(), failing, State{})
	if err != nil {
		t.Fatal(err)
	}
	if run.Outcome.Kind != DrainSuppressed || !strings.Contains(run.Outcome.Detail, "gave back this drain, the 3rd") {
		t.Fatalf("outcome %+v", run.Outcome)
	}
	if f.node.Drained() || run.State.Drained != nil {
		t.Errorf("drain kept: node %+v state %+v", f.node, run.State)
	}
	if got := strings.Join(kinds(run.Events), ","); got != "transition,drain,resume,drain-suppressed" {
		t.Errorf("events %s", got)
	}
}

// CachedRefusal trusts only a fresh count of this node's that reaches the
// limit; it never asks Slurm.
func TestCachedRefusal(t *testing.T) {
	count := func(node string, drained int, age time.Duration) string {
		return fmt.Sprintf(`{"node":%q,"drained":%d,"total":100,"time":%q}`, node, drained, t0.Add(-age).Format(time.RFC3339))
	}
	tests := []struct {
		name   string
		cache  string // storm.json; none when ""
		mutate func(e *Engine)
		want   string // detail part; "" for no refusal
	}{
		{name: "fresh, at the limit: refuses", cache: count("gpu001", 10, 10*time.Second),
			want: "10 of 100 nodes already drained by gpuhc (limit 10%, at most 10 nodes), counted 10s ago; not draining: " + xidDrain},
		{name: "fresh, below the limit", cache: count("gpu001", 9, 10*time.Second)},
		{name: "stale", cache: count("gpu001", 50, time.Minute)},
		{name: "another node's", cache: count("gpu002", 50, time.Second)},
		{name: "no cache"},
		{name: "guard off", cache: count("gpu001", 50, time.Second), mutate: func(e *Engine) { e.Policy.MaxDrainedFraction, e.Policy.MaxDrainedNodes = 0, 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeSlurm{node: idle()}
			e := engine(f)
			e.StormFile = StormFile(t.TempDir())
			if tt.cache != "" {
				if err := os.WriteFile(e.StormFile, []byte(tt.cache), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tt.mutate != nil {
				tt.mutate(&e)
			}
			detail, refuse := e.CachedRefusal(xidDrain)
			if refuse != (tt.want != "") || detail != tt.want {
				t.Errorf("refuse %v %q, want %q", refuse, detail, tt.want)
			}
			if len(f.calls) != 0 {
				t.Errorf("Slurm calls %q", f.calls)
			}
		})
	}
}

// The recount waits until slurmctld's clock has left the second of the
// drain, plus the skew allowance, and not at all once it has.
func TestStormSettle(t *testing.T) {
	base := time.Date(2026, 12, 2, 14, 0, 7, 0, time.UTC)
	cases := []struct {
		name           string
		drained, now   time.Time
		want           time.Duration
		wantNoSleeping bool
	}{
		{"drained at the start of a second", base, base, time.Second + clockSkew, false},
		{"drained late in a second", base.Add(900 * time.Millisecond), base.Add(950 * time.Millisecond), 50*time.Millisecond + clockSkew, false},
		{"the second is long over", base, base.Add(2 * time.Second), 0, true},
	}
	for _, c := range cases {
		var slept []time.Duration
		e := Engine{Now: func() time.Time { return c.now },
			Sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }}
		if err := e.settle(context.Background(), c.drained); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		switch {
		case c.wantNoSleeping && len(slept) != 0:
			t.Errorf("%s: slept %v", c.name, slept)
		case !c.wantNoSleeping && (len(slept) != 1 || slept[0] != c.want):
			t.Errorf("%s: slept %v, want [%v]", c.name, slept, c.want)
		}
	}
}

// A recount whose settle is cut short (the run's deadline) keeps the drain
// rather than listing, as a failed list does.
func TestStormSettleCancelledKeepsDrain(t *testing.T) {
	f := &fakeSlurm{node: idle()}
	e := engine(f)
	e.Policy.MaxDrainedFraction, e.Policy.MaxDrainedNodes = 0, 2
	e.Policy.StormJitter.Duration = 0
	e.Sleep = func(context.Context, time.Duration) error { return context.DeadlineExceeded }
	e.Now = func() time.Time { return t0.Truncate(time.Second) }
	run, err := e.Apply(context.Background(), failing, State{})
	if err != nil {
		t.Fatal(err)
	}
	if run.Outcome.Kind != Drained || !f.node.Drained() {
		t.Errorf("outcome %+v, node %+v", run.Outcome, f.node)
	}
}

// A drain the recount could not count (the list failed) is kept, marked
// uncounted, and the next run counts it: over the limit it is given back,
// within it the mark is cleared. The drains that ranked before it appeared
// while it was uncounted.
func TestStormUncountedDrainCountedNextRun(t *testing.T) {
	early := t0.Add(-time.Minute)
	cases := []struct {
		name      string
		before    int // gpuhc drains made before ours
		wantKind  string
		wantKinds string
		drained   bool
	}{
		{"over the limit: given back", 2, DrainSuppressed, "resume,drain-suppressed", false},
		{"within the limit: kept, counted", 1, AlreadyDrained, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSlurm{node: idle()}
			e := engine(f)
			e.Policy.MaxDrainedFraction, e.Policy.MaxDrainedNodes = 0, 2
			// The pre-drain count succeeds; the recount fails.
			f.listHook = roomThenDrained(tc.before, early)
			first := e
			first.Ctl = &failSecondList{fakeSlurm: f}
			run, err := first.Apply(context.Background(), failing, State{})
			if err != nil {
				t.Fatal(err)
			}
			if run.Outcome.Kind != Drained || run.State.Drained == nil || !run.State.Drained.Uncounted {
				t.Fatalf("first run: outcome %+v, state %+v", run.Outcome, run.State.Drained)
			}
			next, err := e.Apply(context.Background(), failing, run.State)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, k := range kinds(next.Events) {
				if k != events.KindTransition {
					got = append(got, k)
				}
			}
			if next.Outcome.Kind != tc.wantKind || strings.Join(got, ",") != tc.wantKinds || f.node.Drained() != tc.drained {
				t.Errorf("next run: outcome %+v, events %q, node drained %v", next.Outcome, got, f.node.Drained())
			}
			if tc.drained && (next.State.Drained == nil || next.State.Drained.Uncounted) {
				t.Errorf("next run: state %+v, want the drain kept and counted", next.State.Drained)
			}
		})
	}
}

// failSecondList fails every node list after the first.
type failSecondList struct {
	*fakeSlurm
	lists int
}

func (f *failSecondList) Nodes(ctx context.Context) ([]slurm.Node, error) {
	f.lists++
	if f.lists > 1 {
		f.calls = append(f.calls, "list")
		return nil, errors.New("slurmrestd GET /nodes/: context deadline exceeded")
	}
	return f.fakeSlurm.Nodes(ctx)
}

// A drain whose call failed but which slurmctld carried out (the answer was
// lost on a busy slurmrestd) is a drain: recorded, counted against the
// limit and given back when over it. One that did not land is an error.
func TestDrainCallFailedButLanded(t *testing.T) {
	timeout := errors.New("slurmrestd POST /node/gpu001: context deadline exceeded")
	cases := []struct {
		name     string
		lands    bool
		others   int // gpuhc drains ranked before ours
		wantKind string
		wantErr  bool
	}{
		{"landed, within the limit", true, 0, Drained, false},
		{"landed, over the limit: given back", true, 2, DrainSuppressed, false},
		{"did not land", false, 0, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSlurm{node: idle(), drainErr: timeout, drainLands: tc.lands}
			e := engine(f)
			e.Policy.MaxDrainedFraction, e.Policy.MaxDrainedNodes = 0, 2
			f.listHook = roomThenDrained(tc.others, t0.Add(-time.Minute))
			run, err := e.Apply(context.Background(), failing, State{})
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "context deadline exceeded") {
					t.Fatalf("err %v, want the drain's error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if run.Outcome.Kind != tc.wantKind {
				t.Errorf("outcome %+v, want %v", run.Outcome, tc.wantKind)
			}
			if f.node.Drained() != (tc.wantKind == Drained) {
				t.Errorf("node drained %v", f.node.Drained())
			}
		})
	}
}

// roomThenDrained is a list hook: the first list (the pre-drain count) as
// it is, with room; every later one with gpu001's drain at t0 and n other
// gpuhc drains made at at.
func roomThenDrained(n int, at time.Time) func([]slurm.Node) []slurm.Node {
	lists := 0
	return func(nodes []slurm.Node) []slurm.Node {
		lists++
		if lists == 1 {
			return nodes
		}
		for i := range nodes {
			if nodes[i].Name == "gpu001" {
				nodes[i].ReasonTime = t0
			}
		}
		for i := range n {
			nodes = append(nodes, slurm.Node{Name: fmt.Sprintf("gpu1%02d", i), State: []string{"IDLE", "DRAIN"},
				Reason: "gpuhc: host.cpu: host: x", ReasonTime: at})
		}
		return nodes
	}
}
