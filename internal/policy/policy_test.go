package policy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

// fakeSlurm is an in-memory node table that records every call, standing in
// for slurmctld in these unit tests (the e2e tests use real Slurm).
type fakeSlurm struct {
	node     slurm.Node
	calls    []string
	drainErr error
	// drainLands makes a failing Drain take effect all the same (a
	// request that timed out on a busy slurmrestd and was carried out).
	drainLands bool
	// others are the rest of the cluster; the node list is these plus
	// node (named gpu001), unless list replaces the whole answer.
	others  []slurm.Node
	list    []slurm.Node
	listErr error
	// listHook rewrites each list answer (nodes appearing between calls).
	listHook func([]slurm.Node) []slurm.Node
}

func (f *fakeSlurm) Backend() string { return "fake" }
func (f *fakeSlurm) Node(_ context.Context, name string) (slurm.Node, error) {
	f.calls = append(f.calls, "get "+name)
	return f.node, nil
}
func (f *fakeSlurm) Nodes(context.Context) ([]slurm.Node, error) {
	f.calls = append(f.calls, "list")
	if f.listErr != nil {
		return nil, f.listErr
	}
	if f.list != nil {
		return f.list, nil
	}
	self := f.node
	self.Name = "gpu001"
	out := append(append([]slurm.Node{}, f.others...), self)
	if f.listHook != nil {
		out = f.listHook(out)
	}
	return out, nil
}
func (f *fakeSlurm) Drain(_ context.Context, name, reason string) error {
	f.calls = append(f.calls, "drain "+name+" "+reason)
	if f.drainErr != nil && !f.drainLands {
		return f.drainErr
	}
	f.node.State = append(f.node.State, "DRAIN")
	f.node.Reason = reason
	return f.drainErr
}
func (f *fakeSlurm) Resume(_ context.Context, name string) error {
	f.calls = append(f.calls, "resume "+name)
	var st []string
	for _, s := range f.node.State {
		if s != "DRAIN" {
			st = append(st, s)
		}
	}
	f.node.State = st
	return nil
}

var (
	healthy = []check.Result{{Check: "host.mounts", Component: "/scratch", Status: check.OK, Message: "mounted"}}
	failing = []check.Result{{Check: "host.mounts", Component: "/scratch", Status: check.Fail, Message: "not mounted", Action: check.ActionDrain}}
	erring  = []check.Result{{Check: "host.mounts", Component: "/scratch", Status: check.Error, Message: "timed out after 10s"}}
	ourDrn  = "gpuhc: host.mounts: /scratch: not mounted"
	t0      = time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
)

func engine(f *fakeSlurm) Engine {
	return Engine{Node: "gpu001", Policy: config.Default().Policy, Ctl: f, Now: func() time.Time { return t0 },
		Jitter: func() float64 { return 0 }, Sleep: func(context.Context, time.Duration) error { return nil }}
}

func idle(state ...string) slurm.Node {
	return slurm.Node{Name: "gpu001", State: append([]string{"IDLE"}, state...)}
}

func kinds(evs []events.Event) []string {
	var k []string
	for _, e := range evs {
		k = append(k, e.Kind)
	}
	return k
}

func TestApply(t *testing.T) {
	drainedByUs := State{Drained: &Drain{Reason: ourDrn, At: t0}}
	tests := []struct {
		name      string
		node      slurm.Node
		prev      State
		results   []check.Result
		mutate    func(*Engine)
		wantKind  string
		wantCalls []string
		wantState func(State) bool
		wantEvent []string
	}{
		{name: "healthy node we never drained makes no call", node: idle(), results: healthy,
			wantKind: Nothing, wantCalls: nil, wantState: func(s State) bool { return s.Drained == nil }},
		{name: "failure drains with our reason", node: idle(), results: failing,
			wantKind: Drained, wantCalls: []string{"get gpu001", "list", "drain gpu001 " + ourDrn, "list"},
			wantState: func(s State) bool { return s.Drained != nil && s.Drained.Reason == ourDrn },
			wantEvent: []string{events.KindTransition, events.KindDrain}},
		{name: "already drained by us: no second drain", node: slurm.Node{State: []string{"IDLE", "DRAIN"}, Reason: ourDrn},
			prev: drainedByUs, results: failing, wantKind: AlreadyDrained, wantCalls: []string{"get gpu001"},
			wantState: func(s State) bool { return s.Drained != nil }},
		{name: "our drain found without state is adopted, and counted against the storm limit", node: slurm.Node{State: []string{"IDLE", "DRAIN"}, Reason: ourDrn},
			results: failing, wantKind: AlreadyDrained, wantCalls: []string{"get gpu001", "list"},
			wantState: func(s State) bool { return s.Drained != nil && s.Drained.Reason == ourDrn && !s.Drained.Uncounted },
			wantEvent: []string{events.KindTransition, events.KindDrain}},
		{name: "another gpuhc reason without state is not adopted", node: slurm.Node{State: []string{"IDLE", "DRAIN"}, Reason: "gpuhc: admin: RMA"},
			results: failing, wantKind: AlreadyDrained, wantCalls: []string{"get gpu001"},
			wantState: func(s State) bool { return s.Drained == nil }},
		{name: "foreign drain is never re-reasoned", node: slurm.Node{State: []string{"IDLE", "DRAIN"}, Reason: "maintenance"},
			results: failing, wantKind: ForeignDrain, wantCalls: []string{"get gpu001"},
			wantState: func(s State) bool { return s.Drained == nil && s.Foreign == "maintenance" },
			wantEvent: []string{events.KindTransition, events.KindDrainSkipped}},
		{name: "foreign drain logged once", node: slurm.Node{State: []string{"IDLE", "DRAIN"}, Reason: "maintenance"},
			prev: State{Foreign: "maintenance", Last: map[string]check.Status{"host.mounts//scratch": check.Fail}}, results: failing,
			wantKind: ForeignDrain, wantCalls: []string{"get gpu001"}, wantEvent: nil},
		{name: "a drain with no reason (REST DRAIN without one, 26.05) is someone else's",
			node: slurm.Node{State: []string{"IDLE", "DRAIN"}}, results: failing, wantKind: ForeignDrain, wantCalls: []string{"get gpu001"},
			wantState: func(s State) bool { return s.Drained == nil && s.Foreign == noReason },
			wantEvent: []string{events.KindTransition, events.KindDrainSkipped}},
		{name: "our drain re-drained by an admin with no reason is let go", node: slurm.Node{State: []string{"IDLE", "DRAIN"}},
			prev: drainedByUs, results: failing, wantKind: ForeignDrain, wantCalls: []string{"get gpu001"},
			wantState: func(s State) bool { return s.Drained == nil && s.Foreign == noReason }},
		{name: "DOWN node with no reason and no DRAIN is drained (nodes that never registered)",
			node: slurm.Node{State: []string{"DOWN", "NOT_RESPONDING"}}, results: failing,
			wantKind: Drained, wantCalls: []string{"get gpu001", "list", "drain gpu001 " + ourDrn, "list"}},
		{name: "stale gpuhc reason on an idle node (24.11 after RESUME) is drained again",
			node: slurm.Node{State: []string{"IDLE"}, Reason: "gpuhc: old"}, results: failing,
			wantKind: Drained, wantCalls: []string{"get gpu001", "list", "drain gpu001 " + ourDrn, "list"}},
		{name: "DOWN node with slurmctld's reason is left alone", node: slurm.Node{State: []string{"DOWN", "NOT_RESPONDING"}, Reason: "Not responding"},
			results: failing, wantKind: ForeignDrain, wantCalls: []string{"get gpu001"},
			wantState: func(s State) bool { return s.Drained == nil && s.Foreign == "Not responding" }},
		{name: "DOWN node with an admin's reason is left alone", node: slurm.Node{State: []string{"DOWN"}, Reason: "bad DIMM, ticket 4711"},
			results: failing, wantKind: ForeignDrain, wantCalls: []string{"get gpu001"}},
		{name: "DOWN node with a stale gpuhc reason and no DRAIN is left alone", node: slurm.Node{State: []string{"DOWN", "NOT_RESPONDING"}, Reason: "gpuhc: old failure"},
			results: failing, wantKind: ForeignDrain, wantCalls: []string{"get gpu001"}},
		{name: "our drain resumed by someone else is recorded before draining again", node: idle(),
			prev: drainedByUs, results: failing, wantKind: Drained,
			wantCalls: []string{"get gpu001", "list", "drain gpu001 " + ourDrn, "list"},
			wantEvent: []string{events.KindTransition, events.KindResume, events.KindDrain}},
		{name: "FAIL node with an admin's reason is left alone", node: slurm.Node{State: []string{"IDLE", "FAIL"}, Reason: "failing PSU"},
			results: failing, wantKind: ForeignDrain, wantCalls: []string{"get gpu001"}},
		{name: "DOWN node without a reason is drained", node: slurm.Node{State: []string{"DOWN"}},
			results: failing, wantKind: Drained, wantCalls: []string{"get gpu001", "list", "drain gpu001 " + ourDrn, "list"}},
		{name: "our drain re-reasoned with another gpuhc reason is released", node: slurm.Node{State: []string{"IDLE", "DRAIN"}, Reason: "gpuhc: admin: RMA"},
			prev: drainedByUs, results: failing, wantKind: AlreadyDrained, wantCalls: []string{"get gpu001"},
			wantState: func(s State) bool { return s.Drained == nil }},
		{name: "another gpuhc reason than ours is not resumed", node: slurm.Node{State: []string{"IDLE", "DRAIN"}, Reason: "gpuhc: admin: RMA pending"},
			prev: State{Drained: drainedByUs.Drained, HealthyRuns: 1}, results: healthy, wantKind: Released,
			wantCalls: []string{"get gpu001"}, wantState: func(s State) bool { return s.Drained == nil }},
		{name: "first healthy run after our drain waits", node: slurm.Node{State: []string{"IDLE", "DRAIN"}, Reason: ourDrn},
			prev: drainedByUs, results: healthy, wantKind: WaitingResume, wantCalls: nil,
			wantState: func(s State) bool { return s.Drained != nil && s.HealthyRuns == 1 }},
		{name: "second healthy run resumes", node: slurm.Node{State: []string{"IDLE", "DRAIN"}, Reason: ourDrn},
			prev: State{Drained: drainedByUs.Drained, HealthyRuns: 1}, results: healthy, wantKind: Resumed,
			wantCalls: []string{"get gpu001", "resume gpu001"}, wantState: func(s State) bool { return s.Drained == nil && s.HealthyRuns == 0 },
			wantEvent: []string{events.KindResume}},
		{name: "admin re-reasoned our drain: never resumed", node: slurm.Node{State: []string{"IDLE", "DRAIN"}, Reason: "RMA ticket 42"},
			prev: State{Drained: drainedByUs.Drained, HealthyRuns: 1}, results: healthy, wantKind: Released,
			wantCalls: []string{"get gpu001"}, wantState: func(s State) bool { return s.Drained == nil }},
		{name: "admin resumed already: state cleared, resume recorded", node: idle(),
			prev: State{Drained: drainedByUs.Drained, HealthyRuns: 1}, results: healthy, wantKind: Released,
			wantCalls: []string{"get gpu001"}, wantState: func(s State) bool { return s.Drained == nil },
			wantEvent: []string{events.KindResume}},
		{name: "DOWN node is held", node: slurm.Node{State: []string{"DOWN", "DRAIN"}, Reason: ourDrn},
			prev: State{Drained: drainedByUs.Drained, HealthyRuns: 1}, results: healthy, wantKind: Held,
			wantCalls: []string{"get gpu001"}, wantState: func(s State) bool { return s.Drained != nil }},
		{name: "pending reboot is held", node: slurm.Node{State: []string{"IDLE", "DRAIN", "REBOOT_REQUESTED"}, Reason: ourDrn},
			prev: State{Drained: drainedByUs.Drained, HealthyRuns: 1}, results: healthy, wantKind: Held, wantCalls: []string{"get gpu001"}},
		{name: "maintenance flag is held", node: slurm.Node{State: []string{"IDLE", "DRAIN", "MAINTENANCE"}, Reason: ourDrn},
			prev: State{Drained: drainedByUs.Drained, HealthyRuns: 1}, results: healthy, wantKind: Held, wantCalls: []string{"get gpu001"}},
		{name: "auto_resume off never resumes", node: slurm.Node{State: []string{"IDLE", "DRAIN"}, Reason: ourDrn},
			prev: State{Drained: drainedByUs.Drained, HealthyRuns: 5}, results: healthy,
			mutate: func(e *Engine) { e.Policy.AutoResume = false }, wantKind: WaitingResume, wantCalls: nil},
		{name: "ERROR does not drain by default", node: idle(), results: erring, wantKind: Nothing, wantCalls: nil,
			wantEvent: []string{events.KindTransition}},
		{name: "ERROR neither counts towards resume nor resets", node: slurm.Node{State: []string{"IDLE", "DRAIN"}, Reason: ourDrn},
			prev: State{Drained: drainedByUs.Drained, HealthyRuns: 1}, results: erring, wantKind: Nothing, wantCalls: nil,
			wantState: func(s State) bool { return s.HealthyRuns == 1 && s.Drained != nil }},
		{name: "drain_on_error drains on ERROR", node: idle(), results: erring,
			mutate:   func(e *Engine) { e.Policy.DrainOnError = true },
			wantKind: Drained, wantCalls: []string{"get gpu001", "list", "drain gpu001 gpuhc: host.mounts: /scratch: timed out after 10s", "list"}},
		{name: "dry run makes no call", node: idle(), results: failing, mutate: func(e *Engine) { e.DryRun = true },
			wantKind: WouldDrain, wantCalls: nil},
		{name: "dry run resume makes no call", node: idle(), prev: State{Drained: drainedByUs.Drained, HealthyRuns: 1}, results: healthy,
			mutate: func(e *Engine) { e.DryRun = true }, wantKind: WouldResume, wantCalls: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSlurm{node: tc.node}
			e := engine(f)
			if tc.mutate != nil {
				tc.mutate(&e)
			}
			run, err := e.Apply(context.Background(), tc.results, tc.prev)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if run.Outcome.Kind != tc.wantKind {
				t.Errorf("outcome %q (%s), want %q", run.Outcome.Kind, run.Outcome.Detail, tc.wantKind)
			}
			if strings.Join(f.calls, "|") != strings.Join(tc.wantCalls, "|") {
				t.Errorf("calls %q, want %q", f.calls, tc.wantCalls)
			}
			if tc.wantState != nil && !tc.wantState(run.State) {
				t.Errorf("unexpected state %+v", run.State)
			}
			if tc.wantEvent != nil || tc.name == "foreign drain logged once" {
				if got := strings.Join(kinds(run.Events), ","); got != strings.Join(tc.wantEvent, ",") {
					t.Errorf("events %s, want %s", got, strings.Join(tc.wantEvent, ","))
				}
			}
		})
	}
}

func TestApplyDrainErrorKeepsState(t *testing.T) {
	f := &fakeSlurm{node: idle(), drainErr: errors.New("slurmctld unreachable")}
	run, err := engine(f).Apply(context.Background(), failing, State{})
	if err == nil || !strings.Contains(err.Error(), "slurmctld unreachable") {
		t.Fatalf("want the drain error, got %v", err)
	}
	if run.State.Drained != nil {
		t.Errorf("a failed drain must not be recorded as ours: %+v", run.State)
	}
	if run.Outcome.Kind != Failed || !strings.Contains(run.Outcome.Detail, "slurmctld unreachable") {
		t.Errorf("outcome %+v", run.Outcome)
	}
	if run.State.Last["host.mounts//scratch"] != check.Fail {
		t.Errorf("transition memory lost: %+v", run.State.Last)
	}
}

func TestResumeAnsweredLateIsStillRecorded(t *testing.T) {
	f := &lateResume{fakeSlurm{node: slurm.Node{State: []string{"IDLE", "DRAIN"}, Reason: ourDrn}}}
	e := engine(&f.fakeSlurm)
	e.Ctl = f
	run, err := e.Apply(context.Background(), healthy, State{Drained: &Drain{Reason: ourDrn}, HealthyRuns: 1})
	if err != nil || run.Outcome.Kind != Resumed || run.State.Drained != nil {
		t.Fatalf("outcome %+v, err %v", run.Outcome, err)
	}
	if k := kinds(run.Events); len(k) != 1 || k[0] != events.KindResume {
		t.Errorf("events %v", k)
	}
}

// lateResume applies the resume but reports a timeout, as a slurmrestd
// answering after the client gave up would.
type lateResume struct{ fakeSlurm }

func (l *lateResume) Resume(ctx context.Context, name string) error {
	l.fakeSlurm.Resume(ctx, name)
	return context.DeadlineExceeded
}

func TestDrainThenResumeCycle(t *testing.T) {
	f := &fakeSlurm{node: idle()}
	e := engine(f)
	var st State
	steps := []struct {
		results []check.Result
		want    string
	}{
		{failing, Drained}, {failing, AlreadyDrained}, {healthy, WaitingResume}, {healthy, Resumed}, {healthy, Nothing}, {healthy, Nothing},
	}
	for i, s := range steps {
		run, err := e.Apply(context.Background(), s.results, st)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if run.Outcome.Kind != s.want {
			t.Fatalf("step %d: outcome %s, want %s", i, run.Outcome.Kind, s.want)
		}
		st = run.State
	}
	if f.node.Drained() {
		t.Errorf("node still drained at the end: %+v", f.node)
	}
	// 2 gets for the failing runs, a list, the drain and a recount, then
	// 1 get + 1 resume; none once healthy.
	if len(f.calls) != 7 {
		t.Errorf("calls %q, want 7", f.calls)
	}
}

func TestTransitions(t *testing.T) {
	e := engine(&fakeSlurm{})
	warn := []check.Result{{Check: "host.thermal", Component: "cpu0", Status: check.Warn, Message: "86°C"}}
	ok := []check.Result{{Check: "host.thermal", Component: "cpu0", Status: check.OK}}
	if evs := e.transitions(ok, nil, t0); len(evs) != 0 {
		t.Errorf("first healthy run logged %v", evs)
	}
	evs := e.transitions(warn, map[string]check.Status{"host.thermal/cpu0": check.OK}, t0)
	if len(evs) != 1 || evs[0].Previous != "OK" || evs[0].Status != "WARN" || evs[0].Component != "cpu0" {
		t.Errorf("OK->WARN: %+v", evs)
	}
	if evs := e.transitions(warn, map[string]check.Status{"host.thermal/cpu0": check.Warn}, t0); len(evs) != 0 {
		t.Errorf("unchanged status logged %v", evs)
	}
}

func TestReason(t *testing.T) {
	tests := []struct {
		name string
		in   []check.Result
		want string
	}{
		{"one", failing, ourDrn},
		{"more", append(append([]check.Result{}, failing...), check.Result{Check: "host.cpu", Component: "host", Message: "x"}),
			ourDrn + " (+1 more)"},
		{"control characters", []check.Result{{Check: "c", Component: "x", Message: "line1\nline2\x00\tend "}}, "gpuhc: c: x: line1 line2 end"},
	}
	for _, tc := range tests {
		if got := Reason(tc.in); got != tc.want {
			t.Errorf("%s: got %q want %q", tc.name, got, tc.want)
		}
	}
	long := Reason([]check.Result{{Check: "c", Component: "x", Message: strings.Repeat("é", 300)}})
	if len(long) > MaxReason || !strings.HasPrefix(long, Prefix) || strings.ContainsRune(long, '\uFFFD') {
		t.Errorf("long reason not cut cleanly: %d bytes %q", len(long), long[len(long)-4:])
	}
	if !Owned(ourDrn) || Owned("maintenance") || Owned(" gpuhc: x") {
		t.Error("Owned misjudges ownership")
	}
}

func TestStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	st := NewStore(dir, "gpu001")
	s, err := st.Load()
	if err != nil || s.Drained != nil {
		t.Fatalf("missing file: %+v %v", s, err)
	}
	want := State{Drained: &Drain{Reason: ourDrn, At: t0}, HealthyRuns: 1, Last: map[string]check.Status{"a/b": check.Fail}}
	if err := st.Save(want); err != nil {
		t.Fatal(err)
	}
	got, err := st.Load()
	if err != nil || !got.Equal(want) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o750 {
		t.Errorf("state dir mode %v", fi.Mode().Perm())
	}
	if err := os.WriteFile(st.Path, []byte("{torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Load(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("corrupt file: %v", err)
	}
}

func TestParseReason(t *testing.T) {
	for in, want := range map[string][4]string{
		ourDrn:                                     {"host.mounts", "/scratch", "not mounted", "true"},
		"gpuhc: replacing GPU 3: ticket 42":        {"", "", "replacing GPU 3: ticket 42", "false"},
		"gpuhc: replacing GPU 3":                   {"", "", "replacing GPU 3", "false"},
		"gpuhc: healthcheck: host: previous run":   {"healthcheck", "host", "previous run", "true"},
		"gpuhc: gpu.xid: gpu3: Xid 79 (+2 more)":   {"gpu.xid", "gpu3", "Xid 79 (+2 more)", "true"},
		"gpuhc: host.mounts: /my data: x: y":       {"host.mounts", "/my data", "x: y", "true"},
		"gpuhc: ib.port: mlx5_2/1: rate 200 < 400": {"ib.port", "mlx5_2/1", "rate 200 < 400", "true"},
		"gpuhc: gpu.xid: gpu3 (SN 1654922000003, 0000:4e:00.0): XID 79 GPU has fallen off the bus": {
			"gpu.xid", "gpu3", "XID 79 GPU has fallen off the bus", "true"},
		"Not responding": {"", "", "", "false"},
		"gpuhc: ":        {"", "", "", "false"},
	} {
		c, comp, m, ok := ParseReason(in)
		if got := [4]string{c, comp, m, fmt.Sprint(ok)}; got != want {
			t.Errorf("ParseReason(%q) = %q, want %q", in, got, want)
		}
	}
	idx := 3
	gpuFail := check.Result{Check: "gpu.xid", Component: "gpu3", Message: "XID 79 GPU has fallen off the bus",
		IDs: check.IDs{GPUIndex: &idx, Serial: "1654922000003", PCIBusID: "0000:4e:00.0"}}
	if got, want := Reason([]check.Result{gpuFail}), "gpuhc: gpu.xid: gpu3 (SN 1654922000003, 0000:4e:00.0): XID 79 GPU has fallen off the bus"; got != want {
		t.Errorf("GPU reason %q, want %q", got, want)
	}
	// Every reason Reason writes parses back.
	r := Reason([]check.Result{{Check: "host.cpu", Component: "host", Message: "1 CPU < 2"}})
	if c, comp, m, ok := ParseReason(r); !ok || c != "host.cpu" || comp != "host" || m != "1 CPU < 2" {
		t.Errorf("round trip of %q: %q %q %q %v", r, c, comp, m, ok)
	}
}

// The drain event names the failure its reason names, with its suggested
// action: what remediation and an admin reading the event log act on.
func TestDrainEventCarriesTheFailure(t *testing.T) {
	e := engine(&fakeSlurm{node: idle()})
	results := []check.Result{
		{Check: "host.mounts", Component: "/scratch", Status: check.OK},
		{Check: "gpu.xid", Component: "gpu3", Status: check.Fail, Action: check.ActionReboot,
			IDs: check.IDs{Serial: "1654922000003"}, Message: "XID 154 GPU recovery action changed: Node Reboot Required"},
	}
	run, err := e.Apply(context.Background(), results, State{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range run.Events {
		if ev.Kind != events.KindDrain {
			continue
		}
		if ev.Check != "gpu.xid" || ev.Component != "gpu3" || ev.Serial != "1654922000003" || ev.Action != "reboot" {
			t.Errorf("drain event %+v", ev)
		}
		return
	}
	t.Fatalf("no drain event in %+v", run.Events)
}
