package slurm

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBackoffDelayCeiling(t *testing.T) {
	b := backoff{base: 250 * time.Millisecond, max: 2 * time.Second,
		jitter: func(d time.Duration) time.Duration { return d }}
	want := []time.Duration{250, 500, 1000, 2000, 2000}
	for i, w := range want {
		if got := b.delay(i); got != w*time.Millisecond {
			t.Errorf("attempt %d: %v, want %v", i, got, w*time.Millisecond)
		}
	}
	if got := b.delay(200); got != 2*time.Second {
		t.Errorf("huge attempt: %v", got)
	}
}

func TestUniformJitterStaysBelowCeiling(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := uniformJitter(time.Second)
		if d < 0 || d >= time.Second {
			t.Fatalf("out of range: %v", d)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Errorf("only %d distinct delays in 1000: not jittered", len(seen))
	}
	if uniformJitter(0) != 0 {
		t.Error("zero ceiling")
	}
}

func TestSleepCtxStopsAtCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	start := time.Now()
	if err := sleepCtx(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v", err)
	}
	if time.Since(start) > time.Second {
		t.Error("slept despite cancel")
	}
}

func TestBackoffWaitRefusesToOutliveDeadline(t *testing.T) {
	called := false
	b := backoff{base: time.Minute, max: time.Minute,
		jitter: func(d time.Duration) time.Duration { return d },
		sleep:  func(context.Context, time.Duration) error { called = true; return nil }}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := b.wait(ctx, 0); !errors.Is(err, context.DeadlineExceeded) || called {
		t.Errorf("err %v, slept %v", err, called)
	}
	if err := b.wait(t.Context(), 0); err != nil || !called {
		t.Errorf("no deadline: err %v, slept %v", err, called)
	}
}
