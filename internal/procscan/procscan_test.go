package procscan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// proc writes root/proc/<pid>/stat and, unless argv is nil, cmdline.
func proc(t *testing.T, root string, pid int, stat string, argv []string) string {
	t.Helper()
	dir := filepath.Join(root, "proc", fmt.Sprint(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
	if argv != nil {
		cmdline := strings.Join(argv, "\x00") + "\x00"
		if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(cmdline), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestWalk(t *testing.T) {
	root := t.TempDir()
	for _, pid := range []int{1, 20, 300} {
		proc(t, root, pid, "", nil)
	}
	for _, other := range []string{"self", "sys", "12a"} {
		if err := os.MkdirAll(filepath.Join(root, "proc", other), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	if err := Walk(context.Background(), root, func(dir string) bool {
		seen = append(seen, filepath.Base(dir))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"1", "20", "300"}; !slices.Equal(seen, want) {
		t.Errorf("visited %v, want %v (pids only)", seen, want)
	}

	seen = nil
	Walk(context.Background(), root, func(dir string) bool {
		seen = append(seen, filepath.Base(dir))
		return len(seen) < 2
	})
	if want := []string{"1", "20"}; !slices.Equal(seen, want) {
		t.Errorf("visited %v after visit said stop, want %v", seen, want)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Walk(ctx, root, func(string) bool { t.Error("visited after ctx ended"); return true }); err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("cancelled Walk: error %v, want interrupted", err)
	}

	missing := filepath.Join(t.TempDir(), "proc")
	if err := Walk(context.Background(), filepath.Dir(missing), nil); err == nil || strings.Count(err.Error(), missing) != 1 {
		t.Errorf("Walk without /proc: error %v, want one naming %s once", err, missing)
	}
}

func TestParseStat(t *testing.T) {
	long := "1 (x) S" + strings.Repeat(" 7", 19)
	for _, tc := range []struct {
		in    string
		comm  string
		state byte
		dead  bool
		start uint64
		err   string // ParseStat's error, then Start's
	}{
		{"812 (nv-hostengine) S 1 812 812 0 -1", "nv-hostengine", 'S', false, 0, "too few fields after comm"},
		{"2100 ((sd-pam)) S 2099", "(sd-pam)", 'S', false, 0, "too few fields after comm"},
		{"7 (a) b) Z 1", "a) b", 'Z', true, 0, "too few fields after comm"},
		{"7 () X 1", "", 'X', true, 0, "too few fields after comm"},
		{long, "x", 'S', false, 7, ""},
		{strings.Replace(long, " 7", " -5", 19) + "\n", "x", 'S', false, 0, `start time "-5" is not a number`},
		{"7 (x)", "", 0, false, 0, "no state after comm"},
		{"7 (x) SS 1", "", 0, false, 0, "no state after comm"},
		{"7 x) S 1", "", 0, false, 0, "no (comm)"},
		{"", "", 0, false, 0, "no (comm)"},
	} {
		st, err := ParseStat([]byte(tc.in))
		if err == nil {
			var start uint64
			start, err = st.Start()
			if start != tc.start {
				t.Errorf("ParseStat(%q).Start() = %d, want %d", tc.in, start, tc.start)
			}
		}
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParseStat(%q): error %v, want %q", tc.in, err, tc.err)
		}
		if st.Comm != tc.comm || st.State != tc.state || st.Dead() != tc.dead {
			t.Errorf("ParseStat(%q) = %q %q dead=%v, want %q %q dead=%v", tc.in, st.Comm, st.State, st.Dead(), tc.comm, tc.state, tc.dead)
		}
	}
}

func TestReadStat(t *testing.T) {
	root := t.TempDir()
	dir := proc(t, root, 5, "5 (slurmd) S 1", nil)
	if st, err := ReadStat(dir); err != nil || st.Comm != "slurmd" {
		t.Errorf("ReadStat = %+v, %v", st, err)
	}
	garbage := proc(t, root, 6, "garbage", nil)
	if _, err := ReadStat(garbage); err == nil || !strings.HasPrefix(err.Error(), "parse "+filepath.Join(garbage, "stat")+": no (comm)") {
		t.Errorf("ReadStat of garbage: error %v, want it to name the file", err)
	}
	huge := proc(t, root, 7, "7 (x) S"+strings.Repeat(" 1", 1<<20), nil)
	if _, err := ReadStat(huge); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("ReadStat of a huge stat: error %v, want the cap", err)
	}
	if _, err := ReadStat(filepath.Join(root, "proc/8")); !Vanished(err) {
		t.Errorf("ReadStat of a gone pid: error %v is not Vanished", err)
	}
}

func TestRuns(t *testing.T) {
	const name = "nvidia-persistenced" // comm "nvidia-persiste"
	for _, tc := range []struct {
		desc string
		comm string
		argv []string // nil: no cmdline file
		want bool
		err  string
	}{
		{"comm is the name", name, nil, true, ""},
		{"other comm, cmdline not read", "slurmd", nil, false, ""},
		{"comm the cut of name, argv[0] its path", "nvidia-persiste", []string{"/usr/bin/" + name, "--verbose"}, true, ""},
		{"comm the cut of name, argv[0] another program", "nvidia-persiste", []string{"/opt/nvidia-persistence-helper"}, false, ""},
		{"argv[0] rewritten into a title", "nvidia-persiste", []string{name + ": worker"}, true, ""},
		{"argv[0] empty (kernel thread, exiting)", "nvidia-persiste", []string{""}, true, ""},
		{"comm a cut, cmdline gone", "nvidia-persiste", nil, false, "no such file"},
		{"comm a cut, cmdline over the cap", "nvidia-persiste", []string{strings.Repeat("x", 200)}, false, "larger than 100 bytes"},
		{"comm shorter than a cut", "nvidia-persist", []string{"/usr/bin/" + name}, false, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dir := proc(t, t.TempDir(), 42, "", tc.argv)
			got, err := Runs(dir, tc.comm, name, 100)
			if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Runs = %v, %v; want %v, error %q", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestUnreadable(t *testing.T) {
	var u Unreadable
	first := errors.New("read /proc/9/stat: permission denied")
	for _, err := range []error{
		&fs.PathError{Op: "open", Path: "/proc/1/stat", Err: fs.ErrNotExist},
		fmt.Errorf("read /proc/2/cmdline: %w", syscall.ESRCH),
		first,
		errors.New("parse /proc/10/stat: no (comm)"),
	} {
		u.Note(err)
	}
	if u.N != 2 || u.First != first {
		t.Errorf("Unreadable = %d, first %v; want 2, first %v (vanished processes not counted)", u.N, u.First, first)
	}
}
