package config

import (
	"errors"
	"math"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/pciaddr"
)

// maxProblem bounds one problem of a load: capMsg's limit and its note.
const maxProblem = 4*maxQuoted + 200 + 40

// maxParseError bounds a parser's error, which names up to three values
// (a host list element, its range, the number): each quotes at most
// maxQuoted bytes of the value, at most 4 bytes each when escaped, and
// the value's length.
const maxParseError = 3*(4*maxQuoted+30) + 200

// checkBounded: an error is short however long the value it names.
func checkBounded(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil && len(err.Error()) > maxParseError {
		t.Fatalf("%.200q: %d-byte error %.300q", what, len(err.Error()), err)
	}
}

// Any file: the errors are a short list of short problems, and a file
// that loads is valid (validation finds nothing more) and loads the same
// again.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("../../etc/gpuhc.toml"); err == nil {
		f.Add(b)
	}
	for _, s := range []string{"", "deadline = \"30s\"\n[[host]]\nmatch = \"gpu[001-016]\"\ndeadline = \"10s\"\n", "[checks.gpu]\ncount = \"" + strings.Repeat("é", 80) + "\"\n",
		"x = [[[[[[[[]]]]]]]]\n", "[checks.mounts]\nmount = [{path = \"/scratch\", min_free = \"NaN%\"}]\n", "[[host]]\nmatch = \"[1-9][1-9]\"\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("f.toml", data, "gpu001")
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 || len(list) > maxErrors+1 {
				t.Fatalf("%q: error %v is not a short ErrorList", data, err)
			}
			for _, e := range list {
				if len(e.Msg) > maxProblem || len(e.Key) > MaxKeyLen || e.File != "f.toml" {
					t.Fatalf("%.200q: problem %.300q (%d bytes, key %d bytes)", data, e.Msg, len(e.Msg), len(e.Key))
				}
			}
			return
		}
		if ps := validate(c); len(ps) > 0 {
			t.Fatalf("%q loads, yet validation finds %v", data, ps)
		}
		if again, err := Parse("f.toml", data, "gpu001"); err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("%q loads differently the second time (%v)", data, err)
		}
	})
}

// Any host list: matching a host name is fast (slurmd waits on it),
// expansion stays under its limit and names only hosts the list matches.
func FuzzHostList(f *testing.F) {
	for _, s := range []string{"gpu[001-016,020]", "rack[1-2]-gpu[01-04]", "gpu*,login?", "[1-999999999][1-999999999][1-999999999][1-999999999][1-999999999][1-999999999][1-999999999][1-999999999]x",
		"a[0-999999999]", "a[1-016]", "a[", "a]", "a[]", ",", "a[1-2]*", "[0-9][0-9][0-9]", "a[9-1]", "a[1-2]b[3-4],c"} {
		f.Add(s, strings.Repeat("1", 64))
	}
	f.Fuzz(func(t *testing.T, expr, node string) {
		h, err := ParseHostList(expr)
		checkBounded(t, expr, err)
		if err != nil {
			return
		}
		start := time.Now()
		h.Match(node)
		h.Match(strings.Repeat("1", 64))
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("matching %q took %v", expr, d)
		}
		names, err := ExpandHostList(expr, 100)
		checkBounded(t, expr, err)
		if len(names) > 100 {
			t.Fatalf("%q expands to %d names, over the limit", expr, len(names))
		}
		for _, n := range names {
			if !h.Match(n) {
				t.Fatalf("%q expands to %q, which it does not match", expr, n)
			}
		}
	})
}

// sizeText is ParseSize's grammar: a number, then a unit.
var sizeText = regexp.MustCompile(`(?s)^([0-9.]*)(.*)$`)

// A size is the number times its unit, exactly as far as a float goes,
// and one too large for a byte count is refused, not wrapped; a
// percentage floor is a number from 0 to 100.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"10GiB", "500MB", "4096", " 1.5 k ", "1e3", ".", "1.", "-1", "99999999999999999999999", "17179869184GiB",
		"18446744073709551615", "16EiB", "5%", "100.5%", "NaN%", "-0%", "inf%", "1kıb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fl, ferr := ParseFloor(s)
		checkBounded(t, s, ferr)
		if ferr == nil && fl.IsPercent && !(fl.Percent >= 0 && fl.Percent <= 100) {
			t.Fatalf("ParseFloor(%q) = %v%%", s, fl.Percent)
		}
		n, err := ParseSize(s)
		checkBounded(t, s, err)
		m := sizeText.FindStringSubmatch(strings.TrimSpace(s))
		v, verr := strconv.ParseFloat(m[1], 64)
		mult, known := sizeUnits[strings.ToUpper(strings.TrimSpace(m[2]))]
		if verr != nil || !known || v < 0 {
			if err == nil {
				t.Fatalf("ParseSize(%q) = %d, for no number and unit", s, n)
			}
			return
		}
		want := v * float64(mult)
		switch {
		case want >= math.MaxUint64 && err == nil:
			t.Fatalf("ParseSize(%q) = %d, for %g bytes", s, n, want)
		case want < math.MaxUint64 && (err != nil || n != uint64(want)):
			t.Fatalf("ParseSize(%q) = %d, %v; want %g", s, n, err, want)
		}
	})
}

// Pairs from the file: what is accepted is written canonically, and the
// canonical form reads back as itself.
func FuzzParsePairs(f *testing.F) {
	for _, s := range []string{"0000:18:00.0=mlx5_0", "00010000:01:00.0 = mlx5_1", "0000:18:00.0=", "0000:18:00.8=a", "=", "0000:18:00.0=a=b",
		"mlx5_0:mlx5_1", "a:a", ":b", "a:b:c", "a/b:c", "0000:4E:00.0=mlx5_\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		gpu, hca, err := ParsePair(s)
		checkBounded(t, s, err)
		if err == nil {
			if g2, h2, err := ParsePair(gpu + "=" + hca); !pciaddr.IsSysfs(gpu) || err != nil || g2 != gpu || h2 != hca {
				t.Fatalf("ParsePair(%q) = %q, %q; written back: %q, %q, %v", s, gpu, hca, g2, h2, err)
			}
		}
		server, client, err := ParseHCAPair(s)
		checkBounded(t, s, err)
		if err == nil {
			if s2, c2, err := ParseHCAPair(server + ":" + client); server == client || err != nil || s2 != server || c2 != client {
				t.Fatalf("ParseHCAPair(%q) = %q, %q; written back: %q, %q, %v", s, server, client, s2, c2, err)
			}
		}
	})
}
