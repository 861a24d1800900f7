package drainctl

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/stats"
)

const statsAbout = `Computes failure statistics from the event logs: observed hours, episodes
(one per failure of a component, however often it was seen), MTTF (hours
per episode), drains, resumes, MTTR (mean drain-to-resume time) and open
drains, fleet-wide and per node, check, GPU serial, component type and
GPU model, and ranks the lemons: the nodes and GPUs with the most
episodes. MTTR is split into its phases: first FAIL to drain, drain to
remediation, remediation to back in service. Remediations are counted
per action and model: started, finished, failed, cured. Hours come from
the health check's heartbeats; without them MTTF is "-".
--json prints the whole report as one object.`

type statsOpts struct {
	common
	node, check  string
	since, until string
	lemonMin     int
	by           string
	// every, when set, sees every event read, before the window and the
	// filters (lemons reads its quarantine records in the same pass).
	every func(events.Event)
}

// statsSections are the breakdowns --by can choose, in print order.
var statsSections = []string{"node", "check", "serial", "type", "model", "remediation", "lemons"}

func (p Program) stats(args []string) error {
	var o statsOpts
	fs := p.statsFlags("stats", "", statsAbout, &o)
	fs.StringVar(&o.by, "by", strings.Join(statsSections, ","), "breakdowns to print (table and CSV), comma-separated: `node,check,serial,type,model,remediation,lemons`")
	pos, err := parse(fs, &o.common, args)
	if err != nil {
		return err
	}
	if err := noArgs(pos); err != nil {
		return err
	}
	sections, err := bySections(o.by)
	if err != nil {
		return err
	}
	rep, partial, err := p.statsReport(&o, nil)
	if err != nil {
		return err
	}
	switch o.format() {
	case formatJSON:
		err = emit(p.Stdout, formatJSON, table{}, rep)
	case formatCSV:
		err = emit(p.Stdout, formatCSV, statsCSV(rep, sections), nil)
	default:
		err = printStats(p.Stdout, rep, sections)
	}
	if err != nil {
		return err
	}
	return partial
}

// statsFlags are the window and selection flags that stats and report
// share, so that a report covers exactly what stats would count.
func (p Program) statsFlags(name, args, about string, o *statsOpts) *flag.FlagSet {
	fs := p.flags(name, args, about, &o.common, true)
	fs.StringVar(&o.node, "node", "", "only these nodes (`hostlist` or glob: gpu[001-004], gpu0*)")
	fs.StringVar(&o.check, "check", "", "only this `check`, by name (host.mounts) or glob (gpu.*)")
	fs.StringVar(&o.since, "since", "", "window start `when`: a duration back (30d, 2w) or a time (2026-11-01, RFC 3339); default: the first event")
	fs.StringVar(&o.until, "until", "", "window end `when` (same forms as --since); default: now")
	fs.IntVar(&o.lemonMin, "lemon-min", stats.DefaultLemonMin, "episodes that make a node or GPU a lemon (`N`)")
	return fs
}

// statsReport reads the event logs once into the report; also, when not
// nil, is given every selected event too. partial is a source that could
// not be read whole (the report stands, the exit code says so).
// statsReport computes stats' report; drains, if not nil, is called with
// each drain and resume event the report counts (stats.KeepsDrain).
func (p Program) statsReport(o *statsOpts, drains func(events.Event)) (rep stats.Report, partial, err error) {
	now := p.now()
	since, err := parseWhen(o.since, now)
	if err != nil {
		return rep, nil, usagef("--since: %v", err)
	}
	until, err := parseWhen(o.until, now)
	if err != nil {
		return rep, nil, usagef("--until: %v", err)
	}
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		return rep, nil, usagef("--since must be before --until")
	}
	if o.lemonMin < 1 {
		return rep, nil, usagef("--lemon-min must be at least 1")
	}
	match, err := nodeMatcher(o.node)
	if err != nil {
		return rep, nil, err
	}
	acc := stats.New(stats.Options{Since: since, Until: until, LemonMin: o.lemonMin, Check: o.check})
	ctx, cancel := slurmContext()
	defer cancel()
	partial, err = incomplete(p.scanEach(ctx, &o.common, func(ev events.Event) {
		if o.every != nil {
			o.every(ev)
		}
		if match(ev.Node) {
			acc.Add(ev)
			if drains != nil && acc.KeepsDrain(ev) {
				drains(ev)
			}
		}
	}))
	if err != nil {
		return rep, nil, err
	}
	rep = acc.Report()
	rep.Filter.Node = o.node
	return rep, partial, nil
}

func bySections(s string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, b := range strings.Split(s, ",") {
		b = strings.TrimSpace(b)
		if b == "" {
			continue
		}
		ok := false
		for _, k := range statsSections {
			ok = ok || k == b
		}
		if !ok {
			return nil, usagef("--by %q: want some of %s", b, strings.Join(statsSections, ","))
		}
		out[b] = true
	}
	return out, nil
}

// hoursText prints a mean time as an admin reads it (3d4h, 25m10s).
func hoursText(h *float64) string {
	if h == nil {
		return "-"
	}
	return human(time.Duration(*h * float64(time.Hour)))
}

func statsRow(r stats.Row) []string {
	i := strconv.Itoa
	return []string{r.Key, stats.FormatHours(&r.Hours), i(r.Episodes), hoursText(r.MTTF),
		i(r.Drains), i(r.Resumes), i(r.Repairs), hoursText(r.MTTR), hoursText(r.DetectToDrain),
		hoursText(r.DrainToRemediation), hoursText(r.RemediationToService), i(r.Open)}
}

// statsHead: MTTR's phases follow it (docs/metrics.md#mttr-phases).
var statsHead = []string{"HOURS", "EPISODES", "MTTF", "DRAINS", "RESUMES", "REPAIRS", "MTTR",
	"DETECT-DRAIN", "DRAIN-REMEDY", "REMEDY-BACK", "OPEN"}

func printStats(w io.Writer, rep stats.Report, sections map[string]bool) error {
	fmt.Fprintln(w, windowLine(rep))
	section := func(title string, rows []stats.Row, serial bool) error {
		t := table{head: append([]string{title}, statsHead...)}
		if serial {
			t.head = append(t.head, "NODES")
		}
		for _, r := range rows {
			cells := statsRow(r)
			if serial {
				cells = append(cells, strings.Join(r.Nodes, ","))
			}
			t.rows = append(t.rows, cells)
		}
		fmt.Fprintln(w)
		return emit(w, formatTable, t, nil)
	}
	if err := section("FLEET", []stats.Row{rep.Fleet}, false); err != nil {
		return err
	}
	for _, s := range []struct {
		key, title string
		rows       []stats.Row
	}{
		{"node", "NODE", rep.ByNode},
		{"check", "CHECK", rep.ByCheck},
		{"serial", "GPU SERIAL", rep.BySerial},
		{"type", "COMPONENT TYPE", rep.ByComponentType},
		{"model", "GPU MODEL", rep.ByModel},
	} {
		if !sections[s.key] || len(s.rows) == 0 {
			continue
		}
		if err := section(s.title, s.rows, s.key == "serial"); err != nil {
			return err
		}
	}
	if sections["remediation"] {
		if err := printRemediation(w, rep.Remediation); err != nil {
			return err
		}
	}
	if !sections["lemons"] {
		return nil
	}
	fmt.Fprintln(w)
	if len(rep.Lemons) == 0 {
		_, err := fmt.Fprintf(w, "lemons (%d or more episodes): none\n", rep.LemonMin)
		return err
	}
	fmt.Fprintf(w, "lemons (%d or more episodes):\n", rep.LemonMin)
	t := table{head: []string{"RANK", "KIND", "KEY", "EPISODES", "SHARE", "MTTF", "DRAINS", "MTTR", "NODES"}}
	for _, l := range rep.Lemons {
		t.rows = append(t.rows, []string{strconv.Itoa(l.Rank), l.Kind, l.Key, strconv.Itoa(l.Episodes),
			fmt.Sprintf("%.0f%%", 100*l.Share), hoursText(l.MTTF), strconv.Itoa(l.Drains), hoursText(l.MTTR),
			strings.Join(l.Nodes, ",")})
	}
	return emit(w, formatTable, t, nil)
}

func windowLine(rep stats.Report) string {
	end := func(t *time.Time, open string) string {
		if t == nil {
			return open
		}
		return stamp(*t)
	}
	s := fmt.Sprintf("window: %s to %s", end(rep.Window.Since, "first event"), end(rep.Window.Until, "now"))
	if rep.Window.From != nil {
		s += fmt.Sprintf("; observed %s to %s", stamp(*rep.Window.From), stamp(*rep.Window.To))
	}
	s += fmt.Sprintf("; %d events", rep.Events)
	var notes []string
	if rep.Duplicates > 0 {
		notes = append(notes, fmt.Sprintf("%d duplicates counted once", rep.Duplicates))
	}
	if rep.Skipped > 0 {
		notes = append(notes, fmt.Sprintf("%d skipped", rep.Skipped))
	}
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, ", ") + ")"
	}
	var f []string
	if rep.Filter.Node != "" {
		f = append(f, "node "+rep.Filter.Node)
	}
	if rep.Filter.Check != "" {
		f = append(f, "check "+rep.Filter.Check)
	}
	if len(f) > 0 {
		s += "; " + strings.Join(f, ", ")
	}
	return s
}

// statsCSV is every chosen breakdown in one CSV, a "section" column first;
// hours are plain numbers, empty when undefined.
func statsCSV(rep stats.Report, sections map[string]bool) table {
	t := table{head: []string{"section", "key", "hours", "episodes", "mttf_hours", "drains", "resumes",
		"repairs", "mttr_hours", "open", "rank", "share", "nodes", "detected", "detect_to_drain_hours",
		"remediated", "drain_to_remediation_hours", "remediation_to_service_hours",
		"started", "finished", "failed", "pending", "cured", "success_rate", "cure_rate"}}
	num := func(h *float64) string {
		if h == nil {
			return ""
		}
		return strconv.FormatFloat(*h, 'f', 4, 64)
	}
	add := func(section string, r stats.Row, rank, share string) {
		i := strconv.Itoa
		t.rows = append(t.rows, append([]string{section, r.Key, num(&r.Hours), i(r.Episodes), num(r.MTTF), i(r.Drains),
			i(r.Resumes), i(r.Repairs), num(r.MTTR), i(r.Open), rank, share, strings.Join(r.Nodes, " "),
			i(r.Detected), num(r.DetectToDrain), i(r.Remediated), num(r.DrainToRemediation), num(r.RemediationToService)},
			make([]string, 7)...))
	}
	add("fleet", rep.Fleet, "", "")
	for _, s := range []struct {
		key  string
		rows []stats.Row
	}{{"node", rep.ByNode}, {"check", rep.ByCheck}, {"serial", rep.BySerial}, {"type", rep.ByComponentType},
		{"model", rep.ByModel}} {
		if sections[s.key] {
			for _, r := range s.rows {
				add(s.key, r, "", "")
			}
		}
	}
	if sections["remediation"] {
		t.rows = append(t.rows, remediationCSV(rep.Remediation, len(t.head))...)
	}
	if sections["lemons"] {
		for _, l := range rep.Lemons {
			add("lemon-"+l.Kind, l.Row, strconv.Itoa(l.Rank), strconv.FormatFloat(l.Share, 'f', 4, 64))
		}
	}
	return t
}

// printRemediation is the remediations by action and by model, with the
// fleet's total; nothing when none was started.
func printRemediation(w io.Writer, rem stats.Remediation) error {
	if rem.Fleet.Started == 0 {
		return nil
	}
	for _, s := range []struct {
		title string
		rows  []stats.RemediationRow
	}{{"REMEDIATION", rem.ByAction}, {"REMEDIATED MODEL", rem.ByModel}} {
		t := table{head: []string{s.title, "STARTED", "FINISHED", "FAILED", "PENDING", "CURED", "SUCCESS", "CURE RATE"}}
		for _, r := range append(s.rows, rem.Fleet) {
			t.rows = append(t.rows, r.Cells())
		}
		fmt.Fprintln(w)
		if err := emit(w, formatTable, t, nil); err != nil {
			return err
		}
	}
	return nil
}

// remediationCSV is the remediation rows of stats' CSV: sections
// remediation-fleet, remediation-action and remediation-model, their
// figures in the last columns, rates as fractions (empty: undefined).
func remediationCSV(rem stats.Remediation, width int) [][]string {
	rate := func(r *float64) string {
		if r == nil {
			return ""
		}
		return strconv.FormatFloat(*r, 'f', 4, 64)
	}
	var out [][]string
	add := func(section string, r stats.RemediationRow) {
		i := strconv.Itoa
		row := make([]string, width-7, width)
		row[0], row[1] = section, r.Key
		out = append(out, append(row, i(r.Started), i(r.Finished), i(r.Failed), i(r.Pending), i(r.Cured),
			rate(r.SuccessRate), rate(r.CureRate)))
	}
	add("remediation-fleet", rem.Fleet)
	for _, r := range rem.ByAction {
		add("remediation-action", r)
	}
	for _, r := range rem.ByModel {
		add("remediation-model", r)
	}
	return out
}
