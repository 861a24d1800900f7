package stats

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(h float64) time.Time { return t0.Add(time.Duration(h * float64(time.Hour))) }

func hb(node string, h, hours float64, serials ...string) events.Event {
	return events.Event{Time: at(h), Kind: events.KindHeartbeat, Node: node, Hours: hours, Serials: serials}
}

func tr(node string, h float64, check, comp, serial, prev, status string) events.Event {
	return events.Event{Time: at(h), Kind: events.KindTransition, Node: node, Check: check, Component: comp, Serial: serial, Previous: prev, Status: status, Message: "m"}
}

func drain(node string, h float64, reason string) events.Event {
	return events.Event{Time: at(h), Kind: events.KindDrain, Node: node, Message: reason}
}

func resume(node string, h float64, reason string) events.Event {
	return events.Event{Time: at(h), Kind: events.KindResume, Node: node, Message: reason}
}

func report(opts Options, evs []events.Event) Report {
	a := New(opts)
	for _, e := range evs {
		a.Add(e)
	}
	return a.Report()
}

func find(t *testing.T, rows []Row, key string) Row {
	t.Helper()
	for _, r := range rows {
		if r.Key == key {
			return r
		}
	}
	t.Fatalf("no row %q in %+v", key, rows)
	return Row{}
}

func f(v float64) *float64 { return &v }

func TestEpisodeDefinition(t *testing.T) {
	const r = "gpuhc: gpu.ecc: gpu3: DBE"
	evs := []events.Event{
		hb("n1", 100, 100, "S3", "S4"),
		// 1: first-seen FAIL opens; repeats and FAIL→FAIL don't; ERROR in
		// between neither closes nor opens; OK closes.
		tr("n1", 1, "gpu.ecc", "gpu3", "S3", "", "FAIL"),
		drain("n1", 1, r),
		tr("n1", 2, "gpu.ecc", "gpu3", "S3", "FAIL", "FAIL"),
		tr("n1", 3, "gpu.ecc", "gpu3", "S3", "FAIL", "ERROR"),
		tr("n1", 4, "gpu.ecc", "gpu3", "S3", "ERROR", "FAIL"),
		tr("n1", 5, "gpu.ecc", "gpu3", "S3", "FAIL", "OK"),
		resume("n1", 6, r),
		// 2: OK→FAIL opens; a resume closes it while still failing; the
		// FAIL→FAIL afterwards does not reopen, nor does ERROR→FAIL: the
		// resume did not re-arm it, only a healthy status does.
		tr("n1", 10, "gpu.ecc", "gpu3", "S3", "OK", "FAIL"),
		drain("n1", 10, r),
		drain("n1", 11, "gpuhc: host.mounts: /scratch: gone"), // re-drain: same period
		resume("n1", 12, "gpuhc: host.mounts: /scratch: gone"),
		tr("n1", 13, "gpu.ecc", "gpu3", "S3", "FAIL", "FAIL"),
		tr("n1", 14, "gpu.ecc", "gpu3", "S3", "FAIL", "ERROR"),
		tr("n1", 15, "gpu.ecc", "gpu3", "S3", "ERROR", "FAIL"),
		// WARN re-arms it; a second key opens 3 alongside 4 on gpu4.
		tr("n1", 20, "gpu.ecc", "gpu3", "S3", "FAIL", "WARN"),
		tr("n1", 30, "gpu.ecc", "gpu4", "S4", "OK", "FAIL"),
		tr("n1", 30, "host.mounts", "/scratch", "", "OK", "FAIL"),
		drain("n1", 30, "gpuhc: gpu.ecc: gpu4: DBE (+1 more)"),
		tr("n1", 31, "gpu.ecc", "gpu4", "S4", "FAIL", "SKIP"),
		tr("n1", 32, "host.mounts", "/scratch", "", "FAIL", "OK"),
		// drain at 30 still open at the end.
	}
	rep := report(Options{}, evs)
	n1 := find(t, rep.ByNode, "n1")
	if n1.Episodes != 4 || n1.Drains != 3 || n1.Resumes != 2 || n1.Repairs != 2 || n1.Open != 1 {
		t.Fatalf("n1 %+v", n1)
	}
	if *n1.MTTF != 25 || *n1.MTTR != 3.5 || n1.Hours != 100 {
		t.Fatalf("n1 MTTF %v MTTR %v hours %v", *n1.MTTF, *n1.MTTR, n1.Hours)
	}
	s3 := find(t, rep.BySerial, "S3")
	if s3.Episodes != 2 || s3.Drains != 2 || s3.Repairs != 2 || s3.Resumes != 2 || s3.Hours != 100 || !reflect.DeepEqual(s3.Nodes, []string{"n1"}) {
		t.Fatalf("S3 %+v", s3)
	}
	s4 := find(t, rep.BySerial, "S4")
	if s4.Episodes != 1 || s4.Drains != 1 || s4.Open != 1 || s4.MTTR != nil {
		t.Fatalf("S4 %+v", s4)
	}
	ecc := find(t, rep.ByCheck, "gpu.ecc")
	if ecc.Episodes != 3 || ecc.Drains != 3 || ecc.Repairs != 2 || ecc.Hours != 100 || *ecc.MTTF != 100.0/3 {
		t.Fatalf("gpu.ecc %+v", ecc)
	}
	mounts := find(t, rep.ByCheck, "host.mounts")
	if mounts.Episodes != 1 || mounts.Drains != 0 || mounts.Resumes != 0 {
		t.Fatalf("host.mounts %+v", mounts)
	}
	if g := find(t, rep.ByComponentType, "gpu"); g.Episodes != 3 {
		t.Fatalf("gpu type %+v", g)
	}
	if m := find(t, rep.ByComponentType, "mount"); m.Episodes != 1 {
		t.Fatalf("mount type %+v", m)
	}
	if rep.Fleet.Episodes != 4 || rep.Fleet.Hours != 100 {
		t.Fatalf("fleet %+v", rep.Fleet)
	}
	if len(rep.Lemons) != 1 || rep.Lemons[0].Key != "n1" || rep.Lemons[0].Share != 1 {
		t.Fatalf("lemons %+v", rep.Lemons)
	}
	rep = report(Options{LemonMin: 2}, evs)
	if len(rep.Lemons) != 2 || rep.Lemons[0].Key != "n1" || rep.Lemons[1].Key != "S3" || rep.Lemons[1].Share != 0.5 {
		t.Fatalf("lemons (min 2) %+v", rep.Lemons)
	}
}

func TestHealthyStatusesCloseErrorDoesNot(t *testing.T) {
	k := func(h float64, prev, status string) events.Event { return tr("n", h, "c", "x0", "", prev, status) }
	evs := []events.Event{
		k(1, "OK", "FAIL"), k(2, "FAIL", "WARN"), k(3, "WARN", "FAIL"), // 2
		k(4, "FAIL", "SKIP"), k(5, "SKIP", "FAIL"), // 3
		k(6, "FAIL", "ERROR"), k(7, "ERROR", "FAIL"), k(8, "FAIL", "ERROR"), k(9, "ERROR", "FAIL"), // still 3
		k(10, "FAIL", "OK"), k(11, "OK", "ERROR"), k(12, "ERROR", "FAIL"), // 4
		k(13, "FAIL", "fail"), k(14, "FAIL", "ok"), k(15, "", "fail"), // 5, case-insensitive
	}
	if got := report(Options{}, evs).Fleet.Episodes; got != 5 {
		t.Fatalf("%d episodes, want 5", got)
	}
}

func TestWindowClipsHoursAndCountsWhatOpensInside(t *testing.T) {
	r := "gpuhc: host.cpu: host: 3 of 4 online"
	evs := []events.Event{
		hb("n1", 24, 24), hb("n1", 48, 24), hb("n1", 72, 24),
		// before the window: an episode and a drain, resumed inside
		tr("n1", 5, "host.cpu", "host", "", "OK", "FAIL"),
		drain("n1", 5, r),
		tr("n1", 20, "host.cpu", "host", "", "FAIL", "FAIL"), // still the old episode
		tr("n1", 30, "host.cpu", "host", "", "FAIL", "OK"),
		resume("n1", 31, r),
		// inside: one episode, drained, resumed after Until (open)
		tr("n1", 40, "host.cpu", "host", "", "OK", "FAIL"),
		drain("n1", 40, r),
		resume("n1", 70, r),
		// after Until: ignored
		tr("n1", 71, "host.cpu", "host", "", "OK", "FAIL"),
	}
	rep := report(Options{Since: at(12), Until: at(60)}, evs)
	n1 := find(t, rep.ByNode, "n1")
	want := Row{Key: "n1", Hours: 48, Episodes: 1, MTTF: f(48), Drains: 1, Resumes: 1, Open: 1}
	if !reflect.DeepEqual(n1, want) {
		t.Fatalf("n1\n got %+v\nwant %+v", n1, want)
	}
	if !rep.Window.From.Equal(at(12)) || !rep.Window.To.Equal(at(60)) || !rep.Window.Since.Equal(at(12)) {
		t.Fatalf("window %+v", rep.Window)
	}
	// the whole log
	rep = report(Options{}, evs)
	n1 = find(t, rep.ByNode, "n1")
	want = Row{Key: "n1", Hours: 72, Episodes: 3, MTTF: f(24), Drains: 2, Resumes: 2, Repairs: 2, MTTR: f(28), Open: 0,
		Detected: 2, DetectToDrain: f(0)}
	if !reflect.DeepEqual(n1, want) {
		t.Fatalf("n1\n got %+v\nwant %+v", n1, want)
	}
	if !rep.Window.From.Equal(at(0)) || !rep.Window.To.Equal(at(72)) || rep.Window.Since != nil || rep.Window.Until != nil {
		t.Fatalf("window %+v", rep.Window)
	}
}

func TestNoEpisodesIsNullNotInfinity(t *testing.T) {
	rep := report(Options{}, []events.Event{hb("quiet", 24, 24, "S1")})
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, `"mttf_hours":null`) || strings.Contains(s, "Inf") || rep.Fleet.MTTF != nil {
		t.Fatalf("%s", s)
	}
	if c := rep.Fleet.Cells(); c[3] != "-" || c[7] != "-" || c[1] != "24.0" {
		t.Fatalf("cells %q", c)
	}
	if q := find(t, rep.ByNode, "quiet"); q.Hours != 24 || q.Episodes != 0 {
		t.Fatalf("quiet %+v", q)
	}
	// episodes without hours: MTTF undefined too
	rep = report(Options{}, []events.Event{tr("n", 1, "c", "x", "", "", "FAIL")})
	if rep.Fleet.Episodes != 1 || rep.Fleet.MTTF != nil {
		t.Fatalf("fleet %+v", rep.Fleet)
	}
}

func TestGPUKeepsHistoryAcrossNodes(t *testing.T) {
	evs := []events.Event{
		hb("a", 24, 24, "G1", "G2"), hb("a", 48, 24, "G2", "G3"),
		hb("b", 24, 24, "G9"), hb("b", 48, 24, "G9", "G1", "G1"),
		tr("a", 10, "gpu.xid", "gpu0", "G1", "OK", "FAIL"),
		tr("a", 11, "gpu.xid", "gpu0", "G1", "FAIL", "OK"),
		tr("b", 40, "gpu.xid", "gpu1", "G1", "OK", "FAIL"),
	}
	rep := report(Options{}, evs)
	g1 := find(t, rep.BySerial, "G1")
	if g1.Hours != 48 || g1.Episodes != 2 || *g1.MTTF != 24 || !reflect.DeepEqual(g1.Nodes, []string{"a", "b"}) {
		t.Fatalf("G1 %+v", g1)
	}
	if g2 := find(t, rep.BySerial, "G2"); g2.Hours != 48 || g2.MTTF != nil {
		t.Fatalf("G2 %+v", g2)
	}
}

func TestFilters(t *testing.T) {
	evs := []events.Event{
		hb("gpu01", 24, 24), hb("gpu02", 24, 24), hb("cpu01", 24, 24),
		tr("gpu01", 1, "host.mounts", "/scratch", "", "OK", "FAIL"),
		drain("gpu01", 1, "gpuhc: host.mounts: /scratch: gone"),
		resume("gpu01", 2, "gpuhc: host.mounts: /scratch: gone"),
		tr("gpu02", 1, "gpu.ecc", "gpu1", "S", "OK", "FAIL"),
		drain("gpu02", 1, "gpuhc: gpu.ecc: gpu1: DBE"),
		resume("gpu02", 3, "gpuhc: gpu.ecc: gpu1: DBE"),
		tr("cpu01", 1, "host.mounts", "/scratch", "", "OK", "FAIL"),
	}
	rep := report(Options{Node: "gpu*"}, evs)
	if rep.Fleet.Hours != 48 || rep.Fleet.Episodes != 2 || len(rep.ByNode) != 2 {
		t.Fatalf("node filter: %+v %+v", rep.Fleet, rep.ByNode)
	}
	rep = report(Options{Check: "host.*"}, evs)
	want := Row{Key: "fleet", Hours: 72, Episodes: 2, MTTF: f(36), Drains: 1, Resumes: 1, Repairs: 1, MTTR: f(1),
		Detected: 1, DetectToDrain: f(0)}
	if !reflect.DeepEqual(rep.Fleet, want) || len(rep.ByCheck) != 1 {
		t.Fatalf("check filter:\n got %+v\nwant %+v\n%+v", rep.Fleet, want, rep.ByCheck)
	}
}

func TestReportIsOrderIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var evs []events.Event
	checks := []string{"gpu.ecc", "host.mounts", "ib.link"}
	statuses := []string{"", "OK", "WARN", "FAIL", "FAIL", "ERROR", "SKIP"}
	for i := range 3000 {
		node := []string{"a", "b", "c", "d"}[rng.IntN(4)]
		h := float64(rng.IntN(500)) // many equal times
		switch rng.IntN(6) {
		case 0:
			evs = append(evs, hb(node, h, 1+float64(rng.IntN(48))/3, "S"+string(rune('0'+rng.IntN(6))), "S"+string(rune('0'+rng.IntN(6)))))
		case 1:
			c := checks[rng.IntN(3)]
			evs = append(evs, drain(node, h, "gpuhc: "+c+": gpu1: x"))
		case 2:
			evs = append(evs, resume(node, h, "r"))
		default:
			c := checks[rng.IntN(3)]
			evs = append(evs, tr(node, h, c, "gpu"+string(rune('0'+rng.IntN(3))), "S"+string(rune('0'+rng.IntN(6))), statuses[rng.IntN(7)], statuses[1+rng.IntN(6)]))
		}
		_ = i
	}
	for _, opts := range []Options{{}, {Since: at(100), Until: at(400), LemonMin: 2}, {Check: "gpu.*"}} {
		want := report(opts, evs)
		if want.Fleet.Episodes == 0 || want.Fleet.Repairs == 0 {
			t.Fatalf("a dull test: %+v", want.Fleet)
		}
		wantJSON, _ := json.Marshal(want)
		for range 5 {
			rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
			got := report(opts, evs)
			if !reflect.DeepEqual(got, want) {
				gotJSON, _ := json.Marshal(got)
				t.Fatalf("order changed the report:\n%s\n%s", gotJSON, wantJSON)
			}
		}
	}
}

func TestComponentType(t *testing.T) {
	for c, want := range map[string]string{
		"gpu3": "gpu", "gpu": "gpu", "gpu12": "gpu", "nvswitch0": "nvswitch", "mlx5_2/1": "mlx5", "mlx5_0": "mlx5",
		"host": "host", "/scratch": "mount", "/": "mount", "ib0": "ib", "eth-1": "eth", "7": "7", "": "",
	} {
		if got := ComponentType(c); got != want {
			t.Errorf("ComponentType(%q) = %q, want %q", c, got, want)
		}
	}
}

// The same events read twice (a rotated file next to its partial .gz, a
// copytruncate copy, a log collected twice) count once: hours, episodes,
// drains, resumes and repairs are those of one reading.
func TestDuplicateEventsCountOnce(t *testing.T) {
	const r = "gpuhc: host.mounts: /scratch: not mounted"
	evs := []events.Event{
		hb("n1", 24, 24, "S1", "S2"), hb("n1", 48, 24, "S1", "S2"), hb("n2", 24, 24, "S3"),
		tr("n1", 30, "host.mounts", "/scratch", "", "OK", "FAIL"),
		drain("n1", 30, r),
		tr("n1", 31, "host.mounts", "/scratch", "", "FAIL", "OK"),
		resume("n1", 32, r),
		tr("n1", 40, "gpu.ecc", "gpu1", "S2", "OK", "FAIL"),
		drain("n1", 40, "gpuhc: gpu.ecc: gpu1: DBE"),
		tr("n2", 10, "gpu.xid", "gpu0", "S3", "", "FAIL"),
	}
	for _, opts := range []Options{{}, {Since: at(12), Until: at(45)}} {
		want := report(opts, evs)
		if want.Duplicates != 0 || want.Fleet.Hours != 72 && opts.Since.IsZero() {
			t.Fatalf("one reading: %+v duplicates %d", want.Fleet, want.Duplicates)
		}
		// Twice, three times, and a part of the log again, in any order.
		twice := append(append(append([]events.Event{}, evs...), evs...), evs[2:6]...)
		// Another copy of a heartbeat: same node, time and hours, another
		// boot id: the same heartbeat.
		again := evs[0]
		again.BootID = "copied"
		twice = append(twice, again)
		rand.New(rand.NewPCG(5, 6)).Shuffle(len(twice), func(i, j int) { twice[i], twice[j] = twice[j], twice[i] })
		got := report(opts, twice)
		if got.Duplicates == 0 {
			t.Errorf("%+v: no duplicates reported", opts)
		}
		if got.Events-got.Duplicates != want.Events {
			t.Errorf("%+v: %d events, %d duplicates; one reading has %d events", opts, got.Events, got.Duplicates, want.Events)
		}
		got.Events, got.Duplicates = want.Events, want.Duplicates
		if !reflect.DeepEqual(got, want) {
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(want)
			t.Errorf("%+v: read twice\n got %s\nwant %s", opts, gj, wj)
		}
	}
	// Heartbeats that differ in time or hours are not duplicates.
	rep := report(Options{}, []events.Event{hb("n", 24, 24), hb("n", 24, 12), hb("n", 36, 12)})
	if rep.Fleet.Hours != 48 || rep.Duplicates != 0 {
		t.Errorf("distinct heartbeats: hours %v, duplicates %d", rep.Fleet.Hours, rep.Duplicates)
	}
}

// docs/architecture.md#episodes: an episode is the first FAIL after
// healthy, up to the next resume or healthy run. A resume ends the episode
// of a component that is still failing without re-arming it: only a healthy
// status does.
func TestResumeClosesButDoesNotRearm(t *testing.T) {
	const r = "gpuhc: gpu.ecc: gpu3: DBE"
	k := func(h float64, prev, status string) events.Event {
		return tr("n", h, "gpu.ecc", "gpu3", "S3", prev, status)
	}
	cases := []struct {
		name string
		evs  []events.Event
		want int
	}{
		{"persisting FAIL after a resume", []events.Event{
			k(1, "OK", "FAIL"), drain("n", 1, r), resume("n", 2, r), drain("n", 3, r), k(4, "FAIL", "FAIL"),
		}, 1},
		{"ERROR blip after a resume", []events.Event{
			k(1, "OK", "FAIL"), drain("n", 1, r), resume("n", 2, r), drain("n", 3, r),
			k(4, "FAIL", "ERROR"), k(5, "ERROR", "FAIL"), k(6, "FAIL", "ERROR"), k(7, "ERROR", "FAIL"),
		}, 1},
		{"healthy after a resume re-arms", []events.Event{
			k(1, "OK", "FAIL"), resume("n", 2, r), k(3, "FAIL", "OK"), k(4, "OK", "ERROR"), k(5, "ERROR", "FAIL"),
		}, 2},
		{"first seen again (the component vanished, came back failing)", []events.Event{
			k(1, "OK", "FAIL"), k(24*30, "", "FAIL"),
		}, 2},
		{"FAIL after OK while open (the OK line is missing)", []events.Event{
			k(1, "OK", "FAIL"), k(5, "OK", "FAIL"),
		}, 2},
		{"the log begins mid-failure", []events.Event{
			k(1, "FAIL", "ERROR"), k(2, "ERROR", "FAIL"), k(3, "FAIL", "FAIL"),
		}, 0},
		{"the log begins with ERROR after OK", []events.Event{
			k(1, "OK", "ERROR"), k(2, "ERROR", "FAIL"),
		}, 1},
	}
	for _, c := range cases {
		rep := report(Options{}, c.evs)
		if rep.Fleet.Episodes != c.want {
			t.Errorf("%s: %d episodes, want %d", c.name, rep.Fleet.Episodes, c.want)
		}
	}
}

// Measurement events (bandwidth figures, FAIL ones included) are records
// of performance, not of state: they open, close and time nothing.
func TestMeasurementsCountNothing(t *testing.T) {
	const r = "gpuhc: bandwidth: gpu0/h2d (SN S0): H2D 31.0 GB/s < floor 48"
	base := []events.Event{
		hb("n1", 100, 100, "S0"),
		tr("n1", 10, "bandwidth", "gpu0/h2d", "S0", "", "FAIL"),
		drain("n1", 10, r),
		resume("n1", 20, r),
	}
	v := 31.0
	meas := func(h float64, status string) events.Event {
		return events.Event{Time: at(h), Kind: events.KindMeasurement, Node: "n1", Check: "bandwidth", Component: "gpu0/h2d",
			Serial: "S0", Status: status, Message: "H2D", Name: "h2d", Value: &v, Unit: "GB/s", Floor: 48}
	}
	// Figures before, during and after the episode, and on a node that
	// has no other event.
	with := append(append([]events.Event{}, base...), meas(5, "OK"), meas(10, "FAIL"), meas(15, "FAIL"), meas(30, "OK"),
		events.Event{Time: at(50), Kind: events.KindMeasurement, Node: "n2", Check: "bandwidth", Component: "gpu1/h2d", Status: "FAIL", Name: "h2d", Value: &v})
	for _, opts := range []Options{{}, {Check: "bandwidth"}, {Since: at(12), Until: at(40)}} {
		want, got := report(opts, base), report(opts, with)
		if !reflect.DeepEqual(got, want) {
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(want)
			t.Errorf("%+v: measurements changed the report:\n%s\n%s", opts, gotJSON, wantJSON)
		}
	}
	if rep := report(Options{}, with); rep.Fleet.Episodes != 1 {
		t.Errorf("episodes %d, want 1", rep.Fleet.Episodes)
	}
}
