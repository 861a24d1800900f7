package logging

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/config"
)

func TestTextAndJSON(t *testing.T) {
	file := filepath.Join(t.TempDir(), "log", "gpuhc.json")
	var stderr bytes.Buffer
	log, c, err := New(config.Log{Level: "info", File: file}, &stderr)
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
	if _, _, err := New(config.Log{Level: "loud"}, &bytes.Buffer{}); err == nil {
		t.Error("bad level accepted")
	}
}
