package logging

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuhc/gpuhc/internal/config"
)

// listen is a syslog daemon's datagram socket at a fresh path.
func listen(t *testing.T, path string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// stop is the daemon going away: its socket closed and removed, as
// rsyslog does on exit.
func stop(t *testing.T, c *net.UnixConn, path string) {
	t.Helper()
	c.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// next reads one datagram, or "" when none comes within wait.
func next(t *testing.T, c *net.UnixConn, wait time.Duration) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(wait))
	b := make([]byte, 16<<10)
	n, err := c.Read(b)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b[:n])
}

func sockPath(t *testing.T) string { return filepath.Join(t.TempDir(), "log.sock") }

func syslogCfg(level, facility, path string) config.Log {
	return config.Log{Level: level, Syslog: true, SyslogFacility: facility, SyslogSocket: path}
}

// syncBuffer is stderr shared by the logger and a hook's warning.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var at = time.Date(2026, 3, 5, 7, 8, 9, 0, time.Local)

func TestSyslogRecordIsExact(t *testing.T) {
	path := sockPath(t)
	srv := listen(t, path)
	var stderr syncBuffer
	log, c, err := New(syslogCfg("info", "local3", path), "gpuhc-test", &stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	log.WithTime(at).WithFields(logrus.Fields{"node": "gpu001", "reason": "XID 79", "checks": 3}).Warn("drained")
	// local3 is 19: 19*8 + warning (4).
	want := fmt.Sprintf(`<156>Mar  5 07:08:09 gpuhc-test[%d]: drained checks=3 node=gpu001 reason="XID 79"`, os.Getpid())
	if got := next(t, srv, 2*time.Second); got != want {
		t.Errorf("record\n got  %q\n want %q", got, want)
	}
	if !strings.Contains(stderr.String(), `msg=drained checks=3 node=gpu001 reason="XID 79"`) {
		t.Errorf("stderr lost the record: %q", stderr.String())
	}
}

func TestSyslogPriorityIsFacilityAndSeverity(t *testing.T) {
	for _, tc := range []struct {
		facility string
		level    logrus.Level
		pri      int
	}{
		{"daemon", logrus.ErrorLevel, 3*8 + 3},
		{"daemon", logrus.WarnLevel, 3*8 + 4},
		{"daemon", logrus.InfoLevel, 3*8 + 6},
		{"daemon", logrus.DebugLevel, 3*8 + 7},
		{"user", logrus.InfoLevel, 1*8 + 6},
		{"local0", logrus.ErrorLevel, 16*8 + 3},
		{"local7", logrus.DebugLevel, 23*8 + 7},
	} {
		path := sockPath(t)
		srv := listen(t, path)
		log, c, err := New(syslogCfg("debug", tc.facility, path), "gpuhc-test", &syncBuffer{})
		if err != nil {
			t.Fatal(err)
		}
		log.Log(tc.level, "x")
		c.Close()
		if got, want := next(t, srv, 2*time.Second), fmt.Sprintf("<%d>", tc.pri); !strings.HasPrefix(got, want) {
			t.Errorf("%s %s: %q, want %s", tc.facility, tc.level, got, want)
		}
	}
}

func TestSyslogTagAndLevelFilter(t *testing.T) {
	path := sockPath(t)
	srv := listen(t, path)
	cfg := syslogCfg("warn", "daemon", path)
	cfg.SyslogTag = "site-hc"
	var stderr syncBuffer
	log, c, err := New(cfg, "gpuhc-test", &stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	log.Info("below the level")
	log.Debug("far below")
	log.Error("kept")
	got := next(t, srv, 2*time.Second)
	if want := fmt.Sprintf(" site-hc[%d]: kept", os.Getpid()); !strings.HasPrefix(got, "<27>") || !strings.HasSuffix(got, want) {
		t.Errorf("got %q, want <27>... %s", got, want)
	}
	if extra := next(t, srv, 100*time.Millisecond); extra != "" {
		t.Errorf("a record below the level reached syslog: %q", extra)
	}
	if strings.Contains(stderr.String(), "below") {
		t.Errorf("stderr: %q", stderr.String())
	}
}

func TestSyslogOffByDefault(t *testing.T) {
	d := config.Default().Log
	if d.Syslog || d.SyslogFacility != "daemon" || d.SyslogSocket != "/dev/log" || d.SyslogTag != "" {
		t.Fatalf("defaults: %+v", d)
	}
	path := sockPath(t)
	srv := listen(t, path)
	d.SyslogSocket = path
	log, c, err := New(d, "gpuhc-test", &syncBuffer{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	log.Error("not for syslog")
	if got := next(t, srv, 200*time.Millisecond); got != "" {
		t.Errorf("syslog off, yet it got %q", got)
	}
}

// Control characters would split the record; a huge one would be cut by
// the daemon at a place of its choosing.
func TestSyslogMessageIsOneBoundedLine(t *testing.T) {
	path := sockPath(t)
	srv := listen(t, path)
	log, c, err := New(syslogCfg("info", "daemon", path), "gpuhc-test", &syncBuffer{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	log.WithField("err", "exit 1\nstderr: boom").Info("scontrol\tfailed")
	if got := next(t, srv, 2*time.Second); !strings.HasSuffix(got, `: "scontrol\tfailed" err="exit 1\nstderr: boom"`) {
		t.Errorf("got %q", got)
	}
	log.Info(strings.Repeat("é", 10000))
	got := next(t, srv, 2*time.Second)
	if len(got) > maxSyslogRecord || !strings.HasSuffix(got, "é...") {
		t.Errorf("long record: %d bytes, ends %q", len(got), got[max(0, len(got)-10):])
	}
}

// No daemon: one warning, every record still on stderr, at once.
func TestSyslogMissingSocket(t *testing.T) {
	var stderr syncBuffer
	start := time.Now()
	log, c, err := New(syslogCfg("info", "daemon", sockPath(t)), "gpuhc-test", &stderr)
	if err != nil {
		t.Fatalf("a missing syslog socket failed the logger: %v", err)
	}
	defer c.Close()
	for i := range 50 {
		log.Infof("record %d", i)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %s", d)
	}
	out := stderr.String()
	if n := strings.Count(out, "level=warning"); n != 1 || !strings.Contains(out, "syslog unavailable; logging to stderr only") || !strings.Contains(out, "no such file") {
		t.Errorf("want one warning naming the error, got %d mentions:\n%s", n, out)
	}
	if !strings.Contains(out, "record 49") {
		t.Errorf("records lost from stderr:\n%s", out)
	}
}

// rsyslog restarted: the old socket is gone and a new one is at the path.
// While there is none, records are dropped with one warning; once it is
// back, records reach it again.
func TestSyslogDaemonRestart(t *testing.T) {
	path := sockPath(t)
	srv := listen(t, path)
	var stderr syncBuffer
	log, c, err := New(syslogCfg("info", "daemon", path), "gpuhc-test", &stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	log.Info("one")
	if got := next(t, srv, 2*time.Second); !strings.HasSuffix(got, ": one") {
		t.Fatalf("got %q", got)
	}
	stop(t, srv, path)
	srv = listen(t, path)
	log.Info("two")
	if got := next(t, srv, 2*time.Second); !strings.HasSuffix(got, ": two") {
		t.Errorf("after a restart: %q", got)
	}
	if strings.Contains(stderr.String(), "syslog") {
		t.Errorf("a restart in between records warned: %s", stderr.String())
	}

	stop(t, srv, path)
	log.Info("three")
	log.Info("four")
	srv = listen(t, path)
	log.Info("five")
	if got := next(t, srv, 2*time.Second); !strings.HasSuffix(got, ": five") {
		t.Errorf("after the daemon came back: %q", got)
	}
	out := stderr.String()
	if strings.Count(out, "syslog: record not sent") != 1 || !strings.Contains(out, "msg=four") {
		t.Errorf("want one warning and every record on stderr:\n%s", out)
	}
}

// A daemon that stops reading (stopped, swamped) fills the socket's queue;
// a blocking write there would hang the run until slurmd kills it.
func TestSyslogDaemonNotReadingDoesNotBlock(t *testing.T) {
	path := sockPath(t)
	listen(t, path) // never read
	var stderr syncBuffer
	log, c, err := New(syslogCfg("info", "daemon", path), "gpuhc-test", &stderr)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		for i := range 3000 {
			log.WithField("n", i).Info(strings.Repeat("x", 200))
		}
		done <- time.Since(start)
	}()
	select {
	case d := <-done:
		c.Close()
		if d > 3*syslogTimeout {
			t.Errorf("3000 records took %s", d)
		}
	case <-time.After(10 * time.Second):
		// Not closed: Close would wait for the blocked write.
		t.Fatal("logging blocked on a daemon that does not read")
	}
	out := stderr.String()
	if strings.Count(out, "syslog:") != 1 || !strings.Contains(out, "not taking records") {
		t.Errorf("want one warning:\n%.2000s", out)
	}
	if !strings.Contains(out, "n=2999") {
		t.Error("records lost from stderr")
	}
}

// syslog-ng's unix-stream("/dev/log") is a stream socket: records are
// lines.
func TestSyslogStreamSocket(t *testing.T) {
	path := sockPath(t)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lines := make(chan string, 2)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	log, c, err := New(syslogCfg("info", "user", path), "gpuhc-test", &syncBuffer{})
	if err != nil {
		t.Fatal(err)
	}
	log.Info("a")
	log.Warn("b")
	c.Close()
	for _, want := range []string{"<14>", "<12>"} {
		select {
		case got := <-lines:
			if !strings.HasPrefix(got, want) {
				t.Errorf("got %q, want %s...", got, want)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("no line")
		}
	}
}
