package drainctl

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/stats"
)

var statsBlock = regexp.MustCompile(`(?s)<script type="application/json" id="gpuhc-stats">(.*?)</script>`)

// reportOf runs report --html and returns the page and its stats block.
func reportOf(t *testing.T, b *bed, args ...string) (string, stats.Report) {
	t.Helper()
	out := filepath.Join(b.dir, "fleet.html")
	b.mustRun(0, append([]string{"report", "--html", out}, args...)...)
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	m := statsBlock.FindSubmatch(page)
	if m == nil {
		t.Fatalf("no gpuhc-stats block in\n%s", page)
	}
	var rep stats.Report
	if err := json.Unmarshal(m[1], &rep); err != nil {
		t.Fatalf("gpuhc-stats block: %v\n%s", err, m[1])
	}
	return string(page), rep
}

func TestReportFiguresAreStats(t *testing.T) {
	b := statsBed(t)
	for _, args := range [][]string{nil, {"--node", "gpu001", "--lemon-min", "1"}, {"--since", "1h"}} {
		page, got := reportOf(t, b, args...)
		b.mustRun(0, append([]string{"stats", "--json"}, args...)...)
		var want stats.Report
		if err := json.Unmarshal([]byte(b.stdout), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v: page's stats differ from stats --json:\npage  %+v\nstats %+v", args, got, want)
		}
		// The fleet table shows the same cells stats' table and CSV do.
		for _, c := range want.Fleet.Cells() {
			if !strings.Contains(page, "<td>"+c+"</td>") {
				t.Errorf("%v: fleet cell %q not on the page", args, c)
			}
		}
	}
	page, _ := reportOf(t, b)
	for _, want := range []string{`id="timeline"`, `<svg`, `class="drain"`, "gpu.xid", "No open drain.", `id="node-table"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "http://") && !strings.Contains(page, `xmlns="http://www.w3.org/2000/svg"`) {
		t.Error("page refers to a network address")
	}
	if regexp.MustCompile(`(?i)<(?:script|link|img)[^>]+(?:src|href)=`).MatchString(page) {
		t.Error("page fetches something")
	}
}

func TestReportEscapesWhatTheLogsSay(t *testing.T) {
	b := newBed(t)
	evil := `<script>alert(1)</script>`
	b.logEvents("gpu001",
		events.Event{Time: t0.Add(-time.Hour), Kind: "transition", Node: "gpu001", Check: "host.mounts", Component: evil,
			Status: "FAIL", Previous: "OK", Message: evil, Action: "drain"},
		events.Event{Time: t0.Add(-time.Hour), Kind: "drain", Node: "gpu001", Check: "host.mounts", Message: "gpuhc: " + evil},
	)
	page, rep := reportOf(t, b)
	if strings.Contains(page, evil) {
		t.Fatalf("the page carries the log's markup unescaped:\n%s", page)
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("the open drain's reason is not shown escaped:\n%s", page)
	}
	if rep.Fleet.Open != 1 || !strings.Contains(page, `class="open"`) {
		t.Errorf("open drain: fleet %+v", rep.Fleet)
	}
}

func TestReportWithoutData(t *testing.T) {
	b := newBed(t)
	page, rep := reportOf(t, b)
	if rep.Events != 0 || !strings.Contains(page, `id="no-data"`) || !strings.Contains(page, "No drain in this window.") {
		t.Errorf("empty report: %+v\n%s", rep, page)
	}
	if !strings.HasPrefix(page, "<!DOCTYPE html>") || !strings.HasSuffix(strings.TrimSpace(page), "</html>") {
		t.Error("not a whole page")
	}
}

func TestReportRefusesWhatIsNotARegularFile(t *testing.T) {
	b := newBed(t)
	fifo := filepath.Join(b.dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	b.mustRun(ExitInternal, "report", "--html", fifo)
	if !strings.Contains(b.stderr, "not a regular file") {
		t.Errorf("stderr %q", b.stderr)
	}
	b.mustRun(ExitInternal, "report", "--html", b.dir) // a directory
	b.mustRun(ExitInternal, "report", "--html", filepath.Join(b.dir, "no", "such", "dir.html"))
	b.mustRun(ExitUsage, "report")
	b.mustRun(ExitUsage, "report", "--html", filepath.Join(b.dir, "x.html"), "extra")
	// Replacing an old page works and leaves no temp file behind.
	out := filepath.Join(b.dir, "r.html")
	if err := os.WriteFile(out, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.mustRun(0, "report", "--html", out)
	if body, _ := os.ReadFile(out); !strings.HasPrefix(string(body), "<!DOCTYPE html>") {
		t.Errorf("old page not replaced: %.40q", body)
	}
	if left, _ := filepath.Glob(filepath.Join(b.dir, ".gpuhc-report-*")); len(left) != 0 {
		t.Errorf("temp files left: %v", left)
	}
}

func TestSpansPairDrainsAndResumes(t *testing.T) {
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	got := spans([]events.Event{
		{Time: at(5), Kind: "resume", Node: "a"},
		{Time: at(1), Kind: "drain", Node: "a", Message: "r1"},
		{Time: at(0), Kind: "resume", Node: "b"}, // its drain predates the logs
		{Time: at(2), Kind: "drain", Node: "a", Message: "r2"},
		{Time: at(3), Kind: "drain", Node: "b", Message: "rb"},
	}, at(10))
	want := []span{
		{Node: "a", Reason: "r2", From: at(1), To: at(5)},
		{Node: "b", Reason: "rb", From: at(3), To: at(10), Open: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("spans = %+v\nwant %+v", got, want)
	}
}

// Found by test/report (headless Chromium against stats --json): the open
// drains were every drain in the logs, whatever --check or --until said,
// and an admin's drain (no check field) showed no check.
func TestReportOpenDrainsAreStats(t *testing.T) {
	b := newBed(t)
	b.logEvents("gpu001", events.Event{Time: t0.Add(-3 * time.Hour), Kind: "drain", Node: "gpu001",
		Message: "gpuhc: host.mounts: /scratch: not mounted"}) // as gpuhc-drain drain writes it
	b.logEvents("gpu002", events.Event{Time: t0.Add(-2 * time.Hour), Kind: "drain", Node: "gpu002", Check: "gpu.xid",
		Component: "gpu3", Message: "gpuhc: gpu.xid: gpu3: XID 79"})
	openRows := regexp.MustCompile(`<tr><td>(gpu\d+)</td><td>[^<]*</td><td>([^<]*)</td>`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "gpu001 host.mounts, gpu002 gpu.xid"},
		{[]string{"--check", "host.*"}, "gpu001 host.mounts"},
		{[]string{"--check", "gpu.xid"}, "gpu002 gpu.xid"},
		{[]string{"--until", t0.Add(-150 * time.Minute).Format(time.RFC3339)}, "gpu001 host.mounts"},
		{[]string{"--node", "gpu002"}, "gpu002 gpu.xid"},
	} {
		page, rep := reportOf(t, b, c.args...)
		_, table, _ := strings.Cut(page, `id="open-table"`)
		table, _, _ = strings.Cut(table, "</table>")
		var got []string
		for _, m := range openRows.FindAllStringSubmatch(table, -1) {
			got = append(got, m[1]+" "+m[2])
		}
		if strings.Join(got, ", ") != c.want || len(got) != rep.Fleet.Open {
			t.Errorf("%v: open drains %q (stats: %d open), want %q", c.args, got, rep.Fleet.Open, c.want)
		}
	}
}
