package drainctl

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
)

const historyAbout = `Prints the events of the event logs, oldest first: status transitions,
drains, resumes, suppressed and skipped drains, job attribution. Daily
heartbeats and bandwidth figures (measurement) are left out unless --kind
asks for them. --json prints the events as the log has them.`

type historyOpts struct {
	common
	node, check  string
	since, until string
	kinds        string
	last         int
}

func (p Program) history(args []string) error {
	var o historyOpts
	fs := p.flags("history", "", historyAbout, &o.common, true)
	fs.StringVar(&o.node, "node", "", "only these nodes (`hostlist` or glob: gpu[001-004], gpu0*)")
	fs.StringVar(&o.check, "check", "", "only this `check` (host.mounts), group (host) or glob (gpu.*)")
	fs.StringVar(&o.since, "since", "", "only events from `when` on: a duration back (36h, 7d, 2w) or a time (2026-11-30, RFC 3339)")
	fs.StringVar(&o.until, "until", "", "only events before `when` (same forms as --since)")
	fs.StringVar(&o.kinds, "kind", "", "only these `kinds`, comma-separated (transition, drain, resume, drain-suppressed, drain-skipped, heartbeat, measurement, ...)")
	fs.IntVar(&o.last, "last", 0, "only the last `N` events (0: all)")
	pos, err := parse(fs, &o.common, args)
	if err != nil {
		return err
	}
	if err := noArgs(pos); err != nil {
		return err
	}
	keep, err := o.filter(p.now())
	if err != nil {
		return err
	}
	if o.last < 0 {
		return usagef("--last must not be negative")
	}
	ctx, cancel := slurmContext()
	defer cancel()
	evs, err := p.readEvents(ctx, &o.common, keep)
	partial, err := incomplete(err)
	if err != nil {
		return err
	}
	if o.last > 0 && len(evs) > o.last {
		evs = evs[len(evs)-o.last:]
	}
	if evs == nil {
		evs = []events.Event{}
	}
	if err := emit(p.Stdout, o.format(), historyTable(evs, o.format()), evs); err != nil {
		return err
	}
	return partial
}

func (o *historyOpts) filter(now time.Time) (func(events.Event) bool, error) {
	node, err := nodeMatcher(o.node)
	if err != nil {
		return nil, err
	}
	chk := checkMatcher(o.check)
	since, err := parseWhen(o.since, now)
	if err != nil {
		return nil, usagef("--since: %v", err)
	}
	until, err := parseWhen(o.until, now)
	if err != nil {
		return nil, usagef("--until: %v", err)
	}
	kinds := map[string]bool{}
	for _, k := range strings.Split(o.kinds, ",") {
		if k = strings.TrimSpace(k); k != "" {
			kinds[k] = true
		}
	}
	return func(ev events.Event) bool {
		switch {
		case !node(ev.Node):
			return false
		case o.check != "" && !chk(ev.Check):
			return false
		case !since.IsZero() && ev.Time.Before(since):
			return false
		case !until.IsZero() && !ev.Time.Before(until):
			return false
		case len(kinds) > 0:
			return kinds[ev.Kind]
		}
		// Heartbeats and figures are the bulk of a log, and tell of no
		// change to a node.
		return ev.Kind != events.KindHeartbeat && ev.Kind != events.KindMeasurement
	}, nil
}

func historyTable(evs []events.Event, format string) table {
	t := table{
		head:  []string{"TIME", "NODE", "KIND", "CHECK", "COMPONENT", "SERIAL", "STATUS", "ACTION", "BY", "MESSAGE"},
		empty: "no events",
	}
	if format == formatCSV {
		t.head = []string{"time", "kind", "node", "check", "component", "serial", "status", "previous",
			"message", "action", "backend", "by", "hours", "job_id", "boot_id"}
	}
	for _, ev := range evs {
		if format == formatCSV {
			hours := ""
			if ev.Hours != 0 {
				hours = fmt.Sprint(ev.Hours)
			}
			t.rows = append(t.rows, []string{csvTime(ev.Time), ev.Kind, ev.Node, ev.Check, ev.Component, ev.Serial,
				ev.Status, ev.Previous, ev.Message, ev.Action, ev.Backend, ev.By, hours, ev.JobID, ev.BootID})
			continue
		}
		status := ev.Status
		if ev.Previous != "" {
			status = ev.Previous + "→" + ev.Status
		}
		by := ev.By
		if by == "" && (ev.Kind == events.KindDrain || ev.Kind == events.KindResume ||
			ev.Kind == events.KindDrainSuppressed || ev.Kind == events.KindDrainSkipped) {
			by = "healthcheck"
		}
		msg := ev.Message
		if ev.JobID != "" {
			msg = strings.TrimSpace("job " + ev.JobID + " " + msg)
		}
		if ev.Kind == events.KindHeartbeat && ev.Hours != 0 {
			msg = strings.TrimSpace(fmt.Sprintf("%.1f h observed %s", ev.Hours, msg))
		}
		t.rows = append(t.rows, []string{stamp(ev.Time), ev.Node, ev.Kind, ev.Check, ev.Component, ev.Serial,
			status, ev.Action, by, msg})
	}
	return t
}
