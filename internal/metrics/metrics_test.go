package metrics

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/metrics/promtest"
)

func parse(t *testing.T, data []byte) *promtest.Doc {
	t.Helper()
	d, err := promtest.Parse(data)
	if err != nil {
		t.Fatalf("invalid exposition: %v\n%s", err, data)
	}
	return d
}

func TestFormat(t *testing.T) {
	s := Snapshot{
		Results: []check.Result{
			{Check: "host.modules", Component: "nvidia", Status: check.Fail},
			{Check: "host.modules", Component: "nvidia_uvm", Status: check.OK},
			{Check: "host.mounts", Component: "/scratch", Status: check.Warn},
			{Check: "host.cpu", Component: "host", Status: check.Skip},
		},
		Timed: []check.Timed{
			{Name: "host.modules", Duration: 1500 * time.Microsecond},
			{Name: "host.mounts", Duration: 2 * time.Second},
			{Name: "host.cpu", Duration: 0},
		},
		Failures: map[string]uint64{"host.modules": 3, "host.thermal": 1},
		LastRun:  time.Date(2026, 11, 30, 5, 53, 48, 250e6, time.UTC),
		Drained:  true,
	}
	d := parse(t, s.Format())
	want := []string{"gpuhc_check_status", "gpuhc_check_duration_seconds", "gpuhc_failures_total",
		"gpuhc_last_run_timestamp_seconds", "gpuhc_drained", "gpuhc_drain_suppressed"}
	if !slices.Equal(d.Order, want) {
		t.Errorf("families %q", d.Order)
	}
	for _, name := range want {
		if f := d.Families[name]; f.Help == "" || f.Type == "" {
			t.Errorf("%s lacks HELP or TYPE: %+v", name, f)
		}
	}
	if d.Families["gpuhc_failures_total"].Type != "counter" || d.Families["gpuhc_drained"].Type != "gauge" {
		t.Error("types")
	}
	// The state set: exactly one status at 1 per component.
	if n := len(d.Samples("gpuhc_check_status")); n != 4*5 {
		t.Errorf("%d status series, want 20", n)
	}
	for _, r := range s.Results {
		for _, st := range Statuses {
			want := 0.0
			if st == r.Status {
				want = 1
			}
			if v, ok := d.Value("gpuhc_check_status", "check", r.Check, "component", r.Component, "status", st.String()); !ok || v != want {
				t.Errorf("%s/%s %s = %v %v, want %v", r.Check, r.Component, st, v, ok, want)
			}
		}
	}
	for _, c := range []struct {
		name  string
		want  float64
		label []string
	}{
		{"gpuhc_check_duration_seconds", 0.0015, []string{"check", "host.modules"}},
		{"gpuhc_check_duration_seconds", 2, []string{"check", "host.mounts"}},
		{"gpuhc_check_duration_seconds", 0, []string{"check", "host.cpu"}},
		{"gpuhc_failures_total", 3, []string{"check", "host.modules"}},
		{"gpuhc_failures_total", 1, []string{"check", "host.thermal"}}, // not run now, still counted
		{"gpuhc_failures_total", 0, []string{"check", "host.mounts"}},  // starts at 0
		{"gpuhc_failures_total", 0, []string{"check", "host.cpu"}},
		{"gpuhc_last_run_timestamp_seconds", 1796018028.25, nil},
		{"gpuhc_drained", 1, nil},
		{"gpuhc_drain_suppressed", 0, nil},
	} {
		if v, ok := d.Value(c.name, c.label...); !ok || v != c.want {
			t.Errorf("%s%v = %v %v, want %v", c.name, c.label, v, ok, c.want)
		}
	}
	if !strings.Contains(string(s.Format()), "\ngpuhc_last_run_timestamp_seconds 1796018028.25\n") {
		t.Errorf("timestamp not written as a plain decimal:\n%s", s.Format())
	}
	if string(s.Format()) != string(s.Format()) {
		t.Error("not deterministic")
	}
}

// Label values are escaped, made UTF-8, and a component reported twice
// makes one series (the worst status), so the file stays valid.
func TestFormatHostileNames(t *testing.T) {
	odd := "a\\b\"c\nd"
	s := Snapshot{
		Results: []check.Result{
			{Check: "host.mounts", Component: odd, Status: check.OK},
			{Check: "host.mounts", Component: odd, Status: check.Fail},
			{Check: "host.processes", Component: "bad\xffname", Status: check.OK},
			{Check: "host.processes", Component: "bad\xfename", Status: check.Warn},
		},
		Timed: []check.Timed{{Name: "host.mounts", Duration: time.Second}, {Name: "host.mounts", Duration: 2 * time.Second}},
	}
	d := parse(t, s.Format())
	if v, ok := d.Value("gpuhc_check_status", "check", "host.mounts", "component", odd, "status", "FAIL"); !ok || v != 1 {
		t.Errorf("escaped component: %v %v\n%s", v, ok, s.Format())
	}
	if v, ok := d.Value("gpuhc_check_status", "check", "host.processes", "component", "bad\uFFFDname", "status", "WARN"); !ok || v != 1 {
		t.Errorf("invalid UTF-8 component: %v %v\n%s", v, ok, s.Format())
	}
	if v, _ := d.Value("gpuhc_check_duration_seconds", "check", "host.mounts"); v != 2 {
		t.Errorf("duration of a check named twice: %v", v)
	}
}

func TestFormatEmpty(t *testing.T) {
	d := parse(t, Snapshot{LastRun: time.Unix(1700000000, 0)}.Format())
	if v, ok := d.Value("gpuhc_drained"); !ok || v != 0 {
		t.Errorf("drained %v %v", v, ok)
	}
	if v, ok := d.Value("gpuhc_drain_suppressed"); !ok || v != 0 {
		t.Errorf("suppressed %v %v", v, ok)
	}
	if v, _ := d.Value("gpuhc_last_run_timestamp_seconds"); v != 1700000000 {
		t.Errorf("last run %v", v)
	}
}

// A drain the storm guard refused: the node is not drained, and the
// suppression is what says it should be.
func TestFormatSuppressed(t *testing.T) {
	s := Snapshot{
		Results:    []check.Result{{Check: "gpu.xid", Component: "gpu3", Status: check.Fail}},
		Failures:   map[string]uint64{"gpu.xid": 1},
		LastRun:    time.Unix(1700000000, 0),
		Suppressed: true,
	}
	d := parse(t, s.Format())
	if f := d.Families["gpuhc_drain_suppressed"]; f.Type != "gauge" || f.Help == "" {
		t.Errorf("family %+v", f)
	}
	if v, ok := d.Value("gpuhc_drain_suppressed"); !ok || v != 1 {
		t.Errorf("suppressed %v %v", v, ok)
	}
	if v, ok := d.Value("gpuhc_drained"); !ok || v != 0 {
		t.Errorf("drained %v %v", v, ok)
	}
}

func TestWriteTextfile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "textfile")
	for _, body := range []string{"# TYPE a gauge\na 1\n", "# TYPE a gauge\na 2\n"} {
		if err := WriteTextfile(dir, []byte(body)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, FileName))
		if err != nil || string(got) != body {
			t.Fatalf("read back %q %v", got, err)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v %v", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temp files left: %v", entries)
	}
	// A directory that cannot be made is an error, not a panic.
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteTextfile(filepath.Join(blocker, "sub"), []byte("x\n")); err == nil {
		t.Error("wrote under a regular file")
	}
}

func TestEpisodes(t *testing.T) {
	res := func(pairs ...any) []check.Result {
		var out []check.Result
		for i := 0; i < len(pairs); i += 3 {
			out = append(out, check.Result{Check: pairs[i].(string), Component: pairs[i+1].(string), Status: pairs[i+2].(check.Status)})
		}
		return out
	}
	steps := []struct {
		name    string
		results []check.Result
		opened  []string
		total   map[string]uint64
		open    []string
	}{
		{"healthy", res("m", "a", check.OK, "t", "h", check.OK), nil, map[string]uint64{}, nil},
		{"m fails", res("m", "a", check.Fail, "t", "h", check.OK), []string{"m"}, map[string]uint64{"m": 1}, []string{"m"}},
		{"still failing", res("m", "a", check.Fail, "t", "h", check.OK), nil, map[string]uint64{"m": 1}, []string{"m"}},
		{"second component of m", res("m", "a", check.Fail, "m", "b", check.Fail), nil, map[string]uint64{"m": 1}, []string{"m"}},
		{"could not check: stays open", res("m", "a", check.Error, "t", "h", check.Fail), []string{"t"}, map[string]uint64{"m": 1, "t": 1}, []string{"m", "t"}},
		{"m absent: stays open", res("t", "h", check.Fail), nil, map[string]uint64{"m": 1, "t": 1}, []string{"m", "t"}},
		{"m fails again: same episode", res("m", "a", check.Fail, "t", "h", check.Warn), nil, map[string]uint64{"m": 1, "t": 1}, []string{"m"}},
		{"m healthy (WARN)", res("m", "a", check.Warn, "m", "b", check.Skip), nil, map[string]uint64{"m": 1, "t": 1}, nil},
		{"m fails: new episode", res("m", "b", check.Fail), []string{"m"}, map[string]uint64{"m": 2, "t": 1}, []string{"m"}},
	}
	var e Episodes
	for _, s := range steps {
		var opened []string
		e, opened = e.Update(s.results)
		if !slices.Equal(opened, s.opened) || !slices.Equal(e.Open, s.open) || len(e.Total) != len(s.total) {
			t.Fatalf("%s: opened %q open %q total %v; want %q %q %v", s.name, opened, e.Open, e.Total, s.opened, s.open, s.total)
		}
		for k, v := range s.total {
			if e.Total[k] != v {
				t.Fatalf("%s: total %v, want %v", s.name, e.Total, s.total)
			}
		}
	}
}

// Update does not write through to the episodes it was given.
func TestEpisodesUpdateCopies(t *testing.T) {
	e := Episodes{Total: map[string]uint64{"m": 1}}
	n, _ := e.Update([]check.Result{{Check: "m", Status: check.Fail}})
	if e.Total["m"] != 1 || n.Total["m"] != 2 || len(e.Open) != 0 {
		t.Errorf("old %+v new %+v", e, n)
	}
}

// Figures become gpuhc_measurement, and their floors, where they have
// one, gpuhc_measurement_floor, with the same labels; a run without
// figures writes neither family.
func TestFormatMeasurements(t *testing.T) {
	fig := func(name string, v, floor float64) []check.Figure {
		return []check.Figure{{Name: name, Value: v, Unit: "GB/s", Floor: floor}}
	}
	s := Snapshot{
		Results: []check.Result{
			{Check: "host.cpu", Component: "host", Status: check.OK},
			{Check: "bandwidth", Component: "gpu1/h2d", Status: check.OK, Figures: fig("h2d", 55.1, 48)},
			{Check: "bandwidth", Component: "gpu0/h2d", Status: check.Fail, Figures: fig("h2d", 31, 48)},
			{Check: "bandwidth", Component: "gpu0-gpu1/p2p", Status: check.OK, Figures: fig("p2p", 389.25, 0)},
			{Check: "bandwidth", Component: "gpu0/d2d", Status: check.Error},
			// Twice the same label set: one series (the first), the file stays valid.
			{Check: "bandwidth", Component: "gpu1/h2d", Status: check.OK, Figures: fig("h2d", 1, 2)},
			{Check: "bandwidth", Component: "odd\"name\n", Status: check.OK, Figures: fig("x\\y", 0, 0)},
		},
		LastRun: time.Unix(1700000000, 0),
	}
	d := parse(t, s.Format())
	want := []string{"gpuhc_check_status", "gpuhc_check_duration_seconds", "gpuhc_failures_total",
		"gpuhc_last_run_timestamp_seconds", "gpuhc_drained", "gpuhc_drain_suppressed", "gpuhc_measurement", "gpuhc_measurement_floor"}
	if !slices.Equal(d.Order, want) {
		t.Errorf("families %q", d.Order)
	}
	for _, name := range want[6:] {
		if f := d.Families[name]; f.Type != "gauge" || f.Help == "" {
			t.Errorf("%s: %+v", name, f)
		}
	}
	for _, c := range []struct {
		name       string
		comp, fig  string
		want       float64
		wantSample bool
	}{
		{"gpuhc_measurement", "gpu0/h2d", "h2d", 31, true},
		{"gpuhc_measurement", "gpu1/h2d", "h2d", 55.1, true},
		{"gpuhc_measurement", "gpu0-gpu1/p2p", "p2p", 389.25, true},
		{"gpuhc_measurement", "odd\"name\n", "x\\y", 0, true},
		{"gpuhc_measurement_floor", "gpu0/h2d", "h2d", 48, true},
		{"gpuhc_measurement_floor", "gpu1/h2d", "h2d", 48, true},
		{"gpuhc_measurement_floor", "gpu0-gpu1/p2p", "p2p", 0, false}, // not judged: no floor
		{"gpuhc_measurement", "gpu0/d2d", "d2d", 0, false},            // an ERROR has no figure
	} {
		v, ok := d.Value(c.name, "check", "bandwidth", "component", c.comp, "name", c.fig, "unit", "GB/s")
		if ok != c.wantSample || v != c.want {
			t.Errorf("%s{%s,%s} = %v %v, want %v %v", c.name, c.comp, c.fig, v, ok, c.want, c.wantSample)
		}
	}
	if n, m := len(d.Samples("gpuhc_measurement")), len(d.Samples("gpuhc_measurement_floor")); n != 4 || m != 2 {
		t.Errorf("%d measurement and %d floor series, want 4 and 2:\n%s", n, m, s.Format())
	}
	if string(s.Format()) != string(s.Format()) {
		t.Error("not deterministic")
	}

	// Figures without any floor: no floor family at all.
	s.Results = []check.Result{{Check: "bandwidth", Component: "gpu0/h2d", Status: check.OK, Figures: fig("h2d", 31, 0)}}
	if d := parse(t, s.Format()); !slices.Equal(d.Order, want[:7]) {
		t.Errorf("families without floors %q", d.Order)
	}
	// A plain run: neither family.
	s.Results = s.Results[:0]
	if d := parse(t, s.Format()); !slices.Equal(d.Order, want[:6]) {
		t.Errorf("families of a plain run %q", d.Order)
	}
}
