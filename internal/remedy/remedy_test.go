package remedy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/policy"
	"github.com/gpuhc/gpuhc/internal/slurm"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

// fakeCtl is an in-memory slurmctld for one node and its cluster,
// recording every call (the e2e tests use real Slurm).
type fakeCtl struct {
	node      slurm.Node
	others    []slurm.Node
	calls     []string
	rebootErr error
}

func (f *fakeCtl) Backend() string { return "fake" }
func (f *fakeCtl) Node(context.Context, string) (slurm.Node, error) {
	f.calls = append(f.calls, "get")
	return f.node, nil
}
func (f *fakeCtl) Nodes(context.Context) ([]slurm.Node, error) {
	f.calls = append(f.calls, "list")
	return append(slices.Clone(f.others), f.node), nil
}
func (f *fakeCtl) Drain(_ context.Context, _, reason string) error {
	f.calls = append(f.calls, "reason "+reason)
	f.node.Reason = reason
	return nil
}
func (f *fakeCtl) Resume(context.Context, string) error {
	return errors.New("remediation never resumes")
}
func (f *fakeCtl) Reboot(_ context.Context, _, reason string) error {
	f.calls = append(f.calls, "reboot "+reason)
	if f.rebootErr == nil {
		f.node.State = append(f.node.State, "REBOOT_REQUESTED")
	}
	return f.rebootErr
}

// fakeRun records argv and answers from a table keyed by argv[1].
type fakeRun struct {
	argv [][]string
	fail map[string]error
}

func (r *fakeRun) run(_ context.Context, argv []string) (string, error) {
	r.argv = append(r.argv, argv)
	key := strings.Join(argv[1:], " ")
	for k, err := range r.fail {
		if strings.HasPrefix(key, k) {
			return "Unable to reset GPU 00000000:4E:00.0: In use by another client", err
		}
	}
	return "GPU 00000000:4E:00.0 was successfully reset.", nil
}

var t0 = time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)

const failReason = "gpuhc: gpu.memory: gpu3 (SN 1652922000123, 0000:4e:00.0): row remap pending"

func drained(action string) *policy.State {
	return &policy.State{Drained: &policy.Drain{
		Reason: failReason, At: t0.Add(-time.Hour), By: policy.By, Check: "gpu.memory", Component: "gpu3",
		Serial: "1652922000123", PCI: "0000:4e:00.0", Action: action,
	}}
}

func idleDrained(reason string) slurm.Node {
	return slurm.Node{Name: "gpu003", State: []string{"IDLE", "DRAIN"}, Reason: reason}
}

type bed struct {
	ctl   *fakeCtl
	run   *fakeRun
	clock time.Time
	boot  string
	dir   statefile.Dir
	// settle runs during the recount's wait: other nodes starting too.
	settle func(*fakeCtl)
}

func newBed(t *testing.T) *bed {
	return &bed{ctl: &fakeCtl{node: idleDrained(failReason)}, run: &fakeRun{}, clock: t0, boot: "boot-1", dir: statefile.Dir{Path: t.TempDir()}}
}

func (b *bed) engine(mut ...func(*config.Remediate)) Engine {
	cfg := config.Default().Remediate
	cfg.Enabled = true
	for _, m := range mut {
		m(&cfg)
	}
	return Engine{Node: "gpu003", Cfg: cfg, Ctl: b.ctl, BootID: b.boot, Dir: b.dir, Now: func() time.Time { return b.clock }, Run: b.run.run,
		Sleep: func(context.Context, time.Duration) error {
			if b.settle != nil {
				b.settle(b.ctl)
			}
			return nil
		}}
}

func kinds(evs []events.Event) []string {
	var k []string
	for _, e := range evs {
		k = append(k, e.Kind)
	}
	return k
}

func before(t *testing.T, e Engine, st *policy.State) Result {
	t.Helper()
	res, err := e.Before(context.Background(), st)
	if err != nil {
		t.Fatalf("Before: %v", err)
	}
	return res
}

func TestResetGPU(t *testing.T) {
	b := newBed(t)
	st := drained("reset-gpu")
	res := before(t, b.engine(), st)
	if res.Outcome.Kind != Done {
		t.Fatalf("outcome %+v", res.Outcome)
	}
	wantReason := "gpuhc: reset-gpu: gpu3 (SN 1652922000123, 0000:4e:00.0): gpu.memory: row remap pending"
	if st.Drained.Reason != wantReason || b.ctl.node.Reason != wantReason {
		t.Errorf("reason %q (node %q), want %q", st.Drained.Reason, b.ctl.node.Reason, wantReason)
	}
	if want := [][]string{{"/usr/bin/nvidia-smi", "--gpu-reset", "-i", "0000:4e:00.0"}}; fmt.Sprint(b.run.argv) != fmt.Sprint(want) {
		t.Errorf("ran %q, want %q", b.run.argv, want)
	}
	if got := kinds(res.Events); !slices.Equal(got, []string{events.KindRemediationStarted, events.KindRemediationFinished}) {
		t.Errorf("events %v", got)
	}
	if ev := res.Events[0]; ev.Action != "reset-gpu" || ev.Serial != "1652922000123" || ev.PCI != "0000:4e:00.0" || ev.Check != "gpu.memory" {
		t.Errorf("started event %+v", ev)
	}
	// The checks that follow judge it; the next run waits for the
	// resume path and resets nothing again.
	b.run.argv = nil
	if res := before(t, b.engine(), st); res.Outcome.Kind != Waiting || len(b.run.argv) != 0 {
		t.Errorf("second run: %+v, ran %q", res.Outcome, b.run.argv)
	}
}

func TestResetAllAndUnits(t *testing.T) {
	b := newBed(t)
	units := func(c *config.Remediate) {
		c.ResetAll = true
		c.StopUnits = []string{"nvidia-dcgm.service", "nvidia-fabricmanager.service"}
	}
	before(t, b.engine(units), drained("reset-gpu"))
	want := "[[/usr/bin/systemctl stop nvidia-dcgm.service] [/usr/bin/systemctl stop nvidia-fabricmanager.service] " +
		"[/usr/bin/nvidia-smi --gpu-reset] [/usr/bin/systemctl start nvidia-fabricmanager.service] [/usr/bin/systemctl start nvidia-dcgm.service]]"
	if got := fmt.Sprint(b.run.argv); got != want {
		t.Errorf("ran %s\nwant %s", got, want)
	}
	// A unit that will not stop: those stopped start again, no reset.
	b = newBed(t)
	b.run.fail = map[string]error{"stop nvidia-fabricmanager": errors.New("exit status 5")}
	res := before(t, b.engine(units), drained("reset-gpu"))
	want = "[[/usr/bin/systemctl stop nvidia-dcgm.service] [/usr/bin/systemctl stop nvidia-fabricmanager.service] [/usr/bin/systemctl start nvidia-dcgm.service]]"
	if got := fmt.Sprint(b.run.argv); got != want || res.Outcome.Kind != FailedOut {
		t.Errorf("ran %s (%+v)\nwant %s", got, res.Outcome, want)
	}
}

func TestResetFails(t *testing.T) {
	b := newBed(t)
	b.run.fail = map[string]error{"--gpu-reset": errors.New("exit status 3")}
	st := drained("reset-gpu")
	res := before(t, b.engine(), st)
	if res.Outcome.Kind != FailedOut || !slices.Equal(kinds(res.Events), []string{events.KindRemediationStarted, events.KindRemediationFailed}) {
		t.Fatalf("%+v %v", res.Outcome, kinds(res.Events))
	}
	if phase, sticky := policy.Sticky(st.Drained.Reason); !sticky || phase != policy.PhaseRemediationFailed || !strings.Contains(st.Drained.Reason, "exit status 3") {
		t.Errorf("reason %q, want a sticky remediation-failed saying why", st.Drained.Reason)
	}
	// Sticky: nothing more is tried.
	b.ctl.calls, b.run.argv = nil, nil
	if res := before(t, b.engine(), st); res.Outcome.Kind != Nothing || len(b.ctl.calls)+len(b.run.argv) != 0 {
		t.Errorf("after failure: %+v, calls %v %v", res.Outcome, b.ctl.calls, b.run.argv)
	}
}

func TestNotNow(t *testing.T) {
	tests := []struct {
		name string
		node slurm.Node
	}{
		{"a job runs (DRAINING)", slurm.Node{State: []string{"MIXED", "DRAIN"}, Reason: failReason}},
		{"allocated", slurm.Node{State: []string{"ALLOCATED", "DRAIN"}, Reason: failReason}},
		{"a job completes", slurm.Node{State: []string{"IDLE", "DRAIN", "COMPLETING"}, Reason: failReason}},
		{"an admin re-reasoned it", slurm.Node{State: []string{"IDLE", "DRAIN"}, Reason: "maintenance: PSU swap"}},
		{"someone resumed it", slurm.Node{State: []string{"IDLE"}, Reason: failReason}},
		{"already rebooting", slurm.Node{State: []string{"IDLE", "DRAIN", "REBOOT_ISSUED"}, Reason: failReason}},
		{"down", slurm.Node{State: []string{"DOWN", "DRAIN"}, Reason: failReason}},
		{"maintenance", slurm.Node{State: []string{"IDLE", "DRAIN", "MAINTENANCE"}, Reason: failReason}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t)
			b.ctl.node = tc.node
			st := drained("reset-gpu")
			res := before(t, b.engine(), st)
			if res.Outcome.Kind != Waiting || len(b.run.argv) != 0 || len(res.Events) != 0 || st.Drained.Reason != failReason {
				t.Errorf("%+v, ran %q, events %v, reason %q", res.Outcome, b.run.argv, kinds(res.Events), st.Drained.Reason)
			}
			if slices.ContainsFunc(b.ctl.calls, func(c string) bool { return c != "get" }) {
				t.Errorf("calls %v: only a read is allowed", b.ctl.calls)
			}
		})
	}
}

func TestReboot(t *testing.T) {
	b := newBed(t)
	b.ctl.node.Reason = strings.Replace(failReason, "gpu.memory", "gpu.xid", 1)
	st := drained("reboot")
	st.Drained.Check, st.Drained.Reason = "gpu.xid", b.ctl.node.Reason
	res := before(t, b.engine(), st)
	want := "reboot gpuhc: reboot: gpu3 (SN 1652922000123, 0000:4e:00.0): gpu.xid: row remap pending"
	if res.Outcome.Kind != Started || !slices.Contains(b.ctl.calls, want) {
		t.Fatalf("%+v, calls %v", res.Outcome, b.ctl.calls)
	}
	// Runs in the same boot wait, and never ask again (idempotent).
	b.ctl.calls = nil
	b.clock = b.clock.Add(5 * time.Minute)
	if res := before(t, b.engine(), st); res.Outcome.Kind != Waiting || len(b.ctl.calls) != 0 {
		t.Errorf("same boot: %+v, calls %v", res.Outcome, b.ctl.calls)
	}
	// slurmctld issues the reboot and appends to our reason; the node
	// comes back still drained (no nextstate), the reason kept.
	b.ctl.node = slurm.Node{Name: "gpu003", State: []string{"IDLE", "DRAIN"}, Reason: st.Drained.Reason + " : reboot issued"}
	// The first run in a new boot records it done, with its duration, and
	// adopts the reason, so the drain stays ours.
	b.boot = "boot-2"
	res = before(t, b.engine(), st)
	if res.Outcome.Kind != Done || len(res.Events) != 1 || res.Events[0].Kind != events.KindRemediationFinished || res.Events[0].Seconds != 300 {
		t.Fatalf("new boot: %+v %+v", res.Outcome, res.Events)
	}
	if st.Drained.Reason != b.ctl.node.Reason {
		t.Errorf("reason after the reboot %q, want slurmctld's %q adopted", st.Drained.Reason, b.ctl.node.Reason)
	}
}

// An admin who re-reasoned the node during the reboot keeps it: the
// reason is not adopted, and the policy then sees it is not ours.
func TestRebootAdminReasonNotAdopted(t *testing.T) {
	b := newBed(t)
	st := drained("reboot")
	before(t, b.engine(), st)
	ours := st.Drained.Reason
	b.ctl.node = slurm.Node{Name: "gpu003", State: []string{"IDLE", "DRAIN"}, Reason: "PSU swap, do not touch"}
	b.boot = "boot-2"
	before(t, b.engine(), st)
	if st.Drained.Reason != ours {
		t.Errorf("adopted %q", st.Drained.Reason)
	}
}

func TestRebootTimesOut(t *testing.T) {
	b := newBed(t)
	st := drained("reboot")
	before(t, b.engine(), st)
	b.clock = b.clock.Add(31 * time.Minute)
	res := before(t, b.engine(), st)
	if res.Outcome.Kind != FailedOut || !strings.Contains(st.Drained.Reason, "remediation-failed") || !strings.Contains(st.Drained.Reason, "not rebooted within 30m0s") {
		t.Errorf("%+v, reason %q", res.Outcome, st.Drained.Reason)
	}
	if len(res.Events) != 1 || res.Events[0].Kind != events.KindRemediationFailed || res.Events[0].Seconds != 31*60 {
		t.Errorf("events %+v", res.Events)
	}
}

func TestRebootRequestRefused(t *testing.T) {
	b := newBed(t)
	b.ctl.rebootErr = slurm.ErrNoRESTReboot
	st := drained("reboot")
	res := before(t, b.engine(), st)
	if res.Outcome.Kind != FailedOut || !strings.HasPrefix(st.Drained.Reason, "gpuhc: remediation-failed: gpu3") {
		t.Errorf("%+v, reason %q", res.Outcome, st.Drained.Reason)
	}
}

func TestDailyBudget(t *testing.T) {
	b := newBed(t)
	e := b.engine(func(c *config.Remediate) { c.MaxPerDay = 1 })
	st := drained("reset-gpu")
	before(t, e, st)
	// The reset did not cure it: a later run judged it failed again.
	recur(t, e, st)
	b.clock = b.clock.Add(time.Hour)
	b.run.argv = nil
	res := before(t, e, st)
	if res.Outcome.Kind != Held || len(b.run.argv) != 0 || !strings.HasSuffix(st.Drained.Reason, "[not remediated: daily budget spent (max_per_day 1)]") {
		t.Fatalf("%+v, ran %q, reason %q", res.Outcome, b.run.argv, st.Drained.Reason)
	}
	// Said once: the next run does not re-reason.
	b.ctl.calls = nil
	before(t, e, st)
	if slices.ContainsFunc(b.ctl.calls, func(c string) bool { return strings.HasPrefix(c, "reason") }) {
		t.Errorf("re-reasoned again: %v", b.ctl.calls)
	}
	// A day later the budget allows it again, and the reason loses the
	// note.
	b.clock = b.clock.Add(24 * time.Hour)
	if res := before(t, e, st); res.Outcome.Kind != Done || strings.Contains(st.Drained.Reason, "not remediated") {
		t.Errorf("next day: %+v, reason %q", res.Outcome, st.Drained.Reason)
	}
}

func TestClusterBudget(t *testing.T) {
	rebooting := func(name string) slurm.Node {
		return slurm.Node{Name: name, State: []string{"IDLE", "DRAIN", "REBOOT_ISSUED"}, Reason: "gpuhc: reboot: gpu1: gpu.xid: XID 79"}
	}
	busy := []slurm.Node{rebooting("gpu001"), {Name: "gpu002", State: []string{"IDLE", "DRAIN"}, Reason: "gpuhc: reset-gpu: gpu0: gpu.memory: x"}}
	tests := []struct {
		name   string
		others []slurm.Node
		mut    func(*config.Remediate)
		want   string
	}{
		{"first remediation always allowed", nil, func(c *config.Remediate) { c.MaxFraction = 0.01 }, Done},
		{"one at once, one busy", busy[:1], func(c *config.Remediate) { c.MaxNodes = 1 }, Held},
		{"admins' drains and plain gpuhc drains do not count",
			[]slurm.Node{{Name: "gpu001", State: []string{"IDLE", "DRAIN"}, Reason: "maintenance"}, {Name: "gpu002", State: []string{"IDLE", "DRAIN"}, Reason: failReason}},
			func(c *config.Remediate) { c.MaxNodes = 1 }, Done},
		{"fraction of 40 nodes at 5%: 2 at once", append(busy[:1], fleet(38)...), nil, Done},
		{"fraction of 40 nodes at 5%: third held", append(slices.Clone(busy), fleet(37)...), nil, Held},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t)
			b.ctl.others = tc.others
			var muts []func(*config.Remediate)
			if tc.mut != nil {
				muts = append(muts, tc.mut)
			}
			if res := before(t, b.engine(muts...), drained("reset-gpu")); res.Outcome.Kind != tc.want {
				t.Errorf("%+v, want %s", res.Outcome, tc.want)
			}
		})
	}
}

func fleet(n int) []slurm.Node {
	out := make([]slurm.Node, n)
	for i := range out {
		out[i] = slurm.Node{Name: fmt.Sprintf("cpu%03d", i), State: []string{"IDLE"}}
	}
	return out
}

// recur is a run after the attempt whose check fails on the part again.
func recur(t *testing.T, e Engine, st *policy.State) {
	t.Helper()
	fail := check.Result{Check: st.Drained.Check, Component: st.Drained.Component, Status: check.Fail}
	if err := e.After([]check.Result{fail}, *st, Part{Model: "NVIDIA H100 80GB HBM3", Driver: "570.133.20"}); err != nil {
		t.Fatal(err)
	}
}

func TestEscalationToRMA(t *testing.T) {
	b := newBed(t)
	e := b.engine() // rma_after 2, max_per_day 2
	st := drained("reset-gpu")
	for i := range 2 {
		if res := before(t, e, st); res.Outcome.Kind != Done {
			t.Fatalf("remediation %d: %+v", i+1, res.Outcome)
		}
		recur(t, e, st)
		b.clock = b.clock.Add(time.Hour)
	}
	b.run.argv = nil
	res := before(t, e, st)
	want := "gpuhc: rma: gpu3 (SN 1652922000123, 0000:4e:00.0): gpu.memory: row remap pending"
	if res.Outcome.Kind != RMA || st.Drained.Reason != want || len(b.run.argv) != 0 {
		t.Fatalf("%+v, reason %q, ran %q", res.Outcome, st.Drained.Reason, b.run.argv)
	}
	ev := res.Events[0]
	if ev.Kind != events.KindRMA || ev.Remediations != 2 || ev.Model != "NVIDIA H100 80GB HBM3" || ev.Driver != "570.133.20" || ev.Serial != "1652922000123" {
		t.Errorf("rma event %+v", ev)
	}
	if _, sticky := policy.Sticky(st.Drained.Reason); !sticky {
		t.Error("rma drain not sticky")
	}
}

// The GPU cured, resumed, and failing again within the window after two
// remediations goes straight to rma; outside the window it is remediated.
func TestEscalationAcrossDrains(t *testing.T) {
	for _, tc := range []struct {
		later time.Duration
		want  string
	}{{3 * 24 * time.Hour, RMA}, {8 * 24 * time.Hour, Done}} {
		b := newBed(t)
		e := b.engine(func(c *config.Remediate) { c.MaxPerDay = 5 })
		for range 2 {
			st := drained("reset-gpu")
			st.Drained.At = b.clock
			b.ctl.node = idleDrained(failReason)
			before(t, e, st)
			b.clock = b.clock.Add(2 * time.Hour)
		}
		b.clock = b.clock.Add(tc.later)
		st := drained("reset-gpu")
		st.Drained.At = b.clock
		b.ctl.node = idleDrained(failReason)
		if res := before(t, e, st); res.Outcome.Kind != tc.want {
			t.Errorf("%s later: %+v, want %s", tc.later, res.Outcome, tc.want)
		}
	}
}

func TestNothingToDo(t *testing.T) {
	b := newBed(t)
	for _, tc := range []struct {
		name string
		e    Engine
		st   *policy.State
	}{
		{"off", Engine{Cfg: config.Default().Remediate, Ctl: b.ctl, Dir: b.dir}, drained("reset-gpu")},
		{"not drained", b.engine(), &policy.State{}},
		{"action drain", b.engine(), drained("drain")},
		{"record from before remediation existed", b.engine(), &policy.State{Drained: &policy.Drain{Reason: failReason, At: t0}}},
		{"rma", b.engine(), func() *policy.State {
			s := drained("reset-gpu")
			s.Drained.Reason = "gpuhc: rma: gpu3: gpu.memory: x"
			return s
		}()},
	} {
		res, err := tc.e.Before(context.Background(), tc.st)
		if err != nil || res.Outcome.Kind != Nothing || len(b.ctl.calls) != 0 || len(b.run.argv) != 0 {
			t.Errorf("%s: %+v %v, calls %v %v", tc.name, res.Outcome, err, b.ctl.calls, b.run.argv)
		}
	}
	if res := before(t, b.engine(func(c *config.Remediate) { c.Actions = []string{"reboot"} }), drained("reset-gpu")); res.Outcome.Kind != Nothing || len(b.run.argv) != 0 {
		t.Errorf("reset-gpu not allowed: %+v", res.Outcome)
	}
}

func TestDryRun(t *testing.T) {
	b := newBed(t)
	e := b.engine()
	e.DryRun = true
	st := drained("reset-gpu")
	res := before(t, e, st)
	if res.Outcome.Kind != Would || len(b.run.argv) != 0 || len(res.Events) != 0 || st.Drained.Reason != failReason {
		t.Errorf("%+v, ran %q, events %v, reason %q", res.Outcome, b.run.argv, res.Events, st.Drained.Reason)
	}
	if slices.ContainsFunc(b.ctl.calls, func(c string) bool { return c != "get" && c != "list" }) {
		t.Errorf("dry run changed Slurm: %v", b.ctl.calls)
	}
}

func TestAfterJudges(t *testing.T) {
	for _, tc := range []struct {
		status           check.Status
		judged, recurred bool
	}{{check.Fail, true, true}, {check.OK, true, false}, {check.Warn, true, false}, {check.Error, false, false}} {
		b := newBed(t)
		e := b.engine()
		st := drained("reset-gpu")
		before(t, e, st)
		r := check.Result{Check: "gpu.memory", Component: "gpu3", Status: tc.status}
		other := check.Result{Check: "gpu.memory", Component: "gpu2", Status: check.Fail}
		if err := e.After([]check.Result{other, r}, *st, Part{}); err != nil {
			t.Fatal(err)
		}
		rec, _ := e.store().load()
		if rec.Current.Judged != tc.judged || rec.Current.Recurred != tc.recurred {
			t.Errorf("%s: judged %v recurred %v", tc.status, rec.Current.Judged, rec.Current.Recurred)
		}
	}
}

// Nodes that count at the same moment all see room; once their reasons
// show, the first by name go on and the others back off, whichever
// counted first.
func TestClusterRecount(t *testing.T) {
	starting := func(name string) slurm.Node {
		return slurm.Node{Name: name, State: []string{"IDLE", "DRAIN"}, Reason: "gpuhc: reset-gpu: gpu0: gpu.recovery: x"}
	}
	for _, tc := range []struct {
		name   string
		others []string
		want   string
	}{
		{"a later name started too: we go on", []string{"gpu004"}, Done},
		{"an earlier name started too: we back off", []string{"gpu002"}, Held},
		{"alone", nil, Done},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t)
			b.settle = func(f *fakeCtl) {
				for _, o := range tc.others {
					f.others = append(f.others, starting(o))
				}
			}
			st := drained("reset-gpu")
			res := before(t, b.engine(func(c *config.Remediate) { c.MaxNodes = 1 }), st)
			if res.Outcome.Kind != tc.want {
				t.Fatalf("%+v, want %s", res.Outcome, tc.want)
			}
			if tc.want == Held && (len(b.run.argv) != 0 || !strings.HasSuffix(st.Drained.Reason, "[not remediated: cluster budget spent (1 at once)]") || policy.Remediating(st.Drained.Reason)) {
				t.Errorf("backed off: ran %q, reason %q", b.run.argv, st.Drained.Reason)
			}
		})
	}
}

// A reset of a GPU drained for a sticky kernel-log FAIL clears that GPU's
// record, so the checks judge it afresh; a sticky check with nothing to
// clear it is not reset at all.
func TestStickyChecks(t *testing.T) {
	b := newBed(t)
	var cleared [][]string
	e := b.engine()
	e.Sticky = map[string]Clearer{
		"gpu.xid":     func(p []string) error { cleared = append(cleared, p); return nil },
		"fabric.sxid": nil,
	}
	st := drained("reset-gpu")
	st.Drained.Check = "gpu.xid"
	if res := before(t, e, st); res.Outcome.Kind != Done || fmt.Sprint(cleared) != "[[0000:4e:00.0]]" {
		t.Errorf("xid: %+v, cleared %v", res.Outcome, cleared)
	}
	b = newBed(t)
	e.Ctl, e.Run, e.Dir = b.ctl, b.run.run, b.dir
	st = drained("reset-gpu")
	st.Drained.Check = "fabric.sxid"
	if res := before(t, e, st); res.Outcome.Kind != Nothing || len(b.run.argv) != 0 {
		t.Errorf("sxid: %+v, ran %q", res.Outcome, b.run.argv)
	}
}
