// Package stats computes failure statistics from gpuhc's event log
// (docs/architecture.md#events-and-mttf): episodes, MTTF and MTTR per node,
// per check, per GPU serial, per component type and fleet-wide, and a lemon
// ranking.
//
// Feed events with Add in any order, from any number of logs, then call
// Report. The report depends only on the set of events added, never on
// their order: events are kept per node and sorted by time (then by a
// fixed order of their fields) when the report is made, and hours are
// summed as whole microseconds, so that even the sums are exact.
//
// # Duplicates
//
// The same lines are often read twice: logrotate's partial .1.gz next to
// the .1 it is compressing, a copytruncate copy, a log collected by two
// pipelines. Such repeats count once. A transition, drain or resume equal
// to another of its node in everything the report uses (time to the
// microsecond, kind, check, component, serial, status and previous
// status; for drains and resumes, the check and component of the reason)
// is a duplicate, and so is a heartbeat of the same node with the same
// time and hours (whatever its serials or boot id). Report.Duplicates says
// how many were dropped.
//
// # Window
//
// Options.Since and Options.Until bound the window [Since, Until); a zero
// value leaves that end open. Events at or after Until are ignored. Events
// before Since are kept only to know what was already open when the window
// began (an episode or a drain that started earlier is not counted, and is
// not counted again). Report.Window gives the requested bounds and the
// first and last instants actually observed in the window.
//
// # Hours
//
// Observed hours come from heartbeat events only. A heartbeat at time T
// with hours H covers (T-H, T]; only the part inside the window counts (the
// hours are clipped in proportion). A node's hours are the sum of its
// heartbeats' hours; a GPU serial's hours are the sum over all nodes of the
// hours of heartbeats listing that serial, so a GPU keeps its exposure when
// moved; fleet hours are the sum over nodes. Every node runs every check,
// so the hours of a check and of a component type are the fleet hours. A
// node without heartbeats has no observed hours. Hours include time spent
// drained: they are observed hours, not hours in service.
//
// # Episodes
//
// An episode is a failure of one component, per (node, check, component),
// from transition events (docs/architecture.md#episodes: the first FAIL
// after healthy, up to the next resume or healthy run). A transition to
// FAIL opens an episode only when the component was not already failing:
//
//   - a first-seen FAIL (the event has no previous status: the health
//     check had no record of the component, say it vanished and came back);
//   - a FAIL whose previous status is OK, WARN or SKIP;
//   - a FAIL after ERROR (could not check), when the last status other than
//     ERROR known for that key was healthy, or none is known.
//
// A FAIL whose previous status is FAIL never opens one, nor does a FAIL
// after ERROR when the component was failing before the ERROR: the same
// failure detected a hundred times, or through a while of ERROR, is one
// episode. An episode closes at the next transition of that key to OK,
// WARN or SKIP, or at a resume event of its node (a resume closes every
// open episode of the node). A resume does not re-arm a component that is
// still failing: only a healthy status does, so a FAIL seen again after
// the resume (FAIL→FAIL, or ERROR→FAIL) is not a new episode. ERROR
// neither opens nor closes. A window's first line for a key that says the
// component was already failing (previous FAIL) counts no episode: it
// opened before the logs. An episode counts in the window where it
// opens. Its GPU serial is the serial of the event that opened it; its
// component type is ComponentType of its component.
//
// MTTF = hours / episodes. With no episode, or no observed hours, MTTF is
// undefined: null in JSON (MTTF is a nil pointer), "-" in tables.
//
// # Drains and MTTR
//
// A drain event begins a drain period of its node unless one is already
// open (a re-drain, with a new reason, belongs to the open period). The
// next resume event of the node ends it. For the window:
//
//   - Drains: drain periods beginning in the window.
//   - Repairs: those ended by a resume before Until; MTTR is the mean of
//     their drain→resume times (null when there is none).
//   - Open: those not resumed by Until (or by the end of the logs); they
//     are not in MTTR. Drains = Repairs + Open.
//   - Resumes: resume events in the window, including those ending a drain
//     period that began before the window.
//
// A drain period is attributed to the check and component named in the
// drain reason ("gpuhc: <check>: <component>: <message>", see
// policy.ParseReason), and to the GPU serial of the latest transition of that
// check and component on that node. A resume is attributed like the drain
// period it ends, or, ending none, by its own reason (its message). A
// reason that does not name a check counts for the node and the fleet
// only.
//
// A remediation's or an rma's reason ("gpuhc: reset-gpu: gpu3 (SN …):
// gpu.xid: …", docs/remediation.md) is attributed to the check it names
// after the part; a failed remediation's ("gpuhc: remediation-failed: …")
// names no check. Both usually come as re-drains of an open period.
//
// # MTTR phases
//
// Each repair (a drain period that began in the window and a resume ended
// before Until) splits into phases, each a mean over the repairs that
// have it:
//
//   - detection→drain (Detected, DetectToDrain): from the FAIL transition
//     that opened the episode of the drain's check and component to the
//     drain. Only when that episode was still open at the drain; a
//     re-drain after a resume (the episode closed by it) and a drain whose
//     reason names no check have none.
//   - drain→remediation (Remediated, DrainToRemediation): from the drain
//     to the first remediation-started event of the node during the
//     period (of any part; with a Check filter, of a matching check).
//   - remediation→back in service (RemediationToService): from that
//     remediation-started to the resume ending the period.
//
// For a remediated repair drain→remediation plus remediation→back in
// service is its drain→resume time; MTTR stays the mean drain→resume time
// of all repairs, remediated or not.
//
// # Remediations
//
// A remediation is a remediation-started event in the window (one that
// started before Since is not counted, nor its end). Its end is the first
// remediation-finished or remediation-failed event after it of the same
// node, action, check and component that ends no earlier remediation;
// ends without a start are ignored. Pending are those with no end before
// Until. A finished remediation is cured when the node's next resume
// comes before Until and, between the finished event and that resume,
// the node logs no FAIL transition of the same check and component (with
// the same serial, where both name one), no rma event and no new
// remediation-started of that part. SuccessRate is finished/(finished +
// failed), CureRate cured/(finished + failed). Rows are by action, by the
// model the started event names (UnknownModel when none) and fleet-wide.
//
// # Models
//
// A GPU serial's model is the one named by the latest event (before
// Until, of any node) carrying both a serial and a model: remediation and
// rma events. ByModel sums the BySerial rows of the serials whose model
// is known: hours, episodes, drains, MTTR and its phases.
//
// # Filters and lemons
//
// Options.Node and Options.Check select nodes and checks by name or shell
// pattern (path.Match). With a Check filter, only that check's episodes,
// drains and resumes are counted; hours are unchanged.
//
// Lemons are the nodes and GPU serials with at least LemonMin episodes in
// the window, ranked by episodes (most first), then MTTF (shortest first),
// then nodes before GPUs, then by name. Share is the fraction of all the
// window's episodes; a GPU's episodes are also its node's, so node and GPU
// shares overlap.
package stats

import (
	"cmp"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/lazyre"
	"github.com/gpuhc/gpuhc/internal/policy"
)

// DefaultLemonMin is the lemon threshold when Options.LemonMin is 0.
const DefaultLemonMin = 3

// Options select what a report covers.
type Options struct {
	// Since and Until bound the window [Since, Until); zero is unbounded.
	Since, Until time.Time
	// LemonMin is the number of episodes that makes a lemon; 0 or less
	// means DefaultLemonMin.
	LemonMin int
	// Node and Check select by name or shell pattern; empty: all.
	Node, Check string
}

// Row is one line of a breakdown.
type Row struct {
	Key   string  `json:"key"`
	Hours float64 `json:"hours"`
	// Episodes opened in the window.
	Episodes int `json:"episodes"`
	// MTTF is Hours/Episodes; nil (null) with no episode or no hours.
	MTTF    *float64 `json:"mttf_hours"`
	Drains  int      `json:"drains"`
	Resumes int      `json:"resumes"`
	Repairs int      `json:"repairs"`
	// MTTR is the mean drain→resume time of the repairs; nil with none.
	MTTR *float64 `json:"mttr_hours"`
	// Phases of the repairs (see "MTTR phases"). Detected repairs are
	// those whose drain came while an episode of its check and component
	// was open; DetectToDrain is their mean first-FAIL→drain time.
	// Remediated repairs are those with a remediation started during the
	// drain; DrainToRemediation and RemediationToService are their mean
	// drain→remediation-started and remediation-started→resume times.
	// Each is nil when no repair has it.
	Detected             int      `json:"detected"`
	DetectToDrain        *float64 `json:"detect_to_drain_hours"`
	Remediated           int      `json:"remediated"`
	DrainToRemediation   *float64 `json:"drain_to_remediation_hours"`
	RemediationToService *float64 `json:"remediation_to_service_hours"`
	// Open drains: not resumed by the end of the window.
	Open int `json:"open"`
	// Nodes a GPU was seen in (BySerial and GPU lemons only), by name.
	Nodes []string `json:"nodes,omitempty"`
}

// Lemon is a node or GPU with at least LemonMin episodes.
type Lemon struct {
	Rank int `json:"rank"`
	// Kind is "node" or "gpu" (Key is then the serial).
	Kind string `json:"kind"`
	Row
	// Share of all episodes in the window, from 0 to 1.
	Share float64 `json:"share"`
}

// Window is the period a report covers.
type Window struct {
	// Since and Until as asked; nil when unbounded.
	Since *time.Time `json:"since"`
	Until *time.Time `json:"until"`
	// From and To are the first and last instants observed in the window
	// (events, and the hours heartbeats cover); nil when nothing was.
	From *time.Time `json:"from"`
	To   *time.Time `json:"to"`
}

// Filter repeats the Node and Check options.
type Filter struct {
	Node  string `json:"node,omitempty"`
	Check string `json:"check,omitempty"`
}

// Report is the statistics for one window. Breakdowns are sorted by key.
type Report struct {
	Window          Window `json:"window"`
	Filter          Filter `json:"filter"`
	LemonMin        int    `json:"lemon_min"`
	Fleet           Row    `json:"fleet"`
	ByNode          []Row  `json:"by_node"`
	ByCheck         []Row  `json:"by_check"`
	BySerial        []Row  `json:"by_serial"`
	ByComponentType []Row  `json:"by_component_type"`
	// ByModel sums the BySerial rows of the GPUs whose model an event
	// named (see "Models").
	ByModel []Row   `json:"by_model"`
	Lemons  []Lemon `json:"lemons"`
	// Remediation is the remediations' success (see "Remediations").
	Remediation Remediation `json:"remediation"`
	// Events is the number of events added that the report considered;
	// Skipped, those that could not be used (a heartbeat with hours not
	// above 0, a transition without check); Duplicates, those of Events
	// that repeated another (see "Duplicates") and were counted once.
	Events     int `json:"events"`
	Skipped    int `json:"skipped_events"`
	Duplicates int `json:"duplicate_events"`
}

// Columns heads the cells of Row.Cells, for tables and CSV.
var Columns = []string{"key", "hours", "episodes", "mttf_hours", "drains", "resumes", "repairs", "mttr_hours", "open"}

// Cells gives the row as text, in Columns order; an undefined MTTF or
// MTTR is "-".
func (r Row) Cells() []string {
	i := strconv.Itoa
	return []string{r.Key, FormatHours(&r.Hours), i(r.Episodes), FormatHours(r.MTTF), i(r.Drains), i(r.Resumes), i(r.Repairs), FormatHours(r.MTTR), i(r.Open)}
}

// FormatHours writes hours with one decimal, or "-" for nil.
func FormatHours(h *float64) string {
	if h == nil {
		return "-"
	}
	return strconv.FormatFloat(*h, 'f', 1, 64)
}

const (
	usPerHour = 3600e6
	// maxHeartbeatHours bounds a heartbeat's hours (a century): beyond it,
	// the value is garbage, and would overflow the microsecond sums.
	maxHeartbeatHours = 100 * 366 * 24
)

// record kinds, in their order at equal times: what a health check run
// logs comes in this order (a remediation is carried out before the
// run's checks).
const (
	recRemStart uint8 = iota
	recRemEnd
	recTransition
	recRMA
	recDrain
	recResume
)

// statuses
const (
	stNone uint8 = iota
	stOK
	stWarn
	stSkip
	stError
	stFail
	stOther
)

func statusCode(s string) uint8 {
	// ToUpper returns an upper-case ASCII string as it is, without copying.
	switch strings.ToUpper(s) {
	case "":
		return stNone
	case "OK":
		return stOK
	case "WARN":
		return stWarn
	case "SKIP":
		return stSkip
	case "ERROR":
		return stError
	case "FAIL":
		return stFail
	}
	return stOther
}

// rec is a transition, drain or resume kept for the report.
type rec struct {
	t                int64 // µs since the epoch
	kind             uint8
	status, previous uint8
	// transitions, remediations and rma: the event's check, component
	// and serial; drains and resumes: the check and component named in
	// the reason.
	check, comp, serial string
	// remediations: the action and the GPU model; a remediation's end has
	// status stOK (finished) or stFail (failed).
	action, model string
}

// beat is a heartbeat kept for the report, its time and hours in µs: 16
// bytes, one a day per node, the bulk of what is kept.
type beat struct{ t, us int64 }

// beatChunk is how many heartbeats a chunk holds (512 bytes). Chunks,
// not a growing slice, so that a year of daily heartbeats per node for
// 10,000 nodes takes 60 MB, not the 80 MB and the garbage of append's
// growth.
const beatChunk = 32

// beats are a node's heartbeats that list the same serials.
type beats struct {
	serials []string // nil: none
	chunks  []*[beatChunk]beat
	n       int // beats in the last chunk
}

func (b *beats) add(h beat) {
	if len(b.chunks) == 0 || b.n == beatChunk {
		b.chunks = append(b.chunks, new([beatChunk]beat))
		b.n = 0
	}
	b.chunks[len(b.chunks)-1][b.n] = h
	b.n++
}

type node struct {
	name string
	skip bool // excluded by Options.Node
	recs []rec
	// beats, by serial list; last is the index of the latest one used.
	beats []beats
	last  int
}

// Accumulator collects events for a Report.
type Accumulator struct {
	opts         Options
	since, until int64
	nodes        map[string]*node
	last         *node
	strs         map[string]string
	from, to     int64
	events       int
	skipped      int
	// models is the GPU model each serial was last named with.
	models map[string]seenModel
}

// seenModel is a serial's model and when an event named it.
type seenModel struct {
	t     int64
	model string
}

// New returns an empty Accumulator.
func New(opts Options) *Accumulator {
	if opts.LemonMin <= 0 {
		opts.LemonMin = DefaultLemonMin
	}
	a := &Accumulator{
		opts: opts, since: math.MinInt64, until: math.MaxInt64,
		nodes: map[string]*node{}, strs: map[string]string{},
		from: math.MaxInt64, to: math.MinInt64, models: map[string]seenModel{},
	}
	if !opts.Since.IsZero() {
		a.since = opts.Since.UnixMicro()
	}
	if !opts.Until.IsZero() {
		a.until = opts.Until.UnixMicro()
	}
	return a
}

// KeepsDrain reports whether Add counts ev, a drain or resume event: it
// is before Until, of a node Options.Node matches and, for a drain, the check its reason names matches
// Options.Check (a resume is kept whatever its reason: it closes
// episodes). The report's timeline draws the drains stats counts with it,
// so the page's open drains are stats' open drains under every flag.
func (a *Accumulator) KeepsDrain(ev events.Event) bool {
	if ev.Kind != events.KindDrain && ev.Kind != events.KindResume || ev.Time.UnixMicro() >= a.until || !match(a.opts.Node, ev.Node) {
		return false
	}
	if ev.Kind == events.KindDrain {
		check, _ := ReasonCheck(ev.Message)
		return match(a.opts.Check, check)
	}
	return true
}

// Remediation actions whose reasons name the check after the part:
// "gpuhc: reset-gpu: gpu3 (SN …): gpu.xid: …" (docs/remediation.md).
var actionReasons = map[string]bool{"reset-gpu": true, "reboot": true, "rma": true}

// checkName is policy's shape of a check's name.
var checkName = lazyre.New(`^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)*$`)

// ReasonCheck is the check and component a drain or resume reason names
// (policy.ParseReason), reading a remediation's or an rma's reason as the
// check it is about, and a failed remediation's as naming none.
func ReasonCheck(reason string) (check, comp string) {
	check, comp, msg, _ := policy.ParseReason(reason)
	switch {
	case actionReasons[check]:
		if c, _, ok := strings.Cut(msg, ": "); ok && checkName.MatchString(c) {
			return c, comp
		}
		return "", ""
	case check == "remediation-failed":
		return "", ""
	}
	return check, comp
}

func match(pattern, name string) bool {
	if pattern == "" {
		return true
	}
	ok, err := path.Match(pattern, name)
	if err != nil {
		return pattern == name
	}
	return ok
}

func (a *Accumulator) node(name string) *node {
	if a.last != nil && a.last.name == name {
		return a.last
	}
	n := a.nodes[name]
	if n == nil {
		n = &node{name: name, skip: !match(a.opts.Node, name), last: -1}
		a.nodes[name] = n
	}
	a.last = n
	return n
}

func (a *Accumulator) intern(s string) string {
	if v, ok := a.strs[s]; ok {
		return v
	}
	s = strings.Clone(s)
	a.strs[s] = s
	return s
}

func (a *Accumulator) observe(lo, hi int64) {
	a.from = min(a.from, lo)
	a.to = max(a.to, hi)
}

// Add takes one event. Kinds other than heartbeat, transition, drain,
// resume, remediation and rma are ignored.
func (a *Accumulator) Add(ev events.Event) {
	if ev.Node == "" || ev.Time.IsZero() {
		a.skipped++
		return
	}
	t := ev.Time.UnixMicro()
	if ev.Serial != "" && ev.Model != "" && t < a.until {
		a.learnModel(t, ev.Serial, ev.Model)
	}
	n := a.node(ev.Node)
	if n.skip {
		return
	}
	switch ev.Kind {
	case events.KindHeartbeat:
		a.heartbeat(n, t, ev)
	case events.KindTransition:
		if t >= a.until {
			return
		}
		if ev.Check == "" {
			a.skipped++
			return
		}
		if !match(a.opts.Check, ev.Check) {
			return
		}
		a.events++
		n.recs = append(n.recs, rec{t: t, kind: recTransition, status: statusCode(ev.Status), previous: statusCode(ev.Previous),
			check: ev.Check, comp: ev.Component, serial: ev.Serial})
		if t >= a.since {
			a.observe(t, t)
		}
	case events.KindRemediationStarted, events.KindRemediationFinished, events.KindRemediationFailed, events.KindRMA:
		a.remediation(n, t, ev)
	case events.KindDrain, events.KindResume:
		if !a.KeepsDrain(ev) {
			return
		}
		check, comp := ReasonCheck(ev.Message)
		kind := recDrain
		if ev.Kind == events.KindResume {
			kind = recResume
		}
		a.events++
		n.recs = append(n.recs, rec{t: t, kind: kind, check: a.intern(check), comp: a.intern(comp)})
		if t >= a.since {
			a.observe(t, t)
		}
	}
}

func (a *Accumulator) heartbeat(n *node, t int64, ev events.Event) {
	if !(ev.Hours > 0) || ev.Hours > maxHeartbeatHours {
		a.skipped++
		return
	}
	us := int64(math.Round(ev.Hours * usPerHour))
	lo, hi := max(t-us, a.since), min(t, a.until)
	if hi <= lo {
		return // nothing in the window
	}
	a.events++
	a.observe(lo, hi)
	a.beatsOf(n, ev.Serials).add(beat{t: t, us: us})
}

// beatsOf is the node's heartbeats that list serials, added if new.
func (a *Accumulator) beatsOf(n *node, serials []string) *beats {
	if len(serials) == 0 {
		serials = nil
	}
	eq := func(b beats) bool { return slices.Equal(b.serials, serials) }
	if n.last >= 0 && eq(n.beats[n.last]) {
		return &n.beats[n.last]
	}
	i := slices.IndexFunc(n.beats, eq)
	if i < 0 {
		var set []string
		if serials != nil {
			set = make([]string, len(serials))
			for k, s := range serials {
				set[k] = a.intern(s)
			}
		}
		i = len(n.beats)
		n.beats = append(n.beats, beats{serials: set})
	}
	n.last = i
	return &n.beats[i]
}

// ComponentType is a component's kind: the component without its index.
//
//	gpu3 → gpu, nvswitch0 → nvswitch, mlx5_2/1 → mlx5, ib0 → ib,
//	host → host, /scratch (a mount point) → mount
//
// That is: a path is "mount"; otherwise everything from the first "/"
// (a port) is cut, then a trailing "_N" or "-N" index, else trailing
// digits. A component that is all digits is kept whole.
func ComponentType(component string) string {
	if strings.HasPrefix(component, "/") {
		return "mount"
	}
	c, _, _ := strings.Cut(component, "/")
	end := len(c)
	for end > 0 && c[end-1] >= '0' && c[end-1] <= '9' {
		end--
	}
	if end == len(c) || end == 0 {
		return c
	}
	if end > 1 && (c[end-1] == '_' || c[end-1] == '-') {
		return c[:end-1]
	}
	return c[:end]
}

// setBeat is a heartbeat with the index of its serial list in node.beats.
type setBeat struct {
	beat
	set int
}

// uniqueBeats appends the node's heartbeats to out, sorted by time and
// hours, each (time, hours) once, and returns them with the number of
// duplicates left out. Of heartbeats that differ only in their serials,
// the one with the least serial list is kept, whatever the order they
// were added in.
func (n *node) uniqueBeats(out []setBeat) ([]setBeat, int) {
	for i, b := range n.beats {
		for c, chunk := range b.chunks {
			k := beatChunk
			if c == len(b.chunks)-1 {
				k = b.n
			}
			for _, h := range chunk[:k] {
				out = append(out, setBeat{h, i})
			}
		}
	}
	slices.SortFunc(out, func(x, y setBeat) int {
		if c := cmp.Compare(x.t, y.t); c != 0 {
			return c
		}
		if c := cmp.Compare(x.us, y.us); c != 0 {
			return c
		}
		if x.set == y.set {
			return 0
		}
		// distinct lists, none empty but nil (which sorts first)
		return slices.Compare(n.beats[x.set].serials, n.beats[y.set].serials)
	})
	kept := out[:0]
	for _, h := range out {
		if len(kept) > 0 && kept[len(kept)-1].beat == h.beat {
			continue
		}
		kept = append(kept, h)
	}
	return kept, len(out) - len(kept)
}

func lemons(rep Report, minEpisodes int) []Lemon {
	out := []Lemon{}
	add := func(kind string, rows []Row) {
		for _, r := range rows {
			if r.Episodes >= minEpisodes {
				out = append(out, Lemon{Kind: kind, Row: r, Share: float64(r.Episodes) / float64(rep.Fleet.Episodes)})
			}
		}
	}
	add("node", rep.ByNode)
	add("gpu", rep.BySerial)
	mttf := func(r Row) float64 {
		if r.MTTF == nil {
			return math.Inf(1)
		}
		return *r.MTTF
	}
	slices.SortFunc(out, func(x, y Lemon) int {
		return cmp.Or(cmp.Compare(y.Episodes, x.Episodes), cmp.Compare(mttf(x.Row), mttf(y.Row)),
			strings.Compare(y.Kind, x.Kind), strings.Compare(x.Key, y.Key))
	})
	for i := range out {
		out[i].Rank = i + 1
	}
	return out
}
