package check

import (
	"context"
	"strings"
	"testing"
	"time"
)

type fnCheck struct {
	name string
	run  func(ctx context.Context) []Result
}

func (c fnCheck) Name() string                     { return c.name }
func (c fnCheck) Run(ctx context.Context) []Result { return c.run(ctx) }

func fixed(name string, rs ...Result) Check {
	return fnCheck{name, func(context.Context) []Result { return rs }}
}

// hang ignores its context, as a check stuck in a kernel call would.
func hang(name string, release chan struct{}) Check {
	return fnCheck{name, func(context.Context) []Result { <-release; return nil }}
}

func TestRunConcurrentWithTimeouts(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	tasks := []Task{
		{Check: fixed("a", Result{Component: "host", Status: OK}), Timeout: time.Second},
		{Check: hang("hung", release), Timeout: 200 * time.Millisecond},
		{Check: hang("hung2", release), Timeout: 200 * time.Millisecond},
		{Check: fixed("b", Result{Component: "x", Status: Fail, Message: "bad"}), Timeout: time.Second},
	}
	start := time.Now()
	got := Run(context.Background(), tasks)
	elapsed := time.Since(start)
	// Two hung checks of 200 ms each, run concurrently: well under 400 ms.
	if elapsed > 380*time.Millisecond {
		t.Errorf("runner took %v: hung checks were not abandoned concurrently", elapsed)
	}
	if len(got) != 4 || got[0].Name != "a" || got[3].Name != "b" {
		t.Fatalf("results out of order: %+v", got)
	}
	for _, i := range []int{1, 2} {
		r := got[i].Results
		if len(r) != 1 || r[0].Status != Error || !strings.HasPrefix(r[0].Message, "timed out after 0.2s") {
			t.Errorf("hung check %d: %+v", i, r)
		}
		if r[0].Check != got[i].Name || r[0].Action != ActionNone {
			t.Errorf("hung check %d missing name/action: %+v", i, r[0])
		}
	}
	if got[3].Results[0].Check != "b" || got[3].Results[0].Action != ActionNone {
		t.Errorf("runner did not fill check name and default action: %+v", got[3].Results[0])
	}
}

func TestRunGlobalDeadline(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	got := Run(ctx, []Task{{Check: hang("slow", release), Timeout: 10 * time.Second}})
	if d := time.Since(start); d > 300*time.Millisecond {
		t.Errorf("global deadline ignored: took %v", d)
	}
	if got[0].Results[0].Status != Error {
		t.Errorf("want ERROR, got %+v", got[0].Results)
	}
}

func TestRunPanicIsError(t *testing.T) {
	p := fnCheck{"boom", func(context.Context) []Result { panic("nil map") }}
	got := Run(context.Background(), []Task{{Check: p, Timeout: time.Second}})
	r := got[0].Results
	if len(r) != 1 || r[0].Status != Error || !strings.Contains(r[0].Message, "panicked") {
		t.Errorf("panic not turned into ERROR: %+v", r)
	}
}

func TestWorstAndFlatten(t *testing.T) {
	timed := []Timed{
		{Name: "z", Results: []Result{{Check: "z", Component: "b", Status: Warn}}},
		{Name: "a", Results: []Result{{Check: "a", Component: "y", Status: Fail}, {Check: "a", Component: "x", Status: OK}}},
	}
	flat := Flatten(timed)
	var order []string
	for _, r := range flat {
		order = append(order, r.Check+"/"+r.Component)
	}
	if strings.Join(order, ",") != "a/x,a/y,z/b" {
		t.Errorf("order %v", order)
	}
	if Worst(flat) != Fail || Worst(nil) != Skip || Worst(flat[2:]) != Warn {
		t.Error("Worst wrong")
	}
}

func TestStatusText(t *testing.T) {
	for _, s := range []Status{Skip, OK, Warn, Error, Fail} {
		b, _ := s.MarshalText()
		var back Status
		if err := back.UnmarshalText([]byte(strings.ToLower(string(b)))); err != nil || back != s {
			t.Errorf("%v round trip: %v %v", s, back, err)
		}
	}
	if _, err := ParseStatus("BROKEN"); err == nil {
		t.Error("unknown status accepted")
	}
}

func TestOrdinal(t *testing.T) {
	for n, want := range map[int]string{1: "1st", 2: "2nd", 3: "3rd", 4: "4th", 11: "11th", 12: "12th", 13: "13th", 21: "21st", 102: "102nd", 111: "111th"} {
		if got := Ordinal(n); got != want {
			t.Errorf("Ordinal(%d) = %q, want %q", n, got, want)
		}
	}
}

// A FAIL found at once reaches the callback while a hung check still runs.
func TestStreamHandsResultsOverAsTheyFinish(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	tasks := []Task{
		{Check: hang("hung", release), Timeout: 300 * time.Millisecond},
		{Check: fixed("fast", Result{Component: "gpu3", Status: Fail, Message: "xid 79"}), Timeout: time.Second},
	}
	start := time.Now()
	type seen struct {
		i     int
		name  string
		after time.Duration
	}
	var order []seen
	got := Stream(context.Background(), tasks, func(i int, tm Timed) {
		order = append(order, seen{i, tm.Name, time.Since(start)})
	})
	if len(order) != 2 || order[0].name != "fast" || order[0].i != 1 || order[1].name != "hung" {
		t.Fatalf("callback order = %+v, want fast (1) then hung (0)", order)
	}
	if order[0].after > 100*time.Millisecond {
		t.Errorf("fast FAIL handed over after %s, want at once", order[0].after)
	}
	if order[1].after < 250*time.Millisecond {
		t.Errorf("hung check handed over after %s, before its timeout", order[1].after)
	}
	if got[0].Name != "hung" || got[1].Name != "fast" || got[1].Results[0].Check != "fast" {
		t.Errorf("results not in task order with names: %+v", got)
	}
}
