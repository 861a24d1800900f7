package drainctl

import (
	"context"
	"errors"
	"fmt"
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
admin drain. A node drained or down with a reason that is not gpuhc's is
refused unless --force.`

const resumeAbout = `Resumes NODES (names, or a Slurm hostlist) that are drained or down with
a gpuhc reason, and records a resume event in each node's event log. A
node whose reason is not gpuhc's (an admin's "maintenance", slurmctld's
"Not responding") is refused unless --force; a node that is not drained is
refused.`

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
	cfg, err := p.loadConfig(&o.common, "")
	if err != nil {
		return err
	}
	ctl, err := p.controller(&o.common, cfg)
	if err != nil {
		return exitError{ExitUsage, fmt.Errorf("node control: %w", err)}
	}
	ctx, cancel := slurmContext()
	defer cancel()
	var rows []changeRow
	code := ExitOK
	for _, name := range nodes {
		var row changeRow
		var ev *events.Event
		n, err := ctl.Node(ctx, name)
		if err != nil {
			row = changeRow{Node: name, Result: resFailed, Detail: "read node: " + err.Error()}
			if errors.Is(err, slurm.ErrNodeNotFound) {
				row.Result, row.Detail = resRefused, "no such node"
			}
		} else {
			row, ev = one(ctx, ctl, n)
			row.Node, row.Before = name, before(n)
		}
		if ev != nil && !o.dryRun {
			if err := p.record(ctx, &o.common, name, *ev); err != nil {
				row.Detail = strings.TrimPrefix(row.Detail+"; ", "; ") + "event not recorded: " + err.Error()
				code = ExitRefused
			}
		}
		if !row.ok() {
			code = ExitRefused
		}
		rows = append(rows, row)
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
	case offline(n) && n.Reason != "" && !policy.Owned(n.Reason) && !o.force:
		row.Result = resRefused
		row.Detail = fmt.Sprintf("%s by someone else (%q%s): not gpuhc's; --force replaces it",
			strings.ToLower(stateWord(n)), n.Reason, setBy(n))
		return row, nil
	}
	if o.dryRun {
		row.Result, row.Detail = resWouldDrain, "dry run: nothing changed"
		return row, nil
	}
	if err := ctl.Drain(ctx, n.Name, reason); err != nil {
		row.Result, row.Detail = resFailed, err.Error()
		return row, nil
	}
	row.Result, row.Backend = resDrained, ctl.Backend()
	if n.Drained() && n.Reason != "" {
		row.Detail = fmt.Sprintf("replaced %q", n.Reason)
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
	case !policy.Owned(n.Reason) && !o.force:
		row.Result = resRefused
		row.Detail = fmt.Sprintf("%s by someone else (%q%s): not gpuhc's; --force resumes it",
			strings.ToLower(stateWord(n)), n.Reason, setBy(n))
		return row, nil
	}
	if o.dryRun {
		row.Result, row.Detail = resWouldResume, "dry run: nothing changed"
		return row, nil
	}
	if err := ctl.Resume(ctx, n.Name); err != nil {
		// A RESUME that slurmctld applied but whose answer was lost still
		// counts.
		if m, rerr := ctl.Node(ctx, n.Name); rerr != nil || offline(m) {
			row.Result, row.Detail = resFailed, err.Error()
			return row, nil
		}
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
func (p Program) record(ctx context.Context, o *common, node string, ev events.Event) error {
	cfg, err := config.LoadOrDefault(o.configPath, node, o.explicit)
	if err != nil {
		return err
	}
	return events.Log{Path: cfg.Events.File}.Append(ctx, ev)
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
