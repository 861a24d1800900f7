package pciaddr

import (
	"regexp"
	"testing"
)

var logAddr = regexp.MustCompile(`^` + LogPattern + `$`)

// Every address a driver may log (LogPattern) normalizes to a sysfs name,
// and a sysfs name is a fixed point: the form gpuhc compares is stable.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"0000:18:00.0", "00000000:4E:00.0", "0000:4e:00", "4e:00.0", "10000:01:00.0", "00010000:01:00.0",
		"ffffffff:ff:1f.7", "", ":", "::", "x", " 0000:4e:00.0 ", "0:0:0.0", "000000000:00:00.0", "0000:4e:00.8", "0000:4E:00.0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := Normalize(s)
		if logAddr.MatchString(s) && !IsSysfs(n) {
			t.Fatalf("Normalize(%q) = %q: a logged address must become a sysfs name", s, n)
		}
		if IsSysfs(n) && Normalize(n) != n {
			t.Fatalf("Normalize(%q) = %q, but Normalize(%q) = %q", s, n, n, Normalize(n))
		}
	})
}
