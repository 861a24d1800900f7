package config

import (
	"fmt"
	"time"
)

// The health check's time budget inside slurmd's limit (HealthCheckTimeout
// on 26.05, a fixed 60 s before). slurmd sends SIGTERM at the limit and
// SIGKILL 10 ms later (26.05), so gpuhc must end in its own time:
//
//	0 ── checks (Deadline) ── drain room ── Slurm calls end ── watchdog ── limit
//
// With the 60 s limit this is the budget gpuhc always had: deadline 45 s,
// watchdog 58 s.
const (
	// DrainRoom is what the drain's Slurm calls get after the deadline.
	DrainRoom = 2 * time.Second
	// Margin separates the last Slurm call from the limit: 1 s for the
	// watchdog to print and exit, 2 s before slurmd's SIGTERM.
	Margin = 3 * time.Second
	// MaxHealthCheckTimeout is the largest HealthCheckTimeout slurmd takes.
	MaxHealthCheckTimeout = 65535 * time.Second
	// DefaultHealthCheckTimeout is the limit when nothing sets one.
	DefaultHealthCheckTimeout = 60 * time.Second
	// watchdogMargin is how long before the limit the watchdog fires.
	watchdogMargin = 2 * time.Second
	// watchdogAfterDeadline is the most the watchdog waits after the
	// deadline (the old deadline + 15 s).
	watchdogAfterDeadline = 15 * time.Second
)

// Budget is one run's time plan, all measured from the start of the run.
type Budget struct {
	Limit    time.Duration // slurmd's kill
	Deadline time.Duration // checks end
	CallsEnd time.Duration // Slurm calls end
	Watchdog time.Duration // gpuhc exits
}

// Fit plans a run with the given check deadline under limit. The
// deadline is clamped to what the limit leaves; clamped says so ("" when
// the deadline fits as asked). A limit too short for any plan (under
// DrainRoom+Margin+1s) gets proportional shares so that checks still run.
func Fit(limit, deadline time.Duration) (b Budget, clamped string) {
	if limit <= 0 {
		limit = DefaultHealthCheckTimeout
	}
	b.Limit = limit
	room := limit - DrainRoom - Margin
	if room < time.Second {
		// HealthCheckTimeout of a few seconds: still check, in half of it.
		b.Deadline = min(deadline, limit/2)
		b.Watchdog = limit * 9 / 10
		b.CallsEnd = b.Watchdog - (b.Watchdog-b.Deadline)/4
		if b.Deadline < deadline {
			clamped = FitError(limit, deadline)
		}
		return b, clamped
	}
	b.Deadline = deadline
	if deadline > room {
		b.Deadline = room
		clamped = FitError(limit, deadline)
	}
	b.Watchdog = min(b.Deadline+watchdogAfterDeadline, limit-watchdogMargin)
	b.CallsEnd = b.Watchdog - time.Second
	return b, clamped
}

// FitError is the arithmetic of a deadline that does not fit.
func FitError(limit, deadline time.Duration) string {
	return fmt.Sprintf("deadline %s + %s for the drain + %s margin > HealthCheckTimeout %s", deadline, DrainRoom, Margin, limit)
}

// CheckFit refuses an explicit deadline (one the file sets, i.e. not the
// built-in 45s) that does not fit in limit; --check-config uses it.
func CheckFit(c Config, limit time.Duration) error {
	d := c.Deadline.Duration
	if b, clamped := Fit(limit, d); clamped != "" && d != Default().Deadline.Duration {
		if limit-DrainRoom-Margin < time.Second {
			return errorf("deadline: %s > %s, half of HealthCheckTimeout %s (too short for %s for the drain + %s margin)", d, b.Deadline, limit, DrainRoom, Margin)
		}
		return errorf("deadline: %s", FitError(limit, d))
	}
	return nil
}
