package bandwidth

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeTool writes an executable shell script standing in for a tool.
// Scripts run with the tools' fixed environment, without PATH, so they
// name every program by its absolute path.
func fakeTool(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// catTool is a tool that prints a captured sample, with an exit status.
func catTool(t *testing.T, sample string, status string) string {
	t.Helper()
	abs, err := filepath.Abs(sample)
	if err != nil {
		t.Fatal(err)
	}
	return fakeTool(t, "/bin/cat '"+abs+"'\nexit "+status)
}

func TestRunTool(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		timeout time.Duration
		stdout  string
		err     string // part of the error; "" for none
	}{
		// PWD=/ is the shell's own.
		{"fixed environment, argv as given", `/usr/bin/env | /usr/bin/sort; echo "$# [$1] [$2] $(/bin/pwd)"`,
			time.Second, "CUDA_DEVICE_ORDER=PCI_BUS_ID\nLC_ALL=C\nPWD=/\n2 [a b] [;x] /\n", ""},
		{"exit status with last words", "echo partial\necho 'NCCL failure common.cu:1005 unhandled cuda error' >&2\nexit 3",
			time.Second, "partial\n", "exit status 3: NCCL failure common.cu:1005 unhandled cuda error"},
		{"killed at the deadline, children too", "/bin/sleep 30 &\n/bin/sleep 30",
			300 * time.Millisecond, "", "killed after 0."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := fakeTool(t, tt.body)
			ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			start := time.Now()
			out, err := runTool(ctx, tool, "a b", ";x")
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %s", took)
			}
			if string(out.stdout) != tt.stdout {
				t.Errorf("stdout %q, want %q", out.stdout, tt.stdout)
			}
			if (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("error %v, want %q", err, tt.err)
			}
		})
	}
}

func TestRunToolBoundsOutput(t *testing.T) {
	// 3 MiB of output: kept to maxOutput, and the tool is not blocked.
	tool := fakeTool(t, "/usr/bin/head -c 3145728 /dev/zero")
	out, err := runTool(context.Background(), tool)
	if err != nil || len(out.stdout) != maxOutput || !out.truncated {
		t.Errorf("kept %d bytes, truncated %v, err %v", len(out.stdout), out.truncated, err)
	}
}

func TestRunToolNotInstalled(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		filepath.Join(dir, "absent"): "absent: not found",
		plain:                        "plain: not an executable file",
		dir:                          ": not an executable file",
	} {
		if _, err := runTool(context.Background(), path); err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("%s: %v, want ...%q", path, err, want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := runTool(ctx, fakeTool(t, "exit 0")); err == nil || !strings.HasSuffix(err.Error(), "not run: out of time") {
		t.Errorf("expired: %v", err)
	}
}
