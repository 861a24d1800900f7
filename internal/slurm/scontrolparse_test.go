package slurm

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func scontrolFixture(t *testing.T, release, file string) []byte {
	return fixture(t, "scontrol", release, file)
}

func utc(s string) time.Time {
	t, err := time.ParseInLocation(scontrolTime, s, time.UTC)
	if err != nil {
		panic(err)
	}
	return t
}

func TestParseShowNodeRecorded(t *testing.T) {
	const r22, r24, r26 = "slurm-22.05", "slurm-24.11", "slurm-26.05"
	cases := []struct {
		release, file, name string
		want                Node
	}{
		{r22, "show_node_idle.txt", "vm", Node{Name: "vm", State: []string{"IDLE"}}},
		{r22, "show_node_drained.txt", "vm", Node{Name: "vm", State: []string{"IDLE", "DRAIN"},
			Reason: ourReason, ReasonUser: "root", ReasonTime: utc("2026-11-30T05:53:48")}},
		{r22, "show_node_foreign.txt", "vm", Node{Name: "vm", State: []string{"IDLE", "DRAIN"},
			Reason: "maintenance", ReasonUser: "root", ReasonTime: utc("2026-11-30T05:53:49")}},
		{r22, "show_node_resumed.txt", "vm", Node{Name: "vm", State: []string{"IDLE", "NOT_RESPONDING"}}},
		{r22, "show_node_down.txt", "vm", Node{Name: "vm", State: []string{"DOWN"},
			Reason: "gpuhc-e2e: slurmd stopped", ReasonUser: "root", ReasonTime: utc("2026-11-30T05:53:50")}},
		{r24, "show_node_idle.txt", "gpu001", Node{Name: "gpu001", State: []string{"IDLE"}}},
		{r24, "show_node_drained.txt", "gpu001", Node{Name: "gpu001", State: []string{"IDLE", "DRAIN"},
			Reason: ourReason, ReasonUser: "slurm", ReasonTime: utc("2026-11-30T05:54:42")}},
		{r24, "show_node_foreign.txt", "gpu001", Node{Name: "gpu001", State: []string{"IDLE", "DRAIN"},
			Reason: "maintenance", ReasonUser: "root", ReasonTime: utc("2026-11-30T05:54:44")}},
		// 24.11 keeps the reason after RESUME; only the DRAIN flag is gone.
		{r24, "show_node_resumed.txt", "gpu001", Node{Name: "gpu001", State: []string{"IDLE", "NOT_RESPONDING"},
			Reason: ourReason, ReasonUser: "slurm", ReasonTime: utc("2026-11-30T05:54:42")}},
		{r24, "show_node_resumed_settled.txt", "gpu001", Node{Name: "gpu001", State: []string{"IDLE"},
			Reason: ourReason, ReasonUser: "slurm", ReasonTime: utc("2026-11-30T05:54:42")}},
		{r24, "show_node_down.txt", "gpu004", Node{Name: "gpu004", State: []string{"DOWN"},
			Reason: "gpuhc-e2e: slurmd stopped", ReasonUser: "root", ReasonTime: utc("2026-11-30T05:54:49")}},
		{r26, "show_node_idle.txt", "gpu001", Node{Name: "gpu001", State: []string{"IDLE"}}},
		{r26, "show_node_drained.txt", "gpu001", Node{Name: "gpu001", State: []string{"IDLE", "DRAIN"},
			Reason: ourReason, ReasonUser: "slurm", ReasonTime: utc("2026-12-02T14:06:56")}},
		{r26, "show_node_foreign.txt", "gpu001", Node{Name: "gpu001", State: []string{"IDLE", "DRAIN"},
			Reason: "maintenance", ReasonUser: "root", ReasonTime: utc("2026-12-02T14:06:57")}},
		// 26.05 clears the reason on RESUME, as 22.05 did.
		{r26, "show_node_resumed.txt", "gpu001", Node{Name: "gpu001", State: []string{"IDLE", "NOT_RESPONDING"}}},
		{r26, "show_node_resumed_settled.txt", "gpu001", Node{Name: "gpu001", State: []string{"IDLE"}}},
		{r26, "show_node_down.txt", "gpu004", Node{Name: "gpu004", State: []string{"DOWN"},
			Reason: "gpuhc-e2e: slurmd stopped", ReasonUser: "root", ReasonTime: utc("2026-12-02T14:07:00")}},
	}
	for _, c := range cases {
		t.Run(c.release+"/"+c.file, func(t *testing.T) {
			got, err := parseShowNode(scontrolFixture(t, c.release, c.file), c.name, time.UTC)
			if err != nil {
				t.Fatal(err)
			}
			assertNode(t, got, c.want)
		})
	}
}

// The same node state must read the same through REST and scontrol.
func TestScontrolAgreesWithREST(t *testing.T) {
	pairs := []struct{ release, text, json, name string }{
		{"slurm-22.05", "show_node_drained.txt", "v0.0.38/node_drained.200.json", "vm"},
		{"slurm-22.05", "show_node_foreign.txt", "v0.0.38/node_foreign_drain.200.json", "vm"},
		{"slurm-24.11", "show_node_foreign.txt", "v0.0.42/node_foreign_drain.200.json", "gpu001"},
		{"slurm-24.11", "show_node_resumed.txt", "v0.0.42/node_resumed.200.json", "gpu001"},
		{"slurm-24.11", "show_node_drained.txt", "v0.0.42/node_drained.200.json", "gpu001"},
		{"slurm-26.05", "show_node_foreign.txt", "v0.0.45/node_foreign_drain.200.json", "gpu001"},
		{"slurm-26.05", "show_node_resumed.txt", "v0.0.45/node_resumed.200.json", "gpu001"},
		{"slurm-26.05", "show_node_drained.txt", "v0.0.45/node_drained.200.json", "gpu001"},
		{"slurm-26.05", "show_node_down.txt", "v0.0.45/node_down.200.json", "gpu004"},
	}
	for _, p := range pairs {
		a, err := parseShowNode(scontrolFixture(t, p.release, p.text), p.name, time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		b, err := pickNode(restFixture(t, p.release, p.json), p.name)
		if err != nil {
			t.Fatal(err)
		}
		if a.Reason != b.Reason || a.ReasonUser != b.ReasonUser || strings.Join(a.State, "+") != strings.Join(b.State, "+") {
			t.Errorf("%s: scontrol %+v, rest %+v", p.text, a, b)
		}
		// scontrol prints seconds; REST may differ by the second the two
		// recordings were taken at most.
		if d := a.ReasonTime.Sub(b.ReasonTime); d < -time.Second || d > time.Second {
			t.Errorf("%s: times %v vs %v", p.text, a.ReasonTime, b.ReasonTime)
		}
	}
}

func TestParseShowNodeEachNodeOfMany(t *testing.T) {
	out := string(scontrolFixture(t, "slurm-24.11", "show_nodes_mixed.txt"))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("fixture has %d lines", len(lines))
	}
	want := map[string]string{"gpu001": "IDLE", "gpu002": "IDLE+DRAIN", "gpu003": "IDLE+DRAIN", "gpu004": "IDLE"}
	for i, line := range lines {
		name := fmt.Sprintf("gpu%03d", i+1)
		n, err := parseShowNode([]byte(line+"\n"), name, time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(n.State, "+"); got != want[name] {
			t.Errorf("%s: state %s, want %s", name, got, want[name])
		}
	}
	// All four at once is not one node's answer.
	if _, err := parseShowNode([]byte(out), "gpu001", time.UTC); err == nil {
		t.Error("accepted four lines for one node")
	}
}

func TestParseShowNodeReasonEdgeCases(t *testing.T) {
	base := string(scontrolFixture(t, "slurm-24.11", "show_node_idle.txt"))
	base = strings.TrimRight(base, " \n")
	cases := []struct {
		tail, reason, user string
	}{
		// A reason holding key=value text, brackets and the word Reason=.
		{" Reason=gpuhc: gpu: gpu3: temp=95 limit=90 [x] Reason=y [root@2026-11-30T05:50:45]",
			"gpuhc: gpu: gpu3: temp=95 limit=90 [x] Reason=y", "root"},
		// Followed by Comment= with its own bracketed text.
		{" Reason=maint [alice@2026-11-30T05:50:45] Comment=see [bob@2026-01-01T00:00:00]",
			"maint", "alice"},
		// A numeric user (uid_to_string falls back to the number).
		{" Reason=x [4242@2026-11-30T05:50:45]", "x", "4242"},
		// No reason time: Slurm prints no suffix.
		{" Reason=no time here Extra=foo", "no time here", ""},
	}
	for _, c := range cases {
		n, err := parseShowNode([]byte(base+c.tail+"\n"), "gpu001", time.UTC)
		if err != nil {
			t.Fatalf("%q: %v", c.tail, err)
		}
		if n.Reason != c.reason || n.ReasonUser != c.user {
			t.Errorf("%q: reason %q user %q, want %q %q", c.tail, n.Reason, n.ReasonUser, c.reason, c.user)
		}
	}
}

func TestParseShowNodeRefusesGarbage(t *testing.T) {
	idle := string(scontrolFixture(t, "slurm-24.11", "show_node_idle.txt"))
	cases := map[string]string{
		"empty":          "",
		"not found text": string(scontrolFixture(t, "slurm-24.11", "show_node_unknown.txt")),
		"other node":     strings.Replace(idle, "NodeName=gpu001", "NodeName=gpu002", 1),
		"no state":       strings.Replace(idle, "State=IDLE", "Stat=IDLE", 1),
		"unknown base":   strings.Replace(idle, "State=IDLE", "State=SLEEPY", 1),
		"flag only":      strings.Replace(idle, "State=IDLE", "State=DRAIN", 1),
		"sinfo style":    strings.Replace(idle, "State=IDLE", "State=IDLE*", 1),
		"state twice":    strings.Replace(idle, "Weight=1", "State=DOWN", 1),
		"two lines":      idle + idle,
		"json":           `{"nodes":[]}`,
		"bad time":       strings.TrimRight(idle, " \n") + " Reason=x [root@2026-13-45T99:99:99]\n",
	}
	for name, out := range cases {
		if n, err := parseShowNode([]byte(out), "gpu001", time.UTC); err == nil {
			t.Errorf("%s: accepted as %+v", name, n)
		}
	}
}
