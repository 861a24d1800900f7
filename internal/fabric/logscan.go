package fabric

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"syscall"
	"time"

	"github.com/gpuhc/gpuhc/internal/lazyre"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// The log is read from a cursor kept between runs (see record). It has to
// survive the ways Fabric Manager logs get rotated:
//
//   - rename (logrotate's default, and Fabric Manager's own rotation): the
//     file at the log path has a new inode and the old one, with our
//     cursor's inode, is now the rotated name ("<log>.1");
//   - copytruncate: the inode stays, the file shrinks below the cursor,
//     and a copy with the same first bytes (but a new inode) is the
//     rotated name;
//   - a restart with LOG_APPEND_TO_LOG=0 truncates the log in place.
//
// When the file at the cursor is no longer what the log path shows, the
// rotated file is looked for by the cursor's inode, or by the hash of the
// file's first bytes (headLen of them) when its size still reaches the
// cursor; if found, its tail from the cursor is read first (a fatal line
// written just before the rotation must not be lost), then the new log
// from its start. If not found (compressed or deleted already), that tail
// is lost, and the result says so.

const (
	// headLen is how much of the log's start identifies it: the first
	// lines carry timestamps, so two generations do not share them.
	headLen = 1024
	// maxLine: a run of this many bytes without a newline is not a line
	// being written but garbage, and is consumed rather than waited for.
	maxLine = 64 << 10
	// tailProbe is how far back the first run looks for the end of the
	// last whole line to start from.
	tailProbe = 64 << 10
)

// logCursor says where the next run goes on reading the log.
type logCursor struct {
	// Path is the log the cursor is for; another (the configuration
	// changed) starts afresh, as its lines are history too.
	Path   string `json:"path"`
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	Offset int64  `json:"offset"`
	// Head is the hex SHA-256 of the file's first HeadLen bytes (HeadLen
	// is at most Offset: bytes already read, which appending never
	// changes).
	Head    string `json:"head,omitempty"`
	HeadLen int64  `json:"head_len,omitempty"`
}

// fatalLine is a log line matching a fatal pattern.
type fatalLine struct {
	text string
	when time.Time // the line's own timestamp; zero when it has none
}

// logScan is what one run read from the log.
type logScan struct {
	fatal   []fatalLine
	next    *logCursor
	started bool  // first run: the cursor was put at the end, nothing read
	skipped int64 // bytes left unread over the max_read budget
	lost    bool  // the rotated log's tail could not be found
}

type logReader struct {
	path, rotated string
	patterns      []*regexp.Regexp
	budget        int64
	loc           *time.Location
}

// openLog is one generation of the log, opened.
type openLog struct {
	f    *os.File
	dev  uint64
	ino  uint64
	size int64
}

func openLogFile(path string) (*openLog, error) {
	f, err := sysread.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", path, sysread.Bare(err))
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	l := &openLog{f: f, size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		// Dev is uint32 on some architectures, hence the conversion.
		l.dev, l.ino = uint64(st.Dev), st.Ino
	}
	return l, nil
}

func (l *openLog) close() {
	if l != nil {
		l.f.Close()
	}
}

// same says whether l is the file c points into: the same inode, or (for a
// copy) the same first bytes, and at least as long as the cursor.
func (l *openLog) same(c *logCursor, byInode bool) bool {
	if l == nil || l.size < c.Offset {
		return false
	}
	if byInode && (l.dev != c.Dev || l.ino != c.Ino) {
		return false
	}
	if c.HeadLen == 0 {
		// Nothing to compare: only the inode can tell.
		return byInode
	}
	h, err := l.head(c.HeadLen)
	return err == nil && h == c.Head
}

func (l *openLog) head(n int64) (string, error) {
	b := make([]byte, n)
	if _, err := l.f.ReadAt(b, 0); err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// cursorAt is the cursor for offset in l.
func (r *logReader) cursorAt(l *openLog, offset int64) *logCursor {
	c := &logCursor{Path: r.path, Dev: l.dev, Ino: l.ino, Offset: offset}
	if n := min(offset, headLen); n > 0 {
		if h, err := l.head(n); err == nil {
			c.Head, c.HeadLen = h, n
		}
	}
	return c
}

// segment is a byte range of one generation to read.
type segment struct {
	log        *openLog
	from, to   int64
	finished   bool // a rotated file: nothing more will be written to it
	skippedTop bool // from was moved forward to keep within the budget
}

// scan reads the log from prev (nil: the first run) and returns what it
// found and where the next run goes on. An error means the log could not
// be read; scan then still returns the next cursor to keep, which is prev
// unless the log is gone.
func (r *logReader) scan(ctx context.Context, prev *logCursor) (*logScan, error) {
	cur, err := openLogFile(r.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &logScan{next: prev}, fmt.Errorf("read %s: %w", r.path, sysread.Bare(err))
	}
	defer cur.close()
	missing := err != nil
	if prev != nil && prev.Path != r.path {
		prev = nil
	}
	if prev == nil {
		if missing {
			// No history to skip: the file that appears is read from its
			// start.
			return &logScan{next: &logCursor{Path: r.path}}, fmt.Errorf("read %s: %w", r.path, sysread.Bare(err))
		}
		end, err := lastLineEnd(cur)
		if err != nil {
			return &logScan{}, fmt.Errorf("read %s: %w", r.path, err)
		}
		return &logScan{next: r.cursorAt(cur, end), started: true}, nil
	}

	var segs []segment
	sc := &logScan{}
	switch {
	case !missing && cur.same(prev, true):
		segs = append(segs, segment{log: cur, from: prev.Offset, to: cur.size})
	default:
		// Rotated, truncated or rewritten: finish the old generation if
		// it can be found, then read the new one from its start.
		old, err := openLogFile(r.rotated)
		if err == nil && !old.same(prev, true) && !old.same(prev, false) {
			old.close()
			old, err = nil, errors.New("no match")
		}
		if err == nil {
			defer old.close()
			segs = append(segs, segment{log: old, from: prev.Offset, to: old.size, finished: true})
		} else {
			sc.lost = prev.Offset > 0
		}
		if !missing {
			segs = append(segs, segment{log: cur, from: 0, to: cur.size})
		}
	}
	r.fit(segs, sc)
	for i := range segs {
		if ctx.Err() != nil {
			return &logScan{next: prev}, fmt.Errorf("interrupted reading %s: %w", r.path, ctx.Err())
		}
		end, err := r.read(&segs[i], sc)
		if err != nil {
			return &logScan{next: prev}, fmt.Errorf("read %s: %w", segs[i].log.f.Name(), err)
		}
		if segs[i].log == cur {
			sc.next = r.cursorAt(cur, end)
		}
	}
	if missing {
		// The log is gone (mid-rotation, or logging elsewhere now): the
		// next file to appear at the path is read from its start.
		sc.next = &logCursor{Path: r.path}
		return sc, fmt.Errorf("read %s: %w", r.path, fs.ErrNotExist)
	}
	return sc, nil
}

// fit keeps the segments within the read budget, skipping the oldest
// bytes: the newest lines matter most.
func (r *logReader) fit(segs []segment, sc *logScan) {
	left := r.budget
	for i := len(segs) - 1; i >= 0; i-- {
		s := &segs[i]
		if n := s.to - s.from; n > left {
			sc.skipped += n - left
			s.from = s.to - left
			s.skippedTop = true
		}
		left -= s.to - s.from
	}
}

// read scans one segment's whole lines for fatal patterns and returns the
// offset after the last byte consumed.
func (r *logReader) read(s *segment, sc *logScan) (int64, error) {
	n := s.to - s.from
	if n <= 0 {
		return s.from, nil
	}
	buf := make([]byte, n)
	got, err := s.log.f.ReadAt(buf, s.from)
	if err != nil && !errors.Is(err, io.EOF) {
		return s.from, sysread.Bare(err)
	}
	buf = buf[:got]
	consumed := len(buf)
	if !s.finished {
		// Leave a line still being written for the next run, unless it
		// is too long to be one.
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			consumed = i + 1
		} else if len(buf) < maxLine {
			consumed = 0
		}
	}
	data := buf[:consumed]
	if s.skippedTop && s.from > 0 {
		// The first line was cut by the skip: it is not a line.
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			sc.skipped += int64(i + 1)
			data = data[i+1:]
		}
	}
	for len(data) > 0 {
		line, rest, _ := bytes.Cut(data, []byte{'\n'})
		data = rest
		r.match(string(bytes.TrimRight(line, "\r")), sc)
	}
	return s.from + int64(consumed), nil
}

// Caps on what is kept of fatal lines: a log flooded with them must not
// fill memory; the message quotes one and counts the rest.
const (
	maxFatalLines = 1000
	maxFatalText  = 512
)

func (r *logReader) match(line string, sc *logScan) {
	for _, p := range r.patterns {
		if p.MatchString(line) {
			if len(sc.fatal) < maxFatalLines {
				sc.fatal = append(sc.fatal, fatalLine{text: sysread.Cut(line, maxFatalText), when: lineTime(line, r.loc)})
			}
			return
		}
	}
}

// lineStamp is Fabric Manager's line prefix, "[Jul 23 2024 07:53:55] ",
// in the node's local time.
var lineStamp = lazyre.New(`^\[([A-Z][a-z]{2} [ 0-9]?[0-9] [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2})\]`)

func lineTime(line string, loc *time.Location) time.Time {
	m := lineStamp.FindStringSubmatch(line)
	if m == nil {
		return time.Time{}
	}
	if loc == nil {
		loc = time.Local
	}
	t, err := time.ParseInLocation("Jan _2 2006 15:04:05", m[1], loc)
	if err != nil {
		return time.Time{}
	}
	return t
}

// lastLineEnd is where the first run starts: after the last whole line, so
// that a line being written is read whole by the next run.
func lastLineEnd(l *openLog) (int64, error) {
	from := max(l.size-tailProbe, 0)
	buf := make([]byte, l.size-from)
	got, err := l.f.ReadAt(buf, from)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, sysread.Bare(err)
	}
	if i := bytes.LastIndexByte(buf[:got], '\n'); i >= 0 {
		return from + int64(i) + 1, nil
	}
	return l.size, nil
}
