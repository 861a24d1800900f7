package drainctl

import (
	"math"
	"strconv"
	"testing"
	"time"
)

// agoModel is what a --since duration means, summed without overflow:
// days and weeks, then Go duration syntax; false where that syntax fails.
func agoModel(s string) (float64, bool) {
	total := 0.0
	for m := daysRE.FindStringSubmatch(s); m != nil; m = daysRE.FindStringSubmatch(s) {
		n, _ := strconv.ParseFloat(m[1], 64)
		day := float64(24 * time.Hour)
		if m[2] == "w" {
			day *= 7
		}
		total += n * day
		s = s[len(m[0]):]
	}
	if s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, false
		}
		total += float64(d)
	}
	return total, true
}

// Any --since/--until: a duration is the time it says back from now (not
// a wrapped one), and a time is a time.
func FuzzParseWhen(f *testing.F) {
	for _, s := range []string{"36h", "7d", "2w", "1d12h", "100000d", "100000w", "99999d99999d", "2026-11-30", "2026-11-30T08:00", "2026-11-30 08:00:00",
		"2026-11-30T08:00:00+01:00", "-1h", "1d-1h", "", " 7d ", "1e3h", "0d0w0s"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := parseAgo(s)
		if ok {
			want, mok := agoModel(s)
			if d < 0 || !mok || math.Abs(float64(d)-want) > want*1e-9+1 {
				t.Fatalf("parseAgo(%q) = %v, want %v ns", s, d, want)
			}
			if w, err := parseWhen(s, now); s != "" && s[0] > ' ' && s[len(s)-1] > ' ' && (err != nil || w.After(now)) {
				t.Fatalf("parseWhen(%q) = %v, %v after parseAgo %v", s, w, err, d)
			}
		}
	})
}
