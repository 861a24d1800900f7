package drainctl

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
)

const jobAbout = `Shows every hardware event on the nodes of job JOBID while it ran: XIDs,
GPU memory errors, FAILs, drains and resumes, and GPU processes it left
behind, from the event logs. The job's nodes and times are those of its
prolog and epilog events (gpuhc-prolog and gpuhc-epilog record one per node
and job). The verdict line says plainly whether a hardware fault coincided
with the job's end: a FAIL on one of its nodes within --window of the end.
JOBID is the number SLURM_JOB_ID gives (for an array task, its own job id,
not 1234_5).`

type jobOpts struct {
	common
	window time.Duration
}

func (p Program) job(args []string) error {
	var o jobOpts
	fs := p.flags("job", "JOBID", jobAbout, &o.common, true)
	fs.DurationVar(&o.window, "window", 10*time.Minute, "a FAIL this close to the job's end (before or after) `coincided` with it")
	pos, err := parse(fs, &o.common, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("job takes one JOBID")
	}
	id := pos[0]
	if n, err := strconv.ParseUint(id, 10, 64); err != nil || n == 0 || strconv.FormatUint(n, 10) != id {
		return usagef("job %q: want the numeric job id (SLURM_JOB_ID)", id)
	}
	if o.window < 0 || o.window > 24*time.Hour {
		return usagef("--window %s: want 0 to 24h", o.window)
	}
	ctx, cancel := slurmContext()
	defer cancel()
	// One pass: the job's own events, and every event that can tell of
	// hardware on any node; the job's nodes and times pick from them after.
	evs, err := p.readEvents(ctx, &o.common, func(ev events.Event) bool {
		return ev.JobID == id || hardwareKind(ev.Kind)
	})
	partial, err := incomplete(err)
	if err != nil {
		return err
	}
	v, ok := judgeJob(id, evs, p.now(), o.window)
	if !ok {
		return exitError{code: ExitRefused, err: fmt.Errorf("job %s: no prolog or epilog event of it in the event logs", id)}
	}
	if o.format() == formatTable {
		fmt.Fprintln(p.Stdout, v.header())
	}
	if err := emit(p.Stdout, o.format(), historyTable(v.Events, o.format()), v); err != nil {
		return err
	}
	return partial
}

// hardwareKind is an event kind that can tell of the hardware of a node
// (heartbeats and figures cannot: they are the bulk of a log).
func hardwareKind(kind string) bool {
	switch kind {
	case events.KindTransition, events.KindDrain, events.KindResume, events.KindDrainSuppressed,
		events.KindKilled, events.KindJobXID, events.KindJobMemory, events.KindJobLeftover:
		return true
	}
	return false
}

// jobVerdict is gpuhc-drain job's answer; its JSON is --json's.
type jobVerdict struct {
	JobID string `json:"job_id"`
	User  string `json:"user,omitempty"`
	// Start and End are the job's first prolog and last epilog events; End
	// is nil while no epilog was recorded (running, or its epilog lost),
	// and the window then runs to now.
	Start   *time.Time `json:"start,omitempty"`
	End     *time.Time `json:"end,omitempty"`
	Nodes   []jobNode  `json:"nodes"`
	Faults  int        `json:"faults"`
	AtEnd   bool       `json:"fault_at_end"`
	Verdict string     `json:"verdict"`
	// Events are the job's and its nodes' hardware events in the window,
	// oldest first.
	Events []events.Event `json:"events"`
}

type jobNode struct {
	Node    string     `json:"node"`
	Prolog  *time.Time `json:"prolog,omitempty"`
	Epilog  *time.Time `json:"epilog,omitempty"`
	Outcome string     `json:"epilog_status,omitempty"`
}

// judgeJob picks job id's nodes and times from evs (sorted by time) and
// the events that fall in it: on its nodes from its start to window past
// its end, or naming the job. ok is false when no prolog or epilog event
// names the job.
func judgeJob(id string, evs []events.Event, now time.Time, window time.Duration) (v jobVerdict, ok bool) {
	v = jobVerdict{JobID: id, Nodes: []jobNode{}, Events: []events.Event{}}
	var start, end time.Time
	nodes := map[string]*jobNode{}
	running := false
	for _, ev := range evs {
		if ev.JobID != id || (ev.Kind != events.KindProlog && ev.Kind != events.KindEpilog) {
			continue
		}
		n := nodes[ev.Node]
		if n == nil {
			n = &jobNode{Node: ev.Node}
			nodes[ev.Node] = n
		}
		if ev.User != "" {
			v.User = ev.User
		}
		t := ev.Time
		if ev.Kind == events.KindProlog {
			n.Prolog = &t
			if start.IsZero() || t.Before(start) {
				start = t
			}
			continue
		}
		n.Epilog, n.Outcome = &t, ev.Status
		end = later(end, t)
	}
	if len(nodes) == 0 {
		return v, false
	}
	for _, n := range nodes {
		running = running || n.Epilog == nil
		v.Nodes = append(v.Nodes, *n)
	}
	slices.SortFunc(v.Nodes, func(a, b jobNode) int { return strings.Compare(a.Node, b.Node) })
	if start.IsZero() {
		// No prolog seen (the log rotated away, or Prolog not set): the
		// earliest epilog bounds it, which leaves nothing out after it.
		start = end
	}
	v.Start = timePtr(start)
	last := now
	if !running {
		v.End = timePtr(end)
		last = end.Add(window)
	}
	for _, ev := range evs {
		inWindow := nodes[ev.Node] != nil && !ev.Time.Before(start) && !ev.Time.After(last)
		if !hardwareKind(ev.Kind) || !(ev.JobID == id || inWindow) {
			continue
		}
		v.Events = append(v.Events, ev)
		if !hardwareFault(ev) {
			continue
		}
		v.Faults++
		if v.End != nil && absDuration(ev.Time.Sub(end)) <= window {
			v.AtEnd = true
		}
	}
	v.Verdict = v.say(running, end, window)
	return v, true
}

// hardwareFault is an event that says the hardware failed: a FAIL of a
// check, an XID or memory error judged FAIL, a drain by a check. GPU
// processes a job left behind are the job's doing, a drain by an admin
// a person's: neither is counted.
func hardwareFault(ev events.Event) bool {
	switch ev.Kind {
	case events.KindTransition, events.KindJobXID, events.KindJobMemory:
		return ev.Status == "FAIL"
	case events.KindDrain:
		return !strings.HasPrefix(ev.By, prog+":")
	}
	return false
}

func (v jobVerdict) say(running bool, end time.Time, window time.Duration) string {
	var first *events.Event
	for i := range v.Events {
		if hardwareFault(v.Events[i]) {
			first = &v.Events[i]
			break
		}
	}
	switch {
	case first == nil && running:
		return "no hardware fault recorded on the job's nodes so far (no epilog yet: still running, or its epilog not logged)"
	case first == nil:
		return "no hardware fault recorded on the job's nodes during the job"
	case v.AtEnd:
		for i := range v.Events {
			if ev := v.Events[i]; hardwareFault(ev) && absDuration(ev.Time.Sub(end)) <= window {
				return "YES: a hardware fault coincided with the job's end: " + describe(ev, end)
			}
		}
	case running:
		return "a hardware fault on the job's nodes while it runs: " + describe(*first, time.Time{})
	}
	return fmt.Sprintf("a hardware fault during the job, not within %s of its end: %s", human(window), describe(*first, end))
}

// describe is one event for the verdict line, with when it was against
// the job's end.
func describe(ev events.Event, end time.Time) string {
	what := strings.Join(nonEmpty(ev.Node, ev.Check, ev.Component), " ")
	if ev.Serial != "" {
		what += " (SN " + ev.Serial + ")"
	}
	msg := ev.Message
	if msg == "" {
		msg = ev.Kind
	}
	s := what + ": " + msg + " at " + stamp(ev.Time)
	if end.IsZero() {
		return s
	}
	switch d := ev.Time.Sub(end); {
	case d < 0:
		return s + ", " + human(-d) + " before the job's end"
	case d > 0:
		return s + ", " + human(d) + " after the job's end"
	}
	return s + ", at the job's end"
}

func (v jobVerdict) header() string {
	var b strings.Builder
	fmt.Fprintf(&b, "job %s", v.JobID)
	if v.User != "" {
		fmt.Fprintf(&b, " (user %s)", v.User)
	}
	names := make([]string, len(v.Nodes))
	for i, n := range v.Nodes {
		names[i] = n.Node
	}
	fmt.Fprintf(&b, " on %d node(s) %s", len(v.Nodes), strings.Join(names, ","))
	if v.Start != nil {
		fmt.Fprintf(&b, ", from %s", stamp(*v.Start))
	}
	if v.End != nil {
		fmt.Fprintf(&b, " to %s (%s)", stamp(*v.End), human(v.End.Sub(*v.Start)))
	} else {
		b.WriteString(", no epilog yet")
	}
	fmt.Fprintf(&b, "\nverdict: %s\n", v.Verdict)
	return b.String()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func nonEmpty(s ...string) []string {
	return slices.DeleteFunc(s, func(x string) bool { return x == "" })
}
