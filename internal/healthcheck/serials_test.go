package healthcheck

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
	"github.com/gpuhc/gpuhc/internal/stats"
)

// Heartbeats credit their hours to the GPU serials present, so that MTTF
// per serial is real: a GPU swapped out takes its hours along, written at
// once in a heartbeat of its own, and its successor starts at zero. A run
// that sees no serial (NVML down) changes nothing.
func TestHeartbeatSerials(t *testing.T) {
	b := newBed(t, nvidiaLoaded, `"nvidia"`)
	m, err := sim.Build("dgxh100", nil)
	must(t, err)
	var before []string
	for i := range m.Devices {
		before = append(before, m.Model.Serial(i))
	}
	slices.Sort(before)
	const swapped = "1654922000099"
	after := slices.Clone(before)
	after[3] = swapped // gpu3's serial sorts fourth of the model's
	slices.Sort(after)
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	swap := []string{"--inject", "gpu3:serial=" + swapped}
	steps := []struct {
		at     time.Duration
		inject []string
		beats  int
		hours  float64  // of the newest heartbeat
		serial []string // of the newest heartbeat
	}{
		{0, nil, 0, 0, nil},
		{time.Hour, nil, 0, 0, nil},
		// gpu3 swapped: the 2 h so far are the old set's, written now.
		{2 * time.Hour, swap, 1, 2, before},
		{3 * time.Hour, swap, 1, 0, nil},
		// NVML down: no serials seen; not a change of GPUs.
		{4 * time.Hour, []string{"--inject", "gpu0:nvml-init"}, 1, 0, nil},
		{5 * time.Hour, swap, 1, 0, nil},
		// Due 24 h after the last: 3 h counted (the long gap as 1 h).
		{26 * time.Hour, swap, 2, 4, after},
	}
	for i, s := range steps {
		args := append([]string{"--simulate", "dgxh100"}, s.inject...)
		code, out, stderr := b.runAt(t, t0.Add(s.at), args...)
		if code == ExitInternal || code == ExitUsage {
			t.Fatalf("step %d: exit %d\n%s%s", i, code, out, stderr)
		}
		beats := b.heartbeats(t)
		if len(beats) != s.beats {
			t.Fatalf("step %d (+%s): %d heartbeats, want %d: %+v", i, s.at, len(beats), s.beats, beats)
		}
		if s.serial == nil {
			continue
		}
		hb := beats[len(beats)-1]
		if hb.Hours != s.hours || !slices.Equal(hb.Serials, s.serial) || !hb.Time.Equal(t0.Add(s.at)) {
			t.Errorf("step %d: heartbeat %v hours, serials %v at %s; want %v hours, %v", i, hb.Hours, hb.Serials, hb.Time, s.hours, s.serial)
		}
	}
	// What gpuhc-drain stats makes of that log: the swapped-out GPU has
	// the 2 h before the swap, its successor the 4 h after, the others 6.
	hours := map[string]float64{}
	for _, row := range b.stats(t).BySerial {
		hours[row.Key] = row.Hours
	}
	if hours[m.Model.Serial(3)] != 2 || hours[swapped] != 4 || hours[m.Model.Serial(0)] != 6 {
		t.Errorf("stats hours by serial: %v", hours)
	}
}

// stats is the statistics of the bed's event log.
func (b bed) stats(t *testing.T) stats.Report {
	t.Helper()
	acc := stats.New(stats.Options{})
	must(t, events.Scan(context.Background(), []string{filepath.Join(b.dir, "events.jsonl")}, nil,
		func(w string) { t.Error(w) }, func(ev events.Event) error { acc.Add(ev); return nil }))
	return acc.Report()
}

// Serials come from the driver: only short printable ones, once each,
// sorted, and a bounded number go into heartbeats.
func TestPresentSerials(t *testing.T) {
	r := func(serial string) check.Result { return check.Result{IDs: check.IDs{Serial: serial}} }
	tests := []struct {
		name string
		in   []check.Result
		want []string
	}{
		{"none", []check.Result{r(""), r("")}, nil},
		{"sorted once each", []check.Result{r("2"), r("1"), r("2"), r("")}, []string{"1", "2"}},
		{"not printable", []check.Result{r("1\n2"), r("a b"), r("é"), r("3")}, []string{"3"}},
		{"too long", []check.Result{r(string(make([]byte, 65))), r(string(slices.Repeat([]byte("9"), 65)))}, nil},
	}
	for _, tt := range tests {
		if got := presentSerials(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	var many []check.Result
	for i := range 100 {
		many = append(many, r(string(rune('A'+i/26))+string(rune('a'+i%26))))
	}
	if got := presentSerials(many); len(got) != maxSerials {
		t.Errorf("%d serials kept, want %d", len(got), maxSerials)
	}
}
