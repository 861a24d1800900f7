package remedy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/policy"
)

// start begins a remediation: the reason says what is being done, the
// escalation record counts it, then the action runs.
func (e Engine) start(ctx context.Context, st *policy.State, rec *record, now time.Time) (Result, error) {
	d := st.Drained
	a := &Attempt{
		ID: fmt.Sprintf("%s@%d", d.Action, now.UnixNano()), Action: d.Action, Check: d.Check, Component: d.Component,
		Serial: d.Serial, PCI: d.PCI, Model: rec.Model, DrainAt: d.At, Started: now, Boot: e.BootID, Outcome: Pending,
	}
	if err := e.setReason(ctx, st, policy.PhaseReason(d.Action, named(d), message(d))); err != nil {
		return Result{Outcome: Outcome{Kind: Nothing}}, err
	}
	if held := e.recount(ctx); held != "" {
		rec.Held = ""
		return e.hold(ctx, st, rec, held)
	}
	rec.Current, rec.Held = a, ""
	rec.started(now)
	if _, err := e.history().Record(part(d), d.Check, a.ID, now); err != nil {
		// Not escalating costs an rma, not a drain: go on.
		err = fmt.Errorf("remediation of %s not counted towards rma: %w", d.Component, err)
		return e.act(ctx, st, rec, a, now, err)
	}
	return e.act(ctx, st, rec, a, now, nil)
}

func (e Engine) act(ctx context.Context, st *policy.State, rec *record, a *Attempt, now time.Time, warn error) (Result, error) {
	ev := e.event(now, events.KindRemediationStarted, a)
	if a.Action == string(check.ActionReboot) {
		ev.Message = "scontrol reboot Reason=" + st.Drained.Reason + " " + e.Node
		if err := e.Ctl.Reboot(ctx, e.Node, st.Drained.Reason); err != nil {
			return e.failed(ctx, st, rec, []events.Event{ev}, "scontrol reboot refused: "+err.Error())
		}
		return Result{Outcome: Outcome{Started, "reboot asked for; Slurm's RebootProgram carries it out once the node is idle"}, Events: []events.Event{ev}}, warn
	}
	argv := e.resetArgv(a.PCI)
	ev.Message = strings.Join(argv, " ")
	if out, err := e.reset(ctx, argv); err != nil {
		return e.failed(ctx, st, rec, []events.Event{ev}, fmt.Sprintf("%v%s", err, said(out)))
	}
	if err := e.clearSticky(a); err != nil {
		return e.failed(ctx, st, rec, []events.Event{ev}, "reset done, but "+err.Error())
	}
	end := e.now()
	a.Outcome, a.Ended = Finished, end
	fin := e.event(end, events.KindRemediationFinished, a)
	fin.Seconds, fin.Message = end.Sub(a.Started).Seconds(), ev.Message+": done"
	return Result{Outcome: Outcome{Done, "GPU reset; this run's checks judge it"}, Events: []events.Event{ev, fin}}, warn
}

// clearSticky drops the reset GPUs from the record of a check whose FAIL
// would outlive the reset, so that this run's checks judge them afresh.
func (e Engine) clearSticky(a *Attempt) error {
	clr := e.Sticky[a.Check]
	if clr == nil {
		return nil
	}
	var pcis []string
	if !e.Cfg.ResetAll && a.PCI != "" {
		pcis = []string{a.PCI}
	}
	if err := clr(pcis); err != nil {
		return fmt.Errorf("%s's record not cleared: %w", a.Check, err)
	}
	return nil
}

// failed ends the current attempt as failed: the node stays drained with
// a reason saying so, which is never auto-resumed.
func (e Engine) failed(ctx context.Context, st *policy.State, rec *record, evs []events.Event, why string) (Result, error) {
	a := rec.Current
	end := e.now()
	a.Outcome, a.Ended = Failed, end
	ev := e.event(end, events.KindRemediationFailed, a)
	ev.Seconds, ev.Message = end.Sub(a.Started).Seconds(), why
	evs = append(evs, ev)
	reason := policy.PhaseReason(policy.PhaseRemediationFailed, named(st.Drained), a.Action+": "+why)
	if err := e.setReason(ctx, st, reason); err != nil {
		return Result{Outcome: Outcome{FailedOut, why}, Events: evs}, err
	}
	return Result{Outcome: Outcome{FailedOut, why}, Events: evs}, nil
}

// pendingReboot follows a reboot asked for: done in a new boot, failed
// past the timeout, waiting otherwise.
func (e Engine) pendingReboot(ctx context.Context, st *policy.State, rec *record) (Result, error) {
	a, now := rec.Current, e.now()
	switch {
	case e.BootID != "" && a.Boot != "" && e.BootID != a.Boot:
		if e.dry() {
			return Result{Outcome: Outcome{Done, "rebooted (dry run: not recorded)"}}, nil
		}
		if err := e.keepOwnership(ctx, st); err != nil {
			return Result{Outcome: Outcome{Waiting, "rebooted; the node could not be read"}}, err
		}
		a.Outcome, a.Ended = Finished, now
		ev := e.event(now, events.KindRemediationFinished, a)
		ev.Seconds, ev.Message = now.Sub(a.Started).Seconds(), "rebooted: boot "+e.BootID
		return Result{Outcome: Outcome{Done, "rebooted; this run's checks judge the node"}, Events: []events.Event{ev}}, nil
	case now.Sub(a.Started) > e.Cfg.RebootTimeout.Duration:
		if e.dry() {
			return Result{Outcome: Outcome{FailedOut, "reboot overdue (dry run)"}}, nil
		}
		return e.failed(ctx, st, rec, nil, fmt.Sprintf("not rebooted within %s of the request", e.Cfg.RebootTimeout.Duration))
	}
	return Result{Outcome: Outcome{Waiting, fmt.Sprintf("reboot asked for %s ago", now.Sub(a.Started).Round(time.Second))}}, nil
}

// keepOwnership adopts the reason slurmctld made of ours when it issued
// the reboot (policy.RebootIssued), so that the drain stays ours and the
// healthy runs after the boot resume it. Any other reason is left for the
// policy to judge (an admin's: not ours any more).
func (e Engine) keepOwnership(ctx context.Context, st *policy.State) error {
	n, err := e.Ctl.Node(ctx, e.Node)
	if err != nil {
		return fmt.Errorf("read node %s after its reboot: %w", e.Node, err)
	}
	if n.Drained() && policy.SameDrain(st.Drained.Reason, n.Reason) {
		st.Drained.Reason = n.Reason
	}
	return nil
}

// rma re-reasons the drain as an rma: the same check failed on the same
// part after n remediations within the window.
func (e Engine) rma(ctx context.Context, st *policy.State, rec *record, n int) (Result, error) {
	d := st.Drained
	reason := policy.PhaseReason(policy.PhaseRMA, named(d), message(d))
	if e.dry() {
		return Result{Outcome: Outcome{RMA, "would drain as " + reason}}, nil
	}
	if err := e.setReason(ctx, st, reason); err != nil {
		return Result{Outcome: Outcome{Kind: Nothing}}, err
	}
	d.Action = string(check.ActionRMA)
	rec.Current = nil
	ev := RMAEvent(e.now(), e.Node, d, rec.Model, rec.Driver, n)
	ev.BootID, ev.Backend = e.BootID, e.Ctl.Backend()
	return Result{Outcome: Outcome{RMA, reason}, Events: []events.Event{ev}}, nil
}

// RMAEvent is the rma event for drain d: its part for the vendor ticket
// and how many remediations came before.
func RMAEvent(now time.Time, node string, d *policy.Drain, model, driver string, remediations int) events.Event {
	return events.Event{
		Time: now, Kind: events.KindRMA, Node: node, Check: d.Check, Component: d.Component, Serial: d.Serial,
		PCI: d.PCI, Model: model, Driver: driver, Remediations: remediations, Action: string(check.ActionRMA),
		Message: d.Reason, By: policy.By,
	}
}

// resetArgv is nvidia-smi's reset of the GPU at pci, or of every GPU.
func (e Engine) resetArgv(pci string) []string {
	if e.Cfg.ResetAll || pci == "" {
		return []string{e.Cfg.NvidiaSMI, "--gpu-reset"}
	}
	return []string{e.Cfg.NvidiaSMI, "--gpu-reset", "-i", pci}
}

// reset stops what holds the GPUs, resets, and starts it again (in
// reverse order, whatever the reset did), all under reset_timeout.
func (e Engine) reset(ctx context.Context, argv []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, e.Cfg.ResetTimeout.Duration)
	defer cancel()
	run := e.Run
	if run == nil {
		run = Exec
	}
	units := e.Cfg.StopUnits
	for i, u := range units {
		if out, err := run(ctx, []string{e.Cfg.Systemctl, "stop", u}); err != nil {
			e.restart(run, units[:i])
			return out, fmt.Errorf("stop %s: %w", u, err)
		}
	}
	out, err := run(ctx, argv)
	if rerr := e.restart(run, units); rerr != nil && err == nil {
		err = rerr
	}
	return out, err
}

// restart starts units again, last stopped first, on a fresh short
// context: they must come back even when the reset used up its time.
func (e Engine) restart(run Runner, units []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	for i := len(units) - 1; i >= 0; i-- {
		if _, err := run(ctx, []string{e.Cfg.Systemctl, "start", units[i]}); err != nil {
			errs = append(errs, fmt.Errorf("start %s again: %w", units[i], err))
		}
	}
	return errors.Join(errs...)
}

// maxOutput caps what a remediation command may print into our memory
// and the reason.
const maxOutput = 64 << 10

// Exec runs argv directly (no shell) under ctx.
func Exec(ctx context.Context, argv []string) (string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = "/"
	cmd.WaitDelay = time.Second
	var out capped
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return out.String(), err
}

// said is a command's output for a message: one line, short.
func said(out string) string {
	s := strings.Join(strings.Fields(out), " ")
	if s == "" {
		return ""
	}
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return ": " + s
}

type capped struct{ buf bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := maxOutput - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *capped) String() string { return c.buf.String() }
