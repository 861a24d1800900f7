package runenv

import (
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	if got := (Process{Now: func() time.Time { return at }}).Clock(); !got.Equal(at) {
		t.Errorf("stopped clock: %s", got)
	}
	before := time.Now()
	if got := (Process{}).Clock(); got.Before(before) || got.After(time.Now()) {
		t.Errorf("no Now: %s, want the real time", got)
	}
}
