package drainctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/policy"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

// Results of drain and resume, per node.
const (
	resDrained        = "drained"
	resResumed        = "resumed"
	resAlreadyDrained = "already-drained"
	resWouldDrain     = "would-drain"
	resWouldResume    = "would-resume"
	resRefused        = "refused"
	resFailed         = "failed"
)

// changeRow is what drain or resume did to one node.
type changeRow struct {
	Node   string `json:"node"`
	Result string `json:"result"`
	// Reason is the reason set (drain) or cleared (resume).
	Reason string `json:"reason,omitempty"`
	// Before is the node's state and reason before the command.
	Before  string `json:"before,omitempty"`
	Detail  string `json:"detail,omitempty"`
	Backend string `json:"backend,omitempty"`
	// unreachable: Slurm could not be read (exit 3, not 1).
	unreachable bool
}

func (r changeRow) ok() bool { return r.Result != resRefused && r.Result != resFailed }

type changeOpts struct {
	common
	reason string
	raw    bool
	force  bool
	dryRun bool
}

const drainAbout = `Drains NODES (names, or a Slurm hostlist such as gpu[001-004]) with the
reason "gpuhc: TEXT", and records a drain event in each node's event log.
The "gpuhc: " prefix makes the drain gpuhc's: "gpuhc-drain resume" may
undo it, while the health check never resumes it (it only resumes drains
it made itself). --raw sends TEXT as it is, making the drain an ordinary
admin drain. A node drained or down whose reason is not a gpuhc drain's
(someone else's, or a stale gpuhc reason on a down node without the DRAIN
flag) is refused unless --force.`

const resumeAbout = `Resumes NODES (names, or a Slurm hostlist) that gpuhc drained: the DRAIN
flag and a gpuhc reason (down or not), and records a resume event in each
node's event log. A node whose reason is not gpuhc's (an admin's
"maintenance", slurmctld's "Not responding"), or a down node without the
DRAIN flag that only shows a stale gpuhc reason (Slurm keeps the reason
after a resume), is refused unless --force; a node that is not drained or
down is refused.`

func (p Program) drain(args []string) error {
	var o changeOpts
	fs := p.flags("drain", "NODES --reason TEXT", drainAbout, &o.common, false)
	fs.StringVar(&o.reason, "reason", "", "why (required); sent as \"gpuhc: TEXT\"")
	fs.BoolVar(&o.raw, "raw", false, "send the reason without the \"gpuhc: \" prefix")
	fs.BoolVar(&o.force, "force", false, "also replace a drain or down reason that is not gpuhc's")
	fs.BoolVar(&o.dryRun, "dry-run", false, "read the nodes and say what would be done, changing nothing")
	pos, err := parse(fs, &o.common, args)
	if err != nil {
		return err
	}
	reason, err := drainReason(o.reason, o.raw)
	if err != nil {
		return err
	}
	return p.change(&o, pos, func(ctx context.Context, ctl slurm.Controller, n slurm.Node) (changeRow, *events.Event) {
		return p.drainOne(ctx, &o, ctl, n, reason)
	})
}

func (p Program) resume(args []string) error {
	var o changeOpts
	fs := p.flags("resume", "NODES", resumeAbout, &o.common, false)
	fs.BoolVar(&o.force, "force", false, "also resume a node whose reason is not gpuhc's")
	fs.BoolVar(&o.dryRun, "dry-run", false, "read the nodes and say what would be done, changing nothing")
	pos, err := parse(fs, &o.common, args)
	if err != nil {
		return err
	}
	return p.change(&o, pos, func(ctx context.Context, ctl slurm.Controller, n slurm.Node) (changeRow, *events.Event) {
		return p.resumeOne(ctx, &o, ctl, n)
	})
}

// drainReason builds the reason sent to Slurm: one printable line of at
// most 256 bytes, "gpuhc: " first unless raw (and not twice).
func drainReason(text string, raw bool) (string, error) {
	text = policy.Sanitize(text)
	if !raw && !policy.Owned(text) {
		text = policy.Sanitize(policy.Prefix + " " + text)
	}
	if strings.TrimSpace(strings.TrimPrefix(text, policy.Prefix)) == "" {
		return "", usagef("--reason is required and must say why")
	}
	return text, nil
}

// change reads each node, lets one decide and act, records the events and
// prints a row per node. Nodes are handled one at a time, in order.
func (p Program) change(o *changeOpts, pos []string, one func(context.Context, slurm.Controller, slurm.Node) (changeRow, *events.Event)) error {
	nodes, err := nodeArgs(pos)
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		return usagef("no node given")
	}
	ctl, logClose, err := p.nodeControl(&o.common)
	if err != nil {
		return err
	}
	defer logClose.Close()
	ctx, cancel := slurmContext()
	defer cancel()
	var rows []changeRow
	code := ExitOK
	for _, name := range nodes {
		var row changeRow
		var ev *events.Event
		n, err := ctl.Node(ctx, name)
		if err != nil {
			row = changeRow{Node: name, Result: resFailed, Detail: "read node: " + err.Error(), unreachable: true}
			if errors.Is(err, slurm.ErrNodeNotFound) {
				row = changeRow{Node: name, Result: resRefused, Detail: "no such node"}
			}
		} else {
			row, ev = one(ctx, ctl, n)
			row.Node, row.Before = name, before(n)
		}
		if ev != nil && !o.dryRun && !p.recordRow(ctx, &o.common, name, *ev, &row.Detail) {
			code = ExitRefused
		}
		if !row.ok() {
			code = ExitRefused
		}
		rows = append(rows, row)
	}
	for _, r := range rows {
		if r.unreachable {
			code = ExitInternal // Slurm could not be read
		}
	}
	if err := emit(p.Stdout, o.format(), changeTable(rows), rows); err != nil {
		return err
	}
	if code != ExitOK {
		return exitError{code: code}
	}
	return nil
}

func (p Program) drainOne(ctx context.Context, o *changeOpts, ctl slurm.Controller, n slurm.Node, reason string) (changeRow, *events.Event) {
	row := changeRow{Reason: reason}
	switch {
	case n.Drained() && n.Reason == reason:
		row.Result, row.Detail = resAlreadyDrained, "already drained with this reason"
		return row, nil
	case offline(n) && n.Reason != "" && !gpuhcDrain(n) && !o.force:
		row.Result, row.Detail = resRefused, notOurs(n)+"; --force replaces it"
		return row, nil
	}
	if o.dryRun {
		row.Result, row.Detail = resWouldDrain, "dry run: nothing changed"
		return row, nil
	}
	if err := ctl.Drain(ctx, n.Name, reason); err != nil {
		// A DRAIN that slurmctld applied but whose answer was lost still
		// counts: read the node again.
		m, rerr := ctl.Node(ctx, n.Name)
		switch {
		case rerr != nil:
			row.Result, row.unreachable = resFailed, true
			row.Detail = fmt.Sprintf("%v; reading the node again: %v", err, rerr)
			return row, nil
		case !m.Drained() || m.Reason != reason:
			row.Result, row.Detail = resFailed, err.Error()
			return row, nil
		}
		row.Detail = fmt.Sprintf("drained, but Slurm's answer was lost (%v)", err)
	}
	row.Result, row.Backend = resDrained, ctl.Backend()
	if offline(n) && n.Reason != "" {
		row.Detail = strings.TrimPrefix(row.Detail+"; ", "; ") + fmt.Sprintf("replaced %q", n.Reason)
	}
	ev := p.event(events.KindDrain, n.Name, reason, ctl.Backend())
	return row, &ev
}

func (p Program) resumeOne(ctx context.Context, o *changeOpts, ctl slurm.Controller, n slurm.Node) (changeRow, *events.Event) {
	row := changeRow{Reason: n.Reason}
	switch {
	case !offline(n):
		row.Result, row.Detail = resRefused, "not drained or down"
		return row, nil
	case !gpuhcDrain(n) && !o.force:
		row.Result, row.Detail = resRefused, notOurs(n)+"; --force resumes it"
		return row, nil
	}
	if o.dryRun {
		row.Result, row.Detail = resWouldResume, "dry run: nothing changed"
		return row, nil
	}
	if err := ctl.Resume(ctx, n.Name); err != nil {
		// A RESUME that slurmctld applied but whose answer was lost still
		// counts.
		m, rerr := ctl.Node(ctx, n.Name)
		switch {
		case rerr != nil:
			row.Result, row.unreachable = resFailed, true
			row.Detail = fmt.Sprintf("%v; reading the node again: %v", err, rerr)
			return row, nil
		case offline(m):
			row.Result, row.Detail = resFailed, err.Error()
			return row, nil
		}
		row.Detail = fmt.Sprintf("resumed, but Slurm's answer was lost (%v)", err)
	}
	row.Result, row.Backend = resResumed, ctl.Backend()
	ev := p.event(events.KindResume, n.Name, n.Reason, ctl.Backend())
	return row, &ev
}

func (p Program) event(kind, node, msg, backend string) events.Event {
	return events.Event{Time: p.now(), Kind: kind, Node: node, Message: msg, Backend: backend, By: p.by()}
}

// record appends ev to the node's event log: events.file as the
// configuration gives it for that node (%n and [[host]] sections apply).
// nodeControl is the configured node control, for the commands that
// change nodes.
func (p Program) nodeControl(o *common) (slurm.Controller, io.Closer, error) {
	cfg, err := p.loadConfig(o, "")
	if err != nil {
		return nil, nil, err
	}
	ctl, closer, err := p.controller(o, cfg)
	if err != nil {
		return nil, nil, exitError{ExitUsage, fmt.Errorf("node control: %w", err)}
	}
	return ctl, closer, nil
}

// recordRow records a row's event, and on failure says so in its detail
// (false): the change was made, its record is what is missing.
func (p Program) recordRow(ctx context.Context, o *common, node string, ev events.Event, detail *string) bool {
	if err := p.record(ctx, o, node, ev); err != nil {
		*detail = strings.TrimPrefix(*detail+"; ", "; ") + "event not recorded: " + err.Error()
		return false
	}
	return true
}

func (p Program) record(ctx context.Context, o *common, node string, ev events.Event) error {
	cfg, err := config.LoadOrDefault(o.configPath, node, o.explicit)
	if err != nil {
		return err
	}
	return events.Log{Path: cfg.Events.File}.Append(ctx, ev)
}

// notOurs says why a drained or down node is not gpuhc's to change.
func notOurs(n slurm.Node) string {
	if staleReason(n) {
		return fmt.Sprintf("%s without the DRAIN flag, with a stale gpuhc reason (%q%s; Slurm keeps a reason after a resume): not a gpuhc drain",
			stateWord(n), n.Reason, setBy(n))
	}
	return fmt.Sprintf("%s by someone else (%q%s): not gpuhc's", stateWord(n), n.Reason, setBy(n))
}

func stateWord(n slurm.Node) string {
	switch {
	case n.Drained():
		return "drained"
	case n.Has("FAIL"):
		return "failed"
	}
	return "down"
}

func setBy(n slurm.Node) string {
	if n.ReasonUser == "" {
		return ""
	}
	return ", set by " + n.ReasonUser
}

func before(n slurm.Node) string {
	s := strings.Join(n.State, "+")
	if n.Reason != "" && offline(n) {
		s += " " + fmt.Sprintf("%q", n.Reason)
	}
	return s
}

func changeTable(rows []changeRow) table {
	t := table{head: []string{"NODE", "RESULT", "BEFORE", "REASON", "DETAIL"}}
	for _, r := range rows {
		t.rows = append(t.rows, []string{r.Node, r.Result, r.Before, r.Reason, r.Detail})
	}
	return t
}
