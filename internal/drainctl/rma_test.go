package drainctl

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/fleetgen"
	"github.com/gpuhc/gpuhc/internal/stats"
)

const rmaSerial = "1652922000003"

// rmaEvent is an event of gpu3 (rmaSerial) for gpu.xid on node, m
// minutes after t0.
func rmaEvent(node string, m int, kind string) events.Event {
	serial := rmaSerial
	if node != "gpu001" && node != "gpu005" {
		serial = "1652922100" + node[3:] // gpu005 held gpu001's GPU before
	}
	return events.Event{Time: t0.Add(time.Duration(m) * time.Minute), Kind: kind, Node: node, Check: "gpu.xid",
		Component: "gpu3", Serial: serial, PCI: "0000:4e:00.0", Model: "NVIDIA H100 80GB HBM3", By: "healthcheck"}
}

// rmaBed: gpu001 fails, is reset (cured), fails again, is reset (not
// cured) and escalated to rma, still in force; gpu002's part, with
// interleaved events, was escalated and resumed by hand; gpu003's
// reboot cured it; gpu004 failed and was never remediated; gpu005 held
// gpu001's GPU before, where it failed once (as gpu5). gpu001's log
// ends in a torn line and has a line of a kind this version does not
// know.
func rmaBed(t *testing.T) *bed {
	b := newBed(t)
	reason := "gpuhc: gpu.xid: gpu3 (SN " + rmaSerial + ", 0000:4e:00.0): XID 79 GPU has fallen off the bus"
	rmaReason := "gpuhc: rma: gpu3 (SN " + rmaSerial + "): gpu.xid: XID 79 GPU has fallen off the bus"
	fail := func(node string, m int, prev string) events.Event {
		ev := rmaEvent(node, m, events.KindTransition)
		ev.Status, ev.Previous, ev.Message = "FAIL", prev, "XID 79 GPU has fallen off the bus"
		return ev
	}
	ok := func(node string, m int) events.Event {
		ev := rmaEvent(node, m, events.KindTransition)
		ev.Status, ev.Previous = "OK", "FAIL"
		return ev
	}
	dr := func(node string, m int, msg string) events.Event {
		ev := rmaEvent(node, m, events.KindDrain)
		ev.Message, ev.Action = msg, "reset-gpu"
		return ev
	}
	res := func(node string, m int, msg, by string) events.Event {
		return events.Event{Time: t0.Add(time.Duration(m) * time.Minute), Kind: events.KindResume, Node: node, Message: msg, By: by}
	}
	remedy := func(node string, m int, kind, action string, secs float64, msg string) events.Event {
		ev := rmaEvent(node, m, kind)
		ev.Action, ev.Seconds, ev.Message = action, secs, msg
		return ev
	}
	rma := func(node string, m, n int) events.Event {
		ev := rmaEvent(node, m, events.KindRMA)
		ev.Driver, ev.Remediations, ev.Message = "550.54.15", n, rmaReason
		return ev
	}
	S, F, X := events.KindRemediationStarted, events.KindRemediationFinished, events.KindRemediationFailed
	reset := "nvidia-smi --gpu-reset -i 0000:4e:00.0"
	b.logEvents("gpu001",
		fail("gpu001", 0, "OK"), dr("gpu001", 5, reason),
		remedy("gpu001", 10, S, "reset-gpu", 0, reset), remedy("gpu001", 11, F, "reset-gpu", 45, reset),
		ok("gpu001", 12), res("gpu001", 20, reason, "healthcheck"),
		fail("gpu001", 100, "OK"), dr("gpu001", 100, reason),
		remedy("gpu001", 110, S, "reset-gpu", 0, reset), remedy("gpu001", 111, F, "reset-gpu", 50, reset),
		rma("gpu001", 112, 2), dr("gpu001", 112, rmaReason),
		events.Event{Time: t0.Add(113 * time.Minute), Kind: "firmware-update", Node: "gpu001"})
	b.logEvents("gpu002",
		fail("gpu002", 1, ""), dr("gpu002", 2, reason),
		remedy("gpu002", 3, S, "reboot", 0, "scontrol reboot ASAP"), remedy("gpu002", 40, X, "reboot", 2220, "reboot not done within 30m"),
		rma("gpu002", 41, 1), res("gpu002", 90, rmaReason, "gpuhc-drain:root"))
	b.logEvents("gpu003",
		fail("gpu003", 0, "OK"), dr("gpu003", 0, reason),
		remedy("gpu003", 5, S, "reboot", 0, "scontrol reboot ASAP"), remedy("gpu003", 15, F, "reboot", 600, ""),
		ok("gpu003", 15), res("gpu003", 25, reason, "healthcheck"))
	b.logEvents("gpu004", fail("gpu004", 0, "OK"), dr("gpu004", 0, reason))
	moved := fail("gpu005", -600, "OK")
	moved.Component = "gpu5"
	b.logEvents("gpu005", moved, ok("gpu005", -590))
	f, err := os.OpenFile(filepath.Join(b.dir, "log", "gpu001.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"time":"2026-11-30T12:00:00Z","kind":"rma","node":"gpu0`)
	f.Close()
	return b
}

func TestRMA(t *testing.T) {
	b := rmaBed(t)
	b.mustRun(0, "rma", "--json")
	var list []rmaCase
	if err := json.Unmarshal([]byte(b.stdout), &list); err != nil {
		t.Fatalf("rma JSON: %v\n%s", err, b.stdout)
	}
	if len(list) != 1 || !strings.Contains(b.stderr, "torn last line") {
		t.Fatalf("rma in force: %+v\nstderr %s", list, b.stderr)
	}
	c := list[0]
	if c.Node != "gpu001" || c.Serial != rmaSerial || c.PCI != "0000:4e:00.0" || c.Model == "" || c.Driver != "550.54.15" ||
		c.Remediations != 2 || c.Resumed != nil || !strings.HasPrefix(c.Reason, "gpuhc: rma: gpu3") {
		t.Errorf("rma case %+v", c)
	}
	// the part's history: its FAIL in gpu005 (by serial, a GPU's history
	// follows it), both FAILs and the three drains in gpu001, both resets
	var kinds []string
	for _, f := range c.Failures {
		kinds = append(kinds, f.Node+" "+f.Kind)
	}
	want := "gpu005 transition,gpu001 transition,gpu001 drain,gpu001 transition,gpu001 drain,gpu001 drain"
	if got := strings.Join(kinds, ","); got != want {
		t.Errorf("failures\n got %s\nwant %s", got, want)
	}
	var tried []string
	for _, r := range c.Tried {
		tried = append(tried, r.Node+" "+r.Action+" "+r.Outcome)
	}
	if got := strings.Join(tried, ","); got != "gpu001 reset-gpu finished,gpu001 reset-gpu finished" {
		t.Errorf("remediations tried %s", got)
	}
	if r := c.Tried[1]; r.Seconds != 50 || r.Ran == "" || r.Ended == nil || !r.Ended.Equal(t0.Add(111*time.Minute)) {
		t.Errorf("second reset %+v", r)
	}

	b.mustRun(0, "rma", "--all", "--json")
	if err := json.Unmarshal([]byte(b.stdout), &list); err != nil || len(list) != 2 || list[1].Node != "gpu002" || list[1].Resumed == nil {
		t.Fatalf("--all: %+v (%v)", list, err)
	}
	if r := list[1].Tried; len(r) != 1 || r[0].Outcome != "failed" || r[0].Seconds != 2220 || r[0].Why != "reboot not done within 30m" {
		t.Errorf("gpu002's failed reboot %+v", r)
	}
	b.mustRun(0, "rma")
	for _, s := range []string{"gpu001 gpu3, SN " + rmaSerial + ", PCI 0000:4e:00.0", "driver 550.54.15", "after 2 remediation(s)",
		"reset-gpu finished", "50s", "OK->FAIL", "gpu005"} {
		if !strings.Contains(b.stdout, s) {
			t.Errorf("rma table lacks %q:\n%s", s, b.stdout)
		}
	}
	b.mustRun(0, "rma", "--csv")
	recs, err := csv.NewReader(strings.NewReader(b.stdout)).ReadAll()
	if err != nil || len(recs) != 1+len(c.Failures)+len(c.Tried) || recs[0][0] != "node" || recs[1][3] != rmaSerial {
		t.Errorf("rma CSV %q (%v)", recs, err)
	}
	b.mustRun(0, "rma", "--node", "gpu002")
	if strings.TrimSpace(b.stdout) != "no rma in force" {
		t.Errorf("--node gpu002: %s", b.stdout)
	}
	b.mustRun(ExitUsage, "rma", "gpu001")
}

func TestStatsRemediation(t *testing.T) {
	b := rmaBed(t)
	b.mustRun(0, "stats", "--json")
	var rep stats.Report
	if err := json.Unmarshal([]byte(b.stdout), &rep); err != nil {
		t.Fatalf("stats JSON: %v", err)
	}
	fl := rep.Remediation.Fleet
	// gpu001: reset cured, reset then rma; gpu002: reboot failed;
	// gpu003: reboot cured.
	if fl.Started != 4 || fl.Finished != 3 || fl.Failed != 1 || fl.Cured != 2 || len(rep.Remediation.ByAction) != 2 {
		t.Errorf("remediations %v %+v", fl.Cells(), rep.Remediation.ByAction)
	}
	// Repairs: gpu001's first (5→20), gpu002's (2→90), gpu003's (0→25).
	f := rep.Fleet
	if f.Repairs != 3 || f.Remediated != 3 || f.Detected != 3 || f.Open != 2 || f.DetectToDrain == nil ||
		*f.DetectToDrain != (5.0+1+0)/3/60 || *f.DrainToRemediation != (5.0+1+5)/3/60 || *f.RemediationToService != (10.0+87+20)/3/60 {
		t.Errorf("fleet %+v", f)
	}
	b.mustRun(0, "stats")
	for _, s := range []string{"DRAIN-REMEDY", "REMEDIATION", "reset-gpu", "REMEDIATED MODEL", "GPU MODEL", "NVIDIA H100 80GB HBM3", "50%"} {
		if !strings.Contains(b.stdout, s) {
			t.Errorf("stats table lacks %q:\n%s", s, b.stdout)
		}
	}
	b.mustRun(0, "stats", "--csv", "--by", "remediation")
	recs, err := csv.NewReader(strings.NewReader(b.stdout)).ReadAll()
	if err != nil || len(recs) != 2+1+2+1 || recs[2][0] != "remediation-fleet" || recs[2][len(recs[2])-3] != "2" {
		t.Errorf("stats CSV %q (%v)", recs, err)
	}
}

// On a generated fleet, rma lists exactly the truth's rma in force, and
// --all the resumed one too, each with the remediation before it.
func TestRMAFleet(t *testing.T) {
	b := newBed(t)
	dir := filepath.Join(b.dir, "fleet")
	tr, err := fleetgen.Generate(dir, fleetgen.Params{Nodes: 8, GPUsPerNode: 8, Days: 60, FailureRate: 6, Seed: 5, RotateBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, all := range []bool{false, true} {
		args := []string{"rma", "--json", "--events", dir}
		if all {
			args = append(args, "--all")
		}
		b.mustRun(0, args...)
		var got []rmaCase
		if err := json.Unmarshal([]byte(b.stdout), &got); err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, r := range tr.RMAs {
			if all || r.Resumed.IsZero() {
				want = append(want, strings.Join([]string{r.Node, r.Check, r.Component, r.Serial, r.PCI, r.Model, r.Driver,
					r.Time.Format(time.RFC3339), strconv.Itoa(r.Remediations), r.Resumed.Format(time.RFC3339)}, " "))
			}
		}
		var have []string
		for _, c := range got {
			resumed := time.Time{}
			if c.Resumed != nil {
				resumed = *c.Resumed
			}
			have = append(have, strings.Join([]string{c.Node, c.Check, c.Component, c.Serial, c.PCI, c.Model, c.Driver,
				c.Time.UTC().Format(time.RFC3339), strconv.Itoa(c.Remediations), resumed.UTC().Format(time.RFC3339)}, " "))
			if len(c.Tried) != 1 || c.Tried[0].Outcome != "finished" || len(c.Failures) < 2 {
				t.Errorf("%s: history %+v %+v", c.Node, c.Failures, c.Tried)
			}
		}
		if strings.Join(have, "\n") != strings.Join(want, "\n") || len(want) != map[bool]int{false: 1, true: 2}[all] {
			t.Errorf("--all=%v\n got %q\nwant %q", all, have, want)
		}
	}
}
