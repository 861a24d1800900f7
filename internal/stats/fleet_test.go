package stats_test

// MTTF correctness: a synthetic fleet (internal/fleetgen) is written to
// disk, read back with events.Scan and counted by the Accumulator; the
// expected numbers are computed here from the generator's ground truth
// alone, with integer seconds, and must match.

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/fleetgen"
	"github.com/gpuhc/gpuhc/internal/stats"
)

// expectRow is a row computed from the truth, hours in seconds.
type expectRow struct {
	secs                                     int64
	episodes, drains, resumes, repairs, open int
	repairSecs                               int64
	nodes                                    map[string]bool
	// MTTR phases of the repairs
	detected, remediated         int
	detectSecs, d2rSecs, r2sSecs int64
}

type expected struct {
	fleet                             expectRow
	node, check, ctype, serial, model map[string]*expectRow
	rem                               map[string]*remExpect // "fleet", "action/<a>", "model/<m>"
}

// remExpect is a remediation row computed from the truth.
type remExpect struct{ started, finished, failed, cured int }

func get(m map[string]*expectRow, k string) *expectRow {
	if m[k] == nil {
		m[k] = &expectRow{nodes: map[string]bool{}}
	}
	return m[k]
}

// overlap is the length in seconds of [a, b] ∩ [since, until) (zero
// bounds: open).
func overlap(a, b, since, until time.Time) int64 {
	if !since.IsZero() && a.Before(since) {
		a = since
	}
	if !until.IsZero() && b.After(until) {
		b = until
	}
	if !b.After(a) {
		return 0
	}
	return int64(b.Sub(a) / time.Second)
}

func inWindow(t, since, until time.Time) bool {
	return (since.IsZero() || !t.Before(since)) && (until.IsZero() || t.Before(until))
}

// componentType, written again from the generator's component names.
var typeRE = regexp.MustCompile(`^(gpu|nvswitch|mlx5)(_?[0-9]+)(/[0-9]+)?$`)

func componentType(c string) string {
	if strings.HasPrefix(c, "/") {
		return "mount"
	}
	if m := typeRE.FindStringSubmatch(c); m != nil {
		return m[1]
	}
	return c
}

func expect(tr *fleetgen.Truth, since, until time.Time) *expected {
	e := &expected{node: map[string]*expectRow{}, check: map[string]*expectRow{}, ctype: map[string]*expectRow{},
		serial: map[string]*expectRow{}, model: map[string]*expectRow{}, rem: map[string]*remExpect{}}
	cover := map[string]fleetgen.NodeTruth{}
	for _, n := range tr.Nodes {
		cover[n.Name] = n
		s := overlap(n.From, n.To, since, until)
		if s > 0 {
			get(e.node, n.Name).secs = s
			e.fleet.secs += s
		}
	}
	for _, tn := range tr.Tenures {
		n := cover[tn.Node]
		from, to := tn.From, tn.To
		if from.Before(n.From) {
			from = n.From
		}
		if to.After(n.To) {
			to = n.To
		}
		if s := overlap(from, to, since, until); s > 0 {
			r := get(e.serial, tn.Serial)
			r.secs += s
			r.nodes[tn.Node] = true
		}
	}
	rows := func(node, check, comp, serial string) []*expectRow {
		out := []*expectRow{&e.fleet, get(e.node, node), get(e.check, check), get(e.ctype, componentType(comp))}
		if serial != "" {
			out = append(out, get(e.serial, serial))
		}
		return out
	}
	for _, ep := range tr.Episodes {
		if !inWindow(ep.Start, since, until) {
			continue
		}
		for _, r := range rows(ep.Node, ep.Check, ep.Component, ep.Serial) {
			r.episodes++
		}
		if ep.Serial != "" {
			get(e.serial, ep.Serial).nodes[ep.Node] = true
		}
	}
	for _, d := range tr.Drains {
		resumed := !d.Resume.IsZero() && (until.IsZero() || d.Resume.Before(until))
		for _, r := range rows(d.Node, d.Check, d.Component, d.Serial) {
			if inWindow(d.Drain, since, until) {
				r.drains++
				if resumed {
					r.repairs++
					r.repairSecs += int64(d.Resume.Sub(d.Drain) / time.Second)
					addPhases(r, d)
				} else {
					r.open++
				}
			}
			if resumed && inWindow(d.Resume, since, until) {
				r.resumes++
			}
		}
	}
	for _, m := range []map[string]*expectRow{e.check, e.ctype} {
		for _, r := range m {
			r.secs = e.fleet.secs
		}
	}
	expectRemediations(e, tr, since, until)
	return e
}

// addPhases adds a repair's MTTR phases to r.
func addPhases(r *expectRow, d fleetgen.Drain) {
	secs := func(a, b time.Time) int64 { return int64(b.Sub(a) / time.Second) }
	if !d.Detect.IsZero() {
		r.detected++
		r.detectSecs += secs(d.Detect, d.Drain)
	}
	if !d.Remedy.IsZero() {
		r.remediated++
		r.d2rSecs += secs(d.Drain, d.Remedy)
		r.r2sSecs += secs(d.Remedy, d.Resume)
	}
}

// expectRemediations counts the remediations started in the window, and
// sums the serial rows by the model of the GPUs a remediation before
// Until named.
func expectRemediations(e *expected, tr *fleetgen.Truth, since, until time.Time) {
	named := map[string]bool{}
	for _, x := range tr.Remediations {
		if until.IsZero() || x.Start.Before(until) {
			named[x.Serial] = true
		}
		if !inWindow(x.Start, since, until) {
			continue
		}
		for _, k := range []string{"fleet", "action/" + x.Action, "model/" + x.Model} {
			c := e.rem[k]
			if c == nil {
				c = &remExpect{}
				e.rem[k] = c
			}
			c.started++
			switch {
			case x.End.IsZero() || !inWindow(x.End, since, until):
			case x.Failed:
				c.failed++
			default:
				c.finished++
			}
			if !x.Cured.IsZero() && inWindow(x.Cured, since, until) {
				c.cured++
			}
		}
	}
	for s, r := range e.serial {
		if !named[s] {
			continue
		}
		m := get(e.model, tr.Models[s])
		m.secs += r.secs
		m.episodes += r.episodes
		m.drains += r.drains
		m.resumes += r.resumes
		m.repairs += r.repairs
		m.open += r.open
		m.repairSecs += r.repairSecs
		m.detected += r.detected
		m.remediated += r.remediated
		m.detectSecs += r.detectSecs
		m.d2rSecs += r.d2rSecs
		m.r2sSecs += r.r2sSecs
	}
}

func compareRemediations(t *testing.T, got stats.Remediation, want map[string]*remExpect) {
	t.Helper()
	rows := map[string]stats.RemediationRow{"fleet": got.Fleet}
	for _, r := range got.ByAction {
		rows["action/"+r.Key] = r
	}
	for _, r := range got.ByModel {
		rows["model/"+r.Key] = r
	}
	if len(rows) != len(want) {
		t.Errorf("remediation rows %v, want %d", slices.Sorted(func(y func(string) bool) {
			for k := range rows {
				if !y(k) {
					return
				}
			}
		}), len(want))
	}
	for k, w := range want {
		g := rows[k]
		ended := w.finished + w.failed
		ok := g.Started == w.started && g.Finished == w.finished && g.Failed == w.failed && g.Cured == w.cured &&
			g.Pending == w.started-ended &&
			near(g.SuccessRate, float64(w.finished)/float64(ended), ended > 0) && near(g.CureRate, float64(w.cured)/float64(ended), ended > 0)
		if !ok {
			t.Errorf("remediation %s: got %v, want %+v", k, g.Cells(), *w)
		}
	}
}

func near(got *float64, want float64, defined bool) bool {
	if !defined {
		return got == nil
	}
	return got != nil && math.Abs(*got-want) <= 1e-9*math.Max(1, math.Abs(want))
}

func compareRow(t *testing.T, what string, got stats.Row, want *expectRow) {
	t.Helper()
	hours := float64(want.secs) / 3600
	ok := got.Episodes == want.episodes && got.Drains == want.drains && got.Resumes == want.resumes &&
		got.Repairs == want.repairs && got.Open == want.open && near(&got.Hours, hours, true) &&
		near(got.MTTF, hours/float64(want.episodes), want.episodes > 0 && want.secs > 0) &&
		near(got.MTTR, float64(want.repairSecs)/3600/float64(want.repairs), want.repairs > 0) &&
		got.Detected == want.detected && got.Remediated == want.remediated &&
		near(got.DetectToDrain, float64(want.detectSecs)/3600/float64(want.detected), want.detected > 0) &&
		near(got.DrainToRemediation, float64(want.d2rSecs)/3600/float64(want.remediated), want.remediated > 0) &&
		near(got.RemediationToService, float64(want.r2sSecs)/3600/float64(want.remediated), want.remediated > 0)
	if ok && len(want.nodes) > 0 {
		ok = slices.Equal(got.Nodes, slices.Sorted(func(y func(string) bool) {
			for n := range want.nodes {
				if !y(n) {
					return
				}
			}
		}))
	}
	if !ok {
		t.Errorf("%s %s:\n got %s\nwant %+v (hours %v, repair hours %v)", what, got.Key, show(got), *want, hours, float64(want.repairSecs)/3600)
	}
}

func show(r stats.Row) string {
	return fmt.Sprintf("%v nodes %v", strings.Join(r.Cells(), " "), r.Nodes)
}

func compareRows(t *testing.T, what string, got []stats.Row, want map[string]*expectRow) {
	t.Helper()
	var keys []string
	for k, r := range want {
		if r.secs > 0 || r.episodes > 0 || r.drains > 0 || r.resumes > 0 {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var gotKeys []string
	for _, r := range got {
		gotKeys = append(gotKeys, r.Key)
	}
	if !slices.Equal(gotKeys, keys) {
		t.Fatalf("%s keys\n got %v\nwant %v", what, gotKeys, keys)
	}
	for _, r := range got {
		compareRow(t, what, r, want[r.Key])
	}
}

type lemon struct {
	kind, key string
	episodes  int
	share     float64
}

func expectLemons(e *expected, minEpisodes int) []lemon {
	var out []lemon
	mttf := map[string]float64{}
	for kind, m := range map[string]map[string]*expectRow{"node": e.node, "gpu": e.serial} {
		for k, r := range m {
			if r.episodes >= minEpisodes {
				out = append(out, lemon{kind, k, r.episodes, float64(r.episodes) / float64(e.fleet.episodes)})
				mttf[kind+k] = math.Inf(1)
				if r.secs > 0 {
					mttf[kind+k] = float64(r.secs) / float64(r.episodes)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b lemon) int {
		return cmp.Or(b.episodes-a.episodes, cmp.Compare(mttf[a.kind+a.key], mttf[b.kind+b.key]),
			-strings.Compare(a.kind, b.kind), strings.Compare(a.key, b.key))
	})
	return out
}

func TestFleetMTTFMatchesGroundTruth(t *testing.T) {
	p := fleetgen.Params{Nodes: 40, GPUsPerNode: 8, Days: 120, FailureRate: 6, LemonNodes: 2, LemonFactor: 8, Seed: 7, RotateBytes: 12 << 10}
	dir := t.TempDir()
	tr, err := fleetgen.Generate(dir, p)
	if err != nil {
		t.Fatal(err)
	}
	// The fleet has what the test is about.
	if tr.Spanning == 0 || tr.TornLines == 0 || tr.Moved.Serial == "" || tr.Quiet == "" || len(tr.Lemons) != 2 {
		t.Fatalf("fleet lacks a case: spanning %d torn %d moved %+v quiet %q lemons %v", tr.Spanning, tr.TornLines, tr.Moved, tr.Quiet, tr.Lemons)
	}
	checkRemediationCases(t, tr)
	var evs []events.Event
	var warns []string
	tot, err := events.ScanTotals(context.Background(), []string{dir}, nil, func(w string) { warns = append(warns, w) }, func(e events.Event) error {
		evs = append(evs, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if tot.Lines != tr.Lines || tot.Events != tr.Lines-tr.TornLines || tot.Malformed != tr.TornLines || len(warns) != tr.TornLines || tot.Files != tr.Files {
		t.Fatalf("scan %+v, warnings %q; truth %d files %d lines, %d torn", tot, warns, tr.Files, tr.Lines, tr.TornLines)
	}

	// Windows: everything; one cutting a drain that began before it (resumed
	// inside) and ending inside another drain (open at its end); from the
	// GPU move on.
	longest := slices.MaxFunc(tr.Drains, func(a, b fleetgen.Drain) int {
		return cmp.Compare(a.Resume.Sub(a.Drain), b.Resume.Sub(b.Drain))
	})
	var cut fleetgen.Drain
	for _, d := range tr.Drains {
		if !d.Resume.IsZero() && d.Drain.Before(longest.Drain.Add(-20*24*time.Hour)) {
			cut = d
		}
	}
	windows := [][2]time.Time{
		{},
		{cut.Drain.Add(time.Second), longest.Drain.Add(time.Minute)},
		{tr.Moved.Removed, time.Time{}},
		{tr.Start.Add(30*24*time.Hour + 7*time.Hour), tr.Start.Add(75 * 24 * time.Hour)},
	}
	for _, w := range windows {
		t.Run(fmt.Sprintf("%s-%s", w[0].Format(time.DateOnly), w[1].Format(time.DateOnly)), func(t *testing.T) {
			for _, lemonMin := range []int{0, 2} {
				a := stats.New(stats.Options{Since: w[0], Until: w[1], LemonMin: lemonMin})
				for _, e := range evs {
					a.Add(e)
				}
				rep := a.Report()
				want := expect(tr, w[0], w[1])
				if want.fleet.episodes == 0 || want.fleet.repairs == 0 {
					t.Fatalf("a dull window: %+v", want.fleet)
				}
				compareRow(t, "fleet", rep.Fleet, &want.fleet)
				compareRows(t, "node", rep.ByNode, want.node)
				compareRows(t, "check", rep.ByCheck, want.check)
				compareRows(t, "component type", rep.ByComponentType, want.ctype)
				compareRows(t, "serial", rep.BySerial, want.serial)
				compareRows(t, "model", rep.ByModel, want.model)
				compareRemediations(t, rep.Remediation, want.rem)

				minE := cmp.Or(lemonMin, stats.DefaultLemonMin)
				wantL := expectLemons(want, minE)
				var gotL []lemon
				for i, l := range rep.Lemons {
					if l.Rank != i+1 {
						t.Errorf("lemon %d has rank %d", i, l.Rank)
					}
					gotL = append(gotL, lemon{l.Kind, l.Key, l.Episodes, l.Share})
				}
				if !reflect.DeepEqual(gotL, wantL) || len(wantL) == 0 {
					t.Errorf("lemons (min %d)\n got %v\nwant %v", minE, gotL, wantL)
				}
				if w == windows[0] && lemonMin == 0 {
					checkFleetCases(t, tr, rep, want)
					if len(want.model) == 0 || want.fleet.remediated == 0 || want.rem["fleet"].cured == 0 {
						t.Errorf("no remediation in the whole log: %+v %+v", want.fleet, want.rem["fleet"])
					}
				}
				if w == windows[1] && (rep.Fleet.Open == 0 || want.fleet.open == 0) {
					t.Errorf("window 1 has no open drain: %+v", rep.Fleet)
				}
			}
		})
	}

	// Order does not matter: rotated files read in reverse, nodes mixed.
	want := report(evs, stats.Options{})
	rng := rand.New(rand.NewPCG(3, 4))
	rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	if got := report(evs, stats.Options{}); !reflect.DeepEqual(got, want) {
		t.Fatalf("shuffled events give another report")
	}
}

func report(evs []events.Event, o stats.Options) stats.Report {
	a := stats.New(o)
	for _, e := range evs {
		a.Add(e)
	}
	return a.Report()
}

// checkFleetCases looks at the special nodes in the unbounded report.
func checkFleetCases(t *testing.T, tr *fleetgen.Truth, rep stats.Report, want *expected) {
	t.Helper()
	for _, r := range rep.ByNode {
		if r.Key == tr.Quiet && (r.Episodes != 0 || r.MTTF != nil || r.Hours < 24) {
			t.Errorf("quiet node %s", show(r))
		}
	}
	moved := false
	for _, r := range rep.BySerial {
		if r.Key == tr.Moved.Serial {
			moved = true
			if !slices.Equal(r.Nodes, []string{tr.Moved.From, tr.Moved.To}) || r.Episodes < 4 {
				t.Errorf("moved GPU %s", show(r))
			}
		}
	}
	if !moved {
		t.Errorf("no row for the moved GPU %s", tr.Moved.Serial)
	}
	for _, l := range tr.Lemons {
		found := false
		for _, x := range rep.Lemons {
			found = found || x.Kind == "node" && x.Key == l
		}
		if !found && want.node[l].episodes >= stats.DefaultLemonMin {
			t.Errorf("lemon node %s not ranked", l)
		}
	}
}

// Logs read twice count once: next to the fleet's logs, a collection
// directory holds logrotate's partial .1.gz (compression in progress) of
// some nodes' .1 files and a whole second copy of other nodes' logs. The
// report is the one of the fleet's logs alone.
func TestFleetReadTwiceCountsOnce(t *testing.T) {
	p := fleetgen.Params{Nodes: 12, GPUsPerNode: 8, Days: 90, FailureRate: 12, LemonNodes: 1, Seed: 11, RotateBytes: 8 << 10}
	dir, dup := t.TempDir(), t.TempDir()
	if _, err := fleetgen.Generate(dir, p); err != nil {
		t.Fatal(err)
	}
	scan := func(sources ...string) stats.Report {
		t.Helper()
		a := stats.New(stats.Options{})
		if err := events.Scan(context.Background(), sources, nil, nil, func(e events.Event) error {
			a.Add(e)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return a.Report()
	}
	want := scan(dir)
	for i := range p.Nodes {
		name := fleetgen.NodeName(i) + ".events.jsonl"
		switch {
		case i%3 == 0: // a partial .1.gz
			b, err := os.ReadFile(filepath.Join(dir, name+".1"))
			if err != nil {
				t.Fatal(err)
			}
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			zw.Write(b)
			zw.Close()
			if err := os.WriteFile(filepath.Join(dup, name+".1.gz"), z.Bytes()[:z.Len()*2/3], 0o644); err != nil {
				t.Fatal(err)
			}
		case i%3 == 1: // every file again
			files, _ := filepath.Glob(filepath.Join(dir, name+"*"))
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dup, "copy-"+filepath.Base(f)), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	got := scan(dir, dup)
	if got.Duplicates == 0 || got.Events-got.Duplicates != want.Events || want.Duplicates != 0 {
		t.Errorf("events %d, duplicates %d; read once: %d events, %d duplicates", got.Events, got.Duplicates, want.Events, want.Duplicates)
	}
	got.Events, got.Duplicates = want.Events, want.Duplicates
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read twice:\n got fleet %s\nwant fleet %s", show(got.Fleet), show(want.Fleet))
	}
}

// checkRemediationCases: the fleet has cured, failed and uncured
// remediations of both actions, an rma in force and one resumed.
func checkRemediationCases(t *testing.T, tr *fleetgen.Truth) {
	t.Helper()
	var cured, failed, uncured int
	actions := map[string]bool{}
	for _, x := range tr.Remediations {
		actions[x.Action] = true
		switch {
		case !x.Cured.IsZero():
			cured++
		case x.Failed:
			failed++
		case !x.End.IsZero():
			uncured++
		}
	}
	var inForce, resumed int
	for _, r := range tr.RMAs {
		if r.Resumed.IsZero() {
			inForce++
		} else {
			resumed++
		}
	}
	if cured == 0 || failed == 0 || uncured == 0 || len(actions) != 2 || inForce != 1 || resumed != 1 {
		t.Fatalf("fleet lacks a remediation case: cured %d failed %d uncured %d actions %v rma %d in force, %d resumed",
			cured, failed, uncured, actions, inForce, resumed)
	}
}
