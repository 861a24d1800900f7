package policy

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

func jobEngine(f *fakeSlurm, by string) Engine {
	e := engine(f)
	e.Job = &Job{ID: "4242", By: by, AfterJob: by == "epilog"}
	return e
}

var (
	gpuOK    = []check.Result{{Check: "gpu.xid", Component: "gpu3", Status: check.OK, Message: "no XIDs"}}
	gpuFail  = []check.Result{{Check: "gpu.xid", Component: "gpu3", Status: check.Fail, Message: "XID 79", Action: check.ActionReboot}}
	xidDrain = "gpuhc: gpu.xid: gpu3: XID 79"
)

func TestJobRun(t *testing.T) {
	drainedByHC := State{Drained: &Drain{Reason: ourDrn, At: t0, By: By}, HealthyRuns: 1,
		Last: map[string]check.Status{"host.mounts//scratch": check.Fail}}
	tests := []struct {
		name    string
		by      string
		node    slurm.Node
		prev    State
		results []check.Result
		// drainOnError sets [policy] drain_on_error.
		drainOnError bool
		wantKind     string
		wantCalls    []string
		check        func(t *testing.T, r Run)
	}{
		{
			name: "healthy prolog on a node we drained: no resume, no call, resume count untouched",
			by:   "prolog", node: slurm.Node{State: []string{"IDLE", "DRAIN"}, Reason: ourDrn}, prev: drainedByHC, results: gpuOK,
			wantKind: Nothing,
			check: func(t *testing.T, r Run) {
				if r.State.Drained == nil || r.State.HealthyRuns != 1 {
					t.Errorf("the health check's record changed: %+v", r.State)
				}
				if r.State.Last["host.mounts//scratch"] != check.Fail || r.State.Last["gpu.xid/gpu3"] != check.OK {
					t.Errorf("statuses not merged: %v", r.State.Last)
				}
				if len(r.Events) != 0 {
					t.Errorf("events %v", kinds(r.Events))
				}
			},
		},
		{
			name: "failing prolog drains with our reason, by the prolog, with the job id",
			by:   "prolog", node: idle(), results: gpuFail,
			wantKind: Drained, wantCalls: []string{"get gpu001", "list", "drain gpu001 " + xidDrain, "list"},
			check: func(t *testing.T, r Run) {
				if r.State.Drained == nil || r.State.Drained.By != "prolog" || r.State.HealthyRuns != 0 {
					t.Errorf("state %+v", r.State)
				}
				if got := kinds(r.Events); strings.Join(got, ",") != "transition,drain" {
					t.Fatalf("events %v", got)
				}
				for _, ev := range r.Events {
					if ev.JobID != "4242" || ev.By != "prolog" {
						t.Errorf("event %+v lacks the job id or who acted", ev)
					}
				}
			},
		},
		{
			name: "epilog: a WARN with drain-after-job drains now",
			by:   "epilog", node: idle(),
			results:   []check.Result{{Check: "gpu.memory", Component: "gpu1", Status: check.Warn, Message: "row remap pending", Action: check.ActionDrainAfterJob}},
			wantKind:  Drained,
			wantCalls: []string{"get gpu001", "list", "drain gpu001 gpuhc: gpu.memory: gpu1: row remap pending", "list"},
		},
		{
			name: "prolog: a WARN with drain-after-job waits for the job",
			by:   "prolog", node: idle(),
			results:  []check.Result{{Check: "gpu.memory", Component: "gpu1", Status: check.Warn, Message: "row remap pending", Action: check.ActionDrainAfterJob}},
			wantKind: Nothing,
		},
		{
			name: "epilog: an ERROR with drain-after-job does not drain (could not check)",
			by:   "epilog", node: idle(),
			results:  []check.Result{{Check: "gpu.memory", Component: "gpu1", Status: check.Error, Message: "NVML error", Action: check.ActionDrainAfterJob}},
			wantKind: Nothing,
		},
		{
			// Review: a slow NVML start softened to ERROR drained the
			// node and requeued the job where drain_on_error was set
			// for the health check.
			name: "prolog: drain_on_error does not make an ERROR drain-worthy in a job run",
			by:   "prolog", node: idle(), drainOnError: true,
			results:  []check.Result{{Check: "gpu.count", Component: "host", Status: check.Error, Message: "NVML did not answer in 4s (within the prolog's budget; left to the health check)"}},
			wantKind: Nothing,
		},
		{
			name: "epilog: nor in the epilog",
			by:   "epilog", node: idle(), drainOnError: true,
			results:  []check.Result{{Check: "job.leftover", Component: "gpu2", Status: check.Error, Message: "could not signal pid 4242: EPERM"}},
			wantKind: Nothing,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeSlurm{node: tt.node}
			e := jobEngine(f, tt.by)
			e.Policy.DrainOnError = tt.drainOnError
			if w := e.DrainWorthy(tt.results); len(w) != 0 && tt.wantKind == Nothing {
				t.Errorf("drain-worthy: %+v", w)
			}
			run, err := e.Apply(context.Background(), tt.results, tt.prev)
			if err != nil {
				t.Fatal(err)
			}
			if run.Outcome.Kind != tt.wantKind {
				t.Errorf("outcome %+v, want %s", run.Outcome, tt.wantKind)
			}
			if strings.Join(f.calls, "|") != strings.Join(tt.wantCalls, "|") {
				t.Errorf("calls %q, want %q", f.calls, tt.wantCalls)
			}
			if tt.check != nil {
				tt.check(t, run)
			}
		})
	}
}

// The health check goes on counting healthy runs across job runs, and
// resumes its drain when the count is reached, as if they never ran.
func TestJobRunsDoNotCountTowardsResume(t *testing.T) {
	f := &fakeSlurm{node: idle()}
	hc, pro := engine(f), jobEngine(f, "prolog")
	failing := []check.Result{{Check: "gpu.xid", Component: "gpu3", Status: check.Fail, Message: "XID 79"}}
	steps := []struct {
		e       Engine
		results []check.Result
		want    string
		healthy int
	}{
		{hc, failing, Drained, 0},
		{pro, gpuOK, Nothing, 0},
		{pro, gpuOK, Nothing, 0},
		{hc, gpuOK, WaitingResume, 1},
		{pro, gpuOK, Nothing, 1},
		{hc, gpuOK, Resumed, 0},
	}
	var st State
	for i, s := range steps {
		run, err := s.e.Apply(context.Background(), s.results, st)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if run.Outcome.Kind != s.want || run.State.HealthyRuns != s.healthy {
			t.Fatalf("step %d: %s with %d healthy runs, want %s with %d", i, run.Outcome.Kind, run.State.HealthyRuns, s.want, s.healthy)
		}
		st = run.State
	}
	if n := strings.Count(strings.Join(f.calls, "|"), "resume"); n != 1 {
		t.Errorf("%d resumes, want the health check's one: %q", n, f.calls)
	}
}

// A drain an epilog made for a check the health check does not run stays
// until an admin resumes it; one for a check it runs resumes as usual.
func TestDrainOfAJobRunForACheckTheHealthCheckDoesNotRun(t *testing.T) {
	leftover := "gpuhc: job.leftover: gpu2: pid 4242 (python3, uid 1001) holds 2048 MiB after job 7"
	f := &fakeSlurm{node: slurm.Node{State: []string{"IDLE", "DRAIN"}, Reason: leftover}}
	st := State{Drained: &Drain{Reason: leftover, At: t0, By: "epilog"}, HealthyRuns: 1}
	run, err := engine(f).Apply(context.Background(), healthy, st)
	if err != nil {
		t.Fatal(err)
	}
	if run.Outcome.Kind != Held || !strings.Contains(run.Outcome.Detail, "job.leftover, which this run does not check") {
		t.Errorf("outcome %+v", run.Outcome)
	}
	if strings.Contains(strings.Join(f.calls, "|"), "resume") || run.State.Drained == nil {
		t.Errorf("resumed: calls %q state %+v", f.calls, run.State)
	}
	// An admin resumes it: the record goes, with a resume event.
	f.Resume(context.Background(), "gpu001")
	run, err = engine(f).Apply(context.Background(), healthy, run.State)
	if err != nil || run.Outcome.Kind != Released || run.State.Drained != nil {
		t.Fatalf("after the admin's resume: %+v %+v %v", run.Outcome, run.State, err)
	}
	if k := kinds(run.Events); len(k) != 1 || k[0] != events.KindResume {
		t.Errorf("events %v", k)
	}

	// The prolog's drain for gpu.xid, which the health check runs.
	f = &fakeSlurm{node: slurm.Node{State: []string{"IDLE", "DRAIN"}, Reason: xidDrain}}
	st = State{Drained: &Drain{Reason: xidDrain, At: t0, By: "prolog"}, HealthyRuns: 1}
	run, err = engine(f).Apply(context.Background(), gpuOK, st)
	if err != nil || run.Outcome.Kind != Resumed {
		t.Errorf("prolog's gpu.xid drain: %+v %v", run.Outcome, err)
	}
}
