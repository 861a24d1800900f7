package stats

import (
	"slices"
	"strconv"

	"github.com/gpuhc/gpuhc/internal/events"
)

// RemediationRow is the remediations of one action, one model or the
// fleet (see "Remediations").
type RemediationRow struct {
	Key string `json:"key"`
	// Started remediations in the window; of them, Finished and Failed
	// are those whose end was logged, Pending those whose was not.
	Started  int `json:"started"`
	Finished int `json:"finished"`
	Failed   int `json:"failed"`
	Pending  int `json:"pending"`
	// Cured are the finished remediations that put the part back in
	// service without it failing again.
	Cured int `json:"cured"`
	// SuccessRate is Finished/(Finished+Failed) and CureRate
	// Cured/(Finished+Failed); nil when none ended.
	SuccessRate *float64 `json:"success_rate"`
	CureRate    *float64 `json:"cure_rate"`
}

// Remediation is the remediations fleet-wide, by action and by GPU model.
type Remediation struct {
	Fleet    RemediationRow   `json:"fleet"`
	ByAction []RemediationRow `json:"by_action"`
	ByModel  []RemediationRow `json:"by_model"`
}

// UnknownModel is the model key of remediations whose event names none.
const UnknownModel = "unknown"

// RemediationColumns heads the cells of RemediationRow.Cells.
var RemediationColumns = []string{"key", "started", "finished", "failed", "pending", "cured", "success_rate", "cure_rate"}

// Cells gives the row as text, in RemediationColumns order; an undefined
// rate is "-".
func (r RemediationRow) Cells() []string {
	return []string{r.Key, itoa(r.Started), itoa(r.Finished), itoa(r.Failed), itoa(r.Pending), itoa(r.Cured),
		FormatRate(r.SuccessRate), FormatRate(r.CureRate)}
}

// FormatRate writes a rate as a whole percentage, or "-" for nil.
func FormatRate(r *float64) string {
	if r == nil {
		return "-"
	}
	return itoa(int(*r*100+0.5)) + "%"
}

// remediation keeps a remediation or rma event of n.
func (a *Accumulator) remediation(n *node, t int64, ev events.Event) {
	if t >= a.until || !match(a.opts.Check, ev.Check) {
		return
	}
	r := rec{t: t, check: a.intern(ev.Check), comp: a.intern(ev.Component), serial: a.intern(ev.Serial),
		action: a.intern(ev.Action), model: a.intern(ev.Model)}
	switch ev.Kind {
	case events.KindRemediationStarted:
		r.kind = recRemStart
	case events.KindRemediationFinished:
		r.kind, r.status = recRemEnd, stOK
	case events.KindRemediationFailed:
		r.kind, r.status = recRemEnd, stFail
	default:
		r.kind = recRMA
	}
	a.events++
	n.recs = append(n.recs, r)
	if t >= a.since {
		a.observe(t, t)
	}
}

// learnModel keeps the model the latest event names for serial (the
// least name at equal times, so that the order of events does not matter).
func (a *Accumulator) learnModel(t int64, serial, model string) {
	old, ok := a.models[serial]
	if ok && (old.t > t || old.t == t && old.model <= model) {
		return
	}
	a.models[a.intern(serial)] = seenModel{t: t, model: a.intern(model)}
}

// remCount is a RemediationRow being counted.
type remCount struct{ started, finished, failed, cured int }

func (c *remCount) row(key string) RemediationRow {
	r := RemediationRow{Key: key, Started: c.started, Finished: c.finished, Failed: c.failed,
		Pending: c.started - c.finished - c.failed, Cured: c.cured}
	if ended := c.finished + c.failed; ended > 0 {
		s, k := float64(c.finished)/float64(ended), float64(c.cured)/float64(ended)
		r.SuccessRate, r.CureRate = &s, &k
	}
	return r
}

type remTallies struct {
	fleet            remCount
	byAction, byModl map[string]*remCount
}

func newRemTallies() remTallies {
	return remTallies{byAction: map[string]*remCount{}, byModl: map[string]*remCount{}}
}

// add applies f to the counts a remediation started as r counts in.
func (m *remTallies) add(r rec, f func(*remCount)) {
	f(&m.fleet)
	model := r.model
	if model == "" {
		model = UnknownModel
	}
	f(getCount(m.byAction, r.action))
	f(getCount(m.byModl, model))
}

func getCount(m map[string]*remCount, key string) *remCount {
	c := m[key]
	if c == nil {
		c = &remCount{}
		m[key] = c
	}
	return c
}

func (m *remTallies) report() Remediation {
	rows := func(t map[string]*remCount) []RemediationRow {
		out := []RemediationRow{}
		for _, k := range slices.Sorted(mapKeys(t)) {
			out = append(out, t[k].row(k))
		}
		return out
	}
	return Remediation{Fleet: m.fleet.row("fleet"), ByAction: rows(m.byAction), ByModel: rows(m.byModl)}
}

// attempt is a remediation followed through a node's records.
type attempt struct {
	r       rec
	counted bool // started in the window
	state   uint8
}

// attempt states
const (
	attRunning  uint8 = iota // started, no end yet
	attFinished              // finished, not yet back in service
	attDone                  // failed, cured or not cured
)

// samePart reports whether r is about the part a remediation was: the
// same check and component, and the same serial where both name one.
func (at *attempt) samePart(r rec) bool {
	return at.r.check == r.check && at.r.comp == r.comp && (at.r.serial == "" || r.serial == "" || at.r.serial == r.serial)
}

// remediations follows the node's remediations (recs sorted, unique) to
// their end and, when finished, to the next resume: cured when no FAIL
// of the part, rma or new remediation of the part came first.
func (rp *reporter) remediations(recs []rec) {
	var live []*attempt
	for _, r := range recs {
		switch r.kind {
		case recRemStart:
			rp.uncured(live, func(at *attempt) bool { return at.samePart(r) })
			at := &attempt{r: r, counted: r.t >= rp.a.since}
			live = append(live, at)
			rp.count(at, func(c *remCount) { c.started++ })
		case recRemEnd:
			rp.ended(live, r)
		case recTransition:
			if r.status == stFail {
				rp.uncured(live, func(at *attempt) bool { return at.samePart(r) })
			}
		case recRMA:
			rp.uncured(live, func(*attempt) bool { return true })
		case recResume:
			for _, at := range live {
				if at.state == attFinished {
					at.state = attDone
					rp.count(at, func(c *remCount) { c.cured++ })
				}
			}
		}
		live = slices.DeleteFunc(live, func(at *attempt) bool { return at.state == attDone })
	}
}

func (rp *reporter) count(at *attempt, f func(*remCount)) {
	if at.counted {
		rp.rem.add(at.r, f)
	}
}

// ended gives the oldest running remediation of r's action and part its end.
func (rp *reporter) ended(live []*attempt, r rec) {
	for _, at := range live {
		if at.state != attRunning || at.r.action != r.action || at.r.check != r.check || at.r.comp != r.comp {
			continue
		}
		if r.status == stFail {
			at.state = attDone
			rp.count(at, func(c *remCount) { c.failed++ })
		} else {
			at.state = attFinished
			rp.count(at, func(c *remCount) { c.finished++ })
		}
		return
	}
}

// uncured ends, not cured, the finished remediations that hit selects.
func (rp *reporter) uncured(live []*attempt, hit func(*attempt) bool) {
	for _, at := range live {
		if at.state == attFinished && hit(at) {
			at.state = attDone
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
