// Command report is test/report/run.sh's checker (make report-test): it
// reads what headless Chromium made of gpuhc-drain's report page and
// compares it with what the page must show.
//
//	report dom -stats S.json -truth T.json -events DIR -part PART DOM.html
//	report netlog NETLOG.json
//	report png -width W -height H FILE.png
//
// dom reads the DOM Chromium serialised after loading the page
// (--dump-dom), not the file gpuhc-drain wrote, so a script or a parser
// quirk that changes what a reader sees is caught. Each exits 1 with "# "
// lines saying what differs, 2 on a usage or read error.
package main

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"image/png"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/fleetgen"
	"github.com/gpuhc/gpuhc/internal/stats"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var bad []string
	var err error
	switch os.Args[1] {
	case "dom":
		bad, err = domCmd(os.Args[2:])
	case "netlog":
		bad, err = netlogCmd(os.Args[2:])
	case "png":
		bad, err = pngCmd(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(2)
	}
	for _, b := range bad {
		fmt.Println("#", b)
	}
	if len(bad) > 0 {
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: report dom|netlog|png ... (see test/report/main.go)")
	os.Exit(2)
}

// page is the rendered DOM as the test needs it: each table's rows of
// cell text by table id, every svg <title>, every src/href, and the text
// of the element with id "window".
type page struct {
	tables map[string][][]string
	titles []string
	links  []string
	window string
}

func parseDOM(r io.Reader) (*page, error) {
	d := xml.NewDecoder(r)
	// Chromium serialises HTML, not XML: void elements stay unclosed and
	// entities are HTML's.
	d.Strict, d.AutoClose, d.Entity = false, xml.HTMLAutoClose, xml.HTMLEntity
	p := &page{tables: map[string][][]string{}}
	var table, text string
	var inCell, inTitle, inWindow bool
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return p, nil
		}
		if err != nil {
			return nil, fmt.Errorf("DOM: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			for _, a := range t.Attr {
				switch strings.ToLower(a.Name.Local) {
				case "src", "href":
					p.links = append(p.links, a.Value)
				case "id":
					if t.Name.Local == "table" {
						table = a.Value
					}
					inWindow = inWindow || a.Value == "window"
				}
			}
			switch t.Name.Local {
			case "tr":
				if table != "" {
					p.tables[table] = append(p.tables[table], nil)
				}
			case "td", "th":
				inCell, text = true, ""
			case "title":
				inTitle, text = true, ""
			}
		case xml.CharData:
			if inCell || inTitle {
				text += string(t)
			}
			if inWindow {
				p.window += string(t)
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "table":
				table = ""
			case "td", "th":
				if rows := p.tables[table]; inCell && len(rows) > 0 {
					rows[len(rows)-1] = append(rows[len(rows)-1], text)
				}
				inCell = false
			case "title":
				if inTitle {
					p.titles = append(p.titles, text)
				}
				inTitle = false
			case "p":
				inWindow = false
			}
		}
	}
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func domCmd(args []string) ([]string, error) {
	fs := flag.NewFlagSet("dom", flag.ContinueOnError)
	statsPath := fs.String("stats", "", "gpuhc-drain stats --json output")
	truthPath := fs.String("truth", "", "fleetgen -truth output")
	evDir := fs.String("events", "", "the event logs")
	part := fs.String("part", "", "fleet, open, lemons, checks, tables or links")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		return nil, errors.New("dom -stats S.json -truth T.json -events DIR -part PART DOM.html")
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pg, err := parseDOM(f)
	if err != nil {
		return nil, err
	}
	var rep stats.Report
	if err := readJSON(*statsPath, &rep); err != nil {
		return nil, err
	}
	switch *part {
	case "fleet":
		return fleetPart(pg, rep), nil
	case "open":
		var truth fleetgen.Truth
		if err := readJSON(*truthPath, &truth); err != nil {
			return nil, err
		}
		reasons, err := lastDrainReasons(*evDir)
		if err != nil {
			return nil, err
		}
		return openPart(pg, rep, truth, reasons), nil
	case "lemons":
		return lemonPart(pg, rep), nil
	case "checks":
		return checkPart(pg, rep), nil
	case "tables":
		var bad []string
		for id, rows := range map[string][]stats.Row{"node-table": rep.ByNode, "type-table": rep.ByComponentType, "serial-table": rep.BySerial} {
			bad = append(bad, rowsDiffer(pg, id, rows)...)
		}
		slices.Sort(bad)
		return bad, nil
	case "links":
		var bad []string
		for _, l := range pg.links {
			bad = append(bad, "the page links to "+strconv.Quote(l))
		}
		return bad, nil
	}
	return nil, fmt.Errorf("dom: unknown -part %q", *part)
}

// rowsDiffer compares table id (a header row, then one row per Row) with
// the cells stats prints for rows.
func rowsDiffer(pg *page, id string, rows []stats.Row) []string {
	got, ok := pg.tables[id]
	if !ok {
		if len(rows) == 0 {
			return nil // the page says "None." instead of an empty table
		}
		return []string{id + ": not on the page"}
	}
	var bad []string
	if len(got) == 0 || !slices.Equal(got[0], stats.Columns) {
		bad = append(bad, fmt.Sprintf("%s: header %q, want %q", id, first(got), stats.Columns))
	}
	if len(got)-1 != len(rows) {
		bad = append(bad, fmt.Sprintf("%s: %d rows, stats --json has %d", id, len(got)-1, len(rows)))
	}
	for i := 0; i < len(rows) && i+1 < len(got); i++ {
		if want := rows[i].Cells(); !slices.Equal(got[i+1], want) {
			bad = append(bad, fmt.Sprintf("%s row %d: %q, stats --json says %q", id, i+1, got[i+1], want))
		}
	}
	return bad
}

func first(rows [][]string) []string {
	if len(rows) == 0 {
		return nil
	}
	return rows[0]
}

// fleetPart: the fleet row as stats prints it, its MTTF and MTTR within
// the display's rounding of the JSON's, the node count, the events read.
func fleetPart(pg *page, rep stats.Report) []string {
	bad := rowsDiffer(pg, "fleet-table", []stats.Row{rep.Fleet})
	if rows := pg.tables["fleet-table"]; len(rows) == 2 && len(rows[1]) == len(stats.Columns) {
		for _, c := range []struct {
			name string
			col  int
			v    *float64
		}{{"mttf_hours", 3, rep.Fleet.MTTF}, {"mttr_hours", 7, rep.Fleet.MTTR}} {
			shown, err := strconv.ParseFloat(rows[1][c.col], 64)
			if c.v == nil || err != nil || shown < *c.v-0.05 || shown > *c.v+0.05 {
				bad = append(bad, fmt.Sprintf("fleet %s shows %q, stats --json has %v", c.name, rows[1][c.col], deref(c.v)))
			}
		}
	}
	if n := len(pg.tables["node-table"]) - 1; n != len(rep.ByNode) {
		bad = append(bad, fmt.Sprintf("the page lists %d nodes, stats --json %d", n, len(rep.ByNode)))
	}
	if want := strconv.Itoa(rep.Events) + " events read"; !strings.Contains(pg.window, want) {
		bad = append(bad, fmt.Sprintf("the window line %q lacks %q", strings.TrimSpace(pg.window), want))
	}
	return bad
}

func deref(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

// lastDrainReasons: each node's most recent drain reason in the logs.
func lastDrainReasons(dir string) (map[string]string, error) {
	type drain struct {
		t      time.Time
		reason string
	}
	last := map[string]drain{}
	err := events.Scan(context.Background(), []string{dir}, nil, func(string) {}, func(ev events.Event) error {
		if ev.Kind == events.KindDrain && !ev.Time.Before(last[ev.Node].t) {
			last[ev.Node] = drain{ev.Time, ev.Message}
		}
		return nil
	})
	out := map[string]string{}
	for n, d := range last {
		out[n] = d.reason
	}
	return out, err
}

// openPart: the open-drains table lists the nodes stats --json counts as
// open, with the check fleetgen drained them for and the reason of their
// last drain event.
func openPart(pg *page, rep stats.Report, truth fleetgen.Truth, reasons map[string]string) []string {
	var want []string
	for _, r := range rep.ByNode {
		for range r.Open {
			want = append(want, r.Key)
		}
	}
	if len(want) != rep.Fleet.Open {
		return []string{fmt.Sprintf("stats --json: by_node counts %d open drains, fleet %d", len(want), rep.Fleet.Open)}
	}
	checkOf := map[string]string{}
	for _, d := range truth.Drains {
		if d.Resume.IsZero() {
			checkOf[d.Node] = d.Check
		}
	}
	rows := pg.tables["open-table"]
	var bad []string
	if len(rows) == 0 || !slices.Equal(rows[0], []string{"node", "since", "check", "reason"}) {
		return []string{fmt.Sprintf("open-table: header %q", first(rows))}
	}
	var got []string
	for _, r := range rows[1:] {
		if len(r) != 4 {
			bad = append(bad, fmt.Sprintf("open-table: row %q", r))
			continue
		}
		got = append(got, r[0])
		if r[2] != checkOf[r[0]] {
			bad = append(bad, fmt.Sprintf("open drain %s: check %q, fleetgen drained it for %q", r[0], r[2], checkOf[r[0]]))
		}
		if r[3] != reasons[r[0]] {
			bad = append(bad, fmt.Sprintf("open drain %s: reason %q, its last drain event says %q", r[0], r[3], reasons[r[0]]))
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		bad = append(bad, fmt.Sprintf("open drains on the page %q, stats --json %q", got, want))
	}
	if len(want) != len(checkOf) {
		bad = append(bad, fmt.Sprintf("stats --json has %d open drains, fleetgen left %d", len(want), len(checkOf)))
	}
	return bad
}

func lemonPart(pg *page, rep stats.Report) []string {
	rows := pg.tables["lemon-table"]
	if len(rep.Lemons) == 0 {
		if rows != nil {
			return []string{"a lemon table, and stats --json has no lemon"}
		}
		return nil
	}
	if len(rows)-1 != len(rep.Lemons) {
		return []string{fmt.Sprintf("lemon-table: %d rows, stats --json has %d lemons", len(rows)-1, len(rep.Lemons))}
	}
	var bad []string
	for i, l := range rep.Lemons {
		want := []string{strconv.Itoa(l.Rank), l.Kind, l.Key, strconv.Itoa(l.Episodes),
			strconv.FormatFloat(l.Share*100, 'f', 1, 64) + "%", strings.Join(l.Nodes, ", ")}
		if !slices.Equal(rows[i+1], want) {
			bad = append(bad, fmt.Sprintf("lemon %d: %q, stats --json says %q", i+1, rows[i+1], want))
		}
	}
	return bad
}

// checkPart: the per-check table, and the chart's bar for each check
// (its tooltip) with the same episode count.
func checkPart(pg *page, rep stats.Report) []string {
	bad := rowsDiffer(pg, "check-table", rep.ByCheck)
	for _, r := range rep.ByCheck {
		if r.Episodes == 0 {
			continue
		}
		if t := r.Key + ": " + strconv.Itoa(r.Episodes) + " episodes"; !slices.Contains(pg.titles, t) {
			bad = append(bad, fmt.Sprintf("the episodes chart has no bar %q", t))
		}
	}
	return bad
}

// netlogCmd reads a Chromium --log-net-log file and reports every URL
// request the page made. Chromium's own background requests (updates,
// accounts) have no origin ("not an origin"); the page's have its origin
// (a file:// page's is opaque, "null").
func netlogCmd(args []string) ([]string, error) {
	if len(args) != 1 {
		return nil, errors.New("netlog NETLOG.json")
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		return nil, err
	}
	var nl struct {
		Constants struct {
			LogEventTypes map[string]int `json:"logEventTypes"`
		} `json:"constants"`
		Events []struct {
			Type   int `json:"type"`
			Params struct {
				URL       string `json:"url"`
				Initiator string `json:"initiator"`
			} `json:"params"`
		} `json:"events"`
	}
	if err := json.Unmarshal(b, &nl); err != nil {
		return nil, fmt.Errorf("%s: %w", args[0], err)
	}
	start, ok := nl.Constants.LogEventTypes["URL_REQUEST_START_JOB"]
	if !ok {
		return nil, fmt.Errorf("%s: no URL_REQUEST_START_JOB event type: not a net log?", args[0])
	}
	var bad []string
	for _, e := range nl.Events {
		// A job's end event carries no URL, only its outcome.
		if e.Type == start && e.Params.URL != "" && e.Params.Initiator != "not an origin" && !slices.Contains(bad, e.Params.URL) {
			bad = append(bad, e.Params.URL)
		}
	}
	for i, u := range bad {
		bad[i] = "the page fetched " + strconv.Quote(u)
	}
	return bad, nil
}

// pngCmd: FILE is a PNG of the window's size in which the page's charts
// were painted: pixels of the open-drain red and the episodes blue.
func pngCmd(args []string) ([]string, error) {
	fs := flag.NewFlagSet("png", flag.ContinueOnError)
	w := fs.Int("width", 0, "expected width")
	h := fs.Int("height", 0, "expected height")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		return nil, errors.New("png -width W -height H FILE.png")
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return []string{fs.Arg(0) + ": " + err.Error()}, nil
	}
	var bad []string
	if b := img.Bounds(); b.Dx() != *w || b.Dy() != *h {
		bad = append(bad, fmt.Sprintf("%dx%d, the window is %dx%d", b.Dx(), b.Dy(), *w, *h))
	}
	colours := map[string][3]uint32{"open-drain red #c0392b": {0xc0, 0x39, 0x2b}, "episodes blue #3b6ea8": {0x3b, 0x6e, 0xa8}}
	count := map[string]int{}
	ink := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			if r < 0xf0 || g < 0xf0 || bl < 0xf0 {
				ink++
			}
			for name, c := range colours {
				if r == c[0] && g == c[1] && bl == c[2] {
					count[name]++
				}
			}
		}
	}
	for name := range colours {
		if count[name] < 20 {
			bad = append(bad, fmt.Sprintf("%d pixels of the %s: the chart was not painted", count[name], name))
		}
	}
	if area := b.Dx() * b.Dy(); ink < area/100 {
		bad = append(bad, fmt.Sprintf("%d of %d pixels are not white: a blank page", ink, area))
	}
	slices.Sort(bad)
	return bad, nil
}
