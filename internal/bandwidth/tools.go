package bandwidth

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// maxOutput caps what is kept of a tool's stdout and of its stderr: the
// outputs parsed here are a few KB, and a tool gone wrong must not make us
// hold gigabytes.
const maxOutput = 1 << 20

// toolEnv is the whole environment of every tool: slurmd gives us no
// PATH, and nothing from a job's environment may change what is measured.
// PCI order makes CUDA ordinals follow the bus, as nvidia-smi's do.
var toolEnv = []string{"LC_ALL=C", "CUDA_DEVICE_ORDER=PCI_BUS_ID"}

// capped is a writer that keeps the first max bytes.
type capped struct {
	buf   bytes.Buffer
	max   int
	extra int64 // bytes dropped
}

func (c *capped) Write(p []byte) (int, error) {
	n := len(p)
	if room := max(c.max-c.buf.Len(), 0); room < n {
		c.extra += int64(n - room)
		p = p[:room]
	}
	c.buf.Write(p)
	// Report everything written: the tool keeps running, and its pipe
	// must not fill up because we stopped keeping its words.
	return n, nil
}

// output is what a tool printed.
type output struct {
	stdout, stderr []byte
	truncated      bool
}

// toolCommand builds a command for path: argv only, the fixed
// environment, its own process group so that a kill at the timeout takes
// its children too.
func toolCommand(ctx context.Context, path string, args []string, stdout, stderr *capped) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = toolEnv
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Pdeathsig: its own process group is out of reach of slurmd's kill
	// of ours, so a tool (an ib_write_bw server waiting for a client that
	// never comes) must die with us rather than hold its port forever.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A grandchild holding the pipes must not keep us waiting.
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// runTool runs a tool to completion within ctx. The output comes back
// even with an error, which says why the tool failed in one line.
func runTool(ctx context.Context, path string, args ...string) (output, error) {
	if err := checkTool(path); err != nil {
		return output{}, err
	}
	if ctx.Err() != nil {
		return output{}, fmt.Errorf("%s: not run: out of time", path)
	}
	stdout, stderr := &capped{max: maxOutput}, &capped{max: maxOutput}
	start := time.Now()
	err := toolCommand(ctx, path, args, stdout, stderr).Run()
	out := output{stdout: stdout.buf.Bytes(), stderr: stderr.buf.Bytes(), truncated: stdout.extra > 0 || stderr.extra > 0}
	return out, toolError(ctx, path, err, out, start)
}

// checkTool says clearly that a configured tool is not installed, rather
// than exec's "no such file or directory".
func checkTool(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: not found", path)
	case err != nil:
		return fmt.Errorf("%s: %w", path, err)
	case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%s: not an executable file", path)
	}
	return nil
}

// toolError describes a finished run that failed: killed at the
// timeout, or an exit status with the tool's last words.
func toolError(ctx context.Context, path string, err error, out output, start time.Time) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: killed after %gs: out of time", path, time.Since(start).Round(100*time.Millisecond).Seconds())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		last := lastLine(out.stderr)
		if last == "" {
			last = lastLine(out.stdout)
		}
		if last != "" {
			return fmt.Errorf("%s: %s: %s", path, ee.ProcessState.String(), last)
		}
		return fmt.Errorf("%s: %s", path, ee.ProcessState.String())
	}
	return fmt.Errorf("run %s: %w", path, err)
}

// lastLine is the last non-blank line of b, made printable.
func lastLine(b []byte) string {
	var last string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), maxOutput)
	for sc.Scan() {
		if t := strings.TrimSpace(sc.Text()); t != "" {
			last = t
		}
	}
	return printable(last)
}

// lines splits output into lines without their line ends; a line longer
// than the scanner allows ends the output (it is garbage in any case).
func lines(b []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), maxOutput)
	for sc.Scan() {
		out = append(out, strings.TrimRight(sc.Text(), "\r"))
	}
	return out
}
