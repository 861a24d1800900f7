package logging

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/sirupsen/logrus"

	"github.com/gpuhc/gpuhc/internal/config"
)

// syslogTimeout bounds each connect and each write to the syslog socket. A
// local daemon takes a datagram in microseconds; one that does not within
// this is stopped or swamped, and the run (under slurmd's hard limit) must
// not wait for it.
const syslogTimeout = 250 * time.Millisecond

// maxSyslogRecord keeps a record within rsyslog's default maximum message
// size (8 KiB); longer ones would be cut by the daemon anyway.
const maxSyslogRecord = 8000

// AddSyslog also sends log's records, at log's level, to the local syslog
// daemon when cfg.Syslog is on; prog is the tag when cfg.SyslogTag is
// empty. A socket that cannot be reached costs one warning through log,
// never an error. Close the returned closer on exit.
//
// log/syslog is not used because its writes have no deadline: a daemon
// that stops reading would block the run.
func AddSyslog(log *logrus.Logger, cfg config.Log, prog string) io.Closer {
	if !cfg.Syslog {
		return io.NopCloser(nil)
	}
	facility, ok := config.SyslogFacilityCode(cfg.SyslogFacility)
	if !ok {
		log.Warnf("syslog: facility %q unknown; not logging to syslog", cfg.SyslogFacility)
		return io.NopCloser(nil)
	}
	tag := cfg.SyslogTag
	if tag == "" {
		tag = prog
	}
	// The hook warns on stderr itself while records are being written, so
	// the logger's writes and its own must not interleave.
	out := &lockedWriter{w: log.Out}
	log.SetOutput(out)
	h := &syslogHook{
		path: cfg.SyslogSocket, facility: facility, tag: tag, pid: os.Getpid(),
		levels: levelsUpTo(log.GetLevel()), timeout: syslogTimeout, warn: out,
		warnFormat: log.Formatter,
	}
	if err := h.dial(); err != nil {
		log.WithError(err).Warn("syslog unavailable; logging to stderr only")
		return io.NopCloser(nil)
	}
	log.AddHook(h)
	return h
}

// syslogHook writes records to a local syslog socket in the format of
// glibc's syslog(3): "<PRI>Mmm dd hh:mm:ss TAG[PID]: MSG", the daemon
// adding the host name.
type syslogHook struct {
	path       string
	facility   int
	tag        string
	pid        int
	levels     []logrus.Level
	timeout    time.Duration
	warn       io.Writer
	warnFormat logrus.Formatter

	mu     sync.Mutex
	conn   net.Conn
	stream bool // a SOCK_STREAM socket (syslog-ng's unix-stream): records end in "\n"
	off    bool // a write timed out: the daemon is not reading, stop trying
	warned bool
}

func (h *syslogHook) Levels() []logrus.Level { return h.levels }

// Fire never returns an error: logrus would print it on os.Stderr for every
// record, and a failing syslog must not be noisier than one line.
func (h *syslogHook) Fire(e *logrus.Entry) error {
	rec := h.record(e)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.off {
		return nil
	}
	err := h.send(rec)
	if err != nil && !isTimeout(err) {
		// A restarted daemon listens on a new socket at the same path.
		h.closeConn()
		if err = h.dial(); err == nil {
			err = h.send(rec)
		}
	}
	if err == nil {
		return nil
	}
	h.closeConn()
	msg := "syslog: record not sent (%v); later records are tried again, failures not reported"
	if isTimeout(err) {
		h.off = true
		msg = "syslog: the daemon is not taking records (%v); no more are sent to syslog"
	}
	h.warnOnce(fmt.Sprintf(msg, err))
	return nil
}

// dial connects to the socket: a datagram socket as rsyslog, journald and
// most syslog-ng setups make, else a stream one. Called with mu held or
// before the hook is shared.
func (h *syslogHook) dial() error {
	d := net.Dialer{Timeout: h.timeout}
	c, err := d.Dial("unixgram", h.path)
	if errors.Is(err, syscall.EPROTOTYPE) {
		if c, err = d.Dial("unix", h.path); err == nil {
			h.stream = true
		}
	}
	if err != nil {
		return fmt.Errorf("syslog socket: %w", err)
	}
	h.conn = c
	return nil
}

func (h *syslogHook) send(rec []byte) error {
	if h.conn == nil {
		return errors.New("not connected")
	}
	if h.stream {
		rec = append(rec, '\n')
	}
	if err := h.conn.SetWriteDeadline(time.Now().Add(h.timeout)); err != nil {
		return err
	}
	_, err := h.conn.Write(rec)
	return err
}

func (h *syslogHook) closeConn() {
	if h.conn != nil {
		h.conn.Close()
		h.conn = nil
	}
}

func (h *syslogHook) warnOnce(msg string) {
	if h.warned {
		return
	}
	h.warned = true
	b, err := h.warnFormat.Format(&logrus.Entry{Time: time.Now(), Level: logrus.WarnLevel, Message: msg, Data: logrus.Fields{}})
	if err == nil {
		h.warn.Write(b)
	}
}

// Close ends the connection; records after it are dropped.
func (h *syslogHook) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.off = true
	h.closeConn()
	return nil
}

// record is one syslog line for e: the message, then its fields sorted by
// key as key=value, quoted where logrus's text format would quote them.
func (h *syslogHook) record(e *logrus.Entry) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "<%d>%s %s[%d]: ", h.facility*8+severity(e.Level), e.Time.Format(time.Stamp), h.tag, h.pid)
	if printable(e.Message) {
		b.WriteString(e.Message)
	} else {
		b.WriteString(fmt.Sprintf("%q", e.Message))
	}
	keys := make([]string, 0, len(e.Data))
	for k := range e.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteByte(' ')
		b.WriteString(quoted(k))
		b.WriteByte('=')
		b.WriteString(quoted(fmt.Sprint(e.Data[k])))
	}
	s := b.String()
	if len(s) > maxSyslogRecord {
		cut := maxSyslogRecord - len("...")
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return []byte(s)
}

// severity maps a logrus level to a syslog severity. Panic and fatal are
// critical, not emergency: rsyslog's stock rules send emerg to every
// terminal, and one node's health check is no such thing.
func severity(l logrus.Level) int {
	switch l {
	case logrus.PanicLevel, logrus.FatalLevel:
		return 2
	case logrus.ErrorLevel:
		return 3
	case logrus.WarnLevel:
		return 4
	case logrus.InfoLevel:
		return 6
	default:
		return 7
	}
}

// printable: valid UTF-8 without control characters, which would split or
// garble the record in the daemon's files.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

// quoted is s as logrus's text format writes a value: bare when it is made
// of letters, digits and "-._/@^+", else in Go quotes.
func quoted(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-._/@^+", r)) {
			return fmt.Sprintf("%q", s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// lockedWriter serialises the writes of the logger and its hooks.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
