package host

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// defaultMinWait is the least time a mount must have had before "did not
// answer" counts as a fault; with less, the run was simply out of time.
const defaultMinWait = time.Second

type mounts struct {
	root string
	cfg  config.Mounts
	// Hooks, so tests can stand in for a hung or full filesystem.
	statfs  func(path string, st *unix.Statfs_t) error
	probe   func(dir string) error
	minWait time.Duration
}

// NewMounts checks that each configured path is a mount point, of the
// right type, answering, writable and with free space, as configured.
func NewMounts(root string, c config.Mounts) check.Check {
	return &mounts{root: root, cfg: c, statfs: unix.Statfs, probe: writeProbe, minWait: defaultMinWait}
}

func (m *mounts) Name() string { return nameMounts }

func (m *mounts) Run(ctx context.Context) []check.Result {
	if len(m.cfg.Mount) == 0 {
		return stamp(nameMounts, []check.Result{skipf(componentHost, "no mounts configured")})
	}
	table, err := m.table()
	if err != nil {
		out := make([]check.Result, len(m.cfg.Mount))
		for i, mt := range m.cfg.Mount {
			out[i] = errorf(mt.Path, "cannot tell if mounted: %v", err)
		}
		return stamp(nameMounts, out)
	}
	opCtx, cancel := check.FinishEarly(ctx)
	defer cancel()
	// Mounts are judged side by side so that one hung server costs one
	// timeout for the whole check, not one per mount after it.
	out := make([]check.Result, len(m.cfg.Mount))
	var wg sync.WaitGroup
	for i, mt := range m.cfg.Mount {
		wg.Go(func() { out[i] = m.judge(opCtx, table, mt) })
	}
	wg.Wait()
	return stamp(nameMounts, out)
}

func (m *mounts) table() ([]mountEntry, error) {
	path := at(m.root, "proc/self/mountinfo")
	b, err := sysread.File(path, maxProc)
	if err != nil {
		return nil, err
	}
	t, err := parseMountinfo(string(b))
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return t, nil
}

// judge checks one mount. Everything up to the filesystem calls comes from
// mountinfo and cannot hang; the calls themselves go through touch.
func (m *mounts) judge(ctx context.Context, table []mountEntry, mt config.Mount) check.Result {
	if !filepath.IsAbs(mt.Path) {
		return errorf(mt.Path, "path must be absolute")
	}
	p := filepath.Clean(mt.Path)
	floor, err := config.ParseFloor(mt.MinFree)
	if err != nil {
		return errorf(p, "bad min_free: %v", err)
	}
	e, ok := findMount(table, p)
	switch {
	case !ok:
		return failf(p, "not mounted")
	case mt.FSType != "" && e.fsType != mt.FSType:
		return failf(p, "fstype %s, want %s", e.fsType, mt.FSType)
	case mt.Writable && e.readOnly():
		return failf(p, "mounted read-only (ro in mountinfo)")
	}
	return m.touch(ctx, e, mt, floor)
}

// fsAnswer is what the filesystem calls returned.
type fsAnswer struct {
	st       unix.Statfs_t
	statErr  error
	probeErr error
}

// touch runs statfs, and the probe write when asked, in a goroutine, and
// waits no longer than ctx. statfs runs even when only presence is asked:
// a dead NFS or Lustre mount still shows in mountinfo.
//
// A mount that does not answer in time is a FAIL, not an ERROR: a hung
// client hangs every job that touches it, so the node must take no new
// work. If the server itself is down every node fails alike, and the
// policy's storm guard stops the mass drain. The goroutine stuck in the
// kernel cannot be stopped; it ends with the process.
func (m *mounts) touch(ctx context.Context, e mountEntry, mt config.Mount, floor config.Floor) check.Result {
	if ctx.Err() != nil {
		return m.noAnswer(ctx, e.mountPoint, 0)
	}
	dir := at(m.root, e.mountPoint)
	ch := make(chan fsAnswer, 1) // buffered: an abandoned goroutine can still send and exit
	start := time.Now()
	go func() {
		var a fsAnswer
		a.statErr = m.statfs(dir, &a.st)
		if a.statErr == nil && mt.Writable {
			a.probeErr = m.probe(dir)
		}
		ch <- a
	}()
	select {
	case a := <-ch:
		return judgeAnswer(e, mt, floor, a)
	case <-ctx.Done():
		return m.noAnswer(ctx, e.mountPoint, time.Since(start))
	}
}

func (m *mounts) noAnswer(ctx context.Context, p string, waited time.Duration) check.Result {
	secs := waited.Round(100 * time.Millisecond).Seconds()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return errorf(p, "interrupted after %gs: %v", secs, ctx.Err())
	}
	if waited < m.minWait {
		return errorf(p, "no time left to check (%gs)", secs)
	}
	return failf(p, "did not answer in %gs", secs)
}

func judgeAnswer(e mountEntry, mt config.Mount, floor config.Floor, a fsAnswer) check.Result {
	p := e.mountPoint
	if a.statErr != nil {
		return fsError(p, "statfs", a.statErr)
	}
	if a.probeErr != nil {
		return fsError(p, "not writable", a.probeErr)
	}
	bsize := uint64(a.st.Frsize)
	if bsize == 0 {
		bsize = uint64(a.st.Bsize)
	}
	// Bavail, not Bfree: jobs do not run as root, so the root-reserved
	// blocks are no use to them, and the floor should not count them.
	avail, total := a.st.Bavail*bsize, a.st.Blocks*bsize
	switch {
	case floor.IsPercent && floor.Percent > 0 && a.st.Blocks == 0:
		return errorf(p, "size unknown (0 blocks), cannot apply floor %g%%", floor.Percent)
	case floor.IsPercent && a.st.Blocks > 0 && 100*float64(a.st.Bavail)/float64(a.st.Blocks) < floor.Percent:
		return failf(p, "%.1f%% free < floor %g%%", 100*float64(a.st.Bavail)/float64(a.st.Blocks), floor.Percent)
	case !floor.IsPercent && avail < floor.Bytes:
		return failf(p, "%s free < floor %s", fmtBytes(avail), fmtBytes(floor.Bytes))
	}
	mode := "rw"
	if e.readOnly() {
		mode = "ro"
	}
	if total == 0 {
		return okf(p, "%s %s", e.fsType, mode)
	}
	return okf(p, "%s %s, %s of %s free", e.fsType, mode, fmtBytes(avail), fmtBytes(total))
}

// fsError judges a failed filesystem call. Errors that mean the mount is
// broken or unusable are a FAIL. Permission errors are an ERROR: root
// being refused, as NFS root_squash does, says nothing about this node
// and would otherwise drain every node sharing the export.
func fsError(p, what string, err error) check.Result {
	if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
		return errorf(p, "%s: %v (root_squash?)", what, err)
	}
	if errors.Is(err, syscall.EROFS) {
		return failf(p, "%s: read-only file system", what)
	}
	return failf(p, "%s: %v", what, err)
}

// writeProbe proves dir writable by creating, writing, closing and
// removing a file no one else can have: O_EXCL and a random name.
func writeProbe(dir string) error {
	name := filepath.Join(dir, fmt.Sprintf(".gpuhc-probe-%d-%016x", os.Getpid(), rand.Uint64()))
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create probe: %w", sysread.Bare(err))
	}
	_, werr := f.Write([]byte{'x'})
	cerr := f.Close() // NFS reports deferred write errors here
	rerr := os.Remove(name)
	switch {
	case werr != nil:
		return fmt.Errorf("write probe: %w", sysread.Bare(werr))
	case cerr != nil:
		return fmt.Errorf("close probe: %w", sysread.Bare(cerr))
	case rerr != nil:
		return fmt.Errorf("remove probe %s: %w", filepath.Base(name), sysread.Bare(rerr))
	}
	return nil
}

// mountEntry is one line of /proc/<pid>/mountinfo.
type mountEntry struct {
	mountPoint string
	fsType     string
	source     string
	mountOpts  []string // per-mount options ("rw,relatime")
	superOpts  []string // superblock options
}

// readOnly says whether the mount or its superblock is read-only; ext4
// with errors=remount-ro turns the superblock ro under a rw mount.
func (e mountEntry) readOnly() bool {
	return slices.Contains(e.mountOpts, "ro") || slices.Contains(e.superOpts, "ro")
}

// findMount returns the last entry at p: later mounts hide earlier ones
// at the same point, and mountinfo lists them in mount order.
func findMount(table []mountEntry, p string) (mountEntry, bool) {
	for i := len(table) - 1; i >= 0; i-- {
		if table[i].mountPoint == p {
			return table[i], true
		}
	}
	return mountEntry{}, false
}

// parseMountinfo reads lines such as
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// (proc(5)): id, parent, major:minor, root, mount point, options, zero or
// more optional fields, "-", fstype, source, super options. Any malformed
// line fails the parse: guessing could report a mounted path as missing.
func parseMountinfo(s string) ([]mountEntry, error) {
	var table []mountEntry
	for i, line := range strings.Split(s, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		e, err := parseMountLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		table = append(table, e)
	}
	if len(table) == 0 {
		return nil, errors.New("no mounts listed")
	}
	return table, nil
}

func parseMountLine(line string) (mountEntry, error) {
	// Fields are separated by exactly one space; an empty source makes
	// an empty field, which strings.Fields would silently drop.
	f := strings.Split(line, " ")
	sep := -1
	if len(f) > 6 {
		if i := slices.Index(f[6:], "-"); i >= 0 {
			sep = 6 + i
		}
	}
	if sep < 0 || len(f) < sep+4 {
		return mountEntry{}, fmt.Errorf("not a mountinfo line: %s", sysread.QuoteShort(line))
	}
	mp := unescapeOctal(f[4])
	if !strings.HasPrefix(mp, "/") {
		return mountEntry{}, fmt.Errorf("mount point %s is not absolute", sysread.QuoteShort(mp))
	}
	return mountEntry{
		mountPoint: filepath.Clean(mp),
		fsType:     unescapeOctal(f[sep+1]),
		source:     unescapeOctal(f[sep+2]),
		mountOpts:  strings.Split(f[5], ","),
		superOpts:  strings.Split(f[sep+3], ","),
	}, nil
}

// unescapeOctal undoes the kernel's escaping of space, tab, newline and
// backslash in mountinfo fields ("/mnt/my\040disk"). Anything that is not
// a backslash and a byte in three octal digits is left as it is.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] >= '0' && s[i+1] <= '3' && isOctal(s[i+2]) && isOctal(s[i+3]) {
			v := (s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0')
			b.WriteByte(v)
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
