package host

import (
	"strconv"
	"testing"

	"github.com/gpuhc/gpuhc/internal/pciaddr"
)

// A sensor's own critical limit is trusted only inside the plausible
// range, and is exactly the millidegrees the attribute says.
func FuzzParseCrit(f *testing.F) {
	seed(f, "testdata/thermal/node/sys/class/hwmon/hwmon0/temp1_crit", "100000", "0", "-40000", "40000", "200000", "200001",
		"9223372036854775807", "1e5", " 100000", "")
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := parseCrit(s)
		if !ok {
			return
		}
		mc, err := strconv.ParseInt(s, 10, 64)
		if err != nil || c < minSensorCritC || c > maxPlausibleC || c != float64(mc)/1000 {
			t.Fatalf("parseCrit(%q) = %v", s, c)
		}
	})
}

// Sysfs attribute names: an index is a short decimal that names the same
// attribute when written back, and an AMD node is one of the 8 functions.
func FuzzIndexed(f *testing.F) {
	for _, s := range []string{"temp1_input", "temp0_input", "temp007_input", "temp_input", "temp12345_input", "temp-1_input",
		"trip_point_3_type", "0000:00:18.3", "0000:00:1f.0", "0000:00:20.3", "0000:01:18.3", "00000:00:19.3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, a := range [][2]string{{"temp", "_input"}, {"trip_point_", "_type"}} {
			n := indexed(s, a[0], a[1])
			if n < -1 || n > 9999 || n >= 0 && indexed(a[0]+strconv.Itoa(n)+a[1], a[0], a[1]) != n {
				t.Fatalf("indexed(%q, %q, %q) = %d", s, a[0], a[1], n)
			}
		}
		if n := amdNode(s); n < -1 || n > 7 || n >= 0 && !pciaddr.IsSysfs(s) {
			t.Fatalf("amdNode(%q) = %d", s, n)
		}
		if n, err := strconv.Atoi(s); isSmallNumber(s) && (err != nil || n < 0 || n > 9999) {
			t.Fatalf("isSmallNumber(%q) for a number %d, %v", s, n, err)
		}
	})
}
