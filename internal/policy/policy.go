package policy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

// Outcome kinds, as printed and logged.
const (
	Nothing        = "none"
	Drained        = "drained"
	Resumed        = "resumed"
	AlreadyDrained = "already-drained"
	ForeignDrain   = "foreign-drain"
	WaitingResume  = "waiting-resume"
	Held           = "held"
	Released       = "released"
	WouldDrain     = "would-drain"
	WouldResume    = "would-resume"
	// Failed means the policy could not act (Slurm unreachable, ...).
	Failed = "error"
	// DrainSuppressed: the node should be drained, but the storm guard
	// refused because too many nodes are already drained by gpuhc.
	DrainSuppressed = "drain-suppressed"
)

// Outcome says what the policy did (or, in a dry run, would do).
type Outcome struct {
	Kind   string
	Detail string
}

// Engine applies the policy for one node.
type Engine struct {
	Node   string
	Policy config.Policy
	DryRun bool
	// Ctl is only called when the decision needs Slurm; it may be nil in a
	// dry run.
	Ctl    slurm.Controller
	BootID string
	Now    func() time.Time
	// StormFile caches the storm guard's count of drained nodes (see
	// StormFile()); empty: no cache, every guarded drain lists the nodes.
	// The limits and the cache's lifetime are in Policy.
	StormFile string
	// Sleep and Jitter (a number in [0,1)) spread the storm guard's
	// listing; nil means a real timer and math/rand.
	Sleep  func(ctx context.Context, d time.Duration) error
	Jitter func() float64
	// Job, when set, makes this a job run (gpuhc-prolog, gpuhc-epilog)
	// rather than the health check's.
	Job *Job
	// Early marks an early drain: results are those of the checks that
	// have finished so far, with a FAIL among them, while others still run.
	// It drains as Apply always does (reason, ownership, storm guard), but
	// the statuses are merged into what was known, as a job run's are, and
	// it never resumes: resume is decided on the complete result set only.
	// The run's full Apply then finds the drain made and does not
	// re-reason it (the reason on the node is the one in State.Drained).
	Early bool
}

// Job describes a job run. It drains on a FAIL exactly as the health
// check does (ownership rules and storm guard included), but:
//   - it never resumes, and its healthy runs do not count towards the
//     health check's resume (a prolog sees a node between two jobs, not
//     over time);
//   - it runs a few checks only, so the statuses it remembers are merged
//     into the health check's rather than replacing them: the checks it
//     did not run keep their last status, and their transitions are
//     neither lost nor logged twice;
//   - its events carry the job id and who acted.
type Job struct {
	ID string
	// By is the program: "prolog" or "epilog".
	By string
	// AfterJob makes results whose action is drain-after-job drain-worthy
	// from WARN up: the epilog runs when the job they waited for is over.
	AfterJob bool
}

// By is the name events and drain records give the health check.
const By = "healthcheck"

// Run is the result of one Apply: the new state to save and events to log.
type Run struct {
	Outcome Outcome
	State   State
	Events  []events.Event
}

// Apply decides and, unless DryRun, acts. On error the returned Run still
// carries the transitions seen, and the state keeps what we knew before, so
// the next run retries.
func (e Engine) Apply(ctx context.Context, results []check.Result, prev State) (Run, error) {
	now := e.now()
	st := prev.Clone()
	run := Run{Events: e.transitions(results, prev.Last, now)}
	st.Last = lastStatuses(results)
	if e.Job != nil || e.Early {
		st.Last = merged(prev.Last, st.Last)
	}

	failures := rmaFirst(e.DrainWorthy(results))
	if e.Early && len(failures) == 0 {
		run.Outcome, run.State = Outcome{Kind: Nothing, Detail: "early: nothing to drain yet"}, st
		return run, nil
	}
	var (
		out Outcome
		err error
	)
	switch {
	case len(failures) > 0:
		st.HealthyRuns = 0
		out, err = e.drain(ctx, failures[0], Reason(failures), &st, &run, now)
	case check.Worst(results) == check.Error:
		// Could not check everything: neither healthy nor failing, so the
		// resume count neither grows nor resets.
		out = Outcome{Kind: Nothing, Detail: "some checks could not run; not counted towards resume"}
	case e.Job != nil:
		out = Outcome{Kind: Nothing}
		if st.Drained != nil {
			out.Detail = "node drained by gpuhc; resuming it is the health check's"
		}
	default:
		out, err = e.healthy(ctx, &st, &run, results, now)
	}
	run.Outcome = out
	if err != nil {
		run.Outcome = Outcome{Failed, err.Error()}
		run.State = prev.Clone()
		run.State.Last = st.Last
		return run, err
	}
	run.State = st
	return run, nil
}

func (e Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// DrainWorthy returns the results Apply drains for: FAILs, ERRORs with
// drain_on_error (the health check's only), and in an after-job run
// (Job.AfterJob) WARNs and FAILs whose action is drain-after-job.
//
// A job run never drains for an ERROR, whatever drain_on_error says:
// its budget is seconds, so its ERRORs are mostly time running out (an
// NVML answer slower than the budget is softened to ERROR for that very
// reason, see jobrun.Soften), and a prolog that drained for them would
// take healthy nodes out, and requeue their jobs, at every slow start.
// The health check, with its 45 s deadline, judges them.
func (e Engine) DrainWorthy(results []check.Result) []check.Result {
	var out []check.Result
	onError := e.Policy.DrainOnError && e.Job == nil
	for _, r := range results {
		afterJob := e.Job != nil && e.Job.AfterJob && r.Action == check.ActionDrainAfterJob && (r.Status == check.Warn || r.Status == check.Fail)
		if r.Status == check.Fail || (onError && r.Status == check.Error) || afterJob {
			out = append(out, r)
		}
	}
	return out
}

// rmaFirst moves the first failure whose action is rma to the front: the
// reason names the first failure, and a part to send back must not hide
// behind a lesser fault (nor be resumed as one).
func rmaFirst(failures []check.Result) []check.Result {
	i := slices.IndexFunc(failures, func(r check.Result) bool { return r.Action == check.ActionRMA })
	if i > 0 {
		failures = slices.Concat(failures[i:i+1], failures[:i], failures[i+1:])
	}
	return failures
}

// by names who acts in events and drain records.
func (e Engine) by() string {
	if e.Job != nil {
		return e.Job.By
	}
	return By
}

func (e Engine) jobID() string {
	if e.Job != nil {
		return e.Job.ID
	}
	return ""
}

// merged is last with this run's statuses laid over it.
func merged(last, run map[string]check.Status) map[string]check.Status {
	out := make(map[string]check.Status, len(last)+len(run))
	maps.Copy(out, last)
	maps.Copy(out, run)
	return out
}

// named is the failure the reason names: the drain event carries its
// check, component, serial and suggested action, which is what remediation
// and an admin reading the event log act on.
// noReason stands for a foreign drain that carries no reason, in the
// state and the drain-skipped event.
const noReason = "(drained with no reason)"

func (e Engine) drain(ctx context.Context, named check.Result, reason string, st *State, run *Run, now time.Time) (Outcome, error) {
	if e.DryRun {
		return Outcome{WouldDrain, reason}, nil
	}
	n, err := e.Ctl.Node(ctx, e.Node)
	if err != nil {
		return Outcome{}, fmt.Errorf("read node %s before draining: %w", e.Node, err)
	}
	switch {
	case n.Drained() && Owned(n.Reason):
		st.Foreign, st.Suppressed = "", ""
		switch {
		case st.Drained != nil && SameDrain(st.Drained.Reason, n.Reason):
			st.Drained.Reason = n.Reason
		case st.Drained == nil && n.Reason == reason:
			// The very drain this run would make, with no record of it: a
			// lost state file, or a drain whose answer was lost. Adopt it
			// so it is resumed once healthy, and count it against the
			// storm limit, which nobody did when it was made.
			// Its drain event is recorded now, as the drain it is: the
			// statistics take a second drain event before a resume as the
			// same period, so a lost state file costs nothing there.
			st.Drained = e.record(named, n.Reason, now)
			st.Drained.Uncounted = true
			run.Events = append(run.Events, e.drainEvent(now, named, reason))
		default:
			// A gpuhc reason we did not set (gpuhc-drain by an admin, or a
			// re-reasoned drain): someone else's to resume.
			st.Drained = nil
			return Outcome{AlreadyDrained, n.Reason + " (not set by this node's health check; left alone)"}, nil
		}
		if st.Drained.Uncounted && e.stormOn() {
			at := n.ReasonTime
			if at.IsZero() {
				at = now
			}
			if out, gaveBack := e.recountDrain(ctx, st, run, n.Reason, at, now); gaveBack {
				return out, nil
			}
		}
		return Outcome{AlreadyDrained, n.Reason}, nil
	case offline(n) && (n.Reason != "" || n.Drained()):
		// An admin's drain, slurmctld's own "Not responding", or a DOWN
		// node still showing an old gpuhc reason (24.11 keeps reasons after
		// RESUME): replacing it would hide why the node is out, and a DOWN
		// node given DRAIN is not returned to service by ReturnToService.
		// A DRAIN with no reason at all is someone else's too: REST takes
		// one (verified on 24.11 and 26.05.5), gpuhc never sends one.
		foreign := n.Reason
		if foreign == "" {
			foreign = noReason
		}
		if st.Foreign != foreign {
			st.Foreign = foreign
			run.Events = append(run.Events, e.event(now, events.KindDrainSkipped, foreign, e.Ctl.Backend()))
		}
		st.Drained, st.Suppressed = nil, ""
		return Outcome{ForeignDrain, fmt.Sprintf("left alone, %s by someone else: %q (we would say %q)", strings.ToLower(n.Base()), n.Reason, reason)}, nil
	}
	e.drainGone(st, run, n, now)
	if e.stormOn() {
		v, err := e.storm(ctx, now)
		if err != nil {
			// Not draining is the safe side: a slurmctld that cannot list
			// nodes could not drain this one either. The next run retries.
			return Outcome{}, fmt.Errorf("storm guard before draining %s: %w", e.Node, err)
		}
		if v.suppress {
			return e.suppress(st, run, reason, e.describe(v, reason, now), now), nil
		}
	}
	if err := e.Ctl.Drain(ctx, e.Node, reason); err != nil && !e.drainLanded(ctx, reason) {
		return Outcome{}, fmt.Errorf("drain %s: %w", e.Node, err)
	}
	drainedAt := e.now()
	st.Drained = e.record(named, reason, now)
	st.Foreign, st.Suppressed = "", ""
	run.Events = append(run.Events, e.drainEvent(now, named, reason))
	if e.stormOn() {
		st.Drained.Uncounted = true
		if out, gaveBack := e.recountDrain(ctx, st, run, reason, drainedAt, now); gaveBack {
			return out, nil
		}
	}
	return Outcome{Drained, reason}, nil
}

// record is the state's record of our drain for named with reason.
func (e Engine) record(named check.Result, reason string, now time.Time) *Drain {
	return &Drain{
		Reason: reason, At: now, By: e.by(),
		Check: named.Check, Component: named.Component, Serial: named.IDs.Serial,
		PCI: named.IDs.PCIBusID, Action: string(named.Action),
	}
}

// drainEvent records a drain for named with reason.
func (e Engine) drainEvent(now time.Time, named check.Result, reason string) events.Event {
	ev := e.event(now, events.KindDrain, reason, e.Ctl.Backend())
	ev.Check, ev.Component, ev.Serial, ev.Action = named.Check, named.Component, named.IDs.Serial, string(named.Action)
	return ev
}

// drainLanded reports whether a drain whose call failed took effect all
// the same: a request that timed out on a busy slurmrestd may still be
// carried out, and a drain nobody knows about is never counted against
// the storm limit nor resumed.
func (e Engine) drainLanded(ctx context.Context, reason string) bool {
	n, err := e.Ctl.Node(ctx, e.Node)
	return err == nil && n.Drained() && n.Reason == reason
}

// recountDrain counts our drain (made at drainedAt, our clock, or
// slurmctld's reason time) against the storm limit and gives it back when
// it came at or past the limit: nodes that failed together all saw room.
// A drain that could not be counted keeps Uncounted, so the next run
// counts it; one that was counted clears it.
func (e Engine) recountDrain(ctx context.Context, st *State, run *Run, reason string, drainedAt, now time.Time) (Outcome, bool) {
	detail, over, counted := e.recount(ctx, reason, drainedAt)
	if !counted {
		return Outcome{}, false
	}
	if over {
		if err := e.Ctl.Resume(ctx, e.Node); err == nil || e.resumedAnyway(ctx) {
			run.Events = append(run.Events, e.event(now, events.KindResume, reason, e.Ctl.Backend()))
			st.Drained = nil
			return e.suppress(st, run, reason, detail, now), true
		}
		// Still ours and still over: the next run tries again.
		return Outcome{}, false
	}
	st.Drained.Uncounted = false
	return Outcome{}, false
}

// suppress records a drain the storm guard refused, once per failing
// check and component: the reason carries measured values that change
// from run to run.
func (e Engine) suppress(st *State, run *Run, reason, detail string, now time.Time) Outcome {
	key := reason
	if chk, comp, _, ok := ParseReason(reason); ok {
		key = chk + ": " + comp
	}
	if st.Suppressed != key {
		st.Suppressed = key
		run.Events = append(run.Events, e.event(now, events.KindDrainSuppressed, detail, e.Ctl.Backend()))
	}
	st.Drained, st.Foreign = nil, ""
	return Outcome{DrainSuppressed, detail}
}

// drainGone records the end of a drain of ours that someone else resumed
// while we were not looking, so that the statistics pair every drain with
// its resume.
func (e Engine) drainGone(st *State, run *Run, n slurm.Node, now time.Time) {
	if st.Drained == nil || n.Drained() {
		return
	}
	ev := e.event(now, events.KindResume, st.Drained.Reason, e.Ctl.Backend())
	ev.By = "not gpuhc (found resumed)"
	run.Events = append(run.Events, ev)
	st.Drained, st.HealthyRuns = nil, 0
}

func (e Engine) healthy(ctx context.Context, st *State, run *Run, results []check.Result, now time.Time) (Outcome, error) {
	st.Foreign, st.Suppressed = "", ""
	if st.Drained == nil {
		// The steady state of a healthy fleet: no Slurm call at all.
		return Outcome{Kind: Nothing}, nil
	}
	st.HealthyRuns++
	if !e.Policy.AutoResume {
		return Outcome{WaitingResume, "healthy; auto_resume is off, resume by hand"}, nil
	}
	if phase, ok := Sticky(st.Drained.Reason); ok {
		return Outcome{Held, fmt.Sprintf("healthy, but a %s drain is never resumed automatically; resume by hand (gpuhc-drain resume)", phase)}, nil
	}
	if st.HealthyRuns < e.Policy.ResumeAfter {
		return Outcome{WaitingResume, fmt.Sprintf("healthy run %d of %d before resume", st.HealthyRuns, e.Policy.ResumeAfter)}, nil
	}
	unjudged := unjudged(st.Drained, results)
	if e.DryRun {
		if unjudged != "" {
			return Outcome{Held, unjudged}, nil
		}
		return Outcome{WouldResume, st.Drained.Reason}, nil
	}
	n, err := e.Ctl.Node(ctx, e.Node)
	if err != nil {
		return Outcome{}, fmt.Errorf("read node %s before resuming: %w", e.Node, err)
	}
	if SameDrain(st.Drained.Reason, n.Reason) {
		st.Drained.Reason = n.Reason
	}
	if ok, why := resumable(n, st.Drained.Reason); !ok {
		if !n.Drained() {
			e.drainGone(st, run, n, now)
			return Outcome{Released, why}, nil
		}
		if n.Reason != st.Drained.Reason {
			// Not ours any more: someone resumed or re-reasoned it.
			st.Drained, st.HealthyRuns = nil, 0
			return Outcome{Released, why}, nil
		}
		return Outcome{Held, why}, nil
	}
	if unjudged != "" {
		return Outcome{Held, unjudged}, nil
	}
	if err := e.Ctl.Resume(ctx, e.Node); err != nil && !e.resumedAnyway(ctx) {
		return Outcome{}, fmt.Errorf("resume %s: %w", e.Node, err)
	}
	run.Events = append(run.Events, e.event(now, events.KindResume, n.Reason, e.Ctl.Backend()))
	st.Drained, st.HealthyRuns = nil, 0
	return Outcome{Resumed, fmt.Sprintf("was %q", n.Reason)}, nil
}

// unjudged says why a healthy run cannot resume d: a drain a job run made
// for a check this run did not run (the epilog's leftover GPU processes,
// the full prolog's bandwidth). Healthy runs of other checks say nothing
// about that fault, so an admin resumes it ("" when the run may resume).
func unjudged(d *Drain, results []check.Result) string {
	if d == nil || d.By == "" || d.By == By {
		return ""
	}
	// The record names the check; a reason in a remediation's phase
	// names the phase where the check stands.
	chk, ok := d.Check, d.Check != ""
	if !ok {
		chk, _, _, ok = ParseReason(d.Reason)
	}
	if !ok || slices.ContainsFunc(results, func(r check.Result) bool { return r.Check == chk }) {
		return ""
	}
	return fmt.Sprintf("drained by gpuhc-%s for %s, which this run does not check; resume by hand (gpuhc-drain resume)", d.By, chk)
}

// resumedAnyway re-reads the node after a failed resume: a RESUME that
// slurmctld applied but whose answer timed out must still be recorded.
func (e Engine) resumedAnyway(ctx context.Context) bool {
	n, err := e.Ctl.Node(ctx, e.Node)
	return err == nil && !n.Drained()
}

// offline reports whether Slurm keeps jobs off the node, whatever the cause.
func offline(n slurm.Node) bool {
	return n.Drained() || n.Base() == "DOWN" || n.Has("FAIL")
}

// resumable applies the resume rules
// (docs/architecture.md#resume-and-hysteresis): only the drain we made
// (same reason), never a DOWN node, never one with a pending reboot or in
// maintenance.
func resumable(n slurm.Node, ours string) (bool, string) {
	switch {
	case !n.Drained():
		return false, "node is no longer drained"
	case n.Reason != ours:
		return false, fmt.Sprintf("drain reason is now %q, not the one we set", n.Reason)
	case n.Base() == "DOWN":
		return false, "node is DOWN; leaving it to the admin"
	case n.HasPrefix("REBOOT"):
		return false, "a reboot is pending"
	case n.Has("MAINTENANCE"):
		return false, "node is in a maintenance reservation"
	}
	return true, ""
}

func (e Engine) event(now time.Time, kind, msg, backend string) events.Event {
	return events.Event{Time: now, Kind: kind, Node: e.Node, Message: msg, Backend: backend, BootID: e.BootID, By: e.by(), JobID: e.jobID()}
}

func key(r check.Result) string { return r.Check + "/" + r.Component }

func lastStatuses(results []check.Result) map[string]check.Status {
	m := make(map[string]check.Status, len(results))
	for _, r := range results {
		m[key(r)] = r.Status
	}
	return m
}

// transitions logs each component whose status changed. A component seen
// for the first time is logged only when it is not healthy, so the first
// run on a healthy node writes nothing.
func (e Engine) transitions(results []check.Result, last map[string]check.Status, now time.Time) []events.Event {
	var out []events.Event
	for _, r := range results {
		old, seen := last[key(r)]
		if seen && old == r.Status {
			continue
		}
		if !seen && (r.Status == check.OK || r.Status == check.Skip) {
			continue
		}
		ev := events.Event{
			Time: now, Kind: events.KindTransition, Node: e.Node,
			Check: r.Check, Component: r.Component, Serial: r.IDs.Serial,
			Status: r.Status.String(), Message: r.Message, Action: string(r.Action),
			BootID: e.BootID, JobID: e.jobID(),
		}
		if e.Job != nil {
			ev.By = e.Job.By
		}
		if seen {
			ev.Previous = old.String()
		}
		out = append(out, ev)
	}
	return out
}
