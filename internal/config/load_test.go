package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func doc(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "gpuhc.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// found lists each reported problem as "line key".
func found(t *testing.T, err error, file string) []string {
	t.Helper()
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error %v (%T) is not an ErrorList", err, err)
	}
	var out []string
	for _, e := range list {
		if e.File != file {
			t.Errorf("error %q names file %q, want %q", e, e.File, file)
		}
		out = append(out, fmt.Sprintf("%d %s", e.Line, e.Key))
	}
	return out
}

func TestLoadStrictErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		node string
		want []string // "line key", in line order
	}{
		{"unknown top-level key", doc(
			`deadline = "45s"`,
			`bogus = 1`),
			"n1", []string{"2 bogus"}},
		{"keys are case sensitive", doc(
			`Deadline = "45s"`),
			"n1", []string{`1 Deadline`}},
		{"unknown key in a section", doc(
			`[checks.thermal]`,
			`warn_celsius = 80.0`,
			`warn_celcius = 80.0`),
			"n1", []string{"3 checks.thermal.warn_celcius"}},
		{"unknown dotted and quoted keys", doc(
			`checks.thermal.hot = 1`,
			`"dead line" = 1`),
			"n1", []string{"1 checks.thermal.hot", `2 "dead line"`}},
		{"unknown table is reported once, not each key in it", doc(
			`[checks.fpga]`,
			`a = 1`,
			`b = 2`),
			"n1", []string{"1 checks.fpga"}},
		{"unknown key in each array-of-tables entry", doc(
			`[[checks.mounts.mount]]`,
			`path = "/a"`,
			`[[checks.mounts.mount]]`,
			`path = "/b"`,
			`writeable = true`,
			`[[checks.mounts.mount]]`,
			`path = "/c"`,
			`writeable = true`),
			"n1", []string{"5 checks.mounts.mount.writeable", "8 checks.mounts.mount.writeable"}},
		{"unknown key in an inline table and inline array of tables", doc(
			`log = { level = "info", colour = true }`,
			`[checks.mounts]`,
			`mount = [ { path = "/a" },`,
			`  { path = "/b", size = 1 } ]`),
			"n1", []string{"1 log.colour", "4 checks.mounts.mount.size"}},
		{"unknown key in a host section that does not match", doc(
			`[[host]]`,
			`match = "other"`,
			`[host.checks.modules]`,
			`requird = ["nvidia"]`),
			"n1", []string{"4 host.checks.modules.requird"}},
		{"unknown key in a matching host section", doc(
			`[[host]]`,
			`match = "n1"`,
			`dedline = "30s"`),
			"n1", []string{"3 host.dedline"}},
		{"host sections do not nest, match is not a base key", doc(
			`match = "n1"`,
			`[[host]]`,
			`match = "n1"`,
			`[[host.host]]`,
			`match = "n1"`),
			"n1", []string{"1 match", "4 host.host"}},
		{"multi-line strings do not confuse line numbers", doc(
			`[slurm]`,
			`user = """`,
			`[checks]`,
			`bogus = 1`,
			`"""`,
			`typo = 2`),
			"n1", []string{"6 slurm.typo"}},
		{"wrong types, each at its own line", doc(
			`deadline = "5 seconds"`,
			`check_timeout = 10`,
			`[checks.cpu]`,
			`expected = "8"`,
			`[checks.thermal]`,
			`warn_celsius = "hot"`,
			`exclude = "acpitz"`,
			`[checks.modules]`,
			`required = "nvidia"`),
			"n1", []string{"1 deadline", "2 check_timeout", "4 checks.cpu.expected",
				"6 checks.thermal.warn_celsius", "7 checks.thermal.exclude", "9 checks.modules.required"}},
		{"storm guard keys of the wrong type", doc(
			`[policy]`,
			`max_drained_fraction = "10%"`,
			`max_drained_nodes = 2.5`,
			`storm_cache = 60`),
			"n1", []string{"2 policy.max_drained_fraction", "3 policy.max_drained_nodes", "4 policy.storm_cache"}},
		{"storm guard values out of range", doc(
			`[policy]`,
			`max_drained_fraction = 10`,
			`max_drained_nodes = -1`,
			`storm_cache = "-1s"`),
			"n1", []string{"2 policy.max_drained_fraction", "3 policy.max_drained_nodes", "4 policy.storm_cache"}},
		{"wrong type for a section", doc(
			`checks = 5`),
			"n1", []string{"1 checks"}},
		{"wrong type in an early array entry names that entry", doc(
			`[[checks.mounts.mount]]`,
			`path = 1`,
			`[[checks.mounts.mount]]`,
			`path = "/b"`),
			"n1", []string{"2 checks.mounts.mount.path"}},
		{"wrong type in the first of two host sections names the first", doc(
			`[[host]]`,
			`match = "x"`,
			`deadline = 30`,
			`[[host]]`,
			`match = "y"`,
			`deadline = "30s"`),
			"n1", []string{"3 host.deadline"}},
		{"unknown keys and wrong types together", doc(
			`bogus = 1`,
			`deadline = true`),
			"n1", []string{"1 bogus", "2 deadline"}},
		{"host section without match", doc(
			`deadline = "30s"`,
			`[[host]]`,
			`deadline = "20s"`),
			"n1", []string{"2 host.match"}},
		{"host section with a bad match", doc(
			`[[host]]`,
			`deadline = "20s"`,
			`match = "gpu[5-1]"`),
			"n1", []string{"3 host.match"}},
		{"match of the wrong type", doc(
			`[[host]]`,
			`match = ["gpu1"]`),
			"n1", []string{"2 host.match"}},
		{"syntax error", doc(
			`root = "/"`,
			`deadline = `),
			"n1", []string{"2 deadline"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeFile(t, tt.text)
			_, err := Load(p, tt.node)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			if got := found(t, err, p); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q\n%v", got, tt.want, err)
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	p := writeFile(t, doc(`[checks.mounts]`, `[[checks.mounts.mount]]`, `path = "/a"`, `writeable = true`))
	_, err := Load(p, "n1")
	want := p + `:4: unknown key "checks.mounts.mount.writeable"`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	var e *Error
	if !errors.As(err, &e) || e.Line != 4 || e.Key != "checks.mounts.mount.writeable" {
		t.Fatalf("errors.As gave %+v", e)
	}

	p = writeFile(t, doc(`deadline = "5 seconds"`))
	_, err = Load(p, "n1")
	want = p + `:1: deadline: want a duration such as "45s" or "1m30s", found string "5 seconds"`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}

	for _, tt := range []struct {
		e    Error
		want string
	}{
		{Error{File: "f", Line: 3, Msg: "m"}, "f:3: m"},
		{Error{File: "f", Msg: "m"}, "f: m"},
		{Error{Line: 3, Msg: "m"}, "line 3: m"},
		{Error{Msg: "m"}, "m"},
	} {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("%+v.Error() = %q, want %q", tt.e, got, tt.want)
		}
	}
}

func TestLoadKeepsDefaultsForAbsentKeys(t *testing.T) {
	p := writeFile(t, doc(`[checks.thermal]`, `warn_celsius = 80.0`))
	c, err := Load(p, "n1")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Checks.Thermal.WarnCelsius = 80
	if fmt.Sprintf("%+v", c) != fmt.Sprintf("%+v", want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
}

// A whole number is a valid fraction: 0 and 1 need no decimal point.
func TestStormGuardKeysLoad(t *testing.T) {
	for _, tc := range []struct {
		text string
		want Policy
	}{
		{"max_drained_fraction = 0\nmax_drained_nodes = 3\nstorm_cache = \"0s\"", Policy{MaxDrainedNodes: 3, StormJitter: Duration{5 * time.Second}}},
		{"max_drained_fraction = 1", Policy{MaxDrainedFraction: 1, StormCache: Duration{time.Minute}, StormJitter: Duration{5 * time.Second}}},
		{"max_drained_fraction = 0.25\nstorm_cache = \"2m\"", Policy{MaxDrainedFraction: 0.25, StormCache: Duration{2 * time.Minute}, StormJitter: Duration{5 * time.Second}}},
	} {
		c, err := Parse("t.toml", []byte("[policy]\n"+tc.text+"\n"), "n1")
		if err != nil {
			t.Errorf("%q: %v", tc.text, err)
			continue
		}
		got := c.Policy
		if got.MaxDrainedFraction != tc.want.MaxDrainedFraction || got.MaxDrainedNodes != tc.want.MaxDrainedNodes || got.StormCache != tc.want.StormCache {
			t.Errorf("%q: got %+v", tc.text, got)
		}
	}
}

func TestLoadEmptyFileIsDefault(t *testing.T) {
	c, err := Load(writeFile(t, "# nothing\n"), "n1")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", c) != fmt.Sprintf("%+v", Default()) {
		t.Errorf("got %+v", c)
	}
}

func TestMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.toml")
	if _, err := Load(missing, "n1"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load: %v does not wrap fs.ErrNotExist", err)
	}
	if _, err := LoadOrDefault(missing, "n1", true); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadOrDefault explicit: %v does not wrap fs.ErrNotExist", err)
	}
	c, err := LoadOrDefault(missing, "n1", false)
	if err != nil || fmt.Sprintf("%+v", c) != fmt.Sprintf("%+v", Default()) {
		t.Errorf("LoadOrDefault implicit = %+v, %v; want defaults", c, err)
	}
	// An existing file is read either way, and its errors are not excused.
	bad := writeFile(t, "bogus = 1\n")
	if _, err := LoadOrDefault(bad, "n1", false); err == nil {
		t.Error("LoadOrDefault ignored an invalid file")
	}
	good := writeFile(t, "deadline = \"30s\"\n")
	if c, err := LoadOrDefault(good, "n1", false); err != nil || c.Deadline.Duration != 30*time.Second {
		t.Errorf("LoadOrDefault existing = %v, %v", c.Deadline, err)
	}
}

const overrideDoc = `[checks.modules]
required = ["a", "b", "c"]

[[checks.mounts.mount]]
path = "/base1"
fstype = "nfs"
writable = true
min_free = "1GiB"

[[checks.mounts.mount]]
path = "/base2"

[[host]]
match = "gpu[001-016,020],login*"
deadline = "30s"
[host.checks.modules]
required = ["nvidia"]
[[host.checks.mounts.mount]]
path = "/scratch"

[[host]]
match = "gpu[010-020]"
deadline = "20s"
[host.checks.cpu]
expected = 128

[[host]]
match = "nomatch"
[host.checks.modules]
required = ["z"]
`

func TestHostOverrides(t *testing.T) {
	p := writeFile(t, overrideDoc)
	tests := []struct {
		node     string
		deadline time.Duration
		modules  []string
		mounts   []Mount
		cpu      int
	}{
		{"gpu003", 30 * time.Second, []string{"nvidia"}, []Mount{{Path: "/scratch"}}, 0},
		{"login7", 30 * time.Second, []string{"nvidia"}, []Mount{{Path: "/scratch"}}, 0},
		// Both sections match: the later wins where both set a key, and
		// what only the earlier set stays.
		{"gpu012", 20 * time.Second, []string{"nvidia"}, []Mount{{Path: "/scratch"}}, 128},
		{"gpu017", 20 * time.Second, []string{"a", "b", "c"},
			[]Mount{{Path: "/base1", FSType: "nfs", Writable: true, MinFree: "1GiB"}, {Path: "/base2"}}, 128},
		{"gpu3", 45 * time.Second, []string{"a", "b", "c"},
			[]Mount{{Path: "/base1", FSType: "nfs", Writable: true, MinFree: "1GiB"}, {Path: "/base2"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.node, func(t *testing.T) {
			c, err := Load(p, tt.node)
			if err != nil {
				t.Fatal(err)
			}
			if c.Deadline.Duration != tt.deadline {
				t.Errorf("deadline = %v, want %v", c.Deadline, tt.deadline)
			}
			// Arrays replace: the host's one mount is not merged with the
			// base's first mount, and no element of a base array survives.
			if !slices.Equal(c.Checks.Modules.Required, tt.modules) {
				t.Errorf("modules = %q, want %q", c.Checks.Modules.Required, tt.modules)
			}
			if !slices.Equal(c.Checks.Mounts.Mount, tt.mounts) {
				t.Errorf("mounts = %+v, want %+v", c.Checks.Mounts.Mount, tt.mounts)
			}
			if c.Checks.CPU.Expected != tt.cpu {
				t.Errorf("cpu.expected = %d, want %d", c.Checks.CPU.Expected, tt.cpu)
			}
		})
	}
}

func TestHostOverrideOrder(t *testing.T) {
	p := writeFile(t, doc(
		`[[host]]`,
		`match = "n*"`,
		`deadline = "20s"`,
		`[[host]]`,
		`match = "n1"`,
		`deadline = "30s"`,
	))
	c, err := Load(p, "n1")
	if err != nil || c.Deadline.Duration != 30*time.Second {
		t.Errorf("n1: deadline = %v, %v; want the later section's 30s", c.Deadline, err)
	}
	c, err = Load(p, "n2")
	if err != nil || c.Deadline.Duration != 20*time.Second {
		t.Errorf("n2: deadline = %v, %v; want 20s", c.Deadline, err)
	}
}

// A bad value in a section that does not match this node is still an
// error, at the section's line, so one node's check covers the whole file.
func TestNonMatchingHostIsValidated(t *testing.T) {
	p := writeFile(t, doc(
		`deadline = "40s"`,
		`[[host]]`,
		`match = "elsewhere[1-4]"`,
		`deadline = "70s"`,
	))
	_, err := Load(p, "n1")
	if err == nil {
		t.Fatal("Load succeeded")
	}
	if got := found(t, err, p); !slices.Equal(got, []string{"4 deadline"}) {
		t.Errorf("got %q\n%v", got, err)
	}
}

// A bad base value is an error even where a matching section overrides
// it: other nodes would get it.
func TestOverriddenBadBaseIsReported(t *testing.T) {
	p := writeFile(t, doc(
		`deadline = "70s"`,
		`[[host]]`,
		`match = "n1"`,
		`deadline = "40s"`,
	))
	_, err := Load(p, "n1")
	if err == nil {
		t.Fatal("Load succeeded")
	}
	if got := found(t, err, p); !slices.Equal(got, []string{"1 deadline"}) {
		t.Errorf("got %q\n%v", got, err)
	}
}

func TestNodeExpansion(t *testing.T) {
	p := writeFile(t, doc(
		`state_dir = "/var/lib/gpuhc/%n"`,
		`lock_file = "/run/gpuhc/%n.lock"`,
		`root = "/%n"`, // not expanded: only the per-node state paths are
		`[log]`,
		`file = "/var/log/gpuhc/%n/log.json"`,
		`[events]`,
		`file = "/var/log/gpuhc/%n-events.jsonl"`,
		`[metrics]`,
		`textfile_dir = "/var/lib/node_exporter/%n"`,
		`[[host]]`,
		`match = "sim2"`,
		`state_dir = "/srv/%n/state"`,
	))
	c, err := Load(p, "sim1")
	if err != nil {
		t.Fatal(err)
	}
	got := []string{c.StateDir, c.LockFile, c.Log.File, c.Events.File, c.Metrics.TextfileDir, c.Root}
	want := []string{"/var/lib/gpuhc/sim1", "/run/gpuhc/sim1.lock", "/var/log/gpuhc/sim1/log.json",
		"/var/log/gpuhc/sim1-events.jsonl", "/var/lib/node_exporter/sim1", "/%n"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if c, err := Load(p, "sim2"); err != nil || c.StateDir != "/srv/sim2/state" {
		t.Errorf("sim2: state_dir = %q, %v", c.StateDir, err)
	}
	// Without a node name %n cannot be expanded.
	_, err = Load(p, "")
	if err == nil {
		t.Fatal("Load with no node name succeeded")
	}
	if got := found(t, err, p); !slices.Contains(got, "1 state_dir") || !slices.Contains(got, "7 events.file") ||
		!slices.Contains(got, "9 metrics.textfile_dir") {
		t.Errorf("got %q\n%v", got, err)
	}
	if _, err := Load(p, "../x"); err == nil {
		t.Error("a node name with a slash was put into a path")
	}
}

func TestParseNamesFile(t *testing.T) {
	_, err := Parse("inline.toml", []byte("x = 1\n"), "n1")
	if err == nil || err.Error() != `inline.toml:1: unknown key "x"` {
		t.Errorf("got %v", err)
	}
}

func TestInlineHostSections(t *testing.T) {
	p := writeFile(t, doc(
		`host = [`,
		`  { match = "n1", deadline = "30s" },`,
		`  { match = "n[1-2]", checks = { cpu = { expected = 8, bogus = 1 } } },`,
		`]`,
	))
	_, err := Load(p, "n1")
	if got := found(t, err, p); !slices.Equal(got, []string{"3 host.checks.cpu.bogus"}) {
		t.Fatalf("got %q\n%v", got, err)
	}
	p = writeFile(t, doc(
		`host = [`,
		`  { match = "n1", deadline = "30s" },`,
		`  { match = "n[1-2]", checks = { cpu = { expected = 8 } } },`,
		`]`,
	))
	c, err := Load(p, "n1")
	if err != nil || c.Deadline.Duration != 30*time.Second || c.Checks.CPU.Expected != 8 {
		t.Errorf("got deadline %v, cpu %d, %v", c.Deadline, c.Checks.CPU.Expected, err)
	}
}

// A config path that is a FIFO used to hang every run, and /dev/zero to
// read until memory ran out; a file past MaxFile is refused unparsed.
func TestLoadRefusesWhatCannotBeAConfig(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "gpuhc.toml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := writeFile(t, "# "+strings.Repeat("x", MaxFile)+"\n")
	for _, tc := range []struct{ path, want string }{
		{fifo, "not a regular file (a named pipe)"},
		{"/dev/zero", "not a regular file (a character device)"},
		{big, fmt.Sprintf("larger than %d bytes", MaxFile)},
	} {
		done := make(chan error, 1)
		go func() { _, err := Load(tc.path, "n1"); done <- err }()
		select {
		case err := <-done:
			if err == nil || err.Error() != "config: read "+tc.path+": "+tc.want {
				t.Errorf("%s: %v; want %q", tc.path, err, tc.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Load blocked", tc.path)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "absent.toml"), "n1"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing config must stay fs.ErrNotExist (LoadOrDefault relies on it): %v", err)
	}
}
