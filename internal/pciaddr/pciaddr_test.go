package pciaddr

import "testing"

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"00000000:4E:00.0": "0000:4e:00.0", // NVML
		"0000:4e:00.0":     "0000:4e:00.0", // sysfs
		"0000:4e:00":       "0000:4e:00.0",
		"4e:00.0":          "0000:4e:00.0",
		" 0000:18:00.0\n":  "0000:18:00.0",
		"00010000:01:00.0": "10000:01:00.0", // VMD domain, as sysfs writes it
		"10000:01:00.0":    "10000:01:00.0",
		"not an address":   "not an address.0",
		"GPU-1234":         "gpu-1234.0",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}
