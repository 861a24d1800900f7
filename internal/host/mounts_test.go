package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

// mountRoot is testdata/mounts/node with the mounted directories made, so
// statfs and the probe act on a real (temp) filesystem.
func mountRoot(t *testing.T, overrides map[string]string) string {
	t.Helper()
	root := fixture(t, "mounts/node", overrides)
	for _, d := range []string{"scratch", "home", "lustre", "opt/sw", "mnt/my data"} {
		mustMkdir(t, filepath.Join(root, d))
	}
	return root
}

func newMounts(root string, ms ...config.Mount) *mounts {
	return NewMounts(root, config.Mounts{Mount: ms}).(*mounts)
}

// fakeStatfs reports a filesystem of total bytes with avail free to users.
func fakeStatfs(total, avail uint64) func(string, *unix.Statfs_t) error {
	return func(_ string, st *unix.Statfs_t) error {
		// Like ext4, 5% is reserved for root: free to root, not to jobs.
		*st = unix.Statfs_t{Bsize: 4096, Frsize: 4096, Blocks: total / 4096, Bfree: (avail + total/20) / 4096, Bavail: avail / 4096}
		return nil
	}
}

func failingProbe(err error) func(string) error {
	return func(string) error { return err }
}

func TestMounts(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name      string
		overrides map[string]string
		mounts    []config.Mount
		statfs    func(string, *unix.Statfs_t) error // nil: the real one
		probe     func(string) error                 // nil: the real one
		want      map[string]want
	}{
		{"healthy", nil, []config.Mount{
			{Path: "/scratch", FSType: "xfs", Writable: true, MinFree: "1KiB"},
			{Path: "/home/", FSType: "nfs4", MinFree: "0%"},
			{Path: "/opt/sw"},
			{Path: "/mnt/my data", Writable: true},
		}, nil, nil, map[string]want{
			"/scratch":     {check.OK, "xfs rw, "},
			"/home":        {check.OK, "nfs4 rw"},
			"/opt/sw":      {check.OK, "nfs4 ro"},
			"/mnt/my data": {check.OK, "tmpfs rw"},
		}},
		{"missing mount drains", nil, []config.Mount{{Path: "/gpfs"}, {Path: "/scratch/sub"}}, nil, nil, map[string]want{
			"/gpfs":        {check.Fail, "not mounted"},
			"/scratch/sub": {check.Fail, "not mounted"},
		}},
		{"wrong fstype drains", nil, []config.Mount{{Path: "/home", FSType: "lustre"}}, nil, nil, map[string]want{
			"/home": {check.Fail, "fstype nfs4, want lustre"},
		}},
		{"read-only mount that must be writable drains", nil,
			[]config.Mount{{Path: "/opt/sw", Writable: true}}, nil,
			func(string) error { panic("probe must not run on a ro mount") },
			map[string]want{"/opt/sw": {check.Fail, "mounted read-only (ro in mountinfo)"}}},
		{"superblock remounted ro drains", map[string]string{"proc/self/mountinfo": "95 22 9:127 / /scratch rw,noatime shared:50 - xfs /dev/md127 ro,attr2\n"},
			[]config.Mount{{Path: "/scratch", Writable: true}}, nil, nil,
			map[string]want{"/scratch": {check.Fail, "read-only"}}},
		{"probe refused as read-only drains", nil, []config.Mount{{Path: "/scratch", Writable: true}}, nil,
			failingProbe(&os.PathError{Op: "open", Path: "x", Err: syscall.EROFS}),
			map[string]want{"/scratch": {check.Fail, "not writable: read-only file system"}}},
		{"probe hitting a full disk drains", nil, []config.Mount{{Path: "/scratch", Writable: true}}, nil,
			failingProbe(syscall.ENOSPC),
			map[string]want{"/scratch": {check.Fail, "not writable: no space left on device"}}},
		{"probe refused by root_squash is an error, not a drain", nil, []config.Mount{{Path: "/home", Writable: true}}, nil,
			failingProbe(syscall.EACCES),
			map[string]want{"/home": {check.Error, "root_squash"}}},
		{"stale NFS handle drains", nil, []config.Mount{{Path: "/home"}},
			func(string, *unix.Statfs_t) error { return syscall.ESTALE }, nil,
			map[string]want{"/home": {check.Fail, "statfs: stale"}}},
		{"free space under byte floor drains", nil, []config.Mount{{Path: "/scratch", MinFree: "50GiB"}},
			fakeStatfs(7000*gib, 123*gib/10), nil,
			map[string]want{"/scratch": {check.Fail, "12.3 GiB free < floor 50 GiB"}}},
		{"free space over byte floor is ok", nil, []config.Mount{{Path: "/scratch", MinFree: "50GiB"}},
			fakeStatfs(7000*gib, 51*gib), nil,
			map[string]want{"/scratch": {check.OK, "xfs rw, 51 GiB of 6.8 TiB free"}}},
		{"free space under percent floor drains", nil, []config.Mount{{Path: "/lustre", MinFree: "5%"}},
			fakeStatfs(100*gib, 3*gib), nil,
			map[string]want{"/lustre": {check.Fail, "3.0% free < floor 5%"}}},
		{"percent floor on a sizeless fs is an error", nil, []config.Mount{{Path: "/proc", MinFree: "5%"}},
			fakeStatfs(0, 0), nil,
			map[string]want{"/proc": {check.Error, "size unknown"}}},
		{"zero percent floor on a sizeless fs is no floor", nil, []config.Mount{{Path: "/proc", MinFree: "0%"}},
			fakeStatfs(0, 0), nil,
			map[string]want{"/proc": {check.OK, "proc rw"}}},
		{"bad min_free is an error", nil, []config.Mount{{Path: "/scratch", MinFree: "lots"}}, nil, nil,
			map[string]want{"/scratch": {check.Error, "bad min_free"}}},
		{"relative path is an error", nil, []config.Mount{{Path: "scratch"}}, nil, nil,
			map[string]want{"scratch": {check.Error, "must be absolute"}}},
		{"missing mountinfo is an error, not a drain", map[string]string{"proc/self/mountinfo": remove},
			[]config.Mount{{Path: "/scratch"}, {Path: "/home"}}, nil, nil, map[string]want{
				"/scratch": {check.Error, "cannot tell if mounted: read "},
				"/home":    {check.Error, "cannot tell if mounted: read "},
			}},
		{"garbage mountinfo is an error, not a drain", map[string]string{"proc/self/mountinfo": "22 1 259:2 / / rw - ext4\n"},
			[]config.Mount{{Path: "/"}}, nil, nil,
			map[string]want{"/": {check.Error, "line 1: not a mountinfo line"}}},
		{"nothing configured skips", nil, nil, nil, nil,
			map[string]want{"host": {check.Skip, "no mounts configured"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := mountRoot(t, tc.overrides)
			m := newMounts(root, tc.mounts...)
			if tc.statfs != nil {
				m.statfs = tc.statfs
			}
			if tc.probe != nil {
				m.probe = tc.probe
			}
			expect(t, nameMounts, run(t, m), tc.want)
			assertNoProbeLeft(t, root)
		})
	}
}

func assertNoProbeLeft(t *testing.T, root string) {
	t.Helper()
	left, _ := filepath.Glob(filepath.Join(root, "*", ".gpuhc-probe-*"))
	more, _ := filepath.Glob(filepath.Join(root, "*", "*", ".gpuhc-probe-*"))
	if left = append(left, more...); len(left) > 0 {
		t.Errorf("probe files left behind: %v", left)
	}
}

// The probe really writes: a directory we cannot write to fails it.
func TestWriteProbe(t *testing.T) {
	dir := t.TempDir()
	if err := writeProbe(dir); err != nil {
		t.Fatalf("probe of a writable dir: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("probe left %v", ents)
	}
	if err := writeProbe(filepath.Join(dir, "missing")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("probe of a missing dir: %v, want ENOENT", err)
	}
}

// This machine's own mountinfo: /proc is mounted as proc everywhere Go
// tests run, so a real parse must find it.
func TestMountsOnThisMachine(t *testing.T) {
	if _, err := os.Stat("/proc/self/mountinfo"); err != nil {
		t.Skip("no /proc/self/mountinfo here")
	}
	rs := run(t, NewMounts("/", config.Mounts{Mount: []config.Mount{{Path: "/proc", FSType: "proc"}, {Path: "/no/such/gpuhc/mount"}}}))
	expect(t, nameMounts, rs, map[string]want{
		"/proc":                {check.OK, "proc"},
		"/no/such/gpuhc/mount": {check.Fail, "not mounted"},
	})
}

// A hung mount must not hang the check: the runner gets our FAIL for it,
// naming the mount, before the check's own timeout, and the mounts that
// answer are still judged.
func TestMountsHungMountFailsInTime(t *testing.T) {
	release := make(chan struct{})
	defer close(release) // let the "hung" goroutine go at the end
	m := newMounts(mountRoot(t, nil), config.Mount{Path: "/home"}, config.Mount{Path: "/scratch"})
	m.minWait = 100 * time.Millisecond
	m.statfs = func(path string, st *unix.Statfs_t) error {
		if strings.HasSuffix(path, "home") {
			<-release
		}
		return unix.Statfs(path, st)
	}
	const timeout = time.Second
	start := time.Now()
	timed := check.Run(context.Background(), []check.Task{{Check: m, Timeout: timeout}})
	if took := time.Since(start); took > timeout {
		t.Errorf("took %v, longer than the %v timeout", took, timeout)
	}
	expect(t, nameMounts, timed[0].Results, map[string]want{
		"/home":    {check.Fail, "did not answer in 0.9s"},
		"/scratch": {check.OK, "xfs rw"},
	})
}

// With too little time left to judge, a slow mount is not blamed.
func TestMountsNoTimeLeftIsError(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	m := newMounts(mountRoot(t, nil), config.Mount{Path: "/home"})
	m.statfs = func(string, *unix.Statfs_t) error { <-release; return nil }
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	expect(t, nameMounts, m.Run(ctx), map[string]want{"/home": {check.Error, "no time left to check"}})
}

func TestMountsCancelledIsError(t *testing.T) {
	m := newMounts(mountRoot(t, nil), config.Mount{Path: "/home"})
	m.statfs = func(string, *unix.Statfs_t) error { select {} }
	expect(t, nameMounts, m.Run(cancelled()), map[string]want{"/home": {check.Error, "interrupted"}})
}

func TestParseMountinfo(t *testing.T) {
	b, err := os.ReadFile("testdata/mounts/node/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	table, err := parseMountinfo(string(b))
	if err != nil {
		t.Fatal(err)
	}
	e, ok := findMount(table, "/mnt/my data")
	if !ok || e.fsType != "tmpfs" || e.source != "tmpfs" || e.readOnly() {
		t.Errorf("escaped mount point: got %+v, %v", e, ok)
	}
	e, ok = findMount(table, "/opt/sw")
	if !ok || e.source != "10.0.0.5:/export/sw" || !e.readOnly() {
		t.Errorf("ro nfs mount: got %+v, %v", e, ok)
	}
	// Overmounted: the later entry is the one in effect.
	over := string(b) + "140 95 0:70 / /scratch rw,relatime shared:70 - tmpfs tmpfs rw,size=10g\n"
	table, _ = parseMountinfo(over)
	if e, _ := findMount(table, "/scratch"); e.fsType != "tmpfs" {
		t.Errorf("overmount: got %s, want the later tmpfs", e.fsType)
	}
	// No optional fields, and an empty source.
	table, err = parseMountinfo("50 22 0:40 / /mnt/x rw,relatime - tmpfs  rw\n")
	if err != nil || len(table) != 1 || table[0].fsType != "tmpfs" || table[0].source != "" {
		t.Errorf("empty source: %+v, %v", table, err)
	}
}

func TestUnescapeOctal(t *testing.T) {
	for in, want := range map[string]string{
		`/mnt/my\040data`:   "/mnt/my data",
		`/a\011b\012c\134d`: "/a\tb\nc\\d",
		`/plain`:            "/plain",
		`/trail\04`:         `/trail\04`,
		`/bad\999`:          `/bad\999`,
		`/big\777`:          `/big\777`,
		`\`:                 `\`,
	} {
		if got := unescapeOctal(in); got != want {
			t.Errorf("unescapeOctal(%q) = %q, want %q", in, got, want)
		}
	}
}
