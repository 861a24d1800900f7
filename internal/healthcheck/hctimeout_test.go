package healthcheck

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/runenv"
)

// withLimit sets [slurm] health_check_timeout in the bed's config.
func (b bed) withLimit(t *testing.T, limit string) {
	t.Helper()
	data, err := os.ReadFile(b.cfg)
	must(t, err)
	s := strings.Replace(string(data), "[slurm]\n", "[slurm]\nhealth_check_timeout = \""+limit+"\"\n", 1)
	must(t, os.WriteFile(b.cfg, []byte(s), 0o644))
}

// hangModules makes /proc/modules a FIFO nobody writes: the modules check
// blocks in open(2) as a check stuck on a hung filesystem does. The FIFO
// is released at the end of the test.
func (b bed) hangModules(t *testing.T) {
	t.Helper()
	p := filepath.Join(b.dir, "root/proc/modules")
	must(t, os.Remove(p))
	must(t, syscall.Mkfifo(p, 0o644))
	t.Cleanup(func() {
		// O_RDWR on a FIFO does not block; the writer's close gives the
		// abandoned reader EOF.
		if f, err := os.OpenFile(p, os.O_RDWR, 0); err == nil {
			f.Close()
		}
	})
}

func kindsOf(evs []events.Event) []string {
	var k []string
	for _, e := range evs {
		k = append(k, e.Kind)
	}
	return k
}

// A real FAIL found at once plus a hung check: the drain goes out after
// the early grace, long before the check deadline, once; the run's own
// policy then keeps that drain (no second drain, no new reason).
func TestEarlyDrainWithHungCheck(t *testing.T) {
	b := newBed(t, nvidiaLoaded, `"nvidia"`)
	b.withLimit(t, "8s") // deadline 3s, Slurm calls until 5s, watchdog 6s
	b.hangModules(t)
	start := time.Now()
	code, out, stderr := b.run(t, "--simulate", "dgxh100", "--inject", "gpu3:xid=79")
	took := time.Since(start)
	if code != ExitFail {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	if took < 3*time.Second || took > 6*time.Second {
		t.Errorf("run took %s, want the 3s deadline and under the 6s watchdog", took)
	}
	var drains []string
	for _, c := range b.callLog(t) {
		if strings.Contains(c, "State=DRAIN") {
			drains = append(drains, c)
		}
	}
	if len(drains) != 1 || !strings.Contains(drains[0], "XID 79") {
		t.Fatalf("drain calls %q, want one with the XID reason\n%s", drains, out)
	}
	evs := b.events(t)
	var drainAt time.Time
	for _, e := range evs {
		if e.Kind == events.KindDrain {
			drainAt = e.Time
		}
	}
	if drainAt.IsZero() || drainAt.Sub(start) > 2500*time.Millisecond {
		t.Errorf("drain event at %v after start, want within the early grace (events %v)", drainAt.Sub(start), kindsOf(evs))
	}
	if !strings.Contains(out, "early: ") || !strings.Contains(out, "already-drained") {
		t.Errorf("want an early drain then the full run finding it\n%s", out)
	}
	if !strings.Contains(out, "timed out") {
		t.Errorf("the hung check is not reported as timed out\n%s", out)
	}
}

// The built-in deadline is clamped into a short limit; a file's own
// deadline that cannot fit is refused by --check-config with the figures.
func TestCheckConfigFitsHealthCheckTimeout(t *testing.T) {
	b := newBed(t, nvidiaLoaded, `"nvidia"`)
	must(t, os.MkdirAll(filepath.Join(b.dir, "root/etc/slurm"), 0o755))
	must(t, os.WriteFile(filepath.Join(b.dir, "root/etc/slurm/slurm.conf"), []byte("ClusterName=t\nHealthCheckTimeout=10\n"), 0o644))
	code, out, stderr := b.run(t, "--check-config")
	if code != ExitHealthy || !strings.Contains(out, "HealthCheckTimeout 10s (/etc/slurm/slurm.conf): deadline 5s, Slurm calls until 7s, watchdog 8s") {
		t.Errorf("slurm.conf limit: exit %d\n%s\n%s", code, out, stderr)
	}
	data, err := os.ReadFile(b.cfg)
	must(t, err)
	must(t, os.WriteFile(b.cfg, append([]byte("deadline = \"30s\"\n"), data...), 0o644))
	code, out, stderr = b.run(t, "--check-config")
	if code != ExitUsage || !strings.Contains(stderr, "deadline 30s + 2s for the drain + 3s margin > HealthCheckTimeout 10s") {
		t.Errorf("explicit deadline: exit %d\n%s\n%s", code, out, stderr)
	}
	b.withLimit(t, "60s")
	code, out, stderr = b.run(t, "--check-config")
	if code != ExitHealthy || !strings.Contains(out, "HealthCheckTimeout 1m0s ([slurm] health_check_timeout): deadline 30s") {
		t.Errorf("config setting wins over slurm.conf: exit %d\n%s\n%s", code, out, stderr)
	}
}

func TestCheckConfigDefaultLimit(t *testing.T) {
	b := newBed(t, nvidiaLoaded, `"nvidia"`)
	code, out, _ := b.run(t, "--check-config")
	if code != ExitHealthy || !strings.Contains(out, "HealthCheckTimeout 1m0s (default): deadline 45s, Slurm calls until 57s, watchdog 58s") {
		t.Errorf("no slurm.conf: exit %d\n%s", code, out)
	}
}

// lockedBuffer is a bytes.Buffer for the two writers of a SIGTERM run:
// the signal's last line on stderr and the run's own log, which the
// test's Exit does not stop as os.Exit would (an *os.File takes
// concurrent writes; a bytes.Buffer does not).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// SIGTERM while a check hangs: an event names the check still running,
// and the program exits at once.
func TestSIGTERMLeavesATrace(t *testing.T) {
	b := newBed(t, nvidiaLoaded, `"nvidia"`)
	b.withLimit(t, "8s")
	b.hangModules(t)
	term := make(chan os.Signal, 1)
	exited := make(chan int, 1)
	var out, errb lockedBuffer
	p := Program{Process: runenv.Process{
		Args:     []string{"--config", b.cfg},
		Getenv:   func(k string) string { return map[string]string{"SLURMD_NODENAME": "gpu007"}[k] },
		Hostname: func() (string, error) { return "", errors.New("no host name in tests") },
		Stdout:   &out, Stderr: &errb,
		Exit: func(c int) { exited <- c; runtime.Goexit() },
	}, Term: term}
	returned := make(chan int, 1)
	go func() { returned <- p.Main() }()
	time.Sleep(300 * time.Millisecond)
	term <- syscall.SIGTERM
	select {
	case c := <-exited:
		if c != ExitInternal {
			t.Errorf("exit code %d, want %d", c, ExitInternal)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("SIGTERM did not end the run")
	}
	evs := b.events(t)
	if len(evs) == 0 || evs[len(evs)-1].Kind != events.KindKilled || !strings.Contains(evs[len(evs)-1].Message, "still running: host.modules") {
		t.Errorf("events %+v, want a killed event naming host.modules", evs)
	}
	<-returned // the test's Exit does not end the process; let the run finish
}

func TestNodeHealth(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want string
		ok   bool
	}{{"yes", "yes", true}, {"no", "no", true}, {"", "", false}, {"YES", "", false}, {"yes\n", "", false}, {"maybe", "", false}} {
		got, ok := nodeHealth(func(string) string { return tc.v })
		if got != tc.want || ok != tc.ok {
			t.Errorf("nodeHealth(%q) = %q, %v; want %q, %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

func TestHealthHint(t *testing.T) {
	for _, tc := range []struct {
		health           string
		drained, failing bool
		want             string
	}{
		{"no", false, false, "did not drain it"},
		{"no", true, false, ""},
		{"no", false, true, ""},
		{"yes", true, false, "someone resumed it"},
		{"yes", false, false, ""},
		{"", true, false, ""},
	} {
		got := healthHint(tc.health, tc.drained, tc.failing)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("healthHint(%q, %v, %v) = %q, want %q", tc.health, tc.drained, tc.failing, got, tc.want)
		}
	}
}
