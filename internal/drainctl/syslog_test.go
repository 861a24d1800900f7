package drainctl

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

// With [log] syslog on, the Slurm client's warnings also reach syslog,
// tagged gpuhc-drain.
func TestSlurmWarningsReachSyslog(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "log.sock")
	srv, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	conf := filepath.Join(dir, "gpuhc.toml")
	body := fmt.Sprintf("[log]\nsyslog = true\nsyslog_facility = \"local1\"\nsyslog_socket = %q\n[events]\nfile = %q\n", sock, filepath.Join(dir, "%n.jsonl"))
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	ctl := newFake(t0, node("gpu001", []string{"IDLE"}, "", "", time.Time{}))
	var stdout, stderr bytes.Buffer
	code := Program{
		Args:     []string{"list", "--config", conf},
		Hostname: func() (string, error) { return "admin1", nil },
		Stdout:   &stdout,
		Stderr:   &stderr,
		Now:      func() time.Time { return t0 },
		NewController: func(_ config.Slurm, log logrus.FieldLogger) (slurm.Controller, error) {
			log.WithField("op", "list nodes").Warn("slurmrestd failed; falling back to scontrol")
			log.Debug("not without -v")
			return ctl, nil
		},
	}.Main()
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	srv.SetReadDeadline(time.Now().Add(2 * time.Second))
	b := make([]byte, 4096)
	n, err := srv.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	// local1 (17) * 8 + warning (4).
	want := fmt.Sprintf(` gpuhc-drain[%d]: slurmrestd failed; falling back to scontrol op="list nodes"`, os.Getpid())
	if got := string(b[:n]); !strings.HasPrefix(got, "<140>") || !strings.HasSuffix(got, want) {
		t.Errorf("got %q, want <140>...%s", got, want)
	}
	srv.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := srv.Read(b); err == nil {
		t.Errorf("a debug record reached syslog: %q", b[:n])
	}
}
