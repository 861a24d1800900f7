package stats

import (
	"reflect"
	"testing"

	"github.com/gpuhc/gpuhc/internal/events"
)

const (
	xidReason = "gpuhc: gpu.xid: gpu3 (SN S3, 0000:4e:00.0): Xid 79"
	h100      = "NVIDIA H100 80GB HBM3"
)

// rem is a remediation or rma event of gpu3 (S3) for gpu.xid.
func rem(node string, h float64, kind, action string) events.Event {
	return events.Event{Time: at(h), Kind: kind, Node: node, Check: "gpu.xid", Component: "gpu3", Serial: "S3",
		PCI: "0000:4e:00.0", Model: h100, Action: action, By: "healthcheck"}
}

func xid(node string, h float64, prev, status string) events.Event {
	return tr(node, h, "gpu.xid", "gpu3", "S3", prev, status)
}

// failed is the start of every case: gpu3 fails at 1 h, drained at 1.5 h.
func failed(node string) []events.Event {
	return []events.Event{hb(node, 48, 48, "S3"), xid(node, 1, "OK", "FAIL"), drain(node, 1.5, xidReason)}
}

func cat(parts ...[]events.Event) []events.Event {
	var out []events.Event
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

type remWant struct {
	repairs, remediated, open int
	mttr, d2r, r2s            *float64
	rem                       RemediationRow
}

func remRow(started, finished, failed, pending, cured int) RemediationRow {
	r := RemediationRow{Key: "fleet", Started: started, Finished: finished, Failed: failed, Pending: pending, Cured: cured}
	if ended := finished + failed; ended > 0 {
		r.SuccessRate, r.CureRate = f(float64(finished)/float64(ended)), f(float64(cured)/float64(ended))
	}
	return r
}

func TestRemediationCases(t *testing.T) {
	S, F, X := events.KindRemediationStarted, events.KindRemediationFinished, events.KindRemediationFailed
	cases := []struct {
		name string
		evs  []events.Event
		want remWant
	}{
		{"no remediation", cat(failed("n1"), []events.Event{xid("n1", 2, "FAIL", "OK"), resume("n1", 3, xidReason)}),
			remWant{repairs: 1, mttr: f(1.5), rem: remRow(0, 0, 0, 0, 0)}},
		{"reset cured", cat(failed("n1"), []events.Event{
			rem("n1", 2, S, "reset-gpu"),
			drain("n1", 2, "gpuhc: reset-gpu: gpu3 (SN S3): gpu.xid: Xid 79"), // the reason changed: a re-drain
			rem("n1", 2.25, F, "reset-gpu"), xid("n1", 2.25, "FAIL", "OK"),
			resume("n1", 3, "gpuhc: reset-gpu: gpu3 (SN S3): gpu.xid: Xid 79")}),
			remWant{repairs: 1, remediated: 1, mttr: f(1.5), d2r: f(0.5), r2s: f(1), rem: remRow(1, 1, 0, 0, 1)}},
		{"reboot cured", cat(failed("n1"), []events.Event{
			rem("n1", 2.5, S, "reboot"), rem("n1", 3, F, "reboot"), xid("n1", 3, "FAIL", "OK"), resume("n1", 3.5, xidReason)}),
			remWant{repairs: 1, remediated: 1, mttr: f(2), d2r: f(1), r2s: f(1), rem: remRow(1, 1, 0, 0, 1)}},
		{"finished, failing again", cat(failed("n1"), []events.Event{
			rem("n1", 2, S, "reset-gpu"), rem("n1", 2.25, F, "reset-gpu"), xid("n1", 2.5, "FAIL", "FAIL"),
			xid("n1", 4, "FAIL", "OK"), resume("n1", 5.5, xidReason)}),
			remWant{repairs: 1, remediated: 1, mttr: f(4), d2r: f(0.5), r2s: f(3.5), rem: remRow(1, 1, 0, 0, 0)}},
		{"failed remediation", cat(failed("n1"), []events.Event{
			rem("n1", 2, S, "reset-gpu"), rem("n1", 2.5, X, "reset-gpu"),
			drain("n1", 2.5, "gpuhc: remediation-failed: gpu3: reset-gpu: exit status 1"),
			resume("n1", 7.5, "gpuhc: remediation-failed: gpu3: reset-gpu: exit status 1")}),
			remWant{repairs: 1, remediated: 1, mttr: f(6), d2r: f(0.5), r2s: f(5.5), rem: remRow(1, 0, 1, 0, 0)}},
		{"rma in force", cat(failed("n1"), []events.Event{
			rem("n1", 2, S, "reset-gpu"), rem("n1", 2.25, F, "reset-gpu"), rem("n1", 2.5, events.KindRMA, ""),
			drain("n1", 2.5, "gpuhc: rma: gpu3 (SN S3): gpu.xid: Xid 79")}),
			remWant{open: 1, rem: remRow(1, 1, 0, 0, 0)}},
		{"rma resumed by hand", cat(failed("n1"), []events.Event{
			rem("n1", 2, S, "reset-gpu"), rem("n1", 2.25, F, "reset-gpu"), rem("n1", 2.5, events.KindRMA, ""),
			resume("n1", 30, "gpuhc: rma: gpu3 (SN S3): gpu.xid: Xid 79")}),
			remWant{repairs: 1, remediated: 1, mttr: f(28.5), d2r: f(0.5), r2s: f(28), rem: remRow(1, 1, 0, 0, 0)}},
		{"still running", cat(failed("n1"), []events.Event{rem("n1", 2, S, "reboot")}),
			remWant{open: 1, rem: remRow(1, 0, 0, 1, 0)}},
		{"interleaved nodes", cat(failed("n1"), failed("n2"), []events.Event{
			rem("n1", 2, S, "reset-gpu"), rem("n2", 2.1, S, "reset-gpu"),
			rem("n2", 2.2, X, "reset-gpu"), rem("n1", 2.3, F, "reset-gpu"),
			xid("n1", 2.3, "FAIL", "OK"), resume("n1", 2.5, xidReason), resume("n2", 3.5, xidReason),
			// an end without a start (the start rotated away): not counted
			rem("n2", 4, F, "reboot"),
			{Time: at(4), Kind: "frobnicate", Node: "n2", Check: "gpu.xid"}, // an unknown kind: ignored
		}),
			remWant{repairs: 2, remediated: 2, mttr: f(1.5), d2r: f(0.55), r2s: f(0.95), rem: remRow(2, 1, 1, 0, 1)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := report(Options{}, c.evs)
			checkRemWant(t, rep, c.want)
			// the same for the check and the model
			checkPhases(t, "check", find(t, rep.ByCheck, "gpu.xid"), rep.Fleet)
			if c.want.rem.Started > 0 { // only an event of a remediation names the model
				checkPhases(t, "model", find(t, rep.ByModel, h100), rep.Fleet)
			}
		})
	}
}

func checkRemWant(t *testing.T, rep Report, w remWant) {
	t.Helper()
	fl := rep.Fleet
	if fl.Repairs != w.repairs || fl.Remediated != w.remediated || fl.Open != w.open || !approx(fl.MTTR, w.mttr) ||
		!approx(fl.DrainToRemediation, w.d2r) || !approx(fl.RemediationToService, w.r2s) {
		t.Errorf("fleet %s remediated %d d2r %s r2s %s; want %+v", show(fl), fl.Remediated,
			FormatHours(fl.DrainToRemediation), FormatHours(fl.RemediationToService), w)
	}
	// Every drain follows the FAIL by half an hour; a re-drain adds none.
	if fl.Drains != w.repairs+w.open || fl.Detected != w.repairs || (w.repairs > 0 && !approx(fl.DetectToDrain, f(0.5))) {
		t.Errorf("fleet drains %d detected %d detect→drain %s", fl.Drains, fl.Detected, FormatHours(fl.DetectToDrain))
	}
	got := rep.Remediation.Fleet
	if !remEqual(got, w.rem) {
		t.Errorf("remediations\n got %v\nwant %v", got.Cells(), w.rem.Cells())
	}
}

func checkPhases(t *testing.T, what string, got, fleet Row) {
	t.Helper()
	got.Key, got.Hours, got.Nodes = fleet.Key, fleet.Hours, fleet.Nodes
	got.MTTF = fleet.MTTF
	if !reflect.DeepEqual(got, fleet) {
		t.Errorf("%s row\n got %+v\nwant %+v", what, got, fleet)
	}
}

func approx(got, want *float64) bool {
	if got == nil || want == nil {
		return got == want
	}
	d := *got - *want
	return d < 1e-9 && d > -1e-9
}

func remEqual(a, b RemediationRow) bool {
	return a.Key == b.Key && a.Started == b.Started && a.Finished == b.Finished && a.Failed == b.Failed &&
		a.Pending == b.Pending && a.Cured == b.Cured && approx(a.SuccessRate, b.SuccessRate) && approx(a.CureRate, b.CureRate)
}

func show(r Row) string { return FormatHours(r.MTTR) + " " + r.Key }

func TestRemediationByActionAndModel(t *testing.T) {
	S, F := events.KindRemediationStarted, events.KindRemediationFinished
	h200 := rem("n2", 2, S, "reboot")
	h200.Model, h200.Serial = "NVIDIA H200", "S9"
	evs := cat(failed("n1"), []events.Event{
		rem("n1", 2, S, "reset-gpu"), rem("n1", 2.5, F, "reset-gpu"), resume("n1", 3, xidReason),
		h200, rem("n3", 2, S, "reboot"),
		{Time: at(2), Kind: S, Node: "n4", Check: "gpu.fabric", Component: "nvswitch0", Action: "reboot"},
	})
	rep := report(Options{}, evs)
	var byAction, byModel []string
	for _, r := range rep.Remediation.ByAction {
		byAction = append(byAction, r.Key, itoa(r.Started), itoa(r.Cured))
	}
	for _, r := range rep.Remediation.ByModel {
		byModel = append(byModel, r.Key, itoa(r.Started), itoa(r.Cured))
	}
	if want := []string{"reboot", "3", "0", "reset-gpu", "1", "1"}; !reflect.DeepEqual(byAction, want) {
		t.Errorf("by action %v, want %v", byAction, want)
	}
	if want := []string{h100, "2", "1", "NVIDIA H200", "1", "0", UnknownModel, "1", "0"}; !reflect.DeepEqual(byModel, want) {
		t.Errorf("by model %v, want %v", byModel, want)
	}
	// S9's model is known: it has a (serial-only) row; S3 has the hours.
	if m := find(t, rep.ByModel, h100); m.Hours != 48 || m.Episodes != 1 || m.Repairs != 1 {
		t.Errorf("model row %+v", m)
	}
	// Windows: a remediation started before Since is not counted, nor
	// are its end and cure.
	rep = report(Options{Since: at(2.25)}, evs)
	if got := rep.Remediation.Fleet; got.Started != 0 || got.Finished != 0 || got.Cured != 0 {
		t.Errorf("since 2.25 h: %v", got.Cells())
	}
	// --check: another check's remediations are left out.
	rep = report(Options{Check: "gpu.fabric"}, evs)
	if got := rep.Remediation.Fleet; got.Started != 1 || len(rep.Remediation.ByModel) != 1 {
		t.Errorf("check gpu.fabric: %v %v", got.Cells(), rep.Remediation.ByModel)
	}
}

func TestReasonCheck(t *testing.T) {
	for reason, want := range map[string][2]string{
		xidReason: {"gpu.xid", "gpu3"},
		"gpuhc: reset-gpu: gpu3 (SN S3): gpu.xid: Xid 79":           {"gpu.xid", "gpu3"},
		"gpuhc: reboot: nvswitch0: gpu.fabric: fabric state":        {"gpu.fabric", "nvswitch0"},
		"gpuhc: rma: gpu3 (SN S3): gpu.ecc: volatile DBE 2 > 0":     {"gpu.ecc", "gpu3"},
		"gpuhc: remediation-failed: gpu3: reset-gpu: exit status 1": {"", ""},
		"gpuhc: reboot: gpu3: ticket 42 by hand":                    {"", ""},
		"maintenance":                                               {"", ""},
	} {
		if c, p := ReasonCheck(reason); c != want[0] || p != want[1] {
			t.Errorf("ReasonCheck(%q) = %q, %q; want %q", reason, c, p, want)
		}
	}
}
