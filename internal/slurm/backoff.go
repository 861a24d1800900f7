package slurm

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/gpuhc/gpuhc/internal/pause"
)

// backoff spaces retries with exponential backoff and full jitter, so a
// fleet of nodes that all saw slurmctld go away do not come back in step.
type backoff struct {
	base, max time.Duration
	// jitter returns a uniform duration in [0, d); injectable for tests.
	jitter func(d time.Duration) time.Duration
	// sleep waits d or until ctx ends; injectable for tests.
	sleep func(ctx context.Context, d time.Duration) error
}

func defaultBackoff() backoff {
	return backoff{
		base:   250 * time.Millisecond,
		max:    5 * time.Second,
		jitter: uniformJitter,
		sleep:  sleepCtx,
	}
}

// delay is the wait before retry number attempt (0 for the first retry).
func (b backoff) delay(attempt int) time.Duration {
	ceil := b.max
	if attempt < 30 && b.base<<attempt < b.max && b.base<<attempt > 0 {
		ceil = b.base << attempt
	}
	if ceil <= 0 {
		return 0
	}
	return b.jitter(ceil)
}

// wait sleeps before a retry. It refuses to start a sleep that would end
// after ctx's deadline: the retry could not finish in time anyway.
func (b backoff) wait(ctx context.Context, attempt int) error {
	d := b.delay(attempt)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return context.DeadlineExceeded
	}
	return b.sleep(ctx, d)
}

func uniformJitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(d)))
}

func sleepCtx(ctx context.Context, d time.Duration) error { return pause.For(ctx, d) }
