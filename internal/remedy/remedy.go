// Package remedy carries out the action a drain of ours suggests
// (reset-gpu, reboot) on an idle node, through Slurm's own machinery, and
// escalates what remediation does not cure to rma
// (docs/remediation.md). It runs at the start of a health-check run, only
// on a node the policy state records as drained by gpuhc: a healthy node
// reads no file and makes no Slurm call for it.
package remedy

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/escalate"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/policy"
	"github.com/gpuhc/gpuhc/internal/slurm"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

// Controller is node control with reboots.
type Controller interface {
	slurm.Controller
	Reboot(ctx context.Context, name, reason string) error
}

// Runner runs argv (never through a shell) under ctx and returns its
// combined output, capped.
type Runner func(ctx context.Context, argv []string) (string, error)

// Engine remediates one node.
type Engine struct {
	Node   string
	Cfg    config.Remediate
	DryRun bool
	Ctl    Controller
	BootID string
	Dir    statefile.Dir
	Now    func() time.Time
	// Run runs nvidia-smi and systemctl; nil: Exec.
	Run Runner
	// Sleep waits before the cluster recount; nil: a real timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Sticky lists the checks whose FAIL outlives a GPU reset (the
	// kernel-log ones keep it for the boot), with what clears their
	// record of the reset GPUs (nil pcis: every GPU) once the reset is
	// done. A check listed with no clearer is never reset: its FAIL
	// could not tell a cure from a failure, and two resets would end in a
	// false rma.
	Sticky map[string]Clearer
}

// Clearer drops a check's record of the GPUs at pcis (all when nil).
type Clearer func(pcis []string) error

// Outcome kinds.
const (
	Nothing   = "none"
	Waiting   = "waiting"
	Held      = "held"
	Started   = "started"
	Done      = "finished"
	FailedOut = "failed"
	RMA       = "rma"
	Would     = "would-remediate"
)

// Outcome says what Before did.
type Outcome struct {
	Kind   string
	Detail string
}

// Result is what Before did: its outcome and events. The policy state it
// was given is updated in place (the drain's new reason).
type Result struct {
	Outcome Outcome
	Events  []events.Event
}

// File names in the state directory.
func recordFile(node string) string { return "remediate." + node + ".json" }

// HistoryFile is the escalation record remediation shares with the XID
// check's escalation across boots (package escalate): one mechanism.
const HistoryFile = "gpu-xid-history.json"

func (e Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e Engine) store() store { return store{dir: e.Dir, name: recordFile(e.Node)} }

func (e Engine) history() escalate.History { return escalate.New(e.Dir, HistoryFile) }

// part keys the escalation record: the GPU's serial, which follows it
// between nodes, or the node's component when there is none.
func part(d *policy.Drain) string {
	if d.Serial != "" {
		return d.Serial
	}
	return "node:" + d.Component
}

// remediable reports whether d's action is one remediation carries out.
func remediable(d *policy.Drain) bool {
	return d != nil && (d.Action == string(check.ActionResetGPU) || d.Action == string(check.ActionReboot)) && d.Check != ""
}

// named is the failure d names, as the reason formatter takes it.
func named(d *policy.Drain) check.Result {
	return check.Result{Check: d.Check, Component: d.Component, IDs: check.IDs{Serial: d.Serial, PCIBusID: d.PCI}}
}

// message is the failure's own words from d's reason, whatever phase the
// reason is in now.
func message(d *policy.Drain) string {
	reason := d.Reason
	if i := strings.LastIndex(reason, heldMark); i > 0 {
		reason = strings.TrimSpace(reason[:i])
	}
	phase, _, msg, ok := policy.ParseReason(reason)
	if !ok {
		return d.Reason
	}
	if phase == d.Check {
		return msg
	}
	// "<phase>: <part>: <check>: <message>": the part was cut already.
	if rest, found := strings.CutPrefix(msg, d.Check+": "); found {
		return rest
	}
	return msg
}

// heldMark starts what hold appends to a reason.
const heldMark = " [not remediated: "

// Before remediates st's drain when everything allows it, and otherwise
// says why not. It is called before the run's checks; their results then
// go to After.
func (e Engine) Before(ctx context.Context, st *policy.State) (Result, error) {
	d := st.Drained
	if !e.Cfg.Enabled || !remediable(d) {
		return Result{Outcome: Outcome{Kind: Nothing}}, nil
	}
	if _, sticky := policy.Sticky(d.Reason); sticky {
		return Result{Outcome: Outcome{Kind: Nothing, Detail: "sticky drain: " + d.Reason}}, nil
	}
	rec, err := e.store().load()
	if err != nil {
		return Result{Outcome: Outcome{Kind: Nothing}}, err
	}
	cur := rec.Current
	if cur != nil && !cur.DrainAt.Equal(d.At) {
		cur, rec.Current = nil, nil // an earlier drain's attempt
	}
	var res Result
	switch {
	case cur != nil && cur.Outcome == Pending:
		res, err = e.pendingReboot(ctx, st, &rec)
	case cur != nil && cur.Outcome == Finished && !cur.Recurred:
		res = Result{Outcome: Outcome{Waiting, cur.Action + " finished; healthy runs resume the node"}}
	default:
		res, err = e.decide(ctx, st, &rec)
	}
	if e.dry() {
		return res, err
	}
	if serr := e.store().save(rec); serr != nil && err == nil {
		err = serr
	}
	return res, err
}

func (e Engine) dry() bool { return e.DryRun || e.Cfg.DryRun }

// decide escalates to rma, or remediates when the node and the budgets
// allow it.
func (e Engine) decide(ctx context.Context, st *policy.State, rec *record) (Result, error) {
	d := st.Drained
	now := e.now()
	n, err := e.history().Since(part(d), d.Check, now.Add(-e.Cfg.RMAWindow.Duration))
	if err != nil {
		return Result{Outcome: Outcome{Kind: Nothing}}, err
	}
	if n >= e.Cfg.RMAAfter {
		return e.rma(ctx, st, rec, n)
	}
	if !e.Cfg.Allows(d.Action) {
		return Result{Outcome: Outcome{Nothing, d.Action + " is not in remediate.actions"}}, nil
	}
	if clr, sticky := e.Sticky[d.Check]; sticky && clr == nil && d.Action == string(check.ActionResetGPU) {
		return Result{Outcome: Outcome{Nothing, d.Check + " stays FAIL for the boot whatever a reset does; not resetting (reboot, or reset and clear by hand)"}}, nil
	}
	node, err := e.Ctl.Node(ctx, e.Node)
	if err != nil {
		return Result{Outcome: Outcome{Kind: Nothing}}, fmt.Errorf("read node %s before remediating: %w", e.Node, err)
	}
	if why := notNow(node, d.Reason); why != "" {
		return Result{Outcome: Outcome{Waiting, why}}, nil
	}
	if held := e.budget(ctx, rec, now); held != "" {
		return e.hold(ctx, st, rec, held)
	}
	if e.dry() {
		return Result{Outcome: Outcome{Would, fmt.Sprintf("%s %s (%s)", d.Action, d.Component, d.Check)}}, nil
	}
	return e.start(ctx, st, rec, now)
}

// notNow says why an idle-only action cannot start on node now ("" when
// it can): the drain must still be ours, and the node must run nothing.
func notNow(n slurm.Node, ours string) string {
	switch {
	case !n.Drained() || n.Reason != ours:
		return fmt.Sprintf("the drain is no longer ours (%q); not remediating", n.Reason)
	case n.Base() == "DOWN":
		return "node is DOWN; leaving it to the admin"
	case n.HasPrefix("REBOOT"):
		return "a reboot is already pending"
	case n.Has("MAINTENANCE"):
		return "node is in a maintenance reservation"
	case n.Base() != "IDLE" || n.Has("COMPLETING"):
		return fmt.Sprintf("node runs a job (%s); remediation waits until it is idle", n.Base())
	}
	return ""
}

func (e Engine) event(now time.Time, kind string, a *Attempt) events.Event {
	return events.Event{
		Time: now, Kind: kind, Node: e.Node, Check: a.Check, Component: a.Component, Serial: a.Serial,
		PCI: a.PCI, Model: a.Model, Action: a.Action, By: policy.By, BootID: e.BootID,
		Backend: e.Ctl.Backend(),
	}
}

// setReason re-reasons our drain (the node is drained already, so this
// only changes the reason) and keeps the policy's record in step, so the
// drain stays ours.
func (e Engine) setReason(ctx context.Context, st *policy.State, reason string) error {
	if err := e.Ctl.Drain(ctx, e.Node, reason); err != nil {
		return fmt.Errorf("set reason on %s: %w", e.Node, err)
	}
	st.Drained.Reason = reason
	return nil
}
