package events

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/gpuhc/gpuhc/internal/sysread"
)

// Reading event logs.
//
// Scan reads any number of event logs and hands each event to a callback.
// Sources are files, globs, directories or "-" (stdin); see Scan. Files are
// read in a fixed order (sources in the order given; inside a directory or a
// glob, by name), so a scan is reproducible. Rotated files therefore come
// out of time order (events.jsonl before events.jsonl.1); internal/stats
// sorts by time itself and gives the same report whatever the input order.
//
// A log is written by many processes over years and copied by log shippers,
// so nothing in its content is fatal: a line that is not a JSON event is
// warned about, counted and skipped, and so is an event without time, node
// or kind. I/O errors (a source that does not exist, an unreadable file) do
// end the scan with an error, because statistics over silently missing
// files would be wrong.

const (
	// readBuffer is the read buffer per worker; lines longer than this are
	// still read whole, up to maxLine.
	readBuffer = 1 << 20
	// maxLine bounds one line. Longer lines are skipped as malformed: no
	// event gpuhc writes comes near it.
	maxLine = 16 << 20
	// batchEvents is how many events a worker hands over at once.
	batchEvents = 2048
	// warnPerFile caps the warnings about malformed or invalid lines in one
	// file; the rest are summed up in one last warning for that file.
	warnPerFile = 10
)

// Totals counts what a scan read.
type Totals struct {
	Files     int   // files (and stdin) read
	Bytes     int64 // bytes of log text, after decompression
	Lines     int   // lines, empty ones included
	Events    int   // events handed to the callback
	Malformed int   // lines that are not a JSON event, Torn included
	Torn      int   // malformed last lines of a file (a writer killed mid-line)
	Invalid   int   // events without time, node or kind
}

func (t *Totals) add(o Totals) {
	t.Files += o.Files
	t.Bytes += o.Bytes
	t.Lines += o.Lines
	t.Events += o.Events
	t.Malformed += o.Malformed
	t.Torn += o.Torn
	t.Invalid += o.Invalid
}

// Scan reads events from sources and calls fn for each, one call at a time
// (fn need not be safe for concurrent use). A source is
//
//   - "-": stdin (read once, however often it is named);
//   - a file, plain or gzip-compressed: gzip is recognised by its magic
//     bytes, whatever the name;
//   - a directory: every regular file in it, by name, not recursing. Names
//     starting with "." are skipped (rsync and editors' temporary files);
//     rotated files (events.jsonl.1, events.jsonl.2.gz) are read like any
//     other;
//   - a glob (filepath.Match syntax): every match, by name; a matching
//     directory is read as above. A glob that matches nothing is an error.
//
// A file named twice (by two sources, or through a symlink) is read once.
// Files are parsed in parallel, but events reach fn in file order and, in a
// file, in line order.
//
// A line that is not a JSON event is skipped with a warning
// ("file:line: skipped malformed line: ..."), or, when it is the file's last
// line, "file:line: skipped torn last line". Events without time, node or
// kind are skipped with a warning. Neither ends the scan. At most 10 such
// warnings are given per file, then one with the count of the rest (torn
// last lines are always warned about). Blank lines are skipped silently.
// warn may be nil.
//
// Scan stops at the first error from fn or ctx, and returns it.
func Scan(ctx context.Context, sources []string, stdin io.Reader, warn func(string), fn func(Event) error) error {
	_, err := ScanTotals(ctx, sources, stdin, warn, fn)
	return err
}

// ScanTotals is Scan, also returning what it read. fn may be nil (count
// only).
func ScanTotals(ctx context.Context, sources []string, stdin io.Reader, warn func(string), fn func(Event) error) (Totals, error) {
	if warn == nil {
		warn = func(string) {}
	}
	if fn == nil {
		fn = func(Event) error { return nil }
	}
	inputs, err := expand(sources, stdin, warn)
	if err != nil {
		return Totals{}, err
	}
	return scanInputs(ctx, inputs, warn, fn)
}

// input is one file to read, or stdin.
type input struct {
	name string
	r    io.Reader // stdin; nil for a file
}

// fileKey identifies a file across names (device and inode).
type fileKey struct{ dev, ino uint64 }

func keyOf(name string, fi fs.FileInfo) any {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fileKey{uint64(st.Dev), uint64(st.Ino)}
	}
	return filepath.Clean(name)
}

// expand turns sources into the files to read, in order.
func expand(sources []string, stdin io.Reader, warn func(string)) ([]input, error) {
	var (
		out       []input
		seen      = map[any]bool{}
		stdinUsed bool
	)
	addFile := func(name string, fi fs.FileInfo) {
		k := keyOf(name, fi)
		if seen[k] {
			return
		}
		seen[k] = true
		out = append(out, input{name: name})
	}
	addDir := func(dir string) error {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		n := 0
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			p := filepath.Join(dir, e.Name())
			fi, err := os.Stat(p) // follows symlinks
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue // removed meanwhile (rotation), or a dangling link
				}
				return err
			}
			if fi.Mode().IsRegular() {
				addFile(p, fi)
				n++
			}
		}
		if n == 0 {
			warn(dir + ": no event files in directory")
		}
		return nil
	}
	addPath := func(p string) error {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return addDir(p)
		}
		// A regular file, or a pipe (<(zcat ...)) named explicitly.
		addFile(p, fi)
		return nil
	}
	for _, src := range sources {
		switch {
		case src == "-":
			if stdin == nil {
				return nil, errors.New("-: no stdin to read")
			}
			if !stdinUsed {
				stdinUsed = true
				out = append(out, input{name: "<stdin>", r: stdin})
			}
		case strings.ContainsAny(src, "*?["):
			matches, err := filepath.Glob(src)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", src, err)
			}
			if len(matches) == 0 {
				return nil, fmt.Errorf("%s: no file matches", src)
			}
			for _, m := range matches { // sorted by Glob
				if err := addPath(m); err != nil {
					return nil, err
				}
			}
		default:
			if err := addPath(src); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// batch is a run of events from one file, with the warnings found in it.
type batch struct {
	evs    []Event
	warns  []string
	totals Totals // set on the file's last batch
	err    error  // fatal: ends the scan
}

type job struct {
	in  input
	out chan batch // closed after the file's last batch
}

var eventsPool = sync.Pool{New: func() any { s := make([]Event, 0, batchEvents); return &s }}

// scanInputs parses files in parallel and delivers in order: the producer
// queues files both to the workers and, in the same order, to the consumer
// (this goroutine), which drains each file's batches in turn. The oldest
// unfinished file always has a worker, so the pipeline cannot stall, and
// memory is bounded by the files in flight.
func scanInputs(ctx context.Context, inputs []input, warn func(string), fn func(Event) error) (Totals, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := min(max(runtime.GOMAXPROCS(0), 1), 8, max(len(inputs), 1))
	jobs := make(chan job)
	order := make(chan chan batch, 2*workers)
	go func() {
		defer close(jobs)
		defer close(order)
		for _, in := range inputs {
			j := job{in: in, out: make(chan batch, 4)}
			select {
			case order <- j.out:
			case <-ctx.Done():
				return
			}
			select {
			case jobs <- j:
			case <-ctx.Done():
				// The consumer will wait on j.out: close it.
				close(j.out)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := newWorker()
			for j := range jobs {
				w.read(ctx, j.in, j.out)
				close(j.out)
			}
		}()
	}
	defer wg.Wait()

	var (
		tot Totals
		err error
	)
	for ch := range order {
		for b := range ch {
			if err != nil {
				continue // draining after an error
			}
			for _, w := range b.warns {
				warn(w)
			}
			for i := range b.evs {
				if err = fn(b.evs[i]); err != nil {
					break
				}
			}
			if b.evs != nil {
				evs := b.evs[:0]
				eventsPool.Put(&evs)
			}
			if err == nil {
				tot.add(b.totals)
				err = b.err
			}
			if err == nil {
				err = ctx.Err()
			}
			if err != nil {
				cancel()
			}
		}
	}
	if err == nil {
		err = ctx.Err() // cancelled before any batch came
	}
	return tot, err
}

// worker reads one file at a time, reusing its buffers.
type worker struct {
	br, gr *bufio.Reader
	gz     *gzip.Reader
	long   []byte
	p      lineParser
}

func newWorker() *worker {
	return &worker{
		br: bufio.NewReaderSize(nil, readBuffer),
		gr: bufio.NewReaderSize(nil, readBuffer),
		p:  lineParser{strs: map[string]string{}},
	}
}

// fileState is what read keeps about the file being read.
type fileState struct {
	name    string
	tot     Totals
	warned  int // warnings given about bad lines
	dropped int // bad lines not warned about (over warnPerFile)
	cur     batch
	out     chan<- batch
	ctx     context.Context
	// pendingErr is the last bad line's error, held back until we know
	// whether it was the file's last (torn) line.
	pendingErr error
	pendingNo  int
}

func (s *fileState) warnLine(msg string) {
	if s.warned < warnPerFile {
		s.warned++
		s.cur.warns = append(s.cur.warns, msg)
	} else {
		s.dropped++
	}
}

// flushPending reports the held-back bad line as malformed (last=false) or
// torn (last=true).
func (s *fileState) flushPending(last bool) {
	if s.pendingErr == nil {
		return
	}
	s.tot.Malformed++
	if last {
		s.tot.Torn++
		// Always said: a torn line is normal and worth one line of notice.
		s.cur.warns = append(s.cur.warns, fmt.Sprintf("%s:%d: skipped torn last line", s.name, s.pendingNo))
	} else {
		s.warnLine(fmt.Sprintf("%s:%d: skipped malformed line: %v", s.name, s.pendingNo, s.pendingErr))
	}
	s.pendingErr = nil
}

// send hands the current batch over; false when the scan was cancelled.
func (s *fileState) send() bool {
	if len(s.cur.evs) == 0 && len(s.cur.warns) == 0 && s.cur.err == nil && s.cur.totals == (Totals{}) {
		return true
	}
	select {
	case s.out <- s.cur:
	case <-s.ctx.Done():
		return false
	}
	s.cur = batch{}
	return true
}

func (w *worker) read(ctx context.Context, in input, out chan<- batch) {
	if ctx.Err() != nil {
		return
	}
	s := &fileState{name: in.name, out: out, ctx: ctx}
	s.tot.Files = 1
	fail := func(err error) {
		s.cur.err = err
		s.send()
	}
	r := in.r
	if r == nil {
		f, err := sysread.Open(in.name)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				// Rotated away between listing and reading.
				s.cur.warns = append(s.cur.warns, fmt.Sprintf("%s: gone before it could be read (rotated?)", in.name))
				s.cur.totals = Totals{}
				s.send()
				return
			}
			fail(err)
			return
		}
		defer f.Close()
		r = f
	}
	w.br.Reset(r)
	src := w.br
	if magic, _ := w.br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		var err error
		if w.gz == nil {
			w.gz, err = gzip.NewReader(w.br)
		} else {
			err = w.gz.Reset(w.br)
		}
		if err != nil {
			s.cur.warns = append(s.cur.warns, fmt.Sprintf("%s: gzip: %v; file skipped", in.name, err))
			s.cur.totals = s.tot
			s.send()
			return
		}
		w.gr.Reset(w.gz)
		src = w.gr
	}
	gzipped := src == w.gr

	lineNo := 0
	for {
		line, err := w.readLine(src)
		if len(line) > 0 || err == nil {
			lineNo++
			s.tot.Lines++
			s.tot.Bytes += int64(len(line))
			if s.pendingErr != nil && len(bytes.TrimSpace(line)) > 0 {
				s.flushPending(false)
			}
			w.handle(s, line, lineNo)
			if len(s.cur.evs) >= batchEvents {
				if ctx.Err() != nil || !s.send() {
					return
				}
			}
		}
		if err == errLineTooLong {
			lineNo++
			s.tot.Lines++
			s.flushPending(false)
			s.tot.Malformed++
			s.warnLine(fmt.Sprintf("%s:%d: skipped line longer than %d bytes", s.name, lineNo, maxLine))
			continue
		}
		if err != nil {
			if err != io.EOF {
				if gzipped || in.r != nil {
					// A truncated or corrupt .gz (a rotation in progress, a
					// cut copy): keep what was read.
					s.flushPending(true)
					s.cur.warns = append(s.cur.warns, fmt.Sprintf("%s: after line %d: %v; rest of file skipped", in.name, lineNo, err))
					break
				}
				fail(fmt.Errorf("read %s: %w", in.name, err))
				return
			}
			break
		}
	}
	s.flushPending(true)
	if s.dropped > 0 {
		s.cur.warns = append(s.cur.warns, fmt.Sprintf("%s: %d more bad lines skipped without a warning each", in.name, s.dropped))
	}
	s.cur.totals = s.tot
	s.send()
}

var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its newline. err is io.EOF with
// the last, unterminated, line (possibly empty), errLineTooLong after a
// line over maxLine was skipped (line is then nil), or a read error.
func (w *worker) readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err == nil {
		return line[:len(line)-1], nil
	}
	if err != bufio.ErrBufferFull {
		return line, err
	}
	w.long = append(w.long[:0], line...)
	for {
		line, err = r.ReadSlice('\n')
		if len(w.long)+len(line) > maxLine {
			for err == bufio.ErrBufferFull {
				_, err = r.ReadSlice('\n')
			}
			if err == nil || err == io.EOF {
				// At EOF, the next read says so again.
				return nil, errLineTooLong
			}
			return nil, err
		}
		w.long = append(w.long, line...)
		switch err {
		case nil:
			return w.long[:len(w.long)-1], nil
		case bufio.ErrBufferFull:
			continue
		default:
			return w.long, err
		}
	}
}

// handle parses one line.
func (w *worker) handle(s *fileState, line []byte, lineNo int) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	evs := s.cur.evs
	if evs == nil {
		evs = *eventsPool.Get().(*[]Event)
	}
	evs = append(evs, Event{})
	ev := &evs[len(evs)-1]
	if err := w.p.parse(line, ev); err != nil {
		s.cur.evs = evs[:len(evs)-1]
		s.pendingErr, s.pendingNo = err, lineNo
		return
	}
	var missing []string
	if ev.Time.IsZero() {
		missing = append(missing, "time")
	}
	if ev.Node == "" {
		missing = append(missing, "node")
	}
	if ev.Kind == "" {
		missing = append(missing, "kind")
	}
	if missing != nil {
		s.cur.evs = evs[:len(evs)-1]
		s.tot.Invalid++
		s.warnLine(fmt.Sprintf("%s:%d: skipped event without %s", s.name, lineNo, strings.Join(missing, ", ")))
		return
	}
	s.cur.evs = evs
	s.tot.Events++
}

// lineParser decodes lines. Lines as gpuhc writes them (plain ASCII
// strings, known keys) take a fast path several times quicker than
// encoding/json; anything else (escapes, non-ASCII text, unknown keys,
// null, wrong types, invalid JSON) goes through encoding/json, so the
// result, and the error, are always exactly encoding/json's.
type lineParser struct {
	strs map[string]string // interned node, check, serial... strings
	// last holds each field's last value: a file is mostly one node's
	// heartbeats, so most values repeat the previous line's.
	last    [nFields]string
	serials []string // the last serials, and scratch space
}

// Fields with a last-value cache.
const (
	fKind = iota
	fNode
	fCheck
	fComponent
	fSerial
	fStatus
	fPrevious
	fAction
	fBackend
	fBy
	fJobID
	fBootID
	nFields
)

func (p *lineParser) field(f int, b []byte) string {
	if string(b) == p.last[f] {
		return p.last[f]
	}
	s := p.intern(b)
	p.last[f] = s
	return s
}

// maxInterned bounds the intern table; it is emptied when full.
const maxInterned = 1 << 18

func (p *lineParser) parse(line []byte, ev *Event) error {
	*ev = Event{}
	if p.fast(line, ev) {
		return nil
	}
	*ev = Event{}
	if err := json.Unmarshal(line, ev); err != nil {
		return err
	}
	return nil
}

func (p *lineParser) intern(b []byte) string {
	if s, ok := p.strs[string(b)]; ok {
		return s
	}
	if len(p.strs) >= maxInterned {
		clear(p.strs)
	}
	s := string(b)
	p.strs[s] = s
	return s
}

func parseFloat(b []byte) (float64, error) { return strconv.ParseFloat(string(b), 64) }

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// fastString reads a JSON string at b[i] (which must be '"') holding only
// printable ASCII without escapes; it returns its contents and the index
// after the closing quote.
func fastString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	j := i + 1
	for j < len(b) && plain[b[j]] {
		j++
	}
	if j < len(b) && b[j] == '"' {
		return b[i+1 : j], j + 1, true
	}
	return nil, i, false
}

// plain marks the bytes a fast string may hold: printable ASCII but the
// quote and the backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// fastNumber reads a JSON number at b[i] as a float64.
func fastNumber(b []byte, i int) (float64, int, bool) {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	start := j
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	digits := j - start
	if digits == 0 || (digits > 1 && b[start] == '0') {
		return 0, i, false
	}
	if j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
		// Fraction or exponent: validate the grammar, then ParseFloat.
		if b[j] == '.' {
			j++
			k := j
			for j < len(b) && b[j] >= '0' && b[j] <= '9' {
				j++
			}
			if j == k {
				return 0, i, false
			}
		}
		if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
			j++
			if j < len(b) && (b[j] == '+' || b[j] == '-') {
				j++
			}
			k := j
			for j < len(b) && b[j] >= '0' && b[j] <= '9' {
				j++
			}
			if j == k {
				return 0, i, false
			}
		}
		f, err := parseFloat(b[i:j])
		if err != nil {
			return 0, i, false
		}
		return f, j, true
	}
	if digits > 15 {
		f, err := parseFloat(b[i:j])
		if err != nil {
			return 0, i, false
		}
		return f, j, true
	}
	var n int64
	for _, c := range b[start:j] {
		n = n*10 + int64(c-'0')
	}
	if b[i] == '-' {
		if n == 0 {
			return 0, i, false // -0: leave it to encoding/json
		}
		n = -n
	}
	return float64(n), j, true
}

// fast decodes the common case; false means "use encoding/json".
func (p *lineParser) fast(b []byte, ev *Event) bool {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipWS(b, i+1) == len(b)
	}
	for {
		key, j, ok := fastString(b, i)
		if !ok {
			return false
		}
		i = skipWS(b, j)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipWS(b, i+1)
		var s []byte
		if k := string(key); k == "hours" || k == "value" || k == "floor" {
			var f float64
			if f, i, ok = fastNumber(b, i); !ok {
				return false
			}
			switch k {
			case "hours":
				ev.Hours = f
			case "value":
				ev.Value = &f
			default:
				ev.Floor = f
			}
		} else if string(key) == "serials" {
			if i, ok = p.fastStrings(b, i, ev); !ok {
				return false
			}
		} else {
			if s, i, ok = fastString(b, i); !ok {
				return false
			}
			switch string(key) {
			case "time":
				if ev.Time.UnmarshalText(s) != nil {
					return false
				}
			case "kind":
				ev.Kind = p.field(fKind, s)
			case "node":
				ev.Node = p.field(fNode, s)
			case "check":
				ev.Check = p.field(fCheck, s)
			case "component":
				ev.Component = p.field(fComponent, s)
			case "serial":
				ev.Serial = p.field(fSerial, s)
			case "status":
				ev.Status = p.field(fStatus, s)
			case "previous":
				ev.Previous = p.field(fPrevious, s)
			case "message":
				ev.Message = string(s)
			case "action":
				ev.Action = p.field(fAction, s)
			case "backend":
				ev.Backend = p.field(fBackend, s)
			case "by":
				ev.By = p.field(fBy, s)
			case "job_id":
				ev.JobID = p.field(fJobID, s)
			case "mode":
				ev.Mode = p.intern(s)
			case "user":
				ev.User = p.intern(s)
			case "name":
				ev.Name = p.intern(s)
			case "unit":
				ev.Unit = p.intern(s)
			case "boot_id":
				ev.BootID = p.field(fBootID, s)
			default:
				return false
			}
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return skipWS(b, i+1) == len(b)
		default:
			return false
		}
	}
}

func (p *lineParser) fastStrings(b []byte, i int, ev *Event) (int, bool) {
	if i >= len(b) || b[i] != '[' {
		return i, false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		ev.Serials = []string{}
		return i + 1, true
	}
	// Decode into p.serials, reusing the previous line's strings where
	// they repeat, then copy out at the exact length.
	n := 0
	for {
		s, j, ok := fastString(b, i)
		if !ok {
			return i, false
		}
		if n < len(p.serials) {
			if string(s) != p.serials[n] {
				p.serials[n] = p.intern(s)
			}
		} else {
			p.serials = append(p.serials, p.intern(s))
		}
		n++
		i = skipWS(b, j)
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case ']':
			ev.Serials = slices.Clone(p.serials[:n])
			return i + 1, true
		default:
			return i, false
		}
	}
}
