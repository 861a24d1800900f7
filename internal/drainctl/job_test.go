package drainctl

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
)

// A job on gpu001 and gpu002 from 10:00 to 12:00, with the events the
// prolog and epilog write; each case adds what happened around it.
func jobEvents(extra ...events.Event) []events.Event {
	at := func(h, m int) time.Time { return time.Date(2026, 12, 1, h, m, 0, 0, time.UTC) }
	evs := []events.Event{
		{Time: at(10, 0), Kind: events.KindProlog, Node: "gpu001", JobID: "4242", User: "alice", Status: "OK"},
		{Time: at(10, 0), Kind: events.KindProlog, Node: "gpu002", JobID: "4242", User: "alice", Status: "OK"},
		{Time: at(12, 0), Kind: events.KindEpilog, Node: "gpu001", JobID: "4242", User: "alice", Status: "OK"},
		{Time: at(12, 0), Kind: events.KindEpilog, Node: "gpu002", JobID: "4242", User: "alice", Status: "FAIL"},
		// Another job, another node: never in the answer.
		{Time: at(9, 0), Kind: events.KindProlog, Node: "gpu003", JobID: "99", Status: "OK"},
		{Time: at(11, 0), Kind: events.KindTransition, Node: "gpu003", Check: "gpu.xid", Status: "FAIL", Previous: "OK", Message: "XID 79"},
	}
	evs = append(evs, extra...)
	sortEvents(evs)
	return evs
}

func sortEvents(evs []events.Event) {
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && evs[j].Time.Before(evs[j-1].Time); j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
}

func TestJobVerdict(t *testing.T) {
	at := func(h, m int) time.Time { return time.Date(2026, 12, 1, h, m, 0, 0, time.UTC) }
	xid := func(tm time.Time, node string) events.Event {
		return events.Event{Time: tm, Kind: events.KindJobXID, Node: node, JobID: "4242", Check: "gpu.xid",
			Component: "gpu3", Serial: "1654922000003", Status: "FAIL", XID: 79, Message: "XID 79 GPU has fallen off the bus during job 4242"}
	}
	tests := []struct {
		name   string
		extra  []events.Event
		faults int
		atEnd  bool
		says   string
		events int
	}{
		{"healthy job", nil, 0, false, "no hardware fault recorded on the job's nodes during the job", 0},
		{"XID at the end", []events.Event{xid(at(11, 58), "gpu002")}, 1, true,
			"YES: a hardware fault coincided with the job's end: gpu002 gpu.xid gpu3 (SN 1654922000003): XID 79", 1},
		{"drain by the health check right after", []events.Event{{Time: at(12, 3), Kind: events.KindDrain, Node: "gpu001",
			Check: "gpu.memory", Component: "gpu1", Message: "gpuhc: gpu.memory: gpu1: DBE"}}, 1, true, "3m0s after the job's end", 1},
		{"FAIL early in the job", []events.Event{{Time: at(10, 30), Kind: events.KindTransition, Node: "gpu001",
			Check: "ib.port", Component: "mlx5_0/1", Status: "FAIL", Previous: "OK", Message: "rate 200 < 400"}}, 1, false,
			"not within 10m0s of its end: gpu001 ib.port mlx5_0/1: rate 200 < 400", 1},
		{"warnings only", []events.Event{{Time: at(11, 59), Kind: events.KindJobMemory, Node: "gpu001", JobID: "4242",
			Check: "gpu.memory", Component: "gpu0", Status: "WARN", Message: "corrected errors"}}, 0, false, "no hardware fault", 1},
		{"leftover process is the job's, not the hardware's", []events.Event{{Time: at(12, 0), Kind: events.KindJobLeftover,
			Node: "gpu001", JobID: "4242", Status: "FAIL", Message: "pid 7 still on gpu0"}}, 0, false, "no hardware fault", 1},
		{"an admin's drain is a person's", []events.Event{{Time: at(12, 1), Kind: events.KindDrain, Node: "gpu001",
			By: "gpuhc-drain:bob", Message: "gpuhc: admin: swap"}}, 0, false, "no hardware fault", 1},
		{"before the job and long after: outside", []events.Event{
			{Time: at(9, 59), Kind: events.KindTransition, Node: "gpu001", Check: "host.mounts", Status: "FAIL", Message: "x"},
			{Time: at(12, 11), Kind: events.KindTransition, Node: "gpu001", Check: "host.mounts", Status: "FAIL", Message: "y"},
		}, 0, false, "no hardware fault", 0},
	}
	for _, tt := range tests {
		v, ok := judgeJob("4242", jobEvents(tt.extra...), at(13, 0), 10*time.Minute)
		if !ok {
			t.Fatalf("%s: job not found", tt.name)
		}
		if v.Faults != tt.faults || v.AtEnd != tt.atEnd || !strings.Contains(v.Verdict, tt.says) || len(v.Events) != tt.events {
			t.Errorf("%s: %d faults, at end %v, %d events, %q", tt.name, v.Faults, v.AtEnd, len(v.Events), v.Verdict)
		}
		if v.User != "alice" || len(v.Nodes) != 2 || v.Nodes[0].Node != "gpu001" || v.Nodes[1].Outcome != "FAIL" ||
			!v.Start.Equal(at(10, 0)) || v.End == nil || !v.End.Equal(at(12, 0)) {
			t.Errorf("%s: job %+v", tt.name, v)
		}
	}
}

func TestJobRunningAndUnknown(t *testing.T) {
	at := func(h, m int) time.Time { return time.Date(2026, 12, 1, h, m, 0, 0, time.UTC) }
	var evs []events.Event // the prologs only: no epilog yet
	for _, ev := range jobEvents() {
		if ev.Kind == events.KindProlog && ev.JobID == "4242" {
			evs = append(evs, ev)
		}
	}
	evs = append(evs, events.Event{Time: at(11, 0), Kind: events.KindTransition, Node: "gpu002", Check: "gpu.lost",
		Component: "gpu5", Status: "FAIL", Message: "GPU is lost"})
	v, ok := judgeJob("4242", evs, at(11, 30), 10*time.Minute)
	if !ok || v.End != nil || v.Faults != 1 || v.AtEnd || !strings.Contains(v.Verdict, "while it runs: gpu002 gpu.lost gpu5") {
		t.Errorf("running job: %+v", v)
	}
	v, ok = judgeJob("4242", evs[:2], at(11, 30), 10*time.Minute)
	if !ok || !strings.Contains(v.Verdict, "so far") {
		t.Errorf("running, healthy: %q", v.Verdict)
	}
	if _, ok := judgeJob("5", jobEvents(), at(13, 0), 10*time.Minute); ok {
		t.Error("a job with no prolog or epilog event was found")
	}
}

// The command: the header and verdict, the events table, --json, and the
// refusals.
func TestJobCommand(t *testing.T) {
	b := historyBed(t)
	var lines []string
	for _, ev := range jobEvents(events.Event{Time: time.Date(2026, 12, 1, 11, 58, 0, 0, time.UTC), Kind: events.KindJobXID,
		Node: "gpu002", JobID: "4242", Check: "gpu.xid", Component: "gpu3", Status: "FAIL", XID: 79, Message: "XID 79 during job 4242"}) {
		l, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(l))
	}
	b.stdin = strings.Join(lines, "\n") + "\n"
	b.mustRun(0, "job", "4242", "--events", "-")
	if !strings.Contains(b.stdout, "job 4242 (user alice) on 2 node(s) gpu001,gpu002") ||
		!strings.Contains(b.stdout, "verdict: YES: a hardware fault coincided with the job's end") ||
		!strings.Contains(b.stdout, "job-xid") || strings.Contains(b.stdout, "gpu003") {
		t.Errorf("job table:\n%s", b.stdout)
	}
	b.mustRun(0, "job", "4242", "--events", "-", "--json")
	var v jobVerdict
	if err := json.Unmarshal([]byte(b.stdout), &v); err != nil || !v.AtEnd || v.Faults != 1 || len(v.Events) != 1 {
		t.Errorf("job JSON %+v (%v)\n%s", v, err, b.stdout)
	}
	b.mustRun(ExitRefused, "job", "77", "--events", "-")
	if !strings.Contains(b.stderr, "no prolog or epilog event") {
		t.Errorf("unknown job: %q", b.stderr)
	}
	for _, bad := range [][]string{{"job"}, {"job", "1234_5"}, {"job", "0"}, {"job", "1", "2"}, {"job", "1", "--window", "-1m"}} {
		b.mustRun(ExitUsage, bad...)
	}
}
