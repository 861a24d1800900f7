//go:build cgo

package healthcheck

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/jobrun/jobruntest"
)

// deepBed is a healthy bed whose bandwidth check measures the fake
// driver's two GPUs, judged (but for P2P) against a floor of 0.2 GB/s.
func deepBed(t *testing.T) bed {
	t.Helper()
	lib := jobruntest.FakeCUDA(t)
	b := newBed(t, nvidiaLoaded, `"nvidia"`)
	f, err := os.OpenFile(b.cfg, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = fmt.Fprint(f, jobruntest.FakeCUDAConfig(lib))
	must(t, errors.Join(err, f.Close()))
	return b
}

func (b bed) events(t *testing.T) []events.Event {
	t.Helper()
	return jobruntest.ReadEventLog(t, filepath.Join(b.dir, "events.jsonl"))
}

func measurementEvents(evs []events.Event) map[string]events.Event {
	out := map[string]events.Event{}
	for _, ev := range evs {
		if ev.Kind == events.KindMeasurement {
			out[ev.Component] = ev
		}
	}
	return out
}

var deepComponents = []string{"cuda0/h2d", "cuda0/d2h", "cuda0/d2d", "cuda1/h2d", "cuda1/d2h", "cuda1/d2d", "cuda0-cuda1/p2p", "cuda1-cuda0/p2p"}

// --deep measures: healthy, every figure goes to the event log and to
// gpuhc.prom; a plain run measures nothing and exports no figures; a
// --deep dry run writes nothing.
func TestDeepRunRecordsMeasurements(t *testing.T) {
	b := deepBed(t)
	code, out, stderr := b.run(t, "--deep")
	if code != ExitHealthy || !strings.Contains(out, "gpu007: OK") {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	if b.callLog(t) != nil {
		t.Errorf("healthy --deep run called Slurm: %q", b.callLog(t))
	}
	evs := b.events(t)
	ms := measurementEvents(evs)
	if len(ms) != len(deepComponents) || len(evs) != len(ms) {
		t.Fatalf("events %+v", evs)
	}
	d := b.readMetrics(t)
	for _, c := range deepComponents {
		ev, ok := ms[c]
		kind := c[strings.Index(c, "/")+1:]
		floor := 0.2
		if kind == "p2p" {
			floor = 0
		}
		if !ok || ev.Check != "bandwidth" || ev.Name != kind || ev.Value == nil || !(*ev.Value > 0.2) || ev.Unit != "GB/s" ||
			ev.Floor != floor || ev.Status != "OK" || ev.Node != "gpu007" || ev.By != "healthcheck --deep" || ev.Message == "" {
			t.Errorf("%s: %+v", c, ev)
			continue
		}
		labels := []string{"check", "bandwidth", "component", c, "name", kind, "unit", "GB/s"}
		if v := value(t, d, "gpuhc_measurement", labels...); v != *ev.Value {
			t.Errorf("%s: gpuhc_measurement %v, event %v", c, v, *ev.Value)
		}
		if v, ok := d.Value("gpuhc_measurement_floor", labels...); ok != (floor > 0) || v != floor {
			t.Errorf("%s: gpuhc_measurement_floor %v %v", c, v, ok)
		}
		if st := status(t, d, "bandwidth", c); st != "OK" {
			t.Errorf("%s is %s", c, st)
		}
	}

	code, out, _ = b.run(t)
	if code != ExitHealthy || strings.Contains(out, "bandwidth") {
		t.Fatalf("plain run: exit %d\n%s", code, out)
	}
	if n := len(b.events(t)); n != len(evs) {
		t.Errorf("plain run wrote %d events", n-len(evs))
	}
	if d := b.readMetrics(t); slices.Contains(d.Order, "gpuhc_measurement") {
		t.Errorf("plain run exports figures: %q", d.Order)
	}

	dry := deepBed(t)
	if code, out, _ := dry.run(t, "--deep", "--dry-run"); code != ExitHealthy || !strings.Contains(out, "cuda0/h2d") {
		t.Fatalf("dry run: exit %d\n%s", code, out)
	}
	if evs := dry.events(t); evs != nil {
		t.Errorf("dry run wrote events: %+v", evs)
	}
}

// A bandwidth FAIL drains with its figure in the reason; the figures are
// logged after the drain. The plain runs that follow, which do not
// measure, hold that drain instead of resuming it.
func TestDeepRunFailureDrainsAndIsHeld(t *testing.T) {
	b := deepBed(t)
	t.Setenv("FAKECUDA_GBPS", "0.05")
	t.Setenv("FAKECUDA_GBPS_ON", "cuMemcpyHtoD_v2")
	code, out, stderr := b.run(t, "--deep")
	if code != ExitFail {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, stderr)
	}
	calls := b.callLog(t)
	const reason = "Reason=gpuhc: bandwidth: cuda0/h2d (0000:1b:00.0): H2D "
	if len(calls) != 4 || !strings.HasPrefix(calls[2], "update|NodeName=gpu007|State=DRAIN|"+reason) ||
		!strings.Contains(calls[2], " GB/s < floor 0.2 (Fake GPU)") {
		t.Fatalf("calls %q", calls)
	}
	evs := b.events(t)
	drain := slices.IndexFunc(evs, func(ev events.Event) bool { return ev.Kind == events.KindDrain })
	first := slices.IndexFunc(evs, func(ev events.Event) bool { return ev.Kind == events.KindMeasurement })
	if drain < 0 || first < drain || evs[drain].By != "healthcheck --deep" {
		t.Fatalf("events %+v", evs)
	}
	ms := measurementEvents(evs)
	for c, want := range map[string]string{"cuda0/h2d": "FAIL", "cuda1/h2d": "FAIL", "cuda0/d2h": "OK"} {
		if ev := ms[c]; ev.Status != want || ev.Value == nil || (want == "FAIL") != (*ev.Value < 0.2) || ev.Floor != 0.2 {
			t.Errorf("%s: %+v", c, ev)
		}
	}
	d := b.readMetrics(t)
	if st := status(t, d, "bandwidth", "cuda0/h2d"); st != "FAIL" || value(t, d, "gpuhc_drained") != 1 {
		t.Errorf("cuda0/h2d %s, drained %v", st, value(t, d, "gpuhc_drained"))
	}

	for i := range 3 {
		code, out, _ := b.run(t)
		if code != ExitHealthy {
			t.Fatalf("plain run %d: exit %d\n%s", i, code, out)
		}
		if i == 2 && !strings.Contains(out, "policy: held: drained by gpuhc-healthcheck --deep for bandwidth, which this run does not check") {
			t.Errorf("plain run %d:\n%s", i, out)
		}
	}
	for _, c := range b.callLog(t) {
		if strings.Contains(c, "RESUME") {
			t.Errorf("a plain run resumed the --deep drain: %q", b.callLog(t))
		}
	}
}
