package policy

import (
	"context"
	"slices"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/events"
)

// An early drain with the first FAIL, then the run's full Apply with a
// second FAIL found later: one drain, the first reason kept, the later
// FAIL recorded as a transition and in the statuses.
func TestEarlyDrainThenLaterFailDoesNotReReason(t *testing.T) {
	f := &fakeSlurm{node: idle()}
	prev := State{Last: map[string]check.Status{"gpu.thermal/gpu0": check.OK}}
	e := engine(f)
	e.Early = true
	early, err := e.Apply(context.Background(), failing, prev)
	if err != nil || early.Outcome.Kind != Drained || early.State.Drained == nil || early.State.Drained.Reason != ourDrn {
		t.Fatalf("early = %+v, %v; want drained %q", early, err, ourDrn)
	}
	if early.State.Last["gpu.thermal/gpu0"] != check.OK {
		t.Errorf("early run forgot the statuses of checks still running: %v", early.State.Last)
	}
	later := check.Result{Check: "gpu.thermal", Component: "gpu0", Status: check.Fail, Message: "97 C", Action: check.ActionDrain}
	all := append(slices.Clone(failing), later)
	f.calls = nil
	full, err := engine(f).Apply(context.Background(), all, early.State)
	if err != nil || full.Outcome.Kind != AlreadyDrained {
		t.Fatalf("full = %+v, %v; want already-drained", full.Outcome, err)
	}
	if f.node.Reason != ourDrn || full.State.Drained.Reason != ourDrn {
		t.Errorf("drain re-reasoned: node %q, state %q", f.node.Reason, full.State.Drained.Reason)
	}
	if !slices.Equal(f.calls, []string{"get gpu001"}) {
		t.Errorf("full run calls = %v, want one read and no drain", f.calls)
	}
	if got := kinds(full.Events); !slices.Equal(got, []string{events.KindTransition}) || full.Events[0].Check != "gpu.thermal" {
		t.Errorf("full run events = %v, want the later FAIL's transition only", full.Events)
	}
	if full.State.Last["gpu.thermal/gpu0"] != check.Fail {
		t.Errorf("later FAIL not in the statuses: %v", full.State.Last)
	}
}

func TestEarlyNeverResumesNorCalls(t *testing.T) {
	f := &fakeSlurm{node: idle("DRAIN")}
	f.node.Reason = ourDrn
	e := engine(f)
	e.Early = true
	prev := State{Drained: &Drain{Reason: ourDrn, At: t0}, HealthyRuns: 5}
	run, err := e.Apply(context.Background(), healthy, prev)
	if err != nil || run.Outcome.Kind != Nothing || len(f.calls) != 0 || run.State.Drained == nil || run.State.HealthyRuns != 5 {
		t.Errorf("early healthy partial = %+v, %v, calls %v; want nothing done", run, err, f.calls)
	}
}

func TestEarlyDrainHonoursStormGuard(t *testing.T) {
	f := &fakeSlurm{node: idle()}
	for _, n := range []string{"gpu002", "gpu003"} {
		f.others = append(f.others, idle("DRAIN"))
		f.others[len(f.others)-1].Name, f.others[len(f.others)-1].Reason = n, "gpuhc: x: y: z"
	}
	e := engine(f)
	e.Early = true
	e.Policy.MaxDrainedFraction, e.Policy.MaxDrainedNodes = 0, 2
	run, err := e.Apply(context.Background(), failing, State{})
	if err != nil || run.Outcome.Kind != DrainSuppressed || slices.ContainsFunc(f.calls, func(c string) bool { return c == "drain gpu001 "+ourDrn }) {
		t.Errorf("early drain past the storm limit = %+v, %v, calls %v; want suppressed", run.Outcome, err, f.calls)
	}
}
