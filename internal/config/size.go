package config

import (
	"strconv"
	"strings"
)

var sizeUnits = map[string]uint64{
	"": 1, "B": 1,
	"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
	"KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40,
	"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40,
}

// ParseSize reads a byte count such as "10GiB", "500MB" or "4096".
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.ToUpper(strings.TrimSpace(t[i:]))
	}
	mult, ok := sizeUnits[unit]
	if !ok || num == "" {
		return 0, errorf("bad size %q: want a number with an optional unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return 0, errorf("bad size %q: %q is not a non-negative number", s, num)
	}
	b := v * float64(mult)
	if b >= 1<<64 {
		// uint64 of a larger float is undefined (amd64 gives 2^63).
		return 0, errorf("bad size %q: more than 16 EiB", s)
	}
	return uint64(b), nil
}

// Floor is a free-space floor: an absolute byte count or a percentage.
type Floor struct {
	Bytes   uint64
	Percent float64 // used when IsPercent
	// IsPercent says which of the two fields applies.
	IsPercent bool
}

// ParseFloor reads "10GiB" or "5%". The empty string is no floor.
func ParseFloor(s string) (Floor, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return Floor{}, nil
	}
	if p, ok := strings.CutSuffix(t, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || !(v >= 0 && v <= 100) { // NaN too
			return Floor{}, errorf("bad percentage %q: want 0%% to 100%%", s)
		}
		return Floor{Percent: v, IsPercent: true}, nil
	}
	b, err := ParseSize(t)
	if err != nil {
		return Floor{}, err
	}
	return Floor{Bytes: b}, nil
}
