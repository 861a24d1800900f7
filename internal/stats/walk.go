package stats

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// tally is a row being counted.
type tally struct {
	hours                              int64
	episodes, drains, resumes, repairs int
	open                               int
	repairUS                           int64
	// phases of the repairs
	detected, remediated int
	detectUS, toRemUS    int64
	remToOKUS            int64
	nodes                []string
}

func (t *tally) row(key string) Row {
	r := Row{Key: key, Hours: float64(t.hours) / usPerHour, Episodes: t.episodes, Drains: t.drains,
		Resumes: t.resumes, Repairs: t.repairs, Open: t.open, Detected: t.detected, Remediated: t.remediated}
	if t.episodes > 0 && t.hours > 0 {
		v := float64(t.hours) / (usPerHour * float64(t.episodes))
		r.MTTF = &v
	}
	r.MTTR = meanHours(t.repairUS, t.repairs)
	r.DetectToDrain = meanHours(t.detectUS, t.detected)
	r.DrainToRemediation = meanHours(t.toRemUS, t.remediated)
	r.RemediationToService = meanHours(t.remToOKUS, t.remediated)
	if len(t.nodes) > 0 {
		r.Nodes = slices.Sorted(slices.Values(t.nodes))
	}
	return r
}

// meanHours is us/n in hours; nil when n is 0.
func meanHours(us int64, n int) *float64 {
	if n == 0 {
		return nil
	}
	v := float64(us) / (usPerHour * float64(n))
	return &v
}

// merge adds o's counts (not its nodes).
func (t *tally) merge(o *tally) {
	t.hours += o.hours
	t.episodes += o.episodes
	t.drains += o.drains
	t.resumes += o.resumes
	t.repairs += o.repairs
	t.open += o.open
	t.repairUS += o.repairUS
	t.detected += o.detected
	t.remediated += o.remediated
	t.detectUS += o.detectUS
	t.toRemUS += o.toRemUS
	t.remToOKUS += o.remToOKUS
}

func (t *tally) used() bool {
	return t.hours > 0 || t.episodes > 0 || t.drains > 0 || t.resumes > 0
}

type tallies map[string]*tally

func (m tallies) get(key string) *tally {
	t := m[key]
	if t == nil {
		t = &tally{}
		m[key] = t
	}
	return t
}

func (m tallies) rows(keep func(*tally) bool) []Row {
	out := []Row{}
	for _, k := range slices.Sorted(mapKeys(m)) {
		if keep(m[k]) {
			out = append(out, m[k].row(k))
		}
	}
	return out
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// drainPeriod is an open drain while walking a node's records.
type drainPeriod struct {
	t                   int64
	check, comp, serial string
	inWindow            bool
	// detect is the first-FAIL→drain time, rem when the first remediation
	// of the period started; -1: none.
	detect, rem int64
}

// targets are the tallies an occurrence counts in besides the node's and
// the fleet's.
type targets struct{ check, ctype, serial *tally }

func compare(x, y rec) int {
	return cmp.Or(cmp.Compare(x.t, y.t), cmp.Compare(x.kind, y.kind), strings.Compare(x.check, y.check),
		strings.Compare(x.comp, y.comp), cmp.Compare(x.status, y.status), cmp.Compare(x.previous, y.previous),
		strings.Compare(x.serial, y.serial), strings.Compare(x.action, y.action), strings.Compare(x.model, y.model))
}

// what is known of a component while walking: absent, nothing
const (
	healthy uint8 = iota + 1
	failing
)

type compKey struct{ check, comp string }

// reporter walks the nodes' records into the tallies.
type reporter struct {
	a                                 *Accumulator
	fleet                             *tally
	byNode, byCheck, byType, bySerial tallies
	rem                               remTallies
	known                             map[compKey]uint8
	lastSerial                        map[compKey]string
	// epStart is when the open episode of a component opened.
	epStart    map[compKey]int64
	uniq       []rec
	setHours   []int64
	scratch    []setBeat
	duplicates int
}

// Report computes the statistics of the events added so far.
func (a *Accumulator) Report() Report {
	rp := &reporter{a: a, fleet: &tally{}, byNode: tallies{}, byCheck: tallies{}, byType: tallies{}, bySerial: tallies{},
		rem: newRemTallies(), known: map[compKey]uint8{}, lastSerial: map[compKey]string{}, epStart: map[compKey]int64{}}
	for _, name := range slices.Sorted(mapKeys(a.nodes)) {
		if n := a.nodes[name]; !n.skip {
			rp.node(n)
		}
	}
	for _, t := range rp.byCheck {
		t.hours = rp.fleet.hours
	}
	for _, t := range rp.byType {
		t.hours = rp.fleet.hours
	}
	rep := a.reportHead()
	rep.Fleet = rp.fleet.row("fleet")
	rep.ByNode = rp.byNode.rows((*tally).used)
	all := func(*tally) bool { return true }
	rep.ByCheck = rp.byCheck.rows(all)
	rep.ByComponentType = rp.byType.rows(all)
	rep.BySerial = rp.bySerial.rows((*tally).used)
	rep.ByModel = rp.byModel().rows((*tally).used)
	rep.Lemons = lemons(rep, a.opts.LemonMin)
	rep.Remediation = rp.rem.report()
	rep.Duplicates = rp.duplicates
	return rep
}

// reportHead is the report's window, filter and counts of events.
func (a *Accumulator) reportHead() Report {
	rep := Report{LemonMin: a.opts.LemonMin, Filter: Filter{Node: a.opts.Node, Check: a.opts.Check}, Events: a.events, Skipped: a.skipped}
	if !a.opts.Since.IsZero() {
		v := time.UnixMicro(a.since).UTC()
		rep.Window.Since = &v
	}
	if !a.opts.Until.IsZero() {
		v := time.UnixMicro(a.until).UTC()
		rep.Window.Until = &v
	}
	if a.from <= a.to {
		f, t := time.UnixMicro(a.from).UTC(), time.UnixMicro(a.to).UTC()
		rep.Window.From, rep.Window.To = &f, &t
	}
	return rep
}

// byModel sums the serials' tallies by their model.
func (rp *reporter) byModel() tallies {
	out := tallies{}
	for s, t := range rp.bySerial {
		if m, ok := rp.a.models[s]; ok {
			out.get(m.model).merge(t)
		}
	}
	return out
}

// attr is the tallies of a (check, component, serial).
func (rp *reporter) attr(check, comp, serial string) targets {
	var tg targets
	if check != "" {
		tg.check = rp.byCheck.get(check)
		tg.ctype = rp.byType.get(ComponentType(comp))
	}
	if serial != "" {
		tg.serial = rp.bySerial.get(serial)
	}
	return tg
}

// each applies f to the fleet's, the node's and the targets' tallies.
func (rp *reporter) each(nt *tally, tg targets, f func(*tally)) {
	f(rp.fleet)
	f(nt)
	for _, t := range []*tally{tg.check, tg.ctype, tg.serial} {
		if t != nil {
			f(t)
		}
	}
}

// node counts one node: its hours, then its records in order.
func (rp *reporter) node(n *node) {
	nt := rp.byNode.get(n.name)
	rp.hours(n, nt)
	rp.unique(n)
	clear(rp.known)
	clear(rp.lastSerial)
	clear(rp.epStart)
	var drain *drainPeriod
	for _, r := range rp.uniq {
		in := r.t >= rp.a.since
		switch r.kind {
		case recTransition:
			rp.transition(n.name, nt, r, in)
		case recDrain:
			drain = rp.drain(nt, drain, r, in)
		case recRemStart:
			if drain != nil && drain.rem < 0 {
				drain.rem = r.t
			}
		case recResume:
			rp.resume(nt, drain, r, in)
			drain = nil
			clear(rp.epStart)
		}
	}
	if drain != nil && drain.inWindow {
		rp.each(nt, rp.attr(drain.check, drain.comp, drain.serial), func(t *tally) { t.open++ })
	}
	rp.remediations(rp.uniq)
}

// hours adds the node's heartbeat hours to it, the fleet and its serials,
// each heartbeat once.
func (rp *reporter) hours(n *node, nt *tally) {
	var dups int
	rp.scratch, dups = n.uniqueBeats(rp.scratch[:0])
	rp.duplicates += dups
	rp.setHours = append(rp.setHours[:0], make([]int64, len(n.beats))...)
	for _, h := range rp.scratch {
		lo, hi := max(h.t-h.us, rp.a.since), min(h.t, rp.a.until)
		if hi > lo {
			nt.hours += hi - lo
			rp.setHours[h.set] += hi - lo
		}
	}
	rp.fleet.hours += nt.hours
	for i, b := range n.beats {
		if rp.setHours[i] == 0 {
			continue
		}
		for j, s := range b.serials {
			if s == "" || slices.Contains(b.serials[:j], s) {
				continue
			}
			st := rp.bySerial.get(s)
			st.hours += rp.setHours[i]
			if !slices.Contains(st.nodes, n.name) {
				st.nodes = append(st.nodes, n.name)
			}
		}
	}
}

// unique sorts the node's records and keeps each once in rp.uniq.
func (rp *reporter) unique(n *node) {
	slices.SortFunc(n.recs, compare)
	rp.uniq = rp.uniq[:0]
	for i, r := range n.recs {
		if i > 0 && compare(n.recs[i-1], r) == 0 {
			rp.duplicates++
			continue
		}
		rp.uniq = append(rp.uniq, r)
	}
}

func (rp *reporter) transition(name string, nt *tally, r rec, in bool) {
	k := compKey{r.check, r.comp}
	if r.serial != "" {
		rp.lastSerial[k] = r.serial
	}
	// What the health check knew just before.
	switch r.previous {
	case stOK, stWarn, stSkip:
		rp.known[k] = healthy
	case stFail:
		rp.known[k] = failing
	case stNone:
		delete(rp.known, k) // first seen: no record of it
	}
	switch r.status {
	case stFail:
		if rp.known[k] == failing {
			return
		}
		rp.known[k] = failing
		rp.epStart[k] = r.t
		if !in {
			return
		}
		rp.each(nt, rp.attr(r.check, r.comp, r.serial), func(t *tally) { t.episodes++ })
		if r.serial != "" && !slices.Contains(rp.bySerial.get(r.serial).nodes, name) {
			rp.bySerial.get(r.serial).nodes = append(rp.bySerial.get(r.serial).nodes, name)
		}
	case stOK, stWarn, stSkip:
		rp.known[k] = healthy
		delete(rp.epStart, k)
	}
}

// drain opens a drain period, unless one is open (a re-drain).
func (rp *reporter) drain(nt *tally, open *drainPeriod, r rec, in bool) *drainPeriod {
	if open != nil {
		return open
	}
	k := compKey{r.check, r.comp}
	d := &drainPeriod{t: r.t, check: r.check, comp: r.comp, serial: rp.lastSerial[k], inWindow: in, detect: -1, rem: -1}
	if s, ok := rp.epStart[k]; ok && r.check != "" {
		d.detect = r.t - s
	}
	if in {
		rp.each(nt, rp.attr(d.check, d.comp, d.serial), func(t *tally) { t.drains++ })
	}
	return d
}

// resume ends the drain period, if any. It closes the node's open
// episodes; a component still failing stays failing (known is
// unchanged), so that seeing it fail again opens no new episode.
func (rp *reporter) resume(nt *tally, drain *drainPeriod, r rec, in bool) {
	count := in && match(rp.a.opts.Check, drain.checkOr(r.check))
	repaired := drain != nil && drain.inWindow
	if !count && !repaired {
		return
	}
	var tg targets
	if drain != nil {
		tg = rp.attr(drain.check, drain.comp, drain.serial)
	} else {
		tg = rp.attr(r.check, r.comp, "")
	}
	if count {
		rp.each(nt, tg, func(t *tally) { t.resumes++ })
	}
	if repaired {
		rp.each(nt, tg, func(t *tally) { drain.repaired(t, r.t) })
	}
}

// repaired counts the period, ended by a resume at end, as a repair.
func (d *drainPeriod) repaired(t *tally, end int64) {
	t.repairs++
	t.repairUS += end - d.t
	if d.detect >= 0 {
		t.detected++
		t.detectUS += d.detect
	}
	if d.rem >= 0 {
		t.remediated++
		t.toRemUS += d.rem - d.t
		t.remToOKUS += end - d.rem
	}
}

// checkOr is the check a resume is counted under: its drain period's, or
// its own reason's.
func (d *drainPeriod) checkOr(own string) string {
	if d != nil {
		return d.check
	}
	return own
}
