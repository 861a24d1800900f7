package slurm

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeScontrol is an executable script standing in for scontrol. Each run
// records its argv (NUL-separated) and environment as argv.N and env.N,
// then prints out.N/err.N and exits with code.N, falling back to
// out/err/code when no per-run file exists.
type fakeScontrol struct {
	t    *testing.T
	dir  string
	path string
}

const fakeScript = `#!/bin/sh
d='%s'
n=0
while [ -e "$d/argv.$n" ]; do n=$((n+1)); done
printf '%%s\0' "$@" > "$d/argv.$n"
/usr/bin/env > "$d/env.$n"
pick() { if [ -e "$d/$1.$n" ]; then echo "$d/$1.$n"; else echo "$d/$1"; fi; }
/bin/cat "$(pick out)"
/bin/cat "$(pick err)" >&2
exit "$(/bin/cat "$(pick code)")"
`

func newFakeScontrol(t *testing.T) *fakeScontrol {
	t.Helper()
	dir := t.TempDir()
	f := &fakeScontrol{t: t, dir: dir, path: filepath.Join(dir, "scontrol")}
	if err := os.WriteFile(f.path, []byte(fmt.Sprintf(fakeScript, dir)), 0o755); err != nil {
		t.Fatal(err)
	}
	f.answer(-1, nil, nil, 0)
	return f
}

// answer sets what run n prints (n < 0: every run without its own files).
func (f *fakeScontrol) answer(n int, stdout, stderr []byte, code int) {
	suffix := ""
	if n >= 0 {
		suffix = fmt.Sprintf(".%d", n)
	}
	f.write("out"+suffix, stdout)
	f.write("err"+suffix, stderr)
	f.write("code"+suffix, []byte(fmt.Sprint(code)))
}

// recorded makes every run answer like testdata/scontrol/<release>/<case>.
func (f *fakeScontrol) recorded(n int, release, name string) {
	code := strings.TrimSpace(string(fixture(f.t, "scontrol", release, name+".exit")))
	var c int
	fmt.Sscan(code, &c)
	f.answer(n, fixture(f.t, "scontrol", release, name+".txt"),
		fixture(f.t, "scontrol", release, name+".stderr.txt"), c)
}

func (f *fakeScontrol) write(name string, b []byte) {
	if err := os.WriteFile(filepath.Join(f.dir, name), b, 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// argv is what run n received, or nil when there was no run n.
func (f *fakeScontrol) argv(n int) []string {
	b, err := os.ReadFile(filepath.Join(f.dir, fmt.Sprintf("argv.%d", n)))
	if err != nil {
		return nil
	}
	parts := strings.Split(string(b), "\x00")
	return parts[:len(parts)-1]
}

// env is run n's environment, one VAR=value a line.
func (f *fakeScontrol) env(n int) []string {
	b, err := os.ReadFile(filepath.Join(f.dir, fmt.Sprintf("env.%d", n)))
	if err != nil {
		f.t.Fatal(err)
	}
	return strings.Split(string(bytes.TrimSpace(b)), "\n")
}

// runs is how many times the script ran.
func (f *fakeScontrol) runs() int {
	n := 0
	for f.argv(n) != nil {
		n++
	}
	return n
}
