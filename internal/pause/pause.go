// Package pause waits: a timer that gives up when its context ends, for
// the backoffs, jitters and settles that must never outlast a run's
// deadline.
package pause

import (
	"context"
	"time"
)

// For waits d, or until ctx ends (its error).
func For(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
