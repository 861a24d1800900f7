package drainctl

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/stats"
)

const mountReason = "gpuhc: host.mounts: /scratch: not mounted"

// fleet is a cluster with every kind of node list must tell apart.
func fleet(t *testing.T) *bed {
	drainedAt := t0.Add(30 * time.Minute)
	b := newBed(t,
		// drained by the health check, with its events
		node("gpu001", []string{"IDLE", "DRAIN"}, mountReason, "slurm", drainedAt),
		// drained by an admin through gpuhc-drain
		node("gpu002", []string{"ALLOCATED", "DRAIN"}, "gpuhc: replacing GPU 3", "root", t0),
		// an admin's own drain
		node("gpu003", []string{"IDLE", "DRAIN"}, "maintenance", "root", t0.Add(time.Hour)),
		// resumed; 24.11 keeps the stale reason on the idle node
		node("gpu004", []string{"IDLE"}, "gpuhc: host.memory: host: MemTotal 1 GiB < 2 GiB", "slurm", t0),
		// slurmctld's own
		node("gpu005", []string{"DOWN", "NOT_RESPONDING"}, "Not responding", "slurm", t0.Add(90*time.Minute)),
		// the storm guard held its drain back
		node("gpu006", []string{"IDLE"}, "", "", time.Time{}),
		// held back, then recovered
		node("gpu007", []string{"IDLE"}, "", "", time.Time{}),
		// healthy
		node("gpu008", []string{"MIXED"}, "", "", time.Time{}),
		// gpuhc reason, no event log at all
		node("gpu009", []string{"IDLE", "DRAIN"}, "gpuhc: gpu.xid: gpu3: Xid 79 (fallen off the bus)", "slurm", t0),
	)
	b.logEvents("gpu001",
		events.Event{Time: t0, Kind: events.KindTransition, Node: "gpu001", Check: "host.cpu", Component: "host",
			Status: "FAIL", Message: "63 CPUs online, want 64", Action: "drain"},
		events.Event{Time: t0.Add(time.Minute), Kind: events.KindTransition, Node: "gpu001", Check: "host.cpu", Component: "host",
			Status: "OK", Previous: "FAIL"},
	)
	b.logEvents("gpu001",
		events.Event{Time: drainedAt, Kind: events.KindTransition, Node: "gpu001", Check: "host.mounts", Component: "/scratch",
			Status: "FAIL", Previous: "OK", Message: "not mounted", Action: "drain", Serial: "1650923000123"},
		events.Event{Time: drainedAt, Kind: events.KindDrain, Node: "gpu001", Message: mountReason, Backend: "rest v0.0.42"},
	)
	b.logEvents("gpu002", events.Event{Time: t0, Kind: events.KindDrain, Node: "gpu002",
		Message: "gpuhc: replacing GPU 3", By: "gpuhc-drain:bob", Backend: "scontrol"})
	b.logEvents("gpu006",
		events.Event{Time: t0.Add(time.Hour), Kind: events.KindTransition, Node: "gpu006", Check: "host.processes",
			Component: "slurmd", Status: "FAIL", Message: "not running", Action: "drain"},
		events.Event{Time: t0.Add(time.Hour), Kind: events.KindDrainSuppressed, Node: "gpu006",
			Message: "2 of 4 nodes already drained by gpuhc (limit 2); not draining: gpuhc: host.processes: slurmd: not running"},
	)
	b.logEvents("gpu007",
		events.Event{Time: t0, Kind: events.KindTransition, Node: "gpu007", Check: "host.modules",
			Component: "nvidia", Status: "FAIL", Message: "nvidia: not loaded"},
		events.Event{Time: t0, Kind: events.KindDrainSuppressed, Node: "gpu007",
			Message: "...; not draining: gpuhc: host.modules: nvidia: not loaded"},
		events.Event{Time: t0.Add(time.Minute), Kind: events.KindTransition, Node: "gpu007", Check: "host.modules",
			Component: "nvidia", Status: "OK", Previous: "FAIL"},
	)
	return b
}

func listJSON(t *testing.T, b *bed, args ...string) map[string]listRow {
	t.Helper()
	b.mustRun(0, append([]string{"list", "--json"}, args...)...)
	var rows []listRow
	if err := json.Unmarshal([]byte(b.stdout), &rows); err != nil {
		t.Fatalf("list --json: %v\n%s", err, b.stdout)
	}
	m := map[string]listRow{}
	for _, r := range rows {
		m[r.Node] = r
	}
	return m
}

func TestListJoinsEventsAndMarksForeignDrains(t *testing.T) {
	b := fleet(t)
	rows := listJSON(t, b)
	var names []string
	for n := range rows {
		names = append(names, n)
	}
	slices.Sort(names)
	if want := []string{"gpu001", "gpu002", "gpu003", "gpu005", "gpu006", "gpu009"}; !slices.Equal(names, want) {
		t.Fatalf("listed %v, want %v", names, want)
	}

	r := rows["gpu001"]
	if !r.Gpuhc || r.Owner != "gpuhc" || r.Check != "host.mounts" || r.Component != "/scratch" ||
		r.Serial != "1650923000123" || r.Action != "drain" || r.Message != "not mounted" ||
		r.By != "healthcheck" || r.ReasonUser != "slurm" || r.Backend != "rest v0.0.42" {
		t.Errorf("gpu001 (health check drain) = %+v", r)
	}
	if r.DurationSeconds != int64(90*60) {
		t.Errorf("gpu001 drained for %ds, want 5400", r.DurationSeconds)
	}

	r = rows["gpu002"]
	if !r.Gpuhc || r.By != "gpuhc-drain:bob" || r.Check != "" || r.Message != "replacing GPU 3" {
		t.Errorf("gpu002 (gpuhc-drain) = %+v", r)
	}
	r = rows["gpu003"]
	if r.Gpuhc || r.Owner != "not gpuhc" || r.Reason != "maintenance" || r.ReasonUser != "root" || r.Check != "" {
		t.Errorf("gpu003 (admin drain) = %+v", r)
	}
	if r := rows["gpu005"]; r.Gpuhc || r.Owner != "not gpuhc" || r.State[0] != "DOWN" {
		t.Errorf("gpu005 (down) = %+v", r)
	}
	r = rows["gpu006"]
	if !r.Suppressed || r.Owner != "gpuhc, suppressed" || r.Check != "host.processes" || r.Component != "slurmd" ||
		!strings.Contains(r.Message, "not draining") {
		t.Errorf("gpu006 (suppressed) = %+v", r)
	}
	r = rows["gpu009"]
	if !r.Gpuhc || r.Check != "gpu.xid" || r.Component != "gpu3" || r.Message != "Xid 79 (fallen off the bus)" || r.By != "" {
		t.Errorf("gpu009 (no events) = %+v", r)
	}
}

func TestListTable(t *testing.T) {
	b := fleet(t)
	b.mustRun(0, "list")
	lines := strings.Split(strings.TrimRight(b.stdout, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "NODE ") || !strings.Contains(lines[0], "OWNER") || !strings.Contains(lines[0], "DETAIL") {
		t.Fatalf("header %q", lines[0])
	}
	find := func(node string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, node+" ") {
				return l
			}
		}
		t.Fatalf("no line for %s in\n%s", node, b.stdout)
		return ""
	}
	for node, parts := range map[string][]string{
		"gpu001": {"IDLE+DRAIN", "gpuhc", "slurm (healthcheck)", "1h30m", "host.mounts", "/scratch", "1650923000123", "drain", "not mounted"},
		"gpu003": {"not gpuhc", "root", "maintenance"},
		"gpu006": {"gpuhc, suppressed", "host.processes"},
	} {
		l := find(node)
		for _, p := range parts {
			if !strings.Contains(l, p) {
				t.Errorf("%s line lacks %q: %q", node, p, l)
			}
		}
	}
	if len(lines) != 7 {
		t.Errorf("%d lines, want header + 6:\n%s", len(lines), b.stdout)
	}
}

func TestListCSVAndFilter(t *testing.T) {
	b := fleet(t)
	b.mustRun(0, "list", "--csv", "gpu[001-003]")
	recs, err := csv.NewReader(strings.NewReader(b.stdout)).ReadAll()
	if err != nil {
		t.Fatalf("CSV: %v\n%s", err, b.stdout)
	}
	if len(recs) != 4 || recs[0][0] != "node" || recs[0][2] != "owner" {
		t.Fatalf("CSV records %q", recs)
	}
	for _, r := range recs[1:] {
		if len(r) != len(recs[0]) {
			t.Errorf("row %q has %d fields, header %d", r, len(r), len(recs[0]))
		}
	}
	if recs[3][0] != "gpu003" || recs[3][2] != "not gpuhc" || recs[3][3] != "maintenance" {
		t.Errorf("gpu003 row %q", recs[3])
	}
}

func TestListEmptyAndErrors(t *testing.T) {
	b := newBed(t, node("gpu001", []string{"IDLE"}, "", "", time.Time{}))
	b.mustRun(0, "list")
	if !strings.Contains(b.stdout, "no drained or down nodes") || b.stderr != "" {
		t.Errorf("empty list says %q / %q", b.stdout, b.stderr)
	}
	b.mustRun(0, "list", "--json")
	if strings.TrimSpace(b.stdout) != "[]" {
		t.Errorf("empty JSON list %q", b.stdout)
	}
	b.ctl.failOn["nodes"] = errors.New("slurmctld down")
	b.mustRun(ExitInternal, "list")
	if !strings.Contains(b.stderr, "slurmctld down") {
		t.Errorf("stderr %q", b.stderr)
	}
	b.mustRun(ExitUsage, "list", "--json", "--csv")
	b.mustRun(ExitInternal, "list", "--events", "/nonexistent/dir/x.jsonl")
}

func TestDrain(t *testing.T) {
	b := newBed(t,
		node("gpu001", []string{"IDLE"}, "", "", time.Time{}),
		node("gpu002", []string{"IDLE", "DRAIN"}, "maintenance", "root", t0),
		node("gpu003", []string{"IDLE", "DRAIN"}, mountReason, "slurm", t0),
		node("gpu004", []string{"DOWN", "NOT_RESPONDING"}, "Not responding", "slurm", t0),
	)
	// Flags after the node; prefix added.
	b.mustRun(0, "drain", "gpu001", "--reason", "replacing\tGPU 3\n(ticket 42)")
	if n := b.ctl.nodes["gpu001"]; !n.Drained() || n.Reason != "gpuhc: replacing GPU 3 (ticket 42)" {
		t.Errorf("gpu001 = %+v", n)
	}
	evs := b.events("gpu001")
	if len(evs) != 1 || evs[0].Kind != "drain" || evs[0].By != "gpuhc-drain:alice" ||
		evs[0].Message != "gpuhc: replacing GPU 3 (ticket 42)" || evs[0].Backend != "fake" || !evs[0].Time.Equal(b.now) {
		t.Errorf("gpu001 events %+v", evs)
	}
	if !strings.Contains(b.stdout, "drained") {
		t.Errorf("stdout %q", b.stdout)
	}

	// An admin's drain is never replaced without --force.
	b.mustRun(ExitRefused, "drain", "--reason", "x", "gpu002")
	if n := b.ctl.nodes["gpu002"]; n.Reason != "maintenance" {
		t.Errorf("gpu002 reason changed: %q", n.Reason)
	}
	if !strings.Contains(b.stdout, "refused") || !strings.Contains(b.stdout, "--force") {
		t.Errorf("refusal says %q", b.stdout)
	}
	if len(b.events("gpu002")) != 0 {
		t.Error("a refused drain was recorded")
	}
	// Nor slurmctld's reason on a down node.
	b.mustRun(ExitRefused, "drain", "--reason", "x", "gpu004")
	b.mustRun(0, "drain", "--reason", "gpuhc: takeover", "--force", "gpu002")
	if n := b.ctl.nodes["gpu002"]; n.Reason != "gpuhc: takeover" {
		t.Errorf("prefix doubled or not set: %q", n.Reason)
	}
	// A gpuhc drain may be re-reasoned; --raw sends the text as is.
	b.mustRun(0, "drain", "--raw", "--reason", "rack power work", "gpu003")
	if n := b.ctl.nodes["gpu003"]; n.Reason != "rack power work" {
		t.Errorf("--raw reason %q", n.Reason)
	}
	// Same reason again: nothing to do, nothing recorded.
	before := len(b.events("gpu001"))
	b.mustRun(0, "drain", "--reason", "replacing GPU 3 (ticket 42)", "gpu001")
	if !strings.Contains(b.stdout, "already-drained") || len(b.events("gpu001")) != before {
		t.Errorf("repeat drain: %q, %d events", b.stdout, len(b.events("gpu001")))
	}
}

func TestDrainUsageAndFailures(t *testing.T) {
	b := newBed(t, node("gpu001", []string{"IDLE"}, "", "", time.Time{}),
		node("gpu002", []string{"IDLE"}, "", "", time.Time{}))
	for _, args := range [][]string{
		{"drain", "gpu001"},
		{"drain", "gpu001", "--reason", "  "},
		{"drain", "gpu001", "--reason", "gpuhc:"},
		{"drain", "--reason", "x"},
		{"drain", "gpu001;reboot", "--reason", "x"},
		{"drain", "gpu[1-", "--reason", "x"},
		{"drain", "gpu001", "--reason", "x", "--bogus"},
	} {
		b.mustRun(ExitUsage, args...)
	}
	if c := b.ctl.changes(); len(c) != 0 {
		t.Errorf("usage errors changed nodes: %v", c)
	}
	// An unknown node is refused, the others still drained.
	b.mustRun(ExitRefused, "drain", "gpu00[1-3]", "--reason", "x")
	if !b.ctl.nodes["gpu001"].Drained() || !b.ctl.nodes["gpu002"].Drained() {
		t.Error("known nodes not drained")
	}
	if !strings.Contains(b.stdout, "no such node") {
		t.Errorf("stdout %q", b.stdout)
	}
	b.ctl.failOn["drain gpu001"] = errors.New("slurmctld said no")
	b.ctl.nodes["gpu001"] = node("gpu001", []string{"IDLE"}, "", "", time.Time{})
	b.mustRun(ExitRefused, "drain", "gpu001", "--reason", "x", "--json")
	var rows []changeRow
	if err := json.Unmarshal([]byte(b.stdout), &rows); err != nil || len(rows) != 1 ||
		rows[0].Result != "failed" || !strings.Contains(rows[0].Detail, "slurmctld said no") {
		t.Errorf("failed drain JSON %q (%v)", b.stdout, err)
	}
}

func TestDrainDryRun(t *testing.T) {
	b := newBed(t, node("gpu001", []string{"IDLE"}, "", "", time.Time{}),
		node("gpu002", []string{"IDLE", "DRAIN"}, "maintenance", "root", t0))
	b.mustRun(ExitRefused, "drain", "--dry-run", "gpu001,gpu002", "--reason", "x")
	if c := b.ctl.changes(); len(c) != 0 {
		t.Errorf("dry run changed nodes: %v", c)
	}
	if !strings.Contains(b.stdout, "would-drain") || b.events("gpu001") != nil {
		t.Errorf("dry run: %q, events %v", b.stdout, b.events("gpu001"))
	}
}

func TestResume(t *testing.T) {
	b := newBed(t,
		node("gpu001", []string{"IDLE", "DRAIN"}, mountReason, "slurm", t0),
		node("gpu002", []string{"IDLE", "DRAIN"}, "maintenance", "root", t0),
		node("gpu003", []string{"IDLE"}, "gpuhc: stale", "slurm", t0),
		node("gpu004", []string{"DOWN", "NOT_RESPONDING"}, "Not responding", "slurm", t0),
	)
	b.env = map[string]string{"USER": "carol"}
	b.mustRun(0, "resume", "gpu001")
	if n := b.ctl.nodes["gpu001"]; n.Drained() {
		t.Errorf("gpu001 still drained: %+v", n)
	}
	evs := b.events("gpu001")
	if len(evs) != 1 || evs[0].Kind != "resume" || evs[0].By != "gpuhc-drain:carol" || evs[0].Message != mountReason {
		t.Errorf("resume events %+v", evs)
	}

	// The admin's drain: refused, left drained, nothing recorded.
	b.mustRun(ExitRefused, "resume", "gpu002")
	if n := b.ctl.nodes["gpu002"]; !n.Drained() || n.Reason != "maintenance" {
		t.Errorf("gpu002 = %+v", n)
	}
	if !strings.Contains(b.stdout, "not gpuhc's") || len(b.events("gpu002")) != 0 {
		t.Errorf("refusal %q", b.stdout)
	}
	// Not drained (a stale gpuhc reason on an idle node): refused.
	b.mustRun(ExitRefused, "resume", "gpu003")
	if !strings.Contains(b.stdout, "not drained") {
		t.Errorf("stdout %q", b.stdout)
	}
	b.mustRun(ExitRefused, "resume", "gpu004")
	// --force resumes anyone's.
	b.mustRun(0, "resume", "--force", "gpu002", "gpu004")
	if b.ctl.nodes["gpu002"].Drained() || b.ctl.nodes["gpu004"].Base() == "DOWN" {
		t.Error("--force did not resume")
	}
	if evs := b.events("gpu002"); len(evs) != 1 || evs[0].Message != "maintenance" {
		t.Errorf("forced resume events %+v", evs)
	}
	if want := []string{"resume gpu001", "resume gpu002", "resume gpu004"}; !slices.Equal(b.ctl.changes(), want) {
		t.Errorf("changes %v, want %v", b.ctl.changes(), want)
	}
}

func TestResumeDryRunAndCSV(t *testing.T) {
	b := newBed(t, node("gpu001", []string{"IDLE", "DRAIN"}, mountReason, "slurm", t0))
	b.mustRun(0, "resume", "--dry-run", "--csv", "gpu001")
	if len(b.ctl.changes()) != 0 || b.events("gpu001") != nil {
		t.Error("dry run changed something")
	}
	recs, err := csv.NewReader(strings.NewReader(b.stdout)).ReadAll()
	if err != nil || len(recs) != 2 || !slices.Equal(recs[0], []string{"node", "result", "before", "reason", "detail"}) ||
		recs[1][1] != "would-resume" {
		t.Errorf("CSV %q (%v)", recs, err)
	}
}

func TestResumeLostAnswer(t *testing.T) {
	b := newBed(t, node("gpu001", []string{"IDLE", "DRAIN"}, mountReason, "slurm", t0),
		node("gpu002", []string{"IDLE", "DRAIN"}, mountReason, "slurm", t0))
	// slurmctld applied the resume but the answer was lost: resumed.
	b.ctl.lost["resume gpu001"] = true
	b.mustRun(0, "resume", "gpu001")
	if len(b.events("gpu001")) != 1 {
		t.Error("a resume whose answer was lost was not recorded")
	}
	// Refused outright: failed, nothing recorded.
	b.ctl.failOn["resume gpu002"] = errors.New("slurmctld said no")
	b.mustRun(ExitRefused, "resume", "gpu002")
	if !strings.Contains(b.stdout, "failed") || b.events("gpu002") != nil {
		t.Errorf("stdout %q", b.stdout)
	}
}

func historyBed(t *testing.T) *bed {
	b := newBed(t)
	b.logEvents("gpu001",
		events.Event{Time: t0, Kind: "transition", Node: "gpu001", Check: "host.mounts", Component: "/scratch",
			Status: "FAIL", Previous: "OK", Message: "/scratch: not mounted", Action: "drain"},
		events.Event{Time: t0, Kind: "drain", Node: "gpu001", Message: mountReason},
		events.Event{Time: t0.Add(time.Hour), Kind: "heartbeat", Node: "gpu001", Hours: 24},
		events.Event{Time: t0.Add(-time.Hour), Kind: "measurement", Node: "gpu001", Check: "bandwidth", Component: "gpu0/h2d",
			Status: "FAIL", Message: "H2D 31.0 GB/s < floor 48", Name: "h2d", Value: new(31.0), Unit: "GB/s", Floor: 48},
	)
	b.logEvents("gpu002",
		events.Event{Time: t0.Add(-48 * time.Hour), Kind: "transition", Node: "gpu002", Check: "gpu.xid", Component: "gpu3",
			Status: "FAIL", Message: "Xid 79", Serial: "S123", JobID: "77"},
		events.Event{Time: t0.Add(30 * time.Minute), Kind: "resume", Node: "gpu002", By: "gpuhc-drain:bob", Message: "gpuhc: x"},
	)
	return b
}

func TestHistory(t *testing.T) {
	b := historyBed(t)
	get := func(args ...string) []events.Event {
		t.Helper()
		b.mustRun(0, append([]string{"history", "--json"}, args...)...)
		var evs []events.Event
		if err := json.Unmarshal([]byte(b.stdout), &evs); err != nil {
			t.Fatalf("history JSON: %v\n%s", err, b.stdout)
		}
		return evs
	}
	kinds := func(evs []events.Event) string {
		var s []string
		for _, ev := range evs {
			s = append(s, ev.Node+"/"+ev.Kind)
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "gpu002/transition gpu001/transition gpu001/drain gpu002/resume"},
		{[]string{"--node", "gpu001"}, "gpu001/transition gpu001/drain"},
		{[]string{"--node", "gpu00[2-3]"}, "gpu002/transition gpu002/resume"},
		{[]string{"--check", "host"}, "gpu001/transition"},
		{[]string{"--check", "gpu.*"}, "gpu002/transition"},
		{[]string{"--since", "1d"}, "gpu001/transition gpu001/drain gpu002/resume"},
		{[]string{"--since", "2026-11-30T10:10:00Z"}, "gpu002/resume"},
		{[]string{"--until", "2026-11-30"}, "gpu002/transition"},
		{[]string{"--kind", "heartbeat,resume"}, "gpu002/resume gpu001/heartbeat"},
		{[]string{"--kind", "measurement"}, "gpu001/measurement"},
		{[]string{"--check", "bandwidth"}, ""},
		{[]string{"--last", "1"}, "gpu002/resume"},
	} {
		if got := kinds(get(tc.args...)); got != tc.want {
			t.Errorf("history %v = %q, want %q", tc.args, got, tc.want)
		}
	}
	if evs := get("--node", "gpu002", "--kind", "transition"); evs[0].Serial != "S123" || evs[0].JobID != "77" {
		t.Errorf("JSON keeps fields: %+v", evs[0])
	}

	b.mustRun(0, "history")
	if !strings.Contains(b.stdout, "OK→FAIL") || !strings.Contains(b.stdout, "gpuhc-drain:bob") ||
		!strings.Contains(b.stdout, "healthcheck") || !strings.Contains(b.stdout, "job 77 Xid 79") {
		t.Errorf("history table:\n%s", b.stdout)
	}
	b.mustRun(0, "history", "--csv")
	recs, err := csv.NewReader(strings.NewReader(b.stdout)).ReadAll()
	if err != nil || len(recs) != 5 || recs[0][0] != "time" {
		t.Fatalf("CSV %q (%v)", recs, err)
	}
	if _, err := time.Parse(time.RFC3339, recs[1][0]); err != nil {
		t.Errorf("CSV time %q: %v", recs[1][0], err)
	}

	b.mustRun(ExitUsage, "history", "--since", "yesterday")
	b.mustRun(ExitUsage, "history", "--node", "gpu[")
	b.mustRun(ExitUsage, "history", "extra")
	b.mustRun(0, "history", "--node", "nothing")
	if !strings.Contains(b.stdout, "no events") {
		t.Errorf("empty history %q", b.stdout)
	}
}

func TestHistoryEventsFlagAndStdin(t *testing.T) {
	b := historyBed(t)
	b.stdin = `{"time":"2026-11-30T09:00:00Z","kind":"drain","node":"gpu042","message":"gpuhc: x"}` + "\n"
	b.mustRun(0, "history", "--json", "--events", "-")
	var evs []events.Event
	if err := json.Unmarshal([]byte(b.stdout), &evs); err != nil || len(evs) != 1 || evs[0].Node != "gpu042" {
		t.Errorf("stdin: %q (%v)", b.stdout, err)
	}
	b.mustRun(0, "history", "--json", "--events", b.dir+"/log/gpu001.jsonl")
	if err := json.Unmarshal([]byte(b.stdout), &evs); err != nil || len(evs) != 2 {
		t.Errorf("one file: %q (%v)", b.stdout, err)
	}
	b.mustRun(0, "history", "--json", "--events", b.dir+"/log")
	if err := json.Unmarshal([]byte(b.stdout), &evs); err != nil || len(evs) != 4 {
		t.Errorf("directory: %q (%v)", b.stdout, err)
	}
}

func TestMainUsage(t *testing.T) {
	b := newBed(t)
	b.mustRun(ExitOK, "--version")
	if !strings.HasPrefix(b.stdout, "gpuhc-drain ") {
		t.Errorf("--version %q", b.stdout)
	}
	b.mustRun(ExitOK, "--help")
	for _, c := range []string{"list", "drain", "resume", "history", "stats"} {
		if !strings.Contains(b.stdout, c) {
			t.Errorf("--help lacks %s", c)
		}
	}
	b.mustRun(ExitUsage)
	b.mustRun(ExitUsage, "frobnicate")
	b.mustRun(ExitOK, "drain", "--help")
	if !strings.Contains(b.stderr, "-reason") || !strings.Contains(b.stderr, "-dry-run") {
		t.Errorf("drain --help:\n%s", b.stderr)
	}
	b.mustRun(ExitOK, "help", "resume")
	if !strings.Contains(b.stderr, "-force") {
		t.Errorf("help resume:\n%s", b.stderr)
	}
}

func TestConfigErrorChangesNothing(t *testing.T) {
	b := newBed(t, node("gpu001", []string{"IDLE"}, "", "", time.Time{}))
	b.mustRun(ExitUsage, "drain", "--config", b.dir+"/missing.toml", "gpu001", "--reason", "x")
	if len(b.ctl.changes()) != 0 {
		t.Error("drained despite a config error")
	}
}

func TestWho(t *testing.T) {
	p := Program{Getenv: func(k string) string { return map[string]string{"USER": "root", "SUDO_USER": "dave"}[k] }}
	if got := p.by(); got != "gpuhc-drain:dave" {
		t.Errorf("by = %q", got)
	}
	p = Program{Getenv: func(string) string { return "" }, UID: func() int { return 0 }}
	if got := p.who(); got != "root" && got != "uid0" {
		t.Errorf("who for uid 0 = %q", got)
	}
}

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"36h":                  now.Add(-36 * time.Hour),
		"7d":                   now.Add(-7 * 24 * time.Hour),
		"2w":                   now.Add(-14 * 24 * time.Hour),
		"1d12h":                now.Add(-36 * time.Hour),
		"90m":                  now.Add(-90 * time.Minute),
		"2026-11-01":           time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
		"2026-11-01T08:30":     time.Date(2026, 11, 1, 8, 30, 0, 0, time.UTC),
		"2026-11-01 08:30:05":  time.Date(2026, 11, 1, 8, 30, 5, 0, time.UTC),
		"2026-11-01T08:30:00Z": time.Date(2026, 11, 1, 8, 30, 0, 0, time.UTC),
	} {
		got, err := parseWhen(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseWhen(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"yesterday", "7x", "-3h", "d", "2026-13-01"} {
		if _, err := parseWhen(bad, now); err == nil {
			t.Errorf("parseWhen(%q) accepted", bad)
		}
	}
}

func TestHuman(t *testing.T) {
	for d, want := range map[time.Duration]string{
		42 * time.Second: "42s", 5*time.Minute + 3*time.Second: "5m3s", 90 * time.Minute: "1h30m",
		(3*24 + 4) * time.Hour: "3d4h",
	} {
		if got := human(d); got != want {
			t.Errorf("human(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestNodeArgs(t *testing.T) {
	got, err := nodeArgs([]string{"gpu[001-003]", "gpu002,login1", "gpu004"})
	if err != nil || !slices.Equal(got, []string{"gpu001", "gpu002", "gpu003", "login1", "gpu004"}) {
		t.Errorf("nodeArgs = %v, %v", got, err)
	}
	for _, bad := range []string{"gpu*", "a b", "-x", "gpu[0-999999]"} {
		if _, err := nodeArgs([]string{bad}); err == nil {
			t.Errorf("nodeArgs(%q) accepted", bad)
		}
	}
}

func statsBed(t *testing.T) *bed {
	b := newBed(t)
	day := 24 * time.Hour
	for i, n := range []string{"gpu001", "gpu002"} {
		b.logEvents(n,
			events.Event{Time: t0.Add(-2 * day), Kind: "heartbeat", Node: n, Hours: 24, Serials: []string{"S" + n}},
			events.Event{Time: t0.Add(-day), Kind: "heartbeat", Node: n, Hours: 24, Serials: []string{"S" + n}},
		)
		if i == 0 {
			b.logEvents(n,
				events.Event{Time: t0.Add(-day), Kind: "transition", Node: n, Check: "gpu.xid", Component: "gpu3",
					Serial: "Sgpu001", Status: "FAIL", Previous: "OK", Message: "Xid 79", Action: "drain"},
				events.Event{Time: t0.Add(-day), Kind: "drain", Node: n, Message: "gpuhc: gpu.xid: gpu3: Xid 79"},
				events.Event{Time: t0.Add(-day + 90*time.Minute), Kind: "resume", Node: n, Message: "gpuhc: gpu.xid: gpu3: Xid 79"},
			)
		}
	}
	return b
}

func TestStats(t *testing.T) {
	b := statsBed(t)
	b.mustRun(0, "stats", "--json")
	var rep stats.Report
	if err := json.Unmarshal([]byte(b.stdout), &rep); err != nil {
		t.Fatalf("stats JSON: %v\n%s", err, b.stdout)
	}
	if rep.Fleet.Episodes != 1 || rep.Fleet.Drains != 1 || rep.Fleet.Repairs != 1 || rep.Fleet.MTTR == nil ||
		*rep.Fleet.MTTR != 1.5 || rep.Fleet.Hours != 96 {
		t.Errorf("fleet row %+v", rep.Fleet)
	}
	if len(rep.ByNode) != 2 || len(rep.ByCheck) != 1 || rep.ByCheck[0].Key != "gpu.xid" {
		t.Errorf("breakdowns %+v %+v", rep.ByNode, rep.ByCheck)
	}

	b.mustRun(0, "stats")
	for _, want := range []string{"window: first event to now", "FLEET", "NODE", "CHECK", "GPU SERIAL", "COMPONENT TYPE",
		"gpu.xid", "1h30m", "lemons (3 or more episodes): none"} {
		if !strings.Contains(b.stdout, want) {
			t.Errorf("stats table lacks %q:\n%s", want, b.stdout)
		}
	}
	b.mustRun(0, "stats", "--lemon-min", "1", "--by", "lemons")
	if strings.Contains(b.stdout, "CHECK") || !strings.Contains(b.stdout, "RANK") || !strings.Contains(b.stdout, "Sgpu001") {
		t.Errorf("stats --by lemons:\n%s", b.stdout)
	}

	b.mustRun(0, "stats", "--csv")
	recs, err := csv.NewReader(strings.NewReader(b.stdout)).ReadAll()
	if err != nil || len(recs) < 5 || recs[0][0] != "section" || recs[1][0] != "fleet" || recs[1][8] != "1.5000" {
		t.Fatalf("stats CSV %q (%v)", recs, err)
	}

	// Filters: another node only; a window after everything.
	b.mustRun(0, "stats", "--json", "--node", "gpu002")
	if err := json.Unmarshal([]byte(b.stdout), &rep); err != nil || rep.Fleet.Episodes != 0 || rep.Fleet.Hours != 48 ||
		rep.Filter.Node != "gpu002" {
		t.Errorf("--node gpu002: %+v (%v)", rep.Fleet, err)
	}
	b.mustRun(0, "stats", "--json", "--since", "1h")
	if err := json.Unmarshal([]byte(b.stdout), &rep); err != nil || rep.Fleet.Episodes != 0 || rep.Window.Since == nil {
		t.Errorf("--since 1h: %+v (%v)", rep, err)
	}
	b.mustRun(ExitUsage, "stats", "--by", "rack")
	b.mustRun(ExitUsage, "stats", "--lemon-min", "0")
	b.mustRun(ExitUsage, "stats", "--since", "1h", "--until", "2h")
	b.mustRun(ExitInternal, "stats", "--events", b.dir+"/nope")
}

func TestStatsWithoutLogs(t *testing.T) {
	b := newBed(t)
	b.mustRun(0, "stats")
	if !strings.Contains(b.stdout, "0 events") || b.stderr != "" {
		t.Errorf("stats without logs: %q / %q", b.stdout, b.stderr)
	}
}
