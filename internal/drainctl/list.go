package drainctl

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/policy"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

// Owners, as the list prints them.
const (
	ownerGpuhc      = "gpuhc"
	ownerOther      = "not gpuhc"
	ownerSuppressed = "gpuhc, suppressed"
)

// listRow is one drained or down node (or one whose drain the storm guard
// held back). JSON field names are part of the interface.
type listRow struct {
	Node  string   `json:"node"`
	State []string `json:"state"`
	// Owner is "gpuhc" for a node with the DRAIN flag and a gpuhc:
	// reason, "not gpuhc" for anyone else's, "gpuhc, suppressed" for a
	// node gpuhc would drain but the storm guard refused.
	Owner string `json:"owner"`
	Gpuhc bool   `json:"gpuhc"`
	// StaleReason marks a down node (no DRAIN flag) that shows an old
	// gpuhc: reason: Slurm 24.11 keeps the reason after a RESUME, and a
	// node that stops responding later keeps it. It is not gpuhc's.
	StaleReason bool       `json:"stale_reason,omitempty"`
	Suppressed  bool       `json:"suppressed,omitempty"`
	Reason      string     `json:"reason"`
	ReasonUser  string     `json:"reason_user,omitempty"`
	ReasonTime  *time.Time `json:"reason_time,omitempty"`
	// Since is when the drain began: Slurm's reason time, else the event's.
	Since           *time.Time `json:"since,omitempty"`
	DurationSeconds int64      `json:"duration_seconds,omitempty"`
	// By is who acted according to the event log: "healthcheck" or
	// "gpuhc-drain:<user>".
	By        string     `json:"by,omitempty"`
	Check     string     `json:"check,omitempty"`
	Component string     `json:"component,omitempty"`
	Serial    string     `json:"serial,omitempty"`
	Status    string     `json:"status,omitempty"`
	Action    string     `json:"action,omitempty"`
	Message   string     `json:"message,omitempty"`
	EventTime *time.Time `json:"event_time,omitempty"`
	Backend   string     `json:"backend,omitempty"`
}

const listAbout = `Lists every drained or down node with its reason, who set it, since when
and for how long. gpuhc's own drains (the DRAIN flag and a reason
"gpuhc: ...") are joined with their event-log detail: the failing check,
component, GPU serial, suggested action and the message with the measured
value and limit. Drains that are not gpuhc's are listed as "not gpuhc", and
so is a down node that shows an old gpuhc reason without the DRAIN flag (a
stale reason, kept by Slurm after a resume). Nodes whose drain the storm
guard held back are listed as "gpuhc, suppressed". NODES (a hostlist or
glob) limits the list.`

func (p Program) list(args []string) error {
	var o common
	fs := p.flags("list", "[NODES]", listAbout, &o, true)
	pos, err := parse(fs, &o, args)
	if err != nil {
		return err
	}
	match, err := nodeMatcher(strings.Join(pos, ","))
	if err != nil {
		return err
	}
	cfg, err := p.loadConfig(&o, "")
	if err != nil {
		return err
	}
	ctl, logClose, err := p.controller(&o, cfg)
	if err != nil {
		return exitError{ExitUsage, fmt.Errorf("node control: %w", err)}
	}
	defer logClose.Close()
	ctx, cancel := slurmContext()
	defer cancel()
	nodes, err := ctl.Nodes(ctx)
	if err != nil {
		return exitError{ExitInternal, fmt.Errorf("list nodes: %w", err)}
	}
	evs, err := p.readEvents(ctx, &o, func(ev events.Event) bool {
		switch ev.Kind {
		case events.KindTransition, events.KindDrain, events.KindResume, events.KindDrainSuppressed:
			return match(ev.Node)
		}
		return false
	})
	partial, err := incomplete(err)
	if err != nil {
		return err
	}
	rows := buildList(nodes, evs, match, p.now())
	if err := emit(p.Stdout, o.format(), listTable(rows, o.format()), rows); err != nil {
		return err
	}
	return partial
}

// offline reports whether Slurm keeps jobs off the node, whatever the cause.
func offline(n slurm.Node) bool {
	return n.Drained() || n.Base() == "DOWN" || n.Has("FAIL")
}

// gpuhcDrain reports whether the node is drained by gpuhc: the DRAIN flag
// and a "gpuhc:" reason, never the reason alone
// (docs/architecture.md#drain-reasons-and-ownership).
func gpuhcDrain(n slurm.Node) bool {
	return n.Drained() && policy.Owned(n.Reason)
}

// staleReason reports a "gpuhc:" reason without the DRAIN flag: Slurm
// 24.11 keeps the reason after a RESUME, and a node that later stops
// responding goes DOWN with it.
func staleReason(n slurm.Node) bool {
	return !n.Drained() && policy.Owned(n.Reason)
}

// buildList joins the nodes Slurm reports with the event log. evs must be
// sorted by time.
func buildList(nodes []slurm.Node, evs []events.Event, match func(string) bool, now time.Time) []listRow {
	byNode := map[string][]events.Event{}
	for _, ev := range evs {
		byNode[ev.Node] = append(byNode[ev.Node], ev)
	}
	rows := []listRow{}
	for _, n := range nodes {
		if !match(n.Name) {
			continue
		}
		var r listRow
		switch {
		case offline(n):
			r = drainedRow(n, byNode[n.Name])
		default:
			var ok bool
			if r, ok = suppressedRow(n, byNode[n.Name]); !ok {
				continue
			}
		}
		if r.Since != nil {
			r.DurationSeconds = int64(now.Sub(*r.Since).Round(time.Second) / time.Second)
		}
		rows = append(rows, r)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Node < rows[j].Node })
	return rows
}

func drainedRow(n slurm.Node, evs []events.Event) listRow {
	r := listRow{
		Node: n.Name, State: n.State, Reason: n.Reason, ReasonUser: n.ReasonUser,
		ReasonTime: timePtr(n.ReasonTime), Since: timePtr(n.ReasonTime),
		Owner: ownerOther,
	}
	if !gpuhcDrain(n) {
		r.StaleReason = staleReason(n)
		return r
	}
	r.Owner, r.Gpuhc = ownerGpuhc, true
	chk, comp, msg, _ := policy.ParseReason(n.Reason)
	r.Check, r.Component, r.Message = chk, comp, msg
	d := lastDrain(evs, n.Reason)
	if d < 0 {
		return r
	}
	ev := evs[d]
	r.By, r.Backend, r.EventTime = ev.By, ev.Backend, timePtr(ev.Time)
	if r.By == "" {
		// The health check's drain events carry no "by".
		r.By = "healthcheck"
	}
	if r.Since == nil {
		r.Since = timePtr(ev.Time)
	}
	if f := failureBefore(evs, d, chk, comp); f >= 0 {
		fe := evs[f]
		r.Check, r.Component, r.Serial = fe.Check, fe.Component, fe.Serial
		r.Status, r.Action, r.Message = fe.Status, fe.Action, fe.Message
	}
	return r
}

// suppressedRow reports a node the storm guard kept from being drained,
// while that failure stands: no drain or resume since, and no recovery of
// the failing component.
func suppressedRow(n slurm.Node, evs []events.Event) (listRow, bool) {
	s := -1
	for i := len(evs) - 1; i >= 0; i-- {
		k := evs[i].Kind
		if k == events.KindDrain || k == events.KindResume {
			return listRow{}, false
		}
		if k == events.KindDrainSuppressed {
			s = i
			break
		}
	}
	if s < 0 {
		return listRow{}, false
	}
	ev := evs[s]
	r := listRow{
		Node: n.Name, State: n.State, Owner: ownerSuppressed, Gpuhc: true, Suppressed: true,
		Reason: n.Reason, ReasonUser: n.ReasonUser, ReasonTime: timePtr(n.ReasonTime),
		Since: timePtr(ev.Time), EventTime: timePtr(ev.Time), Backend: ev.Backend,
		By: "healthcheck", Message: ev.Message,
	}
	chk, comp := "", ""
	if i := strings.Index(ev.Message, policy.Prefix); i >= 0 {
		chk, comp, _, _ = policy.ParseReason(ev.Message[i:])
	}
	f := failureBefore(evs, s, chk, comp)
	if f < 0 {
		return r, true
	}
	fe := evs[f]
	for _, later := range evs[s+1:] {
		if later.Kind == events.KindTransition && later.Check == fe.Check &&
			later.Component == fe.Component && later.Status != check.Fail.String() {
			return listRow{}, false // recovered
		}
	}
	r.Check, r.Component, r.Serial, r.Status, r.Action = fe.Check, fe.Component, fe.Serial, fe.Status, fe.Action
	r.Message = ev.Message
	return r, true
}

// lastDrain is the index of the newest drain event with reason, or -1.
func lastDrain(evs []events.Event, reason string) int {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == events.KindDrain && evs[i].Message == reason {
			return i
		}
	}
	return -1
}

// failureBefore finds the FAIL (or ERROR) transition of check chk that
// led to the policy event at index at: the newest one at or before it,
// back to the previous drain or resume, preferring component comp. -1 when
// there is none, or when the reason names no check (an admin's own
// "gpuhc: ..." text): an unrelated failure must not be attached.
func failureBefore(evs []events.Event, at int, chk, comp string) int {
	if chk == "" {
		return -1
	}
	best := -1
	for i := at; i >= 0; i-- {
		ev := evs[i]
		if i < at && (ev.Kind == events.KindDrain || ev.Kind == events.KindResume) {
			break
		}
		if ev.Kind != events.KindTransition || ev.Check != chk ||
			(ev.Status != check.Fail.String() && ev.Status != check.Error.String()) {
			continue
		}
		if ev.Component == comp {
			return i
		}
		if best < 0 {
			best = i
		}
	}
	return best
}

func listTable(rows []listRow, format string) table {
	t := table{
		head:  []string{"NODE", "STATE", "OWNER", "SET BY", "SINCE", "FOR", "CHECK", "COMPONENT", "SERIAL", "ACTION", "DETAIL"},
		empty: "no drained or down nodes",
	}
	if format == formatCSV {
		t.head = []string{"node", "state", "owner", "reason", "reason_user", "by", "since", "duration_seconds",
			"check", "component", "serial", "status", "action", "message"}
	}
	for _, r := range rows {
		since := time.Time{}
		if r.Since != nil {
			since = *r.Since
		}
		if format == formatCSV {
			t.rows = append(t.rows, []string{r.Node, strings.Join(r.State, "+"), r.Owner, r.Reason, r.ReasonUser, r.By,
				csvTime(since), fmt.Sprint(r.DurationSeconds), r.Check, r.Component, r.Serial, r.Status, r.Action, r.Message})
			continue
		}
		setBy := r.ReasonUser
		if r.By != "" {
			if setBy == "" {
				setBy = r.By
			} else {
				setBy += " (" + r.By + ")"
			}
		}
		dur := ""
		if r.Since != nil {
			dur = human(time.Duration(r.DurationSeconds) * time.Second)
		}
		detail := r.Message
		if !r.Gpuhc || detail == "" {
			detail = r.Reason
		}
		if r.StaleReason {
			detail = "stale reason, not drained: " + r.Reason
		}
		t.rows = append(t.rows, []string{r.Node, strings.Join(r.State, "+"), r.Owner, setBy, stamp(since), dur,
			r.Check, r.Component, r.Serial, r.Action, detail})
	}
	return t
}
