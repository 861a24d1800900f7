package drainctl

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/stats"
)

const rmaAbout = `Lists the parts escalated to a return to the vendor (rma events) that are
still in force: the node has not been resumed since. For each: the node,
component, GPU serial, PCI address, model and driver, the drain reason, the
part's failure history (the FAIL transitions and drains of that check on
that part, on any node it sat in) and the remediations tried (started,
finished or failed, with times and durations): what a vendor ticket asks
for. --all also lists those resumed since (by hand, after a swap).`

type rmaOpts struct {
	common
	node string
	all  bool
}

func (p Program) rma(args []string) error {
	var o rmaOpts
	fs := p.flags("rma", "", rmaAbout, &o.common, true)
	fs.StringVar(&o.node, "node", "", "only these nodes (`hostlist` or glob: gpu[001-004], gpu0*)")
	fs.BoolVar(&o.all, "all", false, "also the rma events a resume of the node has ended")
	pos, err := parse(fs, &o.common, args)
	if err != nil {
		return err
	}
	if err := noArgs(pos); err != nil {
		return err
	}
	match, err := nodeMatcher(o.node)
	if err != nil {
		return err
	}
	ctx, cancel := slurmContext()
	defer cancel()
	evs, err := p.readEvents(ctx, &o.common, func(ev events.Event) bool { return rmaKind(ev.Kind) })
	partial, err := incomplete(err)
	if err != nil {
		return err
	}
	list := rmaList(evs, func(r rmaCase) bool { return match(r.Node) && (o.all || r.Resumed == nil) })
	if err := printRMA(p.Stdout, o.format(), list); err != nil {
		return err
	}
	return partial
}

// rmaKind is an event kind gpuhc-drain rma reads.
func rmaKind(kind string) bool {
	switch kind {
	case events.KindTransition, events.KindDrain, events.KindResume, events.KindRMA,
		events.KindRemediationStarted, events.KindRemediationFinished, events.KindRemediationFailed:
		return true
	}
	return false
}

// rmaCase is one rma event with its part's history; its JSON is --json's.
type rmaCase struct {
	Node         string    `json:"node"`
	Check        string    `json:"check"`
	Component    string    `json:"component"`
	Serial       string    `json:"serial,omitempty"`
	PCI          string    `json:"pci,omitempty"`
	Model        string    `json:"model,omitempty"`
	Driver       string    `json:"driver,omitempty"`
	Time         time.Time `json:"time"`
	Reason       string    `json:"reason"`
	Remediations int       `json:"remediations"`
	// Resumed is the node's first resume after the rma (--all only).
	Resumed *time.Time `json:"resumed,omitempty"`
	// Failures are the part's FAIL transitions and drains, oldest first.
	Failures []rmaFailure `json:"failures"`
	// Tried are the part's remediations, oldest first.
	Tried []rmaRemedy `json:"remediations_tried"`
}

type rmaFailure struct {
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind"`
	Node      string    `json:"node"`
	Component string    `json:"component,omitempty"`
	Previous  string    `json:"previous,omitempty"`
	Message   string    `json:"message"`
}

type rmaRemedy struct {
	Node    string     `json:"node"`
	Action  string     `json:"action"`
	Started time.Time  `json:"started"`
	Ended   *time.Time `json:"ended,omitempty"`
	// Outcome is "finished", "failed" or, with no end logged, "pending".
	Outcome string  `json:"outcome"`
	Seconds float64 `json:"seconds,omitempty"`
	Ran     string  `json:"ran,omitempty"`
	Why     string  `json:"why,omitempty"`
}

// rmaList finds the rma events of evs (sorted by time) that keep accepts,
// with their resume and history, by node then time.
func rmaList(evs []events.Event, keep func(rmaCase) bool) []rmaCase {
	out := []rmaCase{}
	seen := map[string]bool{}
	for i, ev := range evs {
		id := ev.Node + "\x00" + ev.Time.String() + "\x00" + ev.Component + "\x00" + ev.Serial
		if ev.Kind != events.KindRMA || seen[id] {
			continue // read twice: once
		}
		seen[id] = true
		c := rmaCase{Node: ev.Node, Check: ev.Check, Component: ev.Component, Serial: ev.Serial, PCI: ev.PCI,
			Model: ev.Model, Driver: ev.Driver, Time: ev.Time, Reason: ev.Message, Remediations: ev.Remediations}
		c.Resumed = resumeAfter(evs[i+1:], ev.Node)
		if !keep(c) {
			continue
		}
		c.Failures, c.Tried = partHistory(evs, c)
		out = append(out, c)
	}
	slices.SortStableFunc(out, func(a, b rmaCase) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// resumeAfter is the first resume of node in evs; nil when none.
func resumeAfter(evs []events.Event, node string) *time.Time {
	for _, ev := range evs {
		if ev.Kind == events.KindResume && ev.Node == node {
			return timePtr(ev.Time)
		}
	}
	return nil
}

// samePart reports whether an event's check, component and serial are
// about c's part: the same check and, by serial where both name one (on
// any node: a GPU moves), else the same node and component.
func (c rmaCase) samePart(node, check, comp, serial string) bool {
	if check != c.Check {
		return false
	}
	if serial != "" && c.Serial != "" {
		return serial == c.Serial
	}
	return node == c.Node && comp == c.Component
}

// partHistory is c's part's failures and remediations up to its rma.
func partHistory(evs []events.Event, c rmaCase) ([]rmaFailure, []rmaRemedy) {
	fails, tried := []rmaFailure{}, []rmaRemedy{}
	seen := map[string]bool{}
	for i, ev := range evs {
		if ev.Time.After(c.Time) {
			break
		}
		id := fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%s\x00%s", ev.Node, ev.Time, ev.Kind, ev.Component, ev.Action, ev.Message)
		if seen[id] {
			continue
		}
		seen[id] = true
		switch ev.Kind {
		case events.KindTransition:
			if ev.Status == "FAIL" && c.samePart(ev.Node, ev.Check, ev.Component, ev.Serial) {
				fails = append(fails, rmaFailure{ev.Time, ev.Kind, ev.Node, ev.Component, ev.Previous, ev.Message})
			}
		case events.KindDrain:
			if check, comp := drainPart(ev); c.samePart(ev.Node, check, comp, ev.Serial) {
				fails = append(fails, rmaFailure{ev.Time, ev.Kind, ev.Node, comp, "", ev.Message})
			}
		case events.KindRemediationStarted:
			if c.samePart(ev.Node, ev.Check, ev.Component, ev.Serial) {
				tried = append(tried, remedyOf(ev, evs[i+1:]))
			}
		}
	}
	return fails, tried
}

// drainPart is the check and component a drain names: its fields, else
// its reason.
func drainPart(ev events.Event) (check, comp string) {
	if ev.Check != "" {
		return ev.Check, ev.Component
	}
	return stats.ReasonCheck(ev.Message)
}

// remedyOf is the remediation started by ev, ended by the first
// finished or failed event after it of its node, action and component.
func remedyOf(ev events.Event, after []events.Event) rmaRemedy {
	r := rmaRemedy{Node: ev.Node, Action: ev.Action, Started: ev.Time, Outcome: "pending", Ran: ev.Message}
	for _, e := range after {
		if e.Node != ev.Node || e.Action != ev.Action || e.Component != ev.Component {
			continue
		}
		switch e.Kind {
		case events.KindRemediationFinished:
			r.Outcome = "finished"
		case events.KindRemediationFailed:
			r.Outcome, r.Why = "failed", e.Message
		case events.KindRemediationStarted:
			return r // a new one began: this one's end was not logged
		default:
			continue
		}
		r.Ended, r.Seconds = timePtr(e.Time), e.Seconds
		if r.Seconds == 0 {
			r.Seconds = e.Time.Sub(ev.Time).Seconds()
		}
		return r
	}
	return r
}

func printRMA(w io.Writer, format string, list []rmaCase) error {
	if format == formatJSON {
		return emit(w, formatJSON, table{}, list)
	}
	if format == formatCSV {
		return emit(w, formatCSV, rmaCSV(list), nil)
	}
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no rma in force")
		return err
	}
	for i, c := range list {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprint(w, c.header())
		if err := emit(w, formatTable, rmaHistory(c), nil); err != nil {
			return err
		}
	}
	return nil
}

func (c rmaCase) header() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", c.Node, c.Component)
	for _, f := range [][2]string{{"SN", c.Serial}, {"PCI", c.PCI}, {"model", c.Model}, {"driver", c.Driver}} {
		if f[1] != "" {
			fmt.Fprintf(&b, ", %s %s", f[0], f[1])
		}
	}
	fmt.Fprintf(&b, "\nrma at %s after %d remediation(s): %s\n", stamp(c.Time), c.Remediations, c.Reason)
	if c.Resumed != nil {
		fmt.Fprintf(&b, "resumed at %s\n", stamp(*c.Resumed))
	}
	return b.String()
}

// rmaHistory is c's failures and remediations as one table, oldest first.
func rmaHistory(c rmaCase) table {
	t := table{head: []string{"TIME", "EVENT", "NODE", "DETAIL", "DURATION"}}
	type line struct {
		t     time.Time
		cells []string
	}
	var lines []line
	for _, f := range c.Failures {
		what := f.Kind
		if f.Kind == events.KindTransition {
			what = cmpOr(f.Previous, "new") + "->FAIL"
		}
		lines = append(lines, line{f.Time, []string{stamp(f.Time), what, f.Node, f.Message, ""}})
	}
	for _, r := range c.Tried {
		lines = append(lines, line{r.Started, []string{stamp(r.Started), r.Action + " " + r.Outcome, r.Node,
			strings.Join(nonEmpty(r.Ran, r.Why), ": "), remedyDuration(r)}})
	}
	slices.SortStableFunc(lines, func(a, b line) int { return a.t.Compare(b.t) })
	for _, l := range lines {
		t.rows = append(t.rows, l.cells)
	}
	return t
}

func remedyDuration(r rmaRemedy) string {
	if r.Ended == nil {
		return ""
	}
	return human(time.Duration(r.Seconds * float64(time.Second)))
}

func cmpOr(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// rmaCSV is one row per history line, the part's fields repeated.
func rmaCSV(list []rmaCase) table {
	t := table{head: []string{"node", "check", "component", "serial", "pci", "model", "driver", "rma_time", "reason",
		"remediations", "resumed", "item", "time", "item_node", "action", "outcome", "ended", "seconds", "message"}}
	for _, c := range list {
		resumed := ""
		if c.Resumed != nil {
			resumed = csvTime(*c.Resumed)
		}
		part := []string{c.Node, c.Check, c.Component, c.Serial, c.PCI, c.Model, c.Driver, csvTime(c.Time), c.Reason,
			strconv.Itoa(c.Remediations), resumed}
		for _, f := range c.Failures {
			t.rows = append(t.rows, append(slices.Clone(part), f.Kind, csvTime(f.Time), f.Node, "", "", "", "", f.Message))
		}
		for _, r := range c.Tried {
			ended, secs := "", ""
			if r.Ended != nil {
				ended, secs = csvTime(*r.Ended), strconv.FormatFloat(r.Seconds, 'f', -1, 64)
			}
			t.rows = append(t.rows, append(slices.Clone(part), "remediation", csvTime(r.Started), r.Node, r.Action,
				r.Outcome, ended, secs, strings.Join(nonEmpty(r.Ran, r.Why), ": ")))
		}
		if len(c.Failures)+len(c.Tried) == 0 {
			t.rows = append(t.rows, append(slices.Clone(part), "", "", "", "", "", "", "", ""))
		}
	}
	return t
}
