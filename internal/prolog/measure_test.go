//go:build cgo

package prolog

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/jobrun/jobruntest"
)

// fakeCUDABed is a bed whose bandwidth check measures internal/bandwidth's
// fake CUDA driver (host memcpy behind the driver API, built with gcc):
// two GPUs, judged (but for P2P) against a floor of 0.2 GB/s.
func fakeCUDABed(t *testing.T) jobruntest.Bed {
	t.Helper()
	return jobruntest.NewBed(t, jobruntest.FakeCUDAConfig(jobruntest.FakeCUDA(t)))
}

func measurements(evs []events.Event) []events.Event {
	var out []events.Event
	for _, ev := range evs {
		if ev.Kind == events.KindMeasurement {
			out = append(out, ev)
		}
	}
	return out
}

// A full prolog logs each bandwidth figure as a measurement event with
// the job; a quick one measures nothing.
func TestFullPrologRecordsMeasurements(t *testing.T) {
	b, s := fakeCUDABed(t), jobruntest.NewSlurm("gpu001")
	// dgxb200's gpu0 sits at the fake's first PCI address.
	r := runProlog(t, b, s, jobruntest.Env("prolog_slurmd", "SPANK_GPUHC_MODE", "full"), "--simulate", "dgxb200")
	if r.code != 0 || len(s.Calls()) != 0 {
		t.Fatalf("exit %d, calls %q\n%s%s", r.code, s.Calls(), r.out, r.stderr)
	}
	evs := b.ReadEvents(t)
	ms := measurements(evs)
	if len(ms) != 8 || len(evs) != 9 || evs[8].Kind != events.KindProlog {
		t.Fatalf("events %s", jobruntest.Kinds(evs))
	}
	var names []string
	for _, ev := range ms {
		names = append(names, ev.Name)
		floor := 0.2
		if ev.Name == "p2p" {
			floor = 0
		}
		if ev.Check != "bandwidth" || !strings.HasSuffix(ev.Component, "/"+ev.Name) || ev.Value == nil || !(*ev.Value > 0.2) ||
			ev.Unit != "GB/s" || ev.Floor != floor || ev.Status != "OK" || ev.JobID != "4242" || ev.By != "prolog" || ev.Node != "gpu001" {
			t.Errorf("measurement %+v", ev)
		}
	}
	// The fake's first GPU is the simulated gpu0: its figures carry gpu0's
	// name and serial.
	if i := slices.IndexFunc(ms, func(ev events.Event) bool { return ev.Component == "gpu0/h2d" }); i < 0 || ms[i].Serial == "" {
		t.Errorf("no gpu0/h2d with its serial: %+v", ms)
	}
	slices.Sort(names)
	if want := []string{"d2d", "d2d", "d2h", "d2h", "h2d", "h2d", "p2p", "p2p"}; !slices.Equal(names, want) {
		t.Errorf("figures %q", names)
	}

	quick := fakeCUDABed(t)
	if r := runProlog(t, quick, s, jobruntest.Env("prolog_slurmd"), "--simulate", "dgxh100"); r.code != 0 {
		t.Fatalf("quick: exit %d\n%s%s", r.code, r.out, r.stderr)
	}
	if evs := quick.ReadEvents(t); jobruntest.Kinds(evs) != "prolog" {
		t.Errorf("quick prolog events %s", jobruntest.Kinds(evs))
	}
}

// A bandwidth FAIL in a full prolog drains first; the figures are logged
// after the drain, with the FAIL's.
func TestFullPrologFailureLogsMeasurementsAfterTheDrain(t *testing.T) {
	b, s := fakeCUDABed(t), jobruntest.NewSlurm("gpu001")
	t.Setenv("FAKECUDA_GBPS", "0.05")
	t.Setenv("FAKECUDA_GBPS_ON", "cuMemcpyHtoD_v2")
	var before []events.Event
	s.OnDrain = func() { before = b.ReadEvents(t) }
	r := runProlog(t, b, s, jobruntest.Env("prolog_slurmd", "SPANK_GPUHC_MODE", "full"), "--simulate", "dgxh100")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", r.code, r.out, r.stderr)
	}
	calls := s.Calls()
	if len(calls) < 3 || !strings.HasPrefix(calls[2], "drain gpuhc: bandwidth: ") || !strings.Contains(calls[2], "/h2d ") {
		t.Fatalf("calls %q", calls)
	}
	if len(before) != 0 {
		t.Errorf("events written before the drain: %s", jobruntest.Kinds(before))
	}
	evs := b.ReadEvents(t)
	drain := slices.IndexFunc(evs, func(ev events.Event) bool { return ev.Kind == events.KindDrain })
	first := slices.IndexFunc(evs, func(ev events.Event) bool { return ev.Kind == events.KindMeasurement })
	if drain < 0 || first < drain || evs[len(evs)-1].Kind != events.KindProlog {
		t.Fatalf("events %s", jobruntest.Kinds(evs))
	}
	fails := 0
	for _, ev := range measurements(evs) {
		if ev.Name == "h2d" {
			fails++
			if ev.Status != "FAIL" || ev.Value == nil || !(*ev.Value < 0.2) || ev.Floor != 0.2 || ev.JobID != "4242" {
				t.Errorf("slow H2D %+v", ev)
			}
		} else if ev.Status != "OK" {
			t.Errorf("%+v", ev)
		}
	}
	if fails != 2 {
		t.Errorf("%d H2D measurements, want 2", fails)
	}
}
