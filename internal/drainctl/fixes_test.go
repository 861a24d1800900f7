package drainctl

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/stats"
)

// A node gpuhc drained and resumed keeps its reason on 24.11; when it later
// stops responding, slurmctld marks it DOWN and keeps that stale reason
// (set_node_down_ptr replaces only an empty or "Not responding" reason).
// Without the DRAIN flag, the reason is not a gpuhc drain.
func TestStaleReasonOnDownNodeIsNotGpuhcs(t *testing.T) {
	stale := node("gpu001", []string{"DOWN", "NOT_RESPONDING"}, mountReason, "slurm", t0)
	b := newBed(t, stale,
		// drained by gpuhc, then down: still gpuhc's drain
		node("gpu002", []string{"DOWN", "DRAIN", "NOT_RESPONDING"}, mountReason, "slurm", t0))
	b.logEvents("gpu001",
		events.Event{Time: t0.Add(-2 * time.Hour), Kind: events.KindTransition, Node: "gpu001", Check: "host.mounts",
			Component: "/scratch", Status: "FAIL", Previous: "OK", Message: "not mounted", Action: "drain"},
		events.Event{Time: t0.Add(-2 * time.Hour), Kind: events.KindDrain, Node: "gpu001", Message: mountReason},
		events.Event{Time: t0.Add(-time.Hour), Kind: events.KindResume, Node: "gpu001", Message: mountReason, By: "healthcheck"},
	)

	rows := listJSON(t, b)
	r := rows["gpu001"]
	if r.Gpuhc || r.Owner != ownerOther || !r.StaleReason || r.Check != "" || r.Component != "" || r.Message != "" ||
		r.By != "" || r.EventTime != nil || r.Reason != mountReason {
		t.Errorf("gpu001 (down, stale gpuhc reason) = %+v", r)
	}
	if r := rows["gpu002"]; !r.Gpuhc || r.Owner != ownerGpuhc {
		t.Errorf("gpu002 (drained by gpuhc, then down) = %+v", r)
	}
	b.mustRun(0, "list")
	line := ""
	for _, l := range strings.Split(b.stdout, "\n") {
		if strings.HasPrefix(l, "gpu001") {
			line = l
		}
	}
	if !strings.Contains(line, "not gpuhc") || !strings.Contains(line, "stale") {
		t.Errorf("list table: %q", line)
	}

	// Not resumed, not re-reasoned without --force.
	b.mustRun(ExitRefused, "resume", "gpu001")
	if !strings.Contains(b.stdout, "--force") || !strings.Contains(b.stdout, "stale") {
		t.Errorf("resume refusal: %s", b.stdout)
	}
	b.mustRun(ExitRefused, "drain", "gpu001", "--reason", "x")
	if !strings.Contains(b.stdout, "--force") {
		t.Errorf("drain refusal: %s", b.stdout)
	}
	if c := b.ctl.changes(); len(c) != 0 || len(b.events("gpu001")) != 3 {
		t.Fatalf("changed %v, %d events", c, len(b.events("gpu001")))
	}
	// gpuhc's own drain on a node that went down is still resumed.
	b.mustRun(0, "resume", "gpu002")
	// --force does it.
	b.mustRun(0, "drain", "gpu001", "--reason", "x", "--force")
	if n := b.ctl.nodes["gpu001"]; !n.Drained() || n.Reason != "gpuhc: x" {
		t.Errorf("forced drain: %+v", n)
	}
	b.ctl.nodes["gpu001"] = stale
	b.mustRun(0, "resume", "gpu001", "--force")
	if want := []string{"resume gpu002", "drain gpu001", "resume gpu001"}; !slices.Equal(b.ctl.changes(), want) {
		t.Errorf("changes %v, want %v", b.ctl.changes(), want)
	}
}

// With the default log locations, a log that cannot be read is skipped
// with a warning; the rest is read and printed, and the exit status is 3.
func TestUnreadableDefaultLogExits3(t *testing.T) {
	b := historyBed(t)
	// A symlink loop cannot be read, even by root; it sorts before the
	// good logs, so a scan that stopped at it would miss them all.
	loop := filepath.Join(b.dir, "log", "gpu000.jsonl.1")
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"history", "--json"}, {"stats", "--json"}, {"list", "--json"}} {
		b.mustRun(ExitInternal, args...)
		if !strings.Contains(b.stderr, "gpu000.jsonl.1") || !strings.Contains(b.stderr, "incomplete") {
			t.Errorf("%v: stderr %q", args, b.stderr)
		}
		if args[0] != "list" && !strings.Contains(b.stdout, "gpu001") {
			t.Errorf("%v: the readable logs were not read: %s", args, b.stdout)
		}
	}
	// Explicit --events: an unreadable source is an error at once.
	b.mustRun(ExitInternal, "history", "--events", loop)
	if b.stdout != "" {
		t.Errorf("stdout %q", b.stdout)
	}
}

// Slurm that cannot be reached is exit 3, a node Slurm refused exit 1.
func TestSlurmUnreachableExits3(t *testing.T) {
	b := newBed(t, node("gpu001", []string{"IDLE"}, "", "", time.Time{}),
		node("gpu002", []string{"IDLE", "DRAIN"}, mountReason, "slurm", t0))
	down := errors.New("dial tcp 127.0.0.1:6820: connect: connection refused")
	b.ctl.failOn["node gpu001"] = down
	b.ctl.failOn["node gpu002"] = down
	b.mustRun(ExitInternal, "drain", "gpu001", "--reason", "x")
	b.mustRun(ExitInternal, "resume", "gpu002")
	// One node refused, one unreachable: 3 wins.
	b.mustRun(ExitInternal, "resume", "gpu404,gpu001")
	if !strings.Contains(b.stdout, "no such node") {
		t.Errorf("stdout %s", b.stdout)
	}
	// slurmctld goes away between the read and the change.
	delete(b.ctl.failOn, "node gpu001")
	delete(b.ctl.failOn, "node gpu002")
	gone := false
	b.ctl.hook = func(op string) error {
		if gone || !strings.HasPrefix(op, "node ") {
			gone = true
			return down
		}
		return nil
	}
	b.mustRun(ExitInternal, "drain", "gpu001", "--reason", "x")
	gone = false
	b.mustRun(ExitInternal, "resume", "gpu002")
	if !strings.Contains(b.stdout, "reading the node again") {
		t.Errorf("stdout %s", b.stdout)
	}
	if b.events("gpu001") != nil || b.events("gpu002") != nil {
		t.Error("failed changes were recorded")
	}
}

// A drain that slurmctld applied but whose answer was lost is a drain, and
// is recorded; one it refused is not.
func TestDrainLostAnswer(t *testing.T) {
	b := newBed(t, node("gpu001", []string{"IDLE"}, "", "", time.Time{}),
		node("gpu002", []string{"IDLE"}, "", "", time.Time{}))
	b.ctl.lost["drain gpu001"] = true
	b.mustRun(0, "drain", "gpu001", "--reason", "x")
	if evs := b.events("gpu001"); len(evs) != 1 || evs[0].Kind != events.KindDrain || evs[0].Message != "gpuhc: x" {
		t.Errorf("a drain whose answer was lost: events %+v\n%s", evs, b.stdout)
	}
	if !strings.Contains(b.stdout, "drained") || !strings.Contains(b.stdout, "answer lost") {
		t.Errorf("stdout %s", b.stdout)
	}
	b.ctl.failOn["drain gpu002"] = errors.New("slurmctld said no")
	b.mustRun(ExitRefused, "drain", "gpu002", "--reason", "x")
	if b.events("gpu002") != nil {
		t.Error("a refused drain was recorded")
	}
}

// A configured log whose name holds glob characters is read as the file
// it is.
func TestDefaultLogNameWithGlobCharacters(t *testing.T) {
	b := newBed(t)
	b.logEvents("we[ird]*", events.Event{Time: t0, Kind: events.KindDrain, Node: "gpu007", Message: "gpuhc: x"})
	b.mustRun(0, "history", "--json")
	if !strings.Contains(b.stdout, "gpu007") || b.stderr != "" {
		t.Errorf("stdout %q stderr %q", b.stdout, b.stderr)
	}
}

// A log collected twice counts once, and the window line says so.
func TestStatsCountsCopiedLogsOnce(t *testing.T) {
	b := statsBed(t)
	b.mustRun(0, "stats", "--json")
	var once, twice stats.Report
	if err := json.Unmarshal([]byte(b.stdout), &once); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(b.dir, "log", "gpu001.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(b.dir, "copy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.dir, "copy", "gpu001.jsonl.1"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	b.mustRun(0, "stats", "--json", "--events", filepath.Join(b.dir, "log"), "--events", filepath.Join(b.dir, "copy"))
	if err := json.Unmarshal([]byte(b.stdout), &twice); err != nil {
		t.Fatal(err)
	}
	if twice.Duplicates != 5 || !reflect.DeepEqual(twice.Fleet, once.Fleet) || !reflect.DeepEqual(twice.ByNode, once.ByNode) {
		t.Errorf("read twice: %d duplicates\n got %+v\nwant %+v", twice.Duplicates, twice.Fleet, once.Fleet)
	}
	b.mustRun(0, "stats", "--events", filepath.Join(b.dir, "log"), "--events", filepath.Join(b.dir, "copy"))
	if !strings.Contains(b.stdout, "(5 duplicates counted once)") {
		t.Errorf("window line:\n%s", b.stdout)
	}
}
