package fleetgen

import (
	"fmt"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
)

// byHand is the admin who resumes a node once its part is fixed (root
// resumes still-failing nodes, see incident).
const byHand = "gpuhc-drain:ops"

// Driver is the driver version rma events name.
const Driver = "550.54.15"

// ModelOf is the model of a generated GPU: H100 for an even serial, H200
// for an odd one.
func ModelOf(serial string) string {
	if serial == "" {
		return ""
	}
	if (serial[len(serial)-1]-'0')%2 == 0 {
		return "NVIDIA H100 80GB HBM3"
	}
	return "NVIDIA H200"
}

func pciOf(comp string) string {
	var slot int
	fmt.Sscanf(comp, "gpu%d", &slot)
	return fmt.Sprintf("0000:%02x:00.0", 0x18+slot*0x10)
}

// remedyIncident is a drained GPU failure that is remediated.
type remedyIncident struct {
	k              key
	serial, reason string
	t0, tD, t1     int64 // FAIL, drain, when it would recover
	ep             int   // episode id
	rma            bool  // escalate to rma
	start, stop    int64 // remediation started, ended
	ranWhat        string
	resumeAt       int64
}

// remediated writes the remediation of inc and what follows, and
// returns when the node is back to normal (the log's end for an rma in
// force).
func (g *gen) remediated(inc remedyIncident) int64 {
	r, k := g.rng, inc.k
	inc.start = inc.tD + 300*int64(1+r.IntN(4))
	secs := int64(20 + r.IntN(60))
	inc.ranWhat = "nvidia-smi --gpu-reset -i " + pciOf(k.comp)
	if k.action == "reboot" {
		secs, inc.ranWhat = int64(240+r.IntN(600)), "scontrol reboot ASAP "+g.name
	}
	inc.stop = inc.start + secs
	g.remEv(inc, inc.start, events.KindRemediationStarted, 0, inc.ranWhat)
	outcome := r.IntN(10)
	switch {
	case inc.rma:
		return g.escalate(inc)
	case outcome < 6:
		return g.cured(inc)
	case outcome < 8:
		return g.failsAgain(inc)
	}
	return g.remedyFailed(inc)
}

// remEv writes a remediation event of inc at t.
func (g *gen) remEv(inc remedyIncident, t int64, kind string, secs int64, msg string) {
	g.add(t, events.Event{Kind: kind, Check: inc.k.check, Component: inc.k.comp, Serial: inc.serial, PCI: pciOf(inc.k.comp),
		Model: ModelOf(inc.serial), Action: inc.k.action, Message: msg, By: "healthcheck", Seconds: float64(secs)}, 0)
}

// record adds inc's remediation and drain period to the truth.
func (g *gen) record(inc remedyIncident, failed bool, cured int64) {
	if inc.start >= g.pl.end {
		g.drainPeriod(inc.k, inc.serial, inc.tD, inc.resumeAt, inc.t0, 0)
		return
	}
	x := Remediation{Node: g.name, Check: inc.k.check, Component: inc.k.comp, Serial: inc.serial, Model: ModelOf(inc.serial),
		Action: inc.k.action, Start: time.Unix(inc.start, 0).UTC(), End: g.logged(inc.stop), Cured: g.logged(cured)}
	x.Failed = failed && !x.End.IsZero()
	g.res.remediations = append(g.res.remediations, x)
	g.drainPeriod(inc.k, inc.serial, inc.tD, inc.resumeAt, inc.t0, inc.start)
}

// cured: the remediation finishes, the GPU is OK a minute later, resumed
// ten minutes after.
func (g *gen) cured(inc remedyIncident) int64 {
	g.remEv(inc, inc.stop, events.KindRemediationFinished, inc.stop-inc.start, inc.ranWhat)
	ok := inc.stop + 60
	g.tr(ok, inc.k, inc.serial, "FAIL", "OK", "", inc.ep)
	g.endEpisode(inc.ep, ok)
	inc.resumeAt = ok + 600
	g.drainEv(inc.resumeAt, events.KindResume, inc.reason, "healthcheck", 0)
	g.record(inc, false, inc.resumeAt)
	return inc.resumeAt
}

// failsAgain: the remediation finishes but the GPU still fails; it
// recovers later and is resumed.
func (g *gen) failsAgain(inc remedyIncident) int64 {
	g.remEv(inc, inc.stop, events.KindRemediationFinished, inc.stop-inc.start, inc.ranWhat)
	g.tr(inc.stop+60, inc.k, inc.serial, "FAIL", "FAIL", inc.k.msgs[0]+" (after "+inc.k.action+")", 0)
	return g.fixedByHand(inc, "healthcheck")
}

// remedyFailed: the remediation fails and the node is left to an admin.
func (g *gen) remedyFailed(inc remedyIncident) int64 {
	why := "exit status 1: Unable to reset GPU"
	if inc.k.action == "reboot" {
		why = "reboot not done within 30m0s"
	}
	g.remEv(inc, inc.stop, events.KindRemediationFailed, inc.stop-inc.start, why)
	g.redrain(inc, inc.stop, fmt.Sprintf("gpuhc: remediation-failed: %s: %s: %s", inc.k.comp, inc.k.action, why))
	return g.fixedByHand(inc, byHand)
}

// fixedByHand: the GPU recovers at its repair time (at least 20 minutes
// after the remediation) and by resumes the node ten minutes later.
func (g *gen) fixedByHand(inc remedyIncident, by string) int64 {
	ok := max(inc.t1, inc.stop+1200)
	g.tr(ok, inc.k, inc.serial, "FAIL", "OK", "", inc.ep)
	g.endEpisode(inc.ep, ok)
	inc.resumeAt = ok + 600
	g.drainEv(inc.resumeAt, events.KindResume, inc.reason, by, 0)
	g.record(inc, by != "healthcheck", 0)
	return inc.resumeAt
}

// escalate: the remediation finishes, the GPU fails again and is drained
// for rma; node 4's is resumed by hand two days later, after a swap.
func (g *gen) escalate(inc remedyIncident) int64 {
	g.remEv(inc, inc.stop, events.KindRemediationFinished, inc.stop-inc.start, inc.ranWhat)
	at := inc.stop + 60
	k := inc.k
	g.tr(at, k, inc.serial, "FAIL", "FAIL", k.msgs[0]+" (after "+k.action+")", 0)
	reason := fmt.Sprintf("gpuhc: rma: %s (SN %s): %s: %s", k.comp, inc.serial, k.check, k.msgs[0])
	g.add(at, events.Event{Kind: events.KindRMA, Check: k.check, Component: k.comp, Serial: inc.serial, PCI: pciOf(k.comp),
		Model: ModelOf(inc.serial), Driver: Driver, Remediations: 1, Message: reason, By: "healthcheck"}, 0)
	g.redrain(inc, at, reason)
	x := RMA{Node: g.name, Check: k.check, Component: k.comp, Serial: inc.serial, PCI: pciOf(k.comp), Model: ModelOf(inc.serial),
		Driver: Driver, Time: time.Unix(at, 0).UTC(), Remediations: 1}
	inc.resumeAt = g.pl.end
	if g.i == 4 {
		inc.resumeAt = at + 2*86400
		g.tr(inc.resumeAt-600, k, inc.serial, "FAIL", "OK", "", inc.ep)
		g.endEpisode(inc.ep, inc.resumeAt-600)
		g.drainEv(inc.resumeAt, events.KindResume, reason, byHand, 0)
		x.Resumed = g.logged(inc.resumeAt)
	}
	if at < g.pl.end {
		g.res.rmas = append(g.res.rmas, x)
	}
	g.record(inc, false, 0)
	return inc.resumeAt
}

// redrain is the health check's new reason for inc's drain, with the
// check, component and serial of the failure as its drain events carry.
func (g *gen) redrain(inc remedyIncident, t int64, reason string) {
	g.add(t, events.Event{Kind: events.KindDrain, Check: inc.k.check, Component: inc.k.comp, Serial: inc.serial,
		Action: inc.k.action, Message: reason, Backend: "rest", By: "healthcheck"}, 0)
}
