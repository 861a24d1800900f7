package drainctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gpuhc/gpuhc/internal/atomicfile"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/stats"
)

const reportAbout = `Writes one self-contained HTML page (no network fetches: the charts are
inline SVG) with the drains timeline, MTTF and MTTR per node and per
component type, the lemon ranking, failures by check and open drains with
their reasons. The figures are stats' own over the same logs and flags;
the page carries the whole stats --json object in a
<script type="application/json" id="gpuhc-stats"> block.`

// timelineRows is how many nodes the drains timeline draws: those with the
// most drains. A fleet's page stays readable; the tables list every node.
const timelineRows = 40

func (p Program) report(args []string) error {
	var o statsOpts
	var out string
	fs := p.statsFlags("report", "--html FILE", reportAbout, &o)
	fs.StringVar(&out, "html", "", "write the page to `FILE` (replaced atomically)")
	pos, err := parse(fs, &o.common, args)
	if err != nil {
		return err
	}
	if err := noArgs(pos); err != nil {
		return err
	}
	if out == "" {
		return usagef("report: --html FILE is required")
	}
	if err := writableTarget(out); err != nil {
		return err
	}
	var drains []events.Event
	rep, partial, err := p.statsReport(&o, func(ev events.Event) { drains = append(drains, ev) })
	if err != nil {
		return err
	}
	page, err := renderReport(rep, drains, p.now())
	if err != nil {
		return err
	}
	if err := atomicfile.Write(out, page, atomicfile.Options{Mode: 0o644, DirMode: 0o755, Pattern: ".gpuhc-report-*.html"}); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	fmt.Fprintf(p.Stdout, "wrote %s (%d events, %d nodes, %d open drains)\n", out, rep.Events, len(rep.ByNode), rep.Fleet.Open)
	return partial
}

// writableTarget refuses to replace anything but a regular file: a rename
// over a directory fails late, and over a device or FIFO would be a
// surprise to whoever made it.
func writableTarget(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(filepath.Dir(path)); err != nil {
			return fmt.Errorf("report: %s: %w", filepath.Dir(path), err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("report: %s exists and is not a regular file (%s); not replaced", path, st.Mode().Type())
	}
	return nil
}

// span is one drain on the timeline: from its drain event to its resume,
// or open.
type span struct {
	Node, Check, Reason string
	From, To            time.Time
	Open                bool
}

// spans pairs each node's drain and resume events in time order. A resume
// with no drain before it (the drain predates the logs) is left out; a
// second drain while one is open (a reason changed) extends that one.
func spans(evs []events.Event, now time.Time) []span {
	evs = slices.Clone(evs)
	slices.SortStableFunc(evs, func(a, b events.Event) int { return a.Time.Compare(b.Time) })
	open := map[string]int{}
	var out []span
	for _, ev := range evs {
		i, isOpen := open[ev.Node]
		switch {
		case ev.Kind == events.KindDrain && !isOpen:
			open[ev.Node] = len(out)
			out = append(out, span{Node: ev.Node, Check: drainCheck(ev), Reason: ev.Message, From: ev.Time, Open: true})
		case ev.Kind == events.KindDrain:
			out[i].Check, out[i].Reason = drainCheck(ev), ev.Message
		case ev.Kind == events.KindResume && isOpen:
			out[i].To, out[i].Open = ev.Time, false
			delete(open, ev.Node)
		}
	}
	for i := range out {
		if out[i].Open {
			out[i].To = now
		}
	}
	return out
}

// drainCheck is the check a drain is for. An admin's drain (gpuhc-drain
// drain) and older logs carry no check field; their reason names the
// check, and stats counts the drain for that one, so the page does too.
func drainCheck(ev events.Event) string {
	if ev.Check != "" {
		return ev.Check
	}
	check, _ := stats.ReasonCheck(ev.Message)
	return check
}

type reportPage struct {
	Generated         string
	Rep               stats.Report
	StatsJSON         template.JS
	Timeline          template.HTML
	CheckChart        template.HTML
	OpenDrains        []span
	Fleet             []string
	Columns           []string
	Nodes, Types      [][]string
	Checks, Serials   [][]string
	Lemons            []stats.Lemon
	TimelineTruncated int
}

func renderReport(rep stats.Report, drains []events.Event, now time.Time) ([]byte, error) {
	js, err := json.Marshal(rep) // escapes <, > and &: safe inside <script>
	if err != nil {
		return nil, fmt.Errorf("report: encode stats: %w", err)
	}
	all := spans(drains, now)
	pg := reportPage{
		Generated: now.UTC().Format(time.RFC3339), Rep: rep, StatsJSON: template.JS(js),
		Fleet: rep.Fleet.Cells(), Columns: stats.Columns,
		Nodes: cells(rep.ByNode), Types: cells(rep.ByComponentType),
		Checks: cells(rep.ByCheck), Serials: cells(rep.BySerial), Lemons: rep.Lemons,
	}
	for _, s := range all {
		if s.Open {
			pg.OpenDrains = append(pg.OpenDrains, s)
		}
	}
	var tl template.HTML
	tl, pg.TimelineTruncated = timelineSVG(all)
	pg.Timeline = tl
	pg.CheckChart = barsSVG(rep.ByCheck)
	var b bytes.Buffer
	if err := reportTmpl.Execute(&b, pg); err != nil {
		return nil, fmt.Errorf("report: render: %w", err)
	}
	return b.Bytes(), nil
}

func cells(rows []stats.Row) [][]string {
	out := make([][]string, len(rows))
	for i, r := range rows {
		out[i] = r.Cells()
	}
	return out
}
