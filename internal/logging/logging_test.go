package logging

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/config"
)

func TestTextAndJSON(t *testing.T) {
	file := filepath.Join(t.TempDir(), "log", "gpuhc.json")
	var stderr bytes.Buffer
	log, c, err := New(config.Log{Level: "info", File: file}, "gpuhc-test", &stderr)
	if err != nil {
		t.Fatal(err)
	}
	log.WithField("node", "gpu001").Info("drained")
	log.Debug("hidden")
	c.Close()
	if !strings.Contains(stderr.String(), `msg=drained node=gpu001`) || strings.Contains(stderr.String(), "hidden") {
		t.Errorf("stderr text: %q", stderr.String())
	}
	b, _ := os.ReadFile(file)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 1 {
		t.Fatalf("json lines: %q", b)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil || m["msg"] != "drained" || m["node"] != "gpu001" {
		t.Errorf("json line %q: %v", lines[0], err)
	}
}

func TestBadLevel(t *testing.T) {
	if _, _, err := New(config.Log{Level: "loud"}, "gpuhc-test", &bytes.Buffer{}); err == nil {
		t.Error("bad level accepted")
	}
}

// A log file that is a FIFO nobody reads used to block the open, and the
// run with it; a FIFO with a reader, or a device, is not a log either.
func TestLogFileThatIsNotAFileIsRefusedAtOnce(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "gpuhc.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/null"} {
		done := make(chan error, 1)
		go func() {
			_, _, err := New(config.Log{Level: "info", File: p}, "gpuhc-test", &bytes.Buffer{})
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), p) {
				t.Errorf("%s: %v; want an error naming it", p, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: New blocked", p)
		}
	}
}
