package config

import (
	"strings"
	"testing"
	"time"
)

func TestFit(t *testing.T) {
	s := time.Second
	tests := []struct {
		name                              string
		limit, deadline                   time.Duration
		wantDeadline, wantCalls, wantWdog time.Duration
		clamped                           bool
	}{
		{"22.05/24.11 fixed 60 s: unchanged", 60 * s, 45 * s, 45 * s, 57 * s, 58 * s, false},
		{"unset (0) means 60", 0, 45 * s, 45 * s, 57 * s, 58 * s, false},
		{"short deadline under 60", 60 * s, 10 * s, 10 * s, 24 * s, 25 * s, false},
		{"HealthCheckTimeout=10", 10 * s, 45 * s, 5 * s, 7 * s, 8 * s, true},
		{"HealthCheckTimeout=10, deadline 5 fits", 10 * s, 5 * s, 5 * s, 7 * s, 8 * s, false},
		{"long limit keeps deadline+15", 600 * s, 45 * s, 45 * s, 59 * s, 60 * s, false},
		{"tiny limit: proportional", 4 * s, 45 * s, 2 * s, 3200 * time.Millisecond, 3600 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clamped := Fit(tt.limit, tt.deadline)
			if b.Deadline != tt.wantDeadline || b.CallsEnd != tt.wantCalls || b.Watchdog != tt.wantWdog {
				t.Errorf("Fit(%s, %s) = %+v, want deadline %s calls %s watchdog %s", tt.limit, tt.deadline, b, tt.wantDeadline, tt.wantCalls, tt.wantWdog)
			}
			if (clamped != "") != tt.clamped {
				t.Errorf("clamped = %q, want clamped %v", clamped, tt.clamped)
			}
			lim := tt.limit
			if lim == 0 {
				lim = 60 * s
			}
			if !(b.Deadline <= b.CallsEnd && b.CallsEnd < b.Watchdog && b.Watchdog < lim) {
				t.Errorf("plan out of order: %+v", b)
			}
		})
	}
}

func TestCheckFit(t *testing.T) {
	c := Default()
	if err := CheckFit(c, 10*time.Second); err != nil {
		t.Errorf("built-in deadline is clamped, not refused: %v", err)
	}
	c.Deadline.Duration = 30 * time.Second
	err := CheckFit(c, 10*time.Second)
	want := "deadline 30s + 2s for the drain + 3s margin > HealthCheckTimeout 10s"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckFit = %v, want %q", err, want)
	}
	if err := CheckFit(c, 60*time.Second); err != nil {
		t.Errorf("30s fits in 60s: %v", err)
	}
	c.Deadline.Duration = 5 * time.Second
	if err := CheckFit(c, 10*time.Second); err != nil {
		t.Errorf("5s fits in 10s: %v", err)
	}
	c.Deadline.Duration = 2 * time.Second
	if err := CheckFit(c, 4*time.Second); err != nil {
		t.Errorf("2s fits in 4s (half): %v", err)
	}
	c.Deadline.Duration = 3 * time.Second
	if err := CheckFit(c, 4*time.Second); err == nil || !strings.Contains(err.Error(), "3s > 2s, half of HealthCheckTimeout 4s") {
		t.Errorf("3s in 4s: %v", err)
	}
}

func TestHealthCheckTimeoutKey(t *testing.T) {
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{{0, true}, {10 * time.Second, true}, {-time.Second, false}, {1500 * time.Millisecond, false}, {MaxHealthCheckTimeout + time.Second, false}} {
		c := Default()
		c.Slurm.HealthCheckTimeout.Duration = tc.d
		ps := validate(c)
		bad := false
		for _, p := range ps {
			if strings.Contains(p.path, "health_check_timeout") {
				bad = true
			}
		}
		if bad == tc.ok {
			t.Errorf("health_check_timeout %s: problems %v, want ok=%v", tc.d, ps, tc.ok)
		}
	}
}
