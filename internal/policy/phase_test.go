package policy

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

var xid79 = check.Result{Check: "gpu.xid", Component: "gpu3", Status: check.Fail, Action: check.ActionReboot,
	Message: "XID 79 GPU has fallen off the bus", IDs: check.IDs{Serial: "1652922000123", PCIBusID: "0000:4e:00.0"}}

func TestPhaseReasons(t *testing.T) {
	rma := xid79
	rma.Action = check.ActionRMA
	tests := []struct {
		name, reason, wantCheck, wantComp string
		sticky, remediating               bool
	}{
		{"a check's reason", Reason([]check.Result{xid79}), "gpu.xid", "gpu3", false, false},
		{"an rma failure is drained as rma", Reason([]check.Result{rma}), PhaseRMA, "gpu3", true, false},
		{"reboot in progress", PhaseReason(PhaseReboot, xid79, xid79.Message), PhaseReboot, "gpu3", false, true},
		{"reset in progress", PhaseReason(PhaseResetGPU, xid79, xid79.Message), PhaseResetGPU, "gpu3", false, true},
		{"failed remediation", PhaseReason(PhaseRemediationFailed, xid79, "reboot: not done in 30m"), PhaseRemediationFailed, "gpu3", true, false},
		{"an admin's reason", "gpuhc: admin: RMA", "", "", false, false},
		{"not ours", "rma: gpu3", "", "", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chk, comp, _, _ := ParseReason(tc.reason)
			if chk != tc.wantCheck || comp != tc.wantComp {
				t.Errorf("ParseReason(%q) = %q, %q; want %q, %q", tc.reason, chk, comp, tc.wantCheck, tc.wantComp)
			}
			if _, got := Sticky(tc.reason); got != tc.sticky {
				t.Errorf("Sticky(%q) = %v", tc.reason, got)
			}
			if got := Remediating(tc.reason); got != tc.remediating {
				t.Errorf("Remediating(%q) = %v", tc.reason, got)
			}
		})
	}
	want := "gpuhc: rma: gpu3 (SN 1652922000123, 0000:4e:00.0): gpu.xid: XID 79 GPU has fallen off the bus"
	if got := Reason([]check.Result{rma}); got != want {
		t.Errorf("rma reason = %q, want %q", got, want)
	}
}

// The first rma among the failures is the one the reason names, whatever
// order the checks finished in.
func TestRMAFailureNamedFirst(t *testing.T) {
	rma := xid79
	rma.Component, rma.Action = "gpu5", check.ActionRMA
	f := &fakeSlurm{node: idle()}
	run, err := engine(f).Apply(context.Background(), append(append([]check.Result{}, failing...), xid79, rma), State{})
	if err != nil {
		t.Fatal(err)
	}
	if d := run.State.Drained; d == nil || !strings.HasPrefix(d.Reason, "gpuhc: rma: gpu5") || d.Action != "rma" || d.Component != "gpu5" {
		t.Fatalf("drain record %+v, want the rma on gpu5", run.State.Drained)
	}
}

// The drain record keeps what remediation needs: the named failure's
// check, part and action.
func TestDrainRecordsTheNamedFailure(t *testing.T) {
	f := &fakeSlurm{node: idle()}
	run, err := engine(f).Apply(context.Background(), []check.Result{xid79}, State{})
	if err != nil {
		t.Fatal(err)
	}
	d := run.State.Drained
	if d == nil || d.Check != "gpu.xid" || d.Component != "gpu3" || d.Serial != "1652922000123" || d.PCI != "0000:4e:00.0" || d.Action != "reboot" {
		t.Fatalf("drain record %+v", d)
	}
}

// An rma or a failed remediation is never resumed by healthy runs, and
// asks Slurm nothing; a check's drain is resumed as before.
func TestStickyDrainsAreNotResumed(t *testing.T) {
	for _, tc := range []struct {
		reason string
		want   string
	}{
		{PhaseReason(PhaseRMA, xid79, xid79.Message), Held},
		{PhaseReason(PhaseRemediationFailed, xid79, "reset-gpu: nvidia-smi exited 3"), Held},
		{Reason([]check.Result{xid79}), Resumed},
	} {
		f := &fakeSlurm{node: slurm.Node{Name: "gpu001", State: []string{"IDLE", "DRAIN"}, Reason: tc.reason}}
		prev := State{Drained: &Drain{Reason: tc.reason, At: t0, By: By}, HealthyRuns: 5}
		run, err := engine(f).Apply(context.Background(), healthy, prev)
		if err != nil {
			t.Fatal(err)
		}
		if run.Outcome.Kind != tc.want {
			t.Errorf("%q: outcome %+v, want %s", tc.reason, run.Outcome, tc.want)
		}
		if tc.want == Held && len(f.calls) != 0 {
			t.Errorf("%q: Slurm calls %v, want none", tc.reason, f.calls)
		}
	}
}

// slurmctld appends " : reboot issued" to the reason of a reboot gpuhc
// asked for; the drain stays ours, in a run that still fails and in the
// healthy runs after the boot, and is resumed.
func TestRebootIssuedReasonStaysOurs(t *testing.T) {
	ours := PhaseReason(PhaseReboot, xid79, xid79.Message)
	issued := ours + RebootIssued
	f := &fakeSlurm{node: slurm.Node{Name: "gpu001", State: []string{"DOWN", "DRAIN", "REBOOT_ISSUED"}, Reason: issued}}
	run, err := engine(f).Apply(context.Background(), []check.Result{xid79}, State{Drained: &Drain{Reason: ours, At: t0, By: By}})
	if err != nil || run.Outcome.Kind != AlreadyDrained || run.State.Drained == nil || run.State.Drained.Reason != issued {
		t.Fatalf("failing run: %+v %v, state %+v", run.Outcome, err, run.State.Drained)
	}
	f.node.State = []string{"IDLE", "DRAIN"}
	run, err = engine(f).Apply(context.Background(), healthy, State{Drained: &Drain{Reason: ours, At: t0, By: By}, HealthyRuns: 1})
	if err != nil || run.Outcome.Kind != Resumed {
		t.Fatalf("healthy run after the boot: %+v %v", run.Outcome, err)
	}
	// Only a reboot's reason: a check's reason with that suffix is
	// someone's else.
	plain := Reason([]check.Result{xid79})
	if SameDrain(plain, plain+RebootIssued) {
		t.Error("a plain drain's reason with the suffix taken as ours")
	}
}

// A job run's drain that remediation re-reasoned is still judged by its
// check, not by the phase in the reason.
func TestUnjudgedUsesTheRecordedCheck(t *testing.T) {
	d := &Drain{Reason: "gpuhc: reset-gpu: gpu3: epilog.leftover: 2048 MiB in use", By: "epilog", Check: "epilog.leftover"}
	if got := unjudged(d, healthy); !strings.Contains(got, "for epilog.leftover,") {
		t.Errorf("unjudged = %q", got)
	}
	ran := []check.Result{{Check: "epilog.leftover", Component: "gpu3", Status: check.OK}}
	if got := unjudged(d, ran); got != "" {
		t.Errorf("judged by a run of its check, still %q", got)
	}
}
