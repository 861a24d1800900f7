// Package fleetgen writes a synthetic fleet's gpuhc event logs, and returns
// the ground truth it generated, for testing and benchmarking the
// statistics (internal/stats) against numbers known in advance.
//
// Output is deterministic: the same Params give byte-identical files and
// the same Truth, whatever the machine (seeded PCG generators, no wall
// clock, one generator per node so that nodes can be written in parallel).
//
// Each node gets a log as the health check would write it, rotated by size
// into one directory, next to the other nodes' logs (as a site's log
// shipping collects them):
//
//	<node>.events.jsonl       current
//	<node>.events.jsonl.1     previous, plain
//	<node>.events.jsonl.N.gz  older, gzip (N = 2, 3, ...)
//
// with heartbeats every Params.Heartbeat (hours observed, GPU serials),
// and failure incidents: a transition to FAIL (from OK, ERROR, or
// first-seen), repeated detections (FAIL→FAIL with another message), ERROR
// blips, a drain (or a drain-suppressed event, or no drain), the recovery
// (to OK, or WARN) and the resume; sometimes a second component failing
// during a drain, or an admin resuming a still-failing node which the
// health check then drains again.
//
// The truth follows docs/architecture.md#episodes, written here from the
// scenario rather than from the lines: an episode begins with a component's
// first FAIL after healthy (an incident's first FAIL, whether logged after
// OK, after an ERROR that followed OK, or first seen) and ends at its
// recovery or at the node's resume, whichever comes first. An admin's
// resume of a node whose component still fails ends the episode but does
// not re-arm the component: the FAIL lines that follow (FAIL→FAIL, or an
// ERROR→FAIL blip) belong to no episode, and only the recovery to a healthy
// status lets a later incident open a new one. Special nodes: node 0 never
// fails; a GPU of node 1 fails repeatedly, is moved to node 2 half-way and
// fails there too; node 1's current log has a torn line in the middle and a
// torn last line; Params.LemonNodes nodes fail LemonFactor times as often.
//
// Drains come up to two health check runs (0, 5 or 10 minutes) after the
// FAIL that opened the episode. Half of the drained GPU failures (not
// those an admin resumes) are remediated, as docs/remediation.md says:
// the component's action (gpu.ecc: reset-gpu, gpu.xid: reboot) starts a
// few runs after the drain and finishes or fails. Most that finish cure
// the GPU (back to OK a minute later, resumed ten minutes after); some
// finish and the GPU fails again; a failed remediation leaves the node to
// an admin, who resumes it once the part is fixed. Node 3 has a GPU
// failure escalated to rma after its remediation, never resumed (the node
// fails no more); node 4 the same, resumed by hand two days later.
package fleetgen

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
)

// Params describe the fleet.
type Params struct {
	Nodes       int
	GPUsPerNode int
	Days        int
	// Start is when the logs begin (default 2025-01-01T00:00:00Z).
	Start time.Time
	// FailureRate is incidents per node per year on an ordinary node.
	FailureRate float64
	// LemonNodes fail LemonFactor (default 10) times as often.
	LemonNodes  int
	LemonFactor float64
	Seed        uint64
	// RotateBytes rotates a node's log when the next line would take it
	// over this size; 0: never.
	RotateBytes int
	// Heartbeat is the heartbeat interval (default 24h).
	Heartbeat time.Duration
}

// Defaults is a small fleet: 16 nodes of 8 GPUs for 60 days.
func Defaults() Params {
	return Params{Nodes: 16, GPUsPerNode: 8, Days: 60, FailureRate: 6, LemonNodes: 1, LemonFactor: 10, Seed: 1, RotateBytes: 8 << 10, Heartbeat: 24 * time.Hour}
}

// Truth is what was generated, to check the statistics against.
type Truth struct {
	Start, End time.Time // the logs cover [Start, End)
	Nodes      []NodeTruth
	// Episodes and Drains in time order per node, nodes in order.
	Episodes []Episode
	Drains   []Drain
	// Tenures say which GPU serial sat in which node when.
	Tenures []Tenure
	// Remediations in time order per node, nodes in order; RMAs, the
	// escalations.
	Remediations []Remediation
	RMAs         []RMA
	// Models are the GPU models that remediation and rma events name, by
	// serial.
	Models map[string]string
	Moved  Move
	// Quiet is a node that never fails; Lemons, the nodes made to fail
	// more often.
	Quiet  string
	Lemons []string
	// What was written.
	Files      int
	Lines      int   // all lines, torn ones included
	Heartbeats int   // heartbeat lines
	Bytes      int64 // uncompressed
	DiskBytes  int64
	// TornLines are the malformed lines written on purpose: readers warn
	// about and skip them.
	TornLines int
	// Spanning is the number of episodes whose first and last lines are
	// in different files (rotation).
	Spanning int
}

// NodeTruth is a node's observed period: its heartbeats cover
// [From, To] exactly.
type NodeTruth struct {
	Name     string
	From, To time.Time
}

// Episode is one failure of one component.
type Episode struct {
	Node, Check, Component, Serial string
	Start                          time.Time
	// End is when it closed (recovery or resume); zero if still open
	// when the log ends.
	End time.Time
}

// Drain is one drain period.
type Drain struct {
	Node, Check, Component, Serial string
	Drain                          time.Time
	// Resume is zero for a node still drained when the log ends.
	Resume time.Time
	// Detect is the first FAIL of the episode open when the drain came;
	// zero when none was (a re-drain after an admin's resume).
	Detect time.Time
	// Remedy is when the period's remediation started; zero: none.
	Remedy time.Time
}

// Remediation is one remediation of a drained GPU.
type Remediation struct {
	Node, Check, Component, Serial, Model, Action string
	Start                                         time.Time
	// End is when it finished, or failed (Failed); zero when not logged
	// before the log ends.
	End    time.Time
	Failed bool
	// Cured is the resume that put the GPU back in service with no FAIL
	// of it after the remediation finished; zero: not cured (or not by
	// the end of the log).
	Cured time.Time
}

// RMA is an escalation to a return to the vendor.
type RMA struct {
	Node, Check, Component, Serial, PCI, Model, Driver string
	Time                                               time.Time
	Remediations                                       int
	// Resumed is the admin's resume after it; zero: still in force.
	Resumed time.Time
}

// Tenure is a GPU's stay in a node: heartbeats of Node ending in
// (From, To] list Serial.
type Tenure struct {
	Serial, Node string
	From, To     time.Time
}

// Move is the GPU moved from one node to another.
type Move struct {
	Serial, From, To   string
	Removed, Installed time.Time
}

// NodeName is node i's name.
func NodeName(i int) string { return fmt.Sprintf("gpu%05d", i+1) }

func serialOf(node, slot, gpus int) string { return fmt.Sprintf("16509%08d", node*gpus+slot) }

// replacementSerial is the spare put into the moved GPU's old slot.
const replacementSerial = "1651900000000"

// plan is what is decided for the whole fleet before nodes are generated.
type plan struct {
	p          Params
	start, end int64 // Unix seconds
	begin      []int64
	lemon      []bool
	move       Move
	moveSlotTo int
}

func (p *Params) fill() error {
	if p.Start.IsZero() {
		p.Start = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if p.Heartbeat <= 0 {
		p.Heartbeat = 24 * time.Hour
	}
	if p.LemonFactor <= 0 {
		p.LemonFactor = 10
	}
	switch {
	case p.Nodes < 1:
		return fmt.Errorf("fleetgen: %d nodes", p.Nodes)
	case p.Days < 1:
		return fmt.Errorf("fleetgen: %d days", p.Days)
	case p.GPUsPerNode < 0 || p.FailureRate < 0 || p.LemonNodes < 0 || p.RotateBytes < 0:
		return fmt.Errorf("fleetgen: negative parameter in %+v", *p)
	case p.Heartbeat%time.Second != 0:
		return fmt.Errorf("fleetgen: heartbeat %v is not whole seconds", p.Heartbeat)
	}
	return nil
}

// Generate writes the fleet's logs into dir (created if needed) and returns
// the truth.
func Generate(dir string, p Params) (*Truth, error) {
	if err := p.fill(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	pl := newPlan(p)
	results := make([]nodeResult, p.Nodes)
	var (
		wg   sync.WaitGroup
		next = make(chan int)
		errs = make([]error, p.Nodes)
	)
	for range max(runtime.GOMAXPROCS(0), 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &writer{}
			for i := range next {
				results[i], errs[i] = pl.node(i).write(dir, w)
			}
		}()
	}
	for i := range p.Nodes {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	t := &Truth{Start: p.Start.UTC(), End: time.Unix(pl.end, 0).UTC(), Moved: pl.move, Quiet: NodeName(0), Models: map[string]string{}}
	for i, r := range results {
		t.Nodes = append(t.Nodes, NodeTruth{Name: NodeName(i), From: time.Unix(pl.begin[i], 0).UTC(), To: t.End})
		t.Episodes = append(t.Episodes, r.episodes...)
		t.Drains = append(t.Drains, r.drains...)
		t.Tenures = append(t.Tenures, r.tenures...)
		t.Remediations = append(t.Remediations, r.remediations...)
		t.RMAs = append(t.RMAs, r.rmas...)
		for _, x := range r.remediations {
			t.Models[x.Serial] = x.Model
		}
		if pl.lemon[i] {
			t.Lemons = append(t.Lemons, NodeName(i))
		}
		t.Files += r.files
		t.Lines += r.lines
		t.Heartbeats += r.heartbeats
		t.Bytes += r.bytes
		t.DiskBytes += r.diskBytes
		t.TornLines += r.torn
		t.Spanning += r.spanning
	}
	return t, nil
}

func newPlan(p Params) *plan {
	rng := rand.New(rand.NewPCG(p.Seed, 0x666c656574))
	pl := &plan{p: p, start: p.Start.Unix()}
	pl.end = pl.start + int64(p.Days)*86400
	pl.begin = make([]int64, p.Nodes)
	for i := range pl.begin {
		pl.begin[i] = pl.start + rng.Int64N(86400)
	}
	pl.lemon = make([]bool, p.Nodes)
	if p.Nodes > 3 {
		for k, i := range rng.Perm(p.Nodes - 3) {
			if k >= p.LemonNodes {
				break
			}
			pl.lemon[3+i] = true
		}
	}
	if p.Nodes >= 3 && p.GPUsPerNode > 0 && p.Days >= 4 {
		hb := int64(p.Heartbeat / time.Second)
		// Removed at node 1's heartbeat nearest half-way, installed at
		// node 2's first heartbeat a day later: both ends fall on
		// heartbeats, so heartbeat hours split exactly.
		mid := pl.start + (pl.end-pl.start)/2
		removed := pl.begin[1] + max((mid-pl.begin[1])/hb, 1)*hb
		installed := pl.begin[2] + ((removed+86400-pl.begin[2])/hb+1)*hb
		if installed < pl.end {
			pl.moveSlotTo = p.GPUsPerNode - 1
			pl.move = Move{Serial: serialOf(1, 0, p.GPUsPerNode), From: NodeName(1), To: NodeName(2),
				Removed: time.Unix(removed, 0).UTC(), Installed: time.Unix(installed, 0).UTC()}
		}
	}
	return pl
}

// gen builds one node's log.
type gen struct {
	pl      *plan
	i       int
	name    string
	rng     *rand.Rand
	boot    string
	evs     []genEvent
	res     nodeResult
	episode int      // next episode id
	base    []string // serials without the move
}

// genEvent is an event with what the truth needs to know about its line.
type genEvent struct {
	ev      events.Event
	seq     int
	episode int    // episode id +1 the line opens or closes; 0: none
	raw     []byte // a torn fragment instead of ev
}

type nodeResult struct {
	episodes                       []Episode
	drains                         []Drain
	tenures                        []Tenure
	remediations                   []Remediation
	rmas                           []RMA
	files, lines, heartbeats, torn int
	bytes, diskBytes               int64
	spanning                       int
}

func (pl *plan) node(i int) *gen {
	g := &gen{pl: pl, i: i, name: NodeName(i), rng: rand.New(rand.NewPCG(pl.p.Seed, uint64(i)+1))}
	g.boot = fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", g.rng.Uint32(), g.rng.IntN(1<<16), g.rng.IntN(1<<12), g.rng.IntN(1<<12), g.rng.Int64N(1<<48))
	return g
}

// serials gives the GPU serials in the node at time t (Unix seconds); at a
// move's instant, the GPU is still in its old node and not yet in the new.
func (g *gen) serials(t int64) []string {
	if g.base == nil {
		for s := range g.pl.p.GPUsPerNode {
			g.base = append(g.base, serialOf(g.i, s, g.pl.p.GPUsPerNode))
		}
	}
	if mv := g.pl.move; mv.Serial != "" && (g.i == 1 || g.i == 2) {
		out := slices.Clone(g.base)
		for s := range out {
			out[s] = g.serialAt(s, t)
		}
		return out
	}
	return g.base
}

func (g *gen) serialAt(slot int, t int64) string {
	p, mv := g.pl.p, g.pl.move
	if mv.Serial != "" {
		switch {
		case g.i == 1 && slot == 0 && t > mv.Removed.Unix():
			return replacementSerial
		case g.i == 2 && slot == g.pl.moveSlotTo && t > mv.Installed.Unix():
			return mv.Serial
		}
	}
	return serialOf(g.i, slot, p.GPUsPerNode)
}

func (g *gen) tenures() {
	p, mv := g.pl.p, g.pl.move
	from, end := time.Unix(g.pl.begin[g.i], 0).UTC(), time.Unix(g.pl.end, 0).UTC()
	for s := range p.GPUsPerNode {
		switch {
		case mv.Serial != "" && g.i == 1 && s == 0:
			g.res.tenures = append(g.res.tenures, Tenure{mv.Serial, g.name, from, mv.Removed}, Tenure{replacementSerial, g.name, mv.Removed, end})
		case mv.Serial != "" && g.i == 2 && s == g.pl.moveSlotTo:
			g.res.tenures = append(g.res.tenures, Tenure{serialOf(g.i, s, p.GPUsPerNode), g.name, from, mv.Installed}, Tenure{mv.Serial, g.name, mv.Installed, end})
		default:
			g.res.tenures = append(g.res.tenures, Tenure{serialOf(g.i, s, p.GPUsPerNode), g.name, from, end})
		}
	}
}

func (g *gen) add(t int64, ev events.Event, episode int) {
	if t >= g.pl.end {
		return
	}
	ev.Time = time.Unix(t, 0).UTC()
	ev.Node = g.name
	ev.BootID = g.boot
	g.evs = append(g.evs, genEvent{ev: ev, seq: len(g.evs), episode: episode})
}

func (g *gen) heartbeats() {
	hb := int64(g.pl.p.Heartbeat / time.Second)
	last := g.pl.begin[g.i]
	for t := last + hb; ; t += hb {
		if t > g.pl.end {
			t = g.pl.end
		}
		if t <= last {
			break
		}
		ev := events.Event{Kind: events.KindHeartbeat, By: "healthcheck", Hours: float64(t-last) / 3600}
		if g.pl.p.GPUsPerNode > 0 {
			ev.Serials = g.serials(t)
		}
		// add drops events at or after the end; the last heartbeat is
		// exactly at the end and must be kept.
		ev.Time, ev.Node, ev.BootID = time.Unix(t, 0).UTC(), g.name, g.boot
		g.evs = append(g.evs, genEvent{ev: ev, seq: len(g.evs)})
		g.res.heartbeats++
		last = t
	}
}

// key is a failing component.
type key struct {
	check, comp string
	slot        int // GPU slot, -1 for none
	msgs        []string
	action      string
}

var hostKeys = []key{
	{"ib.link", "mlx5_%d/1", -2, []string{"state DOWN, want ACTIVE", "rate 200 Gb/sec < 400 Gb/sec", "symbol_error +1200 since last run"}, "drain"},
	{"gpu.fabric", "nvswitch%d", -3, []string{"fabric state IN_PROGRESS", "NVLink 12 inactive"}, "reboot"},
	{"host.mounts", "/scratch", -1, []string{"/scratch: not mounted", "/scratch: read-only", "/scratch: did not answer in 5s"}, "drain"},
	{"host.thermal", "host", -1, []string{"CPU 97 °C ≥ 95 °C", "inlet 45 °C ≥ 42 °C"}, "drain"},
}

var gpuKeys = []key{
	{"gpu.ecc", "gpu%d", 0, []string{"volatile DBE 2 > 0", "row remap pending", "retired pages 64 ≥ 60"}, "reset-gpu"},
	{"gpu.xid", "gpu%d", 0, []string{"Xid 79: GPU has fallen off the bus", "Xid 48: DBE", "Xid 119: GSP timeout"}, "reboot"},
}

func (g *gen) pickKey(t int64, forceSlot int) (key, string) {
	p := g.pl.p
	var k key
	if forceSlot >= 0 {
		k = gpuKeys[g.rng.IntN(len(gpuKeys))]
		k.slot = forceSlot
	} else {
		n := len(hostKeys)
		if p.GPUsPerNode > 0 {
			n += 4 // GPU failures are the most common
		}
		c := g.rng.IntN(n)
		if c < len(hostKeys) {
			k = hostKeys[c]
		} else {
			k = gpuKeys[c%len(gpuKeys)]
			k.slot = g.rng.IntN(p.GPUsPerNode)
		}
	}
	serial := ""
	switch {
	case k.slot >= 0:
		serial = g.serialAt(k.slot, t)
		k.comp = fmt.Sprintf(k.comp, k.slot)
	case k.slot == -2:
		k.comp = fmt.Sprintf(k.comp, g.rng.IntN(8))
	case k.slot == -3:
		k.comp = fmt.Sprintf(k.comp, g.rng.IntN(4))
	}
	return k, serial
}

func (g *gen) tr(t int64, k key, serial, prev, status, msg string, episode int) {
	g.add(t, events.Event{Kind: events.KindTransition, Check: k.check, Component: k.comp, Serial: serial,
		Status: status, Previous: prev, Message: msg, Action: k.action}, episode)
}

func (g *gen) drainEv(t int64, kind, reason, by string, episode int) {
	g.add(t, events.Event{Kind: kind, Message: reason, Backend: "rest", By: by}, episode)
}

func (g *gen) newEpisode(k key, serial string, start int64) int {
	if start >= g.pl.end {
		return 0
	}
	g.res.episodes = append(g.res.episodes, Episode{Node: g.name, Check: k.check, Component: k.comp, Serial: serial, Start: time.Unix(start, 0).UTC()})
	g.episode++
	return g.episode
}

func (g *gen) endEpisode(id int, t int64) {
	if id > 0 && t < g.pl.end {
		g.res.episodes[id-1].End = time.Unix(t, 0).UTC()
	}
}

// drainPeriod records a drain period from..to, detected at detect and
// remediated from remedy (0: none).
func (g *gen) drainPeriod(k key, serial string, from, to, detect, remedy int64) {
	if from >= g.pl.end {
		return
	}
	d := Drain{Node: g.name, Check: k.check, Component: k.comp, Serial: serial, Drain: time.Unix(from, 0).UTC(),
		Detect: g.logged(detect), Remedy: g.logged(remedy)}
	if to < g.pl.end {
		d.Resume = time.Unix(to, 0).UTC()
	}
	g.res.drains = append(g.res.drains, d)
}

// logged is t as a time when it is in the log (before its end), else zero.
func (g *gen) logged(t int64) time.Time {
	if t <= 0 || t >= g.pl.end {
		return time.Time{}
	}
	return time.Unix(t, 0).UTC()
}

// incident writes one failure starting at t0 and returns when the node is
// back to normal.
func (g *gen) incident(t0 int64, forceSlot int, rma bool) int64 {
	r := g.rng
	k, serial := g.pickKey(t0, forceSlot)
	msg := func() string { return k.msgs[r.IntN(len(k.msgs))] }
	first := msg()
	reason := fmt.Sprintf("gpuhc: %s: %s: %s", k.check, k.comp, first)
	// repair time: 20 min + exponential, mean about 12 h, at most 10 days
	d := 1200 + min(int64(r.ExpFloat64()*12*3600), 10*86400)
	t1 := t0 + d

	ep := g.newEpisode(k, serial, t0)
	prev := "OK"
	switch x := r.IntN(10); {
	case x == 0:
		prev = "" // first seen failing (state file lost, or first run)
	case x == 1 && t0-300 > g.pl.begin[g.i]:
		prev = "ERROR"
		g.tr(t0-300, k, serial, "OK", "ERROR", "timed out after 10s", 0)
	}
	g.tr(t0, k, serial, prev, "FAIL", first, ep)

	mode := r.IntN(100)
	if rma {
		mode = 0
	}
	drained := mode < 85
	// the drain comes up to two runs after the FAIL
	tD := t0 + 300*int64(r.IntN(3))
	switch {
	case drained:
		g.drainEv(tD, events.KindDrain, reason, "healthcheck", 0)
	case mode < 92:
		g.drainEv(tD, events.KindDrainSuppressed, "12 of 100 nodes already drained by gpuhc (limit 10%); not draining: "+reason, "healthcheck", 0)
	}
	variant := r.IntN(100)
	admin := drained && variant < 7 && !rma
	remedy := rma || drained && !admin && k.slot >= 0 && r.IntN(2) == 0
	// repeated detections, another message each time
	for j, n := 0, r.IntN(4); j < n && !remedy; j++ {
		g.tr(t0+int64(j+1)*d/int64(n+2), k, serial, "FAIL", "FAIL", msg()+fmt.Sprintf(" (run %d)", j+2), 0)
	}
	end := t1 + 600
	switch {
	case remedy:
		inc := remedyIncident{k: k, serial: serial, reason: reason, t0: t0, tD: tD, t1: t1, ep: ep, rma: rma}
		if end = g.remediated(inc); end >= g.pl.end {
			return end
		}
	case admin:
		// An admin resumes the still-failing node (ending the episode);
		// the next health check run drains it again: no new episode, the
		// component never having been healthy in between.
		tr := t0 + d/2
		g.drainEv(tr, events.KindResume, reason, "gpuhc-drain:root", ep)
		g.endEpisode(ep, tr)
		g.drainPeriod(k, serial, tD, tr, t0, 0)
		g.drainEv(tr+300, events.KindDrain, reason, "healthcheck", 0)
		if variant%2 == 0 && tr+900 < t1 {
			// An ERROR blip after the resume: the FAIL that follows is the
			// same failure, still no new episode.
			g.tr(tr+600, k, serial, "FAIL", "ERROR", "NVML did not answer in 5s", 0)
			g.tr(tr+900, k, serial, "ERROR", "FAIL", msg(), 0)
		}
		g.tr(t1, k, serial, "FAIL", "OK", "", 0)
		g.drainEv(t1+600, events.KindResume, reason, "healthcheck", 0)
		g.drainPeriod(k, serial, tr+300, t1+600, 0, 0)
	default:
		if variant < 17 && t0+d/3+300 < t1 {
			// could not check for a while: neither ends nor opens
			g.tr(t0+d/3, k, serial, "FAIL", "ERROR", "NVML did not answer in 5s", 0)
			g.tr(t0+d/3+300, k, serial, "ERROR", "FAIL", msg(), 0)
		}
		if drained && variant >= 17 && variant < 25 {
			// a second component fails while the node is drained
			var k2 key
			var s2 string
			for k2, s2 = g.pickKey(t0, -1); k2.check == k.check && k2.comp == k.comp; k2, s2 = g.pickKey(t0, -1) {
			}
			ep2 := g.newEpisode(k2, s2, t0+d/4)
			g.tr(t0+d/4, k2, s2, "OK", "FAIL", k2.msgs[0], ep2)
			g.tr(t0+d/2, k2, s2, "FAIL", "OK", "", ep2)
			g.endEpisode(ep2, t0+d/2)
		}
		status := "OK"
		if variant >= 25 && variant < 30 {
			status = "WARN" // recovers to WARN: also ends the episode
			g.tr(t1+3600, k, serial, "WARN", "OK", "", 0)
			end = t1 + 3600
		}
		g.tr(t1, k, serial, "FAIL", status, "", ep)
		g.endEpisode(ep, t1)
		if drained {
			g.drainEv(t1+600, events.KindResume, reason, "healthcheck", 0)
			g.drainPeriod(k, serial, tD, t1+600, t0, 0)
		}
	}
	if r.IntN(30) == 0 {
		g.drainEv(end+900, events.KindDrainSkipped, "Not responding", "healthcheck", 0)
		end += 900
	}
	return end
}

// incidents lays out the node's failures.
func (g *gen) incidents() {
	p := g.pl.p
	if g.i == 0 || p.FailureRate == 0 {
		return // the quiet node
	}
	rate := p.FailureRate / (365.25 * 86400) // per second
	if g.pl.lemon[g.i] {
		rate *= p.LemonFactor
	}
	// The moved GPU fails twice in each node.
	var forced []int64
	forceSlot := -1
	if mv := g.pl.move; mv.Serial != "" {
		switch from, to := g.pl.begin[g.i], mv.Removed.Unix(); g.i {
		case 1:
			forced = []int64{from + (to-from)/4, from + (to-from)/2}
			forceSlot = 0
		case 2:
			from, to = mv.Installed.Unix(), g.pl.end
			forced = []int64{from + (to-from)/4, from + (to-from)/2}
			forceSlot = g.pl.moveSlotTo
		}
	}
	// Nodes 3 and 4 have a GPU failure escalated to rma two thirds in.
	rmaAt := int64(math.MaxInt64)
	if (g.i == 3 || g.i == 4) && p.Nodes > 4 && p.GPUsPerNode > 1 {
		rmaAt = g.pl.begin[g.i] + (g.pl.end-g.pl.begin[g.i])*2/3
	}
	t := g.pl.begin[g.i]
	for {
		next := int64(math.MaxInt64)
		if rate > 0 {
			next = t + 1 + int64(g.rng.ExpFloat64()/rate)
		}
		slot, rma := -1, false
		if len(forced) > 0 && forced[0] <= next {
			next, slot = max(forced[0], t+1), forceSlot
			forced = forced[1:]
		}
		if rmaAt <= next {
			next, slot, rma = max(rmaAt, t+1), 1, true
			rmaAt = math.MaxInt64
		}
		if next >= g.pl.end {
			return
		}
		t = g.incident(next, slot, rma) + 1800
	}
}

// writer holds a worker's reusable buffers.
type writer struct {
	zbuf bytes.Buffer
	zw   *gzip.Writer
}

func (g *gen) write(dir string, w *writer) (nodeResult, error) {
	g.tenures()
	g.heartbeats()
	g.incidents()
	slices.SortStableFunc(g.evs, func(a, b genEvent) int { return cmp.Compare(a.ev.Time.Unix(), b.ev.Time.Unix()) })
	// Node 1 has torn lines: one mid-file (a killed writer; the next
	// append ended it with a newline), one at the very end.
	if g.i == 1 && len(g.evs) > 2 {
		frag := func() []byte {
			b, _ := json.Marshal(g.evs[len(g.evs)/2].ev)
			return b[:len(b)/2]
		}
		mid := len(g.evs) - 2
		g.evs = slices.Insert(g.evs, mid, genEvent{raw: frag()})
		g.evs = append(g.evs, genEvent{raw: frag()})
		g.res.torn = 2
	}
	// lines, cut into files
	var (
		segs     [][]byte
		cur      []byte
		segOf    = map[int][2]int{} // episode -> first and last segment
		last     = len(g.evs) - 1
		maxBytes = g.pl.p.RotateBytes
	)
	for n, e := range g.evs {
		line := e.raw
		if line == nil {
			b, err := json.Marshal(e.ev)
			if err != nil {
				return g.res, err
			}
			line = append(b, '\n')
		} else if n != last {
			line = append(line, '\n')
		}
		if maxBytes > 0 && len(cur) > 0 && len(cur)+len(line) > maxBytes {
			segs = append(segs, cur)
			cur = nil
		}
		cur = append(cur, line...)
		g.res.lines++
		g.res.bytes += int64(len(line))
		if e.episode > 0 {
			s, ok := segOf[e.episode]
			if !ok {
				s[0] = len(segs)
			}
			s[1] = len(segs)
			segOf[e.episode] = s
		}
	}
	segs = append(segs, cur)
	for _, s := range segOf {
		if s[0] != s[1] {
			g.res.spanning++
		}
	}
	base := filepath.Join(dir, g.name+".events.jsonl")
	for k := range segs {
		data := segs[len(segs)-1-k]
		name := base
		switch {
		case k == 1:
			name = base + ".1"
		case k >= 2:
			name = fmt.Sprintf("%s.%d.gz", base, k)
			w.zbuf.Reset()
			if w.zw == nil {
				w.zw, _ = gzip.NewWriterLevel(&w.zbuf, gzip.BestSpeed)
			} else {
				w.zw.Reset(&w.zbuf)
			}
			if _, err := w.zw.Write(data); err != nil {
				return g.res, err
			}
			if err := w.zw.Close(); err != nil {
				return g.res, err
			}
			data = w.zbuf.Bytes()
		}
		if err := os.WriteFile(name, data, 0o644); err != nil {
			return g.res, err
		}
		g.res.files++
		g.res.diskBytes += int64(len(data))
	}
	return g.res, nil
}
