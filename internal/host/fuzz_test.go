package host

import (
	"os"
	"strings"
	"testing"
)

// The parsers read kernel files that could be anything after a driver or
// kernel bug. Whatever they get, they must not panic, and what they
// accept must make sense. `go test` runs the seeds; `go test -fuzz` more.

func seed(f *testing.F, path string, extra ...string) {
	if b, err := os.ReadFile(path); err == nil {
		f.Add(string(b))
	}
	for _, s := range extra {
		f.Add(s)
	}
}

func FuzzParseMountinfo(f *testing.F) {
	seed(f, "testdata/mounts/node/proc/self/mountinfo", "", "\n", " - ", "1 2 3 4 5 6 - a b c",
		`1 2 3:4 / /a\040b rw - t s o`, "1 2 3:4 / rel rw - t s o", `1 2 3:4 / /\777 rw - t s o`)
	seed(f, "/proc/self/mountinfo")
	f.Fuzz(func(t *testing.T, s string) {
		table, err := parseMountinfo(s)
		if err != nil {
			return
		}
		if len(table) == 0 {
			t.Fatal("no error and no mounts")
		}
		for _, e := range table {
			if !strings.HasPrefix(e.mountPoint, "/") {
				t.Fatalf("accepted relative mount point %q", e.mountPoint)
			}
		}
	})
}

func FuzzParseCPUList(f *testing.F) {
	seed(f, "/sys/devices/system/cpu/online", "0-31,64-95\n", "0", "", ",", "-", "0-0", "9-8", "99999", "0-65536")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseCPUList(s)
		if err == nil && (n < 1 || n > maxCPUID) {
			t.Fatalf("parseCPUList(%q) = %d", s, n)
		}
	})
}

func FuzzParseMeminfo(f *testing.F) {
	seed(f, "testdata/memory/node/proc/meminfo", "", ":", "MemTotal:", "MemTotal: 1 kB kB", "MemTotal: -1 kB", "a:1\nb:2 kB")
	f.Fuzz(func(t *testing.T, s string) {
		info, err := parseMeminfo(s)
		if err == nil && info == nil {
			t.Fatal("no error and no map")
		}
	})
}

func FuzzParseStat(f *testing.F) {
	seed(f, "/proc/self/stat", "", "(", ")", ")(", "1 () Z", "1 (a) ")
	f.Fuzz(func(t *testing.T, s string) {
		comm, _, err := parseStat([]byte(s))
		if err == nil && len(comm) >= len(s) {
			t.Fatalf("comm %q not inside %q", comm, s)
		}
	})
}

func FuzzParseProcModules(f *testing.F) {
	seed(f, "testdata/modules/node/proc/modules", "", "a", "a b c", "-- 1 2", "\xff 1 2")
	f.Fuzz(func(t *testing.T, s string) {
		names, err := parseProcModules(s)
		if err != nil {
			return
		}
		for n := range names {
			if !validModName(n) || strings.Contains(n, "-") {
				t.Fatalf("accepted module name %q", n)
			}
		}
	})
}

func FuzzUnescapeOctal(f *testing.F) {
	for _, s := range []string{`/a\040b`, `\`, `\1`, `\12`, `\377`, `\400`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := unescapeOctal(s); len(got) > len(s) {
			t.Fatalf("unescapeOctal(%q) grew to %q", s, got)
		}
	})
}
