package healthcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/lock"
	"github.com/gpuhc/gpuhc/internal/metrics/promtest"
	"github.com/gpuhc/gpuhc/internal/runenv"
)

// bed is a node in a temp dir: a fixture root, a config, and a stand-in
// scontrol that keeps the node's state in a file and logs its argv, so
// the real exec path of the scontrol backend is exercised.
type bed struct {
	dir, cfg, calls, state string
}

// "show nodes" lists gpu007 after the lines of the file "$state.fleet",
// the rest of the cluster, when there is one.
const shim = `#!/bin/sh
calls=%[1]q; state=%[2]q
for a in "$@"; do printf '%%s|' "$a" >> "$calls"; done; echo >> "$calls"
cmd=; node=; st=; reason=; list=
for a in "$@"; do
  case "$a" in
    show|update) cmd=$a ;;
    nodes) list=1; node=gpu007 ;;
    NodeName=*) node=${a#NodeName=} ;;
    State=*) st=${a#State=} ;;
    Reason=*) reason=${a#Reason=} ;;
    -*) ;;
    *) node=$a ;;
  esac
done
case "$cmd" in
show)
  if [ -n "$list" ] && [ -e "$state.fleet" ]; then cat "$state.fleet"; fi
  cur=$(cat "$state")
  case "$cur" in
    IDLE) echo "NodeName=$node Arch=x86_64 CPUTot=2 State=IDLE ThreadsPerCore=1 Partitions=debug" ;;
    *) echo "NodeName=$node Arch=x86_64 CPUTot=2 State=$cur ThreadsPerCore=1 Partitions=debug Reason=$(cat "$state.reason") [root@2026-11-30T05:53:48]" ;;
  esac ;;
update)
  case "$st" in
    DRAIN) echo IDLE+DRAIN > "$state"; printf '%%s' "$reason" > "$state.reason" ;;
    RESUME) echo IDLE > "$state" ;;
  esac ;;
esac
`

func newBed(t *testing.T, modules string, required string) bed {
	t.Helper()
	dir := t.TempDir()
	b := bed{dir: dir, cfg: filepath.Join(dir, "gpuhc.toml"), calls: filepath.Join(dir, "calls"), state: filepath.Join(dir, "node")}
	must(t, os.MkdirAll(filepath.Join(dir, "root/proc"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "root/proc/modules"), []byte(modules), 0o644))
	// An empty kernel log (a regular file is read as a /dev/kmsg dump):
	// the kernel-log rules run on every node, GPUs or not.
	must(t, os.MkdirAll(filepath.Join(dir, "root/dev"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "root/dev/kmsg"), nil, 0o644))
	must(t, os.WriteFile(b.state, []byte("IDLE\n"), 0o644))
	sc := filepath.Join(dir, "scontrol")
	must(t, os.WriteFile(sc, []byte(fmt.Sprintf(shim, b.calls, b.state)), 0o755))
	cfg := fmt.Sprintf(`root = %q
state_dir = %q
lock_file = %q
[events]
file = %q
[policy]
storm_jitter = "0s"
[metrics]
textfile_dir = %q
[slurm]
scontrol = %q
[checks.modules]
required = [%s]
[checks.thermal]
enabled = false
[checks.memory]
enabled = false
[checks.cpu]
enabled = false
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), filepath.Join(dir, "hc.lock"),
		filepath.Join(dir, "events.jsonl"), filepath.Join(dir, "textfile"), sc, required)
	must(t, os.WriteFile(b.cfg, []byte(cfg), 0o644))
	return b
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (b bed) run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return b.runAt(t, time.Time{}, args...)
}

// runAt runs with the clock stopped at now (the real clock if zero).
func (b bed) runAt(t *testing.T, now time.Time, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	p := Program{Process: runenv.Process{
		Args:     append([]string{"--config", b.cfg}, args...),
		Getenv:   func(k string) string { return map[string]string{"SLURMD_NODENAME": "gpu007"}[k] },
		Hostname: func() (string, error) { return "", errors.New("no host name in tests") },
		Stdout:   &out, Stderr: &errb,
		Exit: func(c int) { t.Fatalf("watchdog fired with %d", c) },
	}}
	if !now.IsZero() {
		p.Now = func() time.Time { return now }
	}
	return p.Main(), out.String(), errb.String()
}

func (b bed) callLog(t *testing.T) []string {
	data, err := os.ReadFile(b.calls)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	must(t, err)
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

const nvidiaLoaded = "nvidia 12345 0 - Live 0x0000000000000000\n"

func TestHealthyNodeMakesNoSlurmCall(t *testing.T) {
	b := newBed(t, nvidiaLoaded, `"nvidia"`)
	code, out, stderr := b.run(t)
	if code != ExitHealthy {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	if !regexp.MustCompile(`host\.modules\s+nvidia\s+OK\s+loaded`).MatchString(out) || !strings.Contains(out, "gpu007: OK") {
		t.Errorf("table missing the check:\n%s", out)
	}
	if !strings.Contains(out, "[0 Slurm calls]") || b.callLog(t) != nil {
		t.Errorf("healthy node called Slurm: %q\n%s", b.callLog(t), out)
	}
	if _, err := os.Stat(filepath.Join(b.dir, "events.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("healthy first run wrote events: %v", err)
	}
}

func TestFailingNodeIsDrainedThenResumed(t *testing.T) {
	b := newBed(t, "", `"nvidia"`)
	code, out, _ := b.run(t)
	if code != ExitFail {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	reason := "gpuhc: host.modules: nvidia: not loaded"
	calls := b.callLog(t)
	wantDrain := "update|NodeName=gpu007|State=DRAIN|Reason=" + reason + "|"
	if len(calls) != 4 || !strings.Contains(calls[0], "show|node|gpu007|") || calls[1] != "-o|show|nodes|" || calls[2] != wantDrain || calls[3] != "-o|show|nodes|" {
		t.Fatalf("calls %q, want show, the storm guard's list, %q, then its recount", calls, wantDrain)
	}
	if !strings.Contains(out, "policy: drained: "+reason) {
		t.Errorf("outcome not printed:\n%s", out)
	}
	ev, _ := os.ReadFile(filepath.Join(b.dir, "events.jsonl"))
	if !strings.Contains(string(ev), `"kind":"drain"`) || !strings.Contains(string(ev), `"node":"gpu007"`) {
		t.Errorf("drain not in event log: %s", ev)
	}

	// The fault is fixed: the first healthy run waits, the second resumes.
	must(t, os.WriteFile(filepath.Join(b.dir, "root/proc/modules"), []byte(nvidiaLoaded), 0o644))
	if code, out, _ = b.run(t); code != ExitHealthy || !strings.Contains(out, "healthy run 1 of 2") {
		t.Fatalf("first healthy run: %d\n%s", code, out)
	}
	if n := len(b.callLog(t)); n != 4 {
		t.Errorf("first healthy run called Slurm: %d calls", n)
	}
	if code, out, _ = b.run(t); code != ExitHealthy || !strings.Contains(out, "policy: resumed") {
		t.Fatalf("second healthy run: %d\n%s", code, out)
	}
	calls = b.callLog(t)
	if calls[len(calls)-1] != "update|NodeName=gpu007|State=RESUME|" {
		t.Errorf("last call %q, want resume", calls[len(calls)-1])
	}
	if state, _ := os.ReadFile(b.state); strings.TrimSpace(string(state)) != "IDLE" {
		t.Errorf("node state %q", state)
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	b := newBed(t, "", `"nvidia"`)
	code, out, _ := b.run(t, "--dry-run")
	if code != ExitFail || !strings.Contains(out, "policy (dry run): would-drain: gpuhc: host.modules: nvidia: not loaded") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if b.callLog(t) != nil {
		t.Errorf("dry run called Slurm: %q", b.callLog(t))
	}
	for _, f := range []string{"events.jsonl", "state/policy.gpu007.json", "state/history.gpu007.json", "textfile"} {
		if _, err := os.Stat(filepath.Join(b.dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("dry run wrote %s", f)
		}
	}
}

func TestConfigErrorNeverDrains(t *testing.T) {
	b := newBed(t, "", `"nvidia"`)
	data, _ := os.ReadFile(b.cfg)
	must(t, os.WriteFile(b.cfg, append(data, []byte("[checks.mounts]\nmount = 3\n")...), 0o644))
	code, _, stderr := b.run(t)
	if code != ExitUsage {
		t.Fatalf("exit %d, want 2", code)
	}
	if !strings.Contains(stderr, "gpuhc.toml:") || !strings.Contains(stderr, "node left alone") {
		t.Errorf("stderr: %s", stderr)
	}
	if b.callLog(t) != nil {
		t.Errorf("config error reached Slurm: %q", b.callLog(t))
	}
}

func TestCheckConfig(t *testing.T) {
	b := newBed(t, "", `"nvidia"`)
	code, out, _ := b.run(t, "--check-config")
	if code != 0 || !strings.Contains(out, "configuration OK") {
		t.Errorf("good config: %d %s", code, out)
	}
	bad := filepath.Join(b.dir, "bad.toml")
	must(t, os.WriteFile(bad, []byte("deadline = \"45s\"\n\n[checks.modules]\nrequird = [\"x\"]\n"), 0o644))
	code, _, stderr := b.run(t, "--check-config", bad)
	if code != ExitUsage || !strings.Contains(stderr, bad+":4:") || !strings.Contains(stderr, "checks.modules.requird") {
		t.Errorf("bad config: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = b.run(t, "--check-config", filepath.Join(b.dir, "missing.toml"))
	if code != ExitUsage || !strings.Contains(stderr, "missing.toml") {
		t.Errorf("missing explicit config: exit %d, stderr %q", code, stderr)
	}
}

func TestOverlappingRunExitsAtOnce(t *testing.T) {
	b := newBed(t, "", `"nvidia"`)
	l, err := lock.Try(filepath.Join(b.dir, "hc.lock"))
	must(t, err)
	defer l.Release()
	code, out, stderr := b.run(t)
	if code != ExitInternal || !strings.Contains(stderr, "another run is still in progress") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if out != "" || b.callLog(t) != nil {
		t.Errorf("second run did work: %q %q", out, b.callLog(t))
	}
}

func TestUsageErrors(t *testing.T) {
	b := newBed(t, "", "")
	for _, args := range [][]string{{"--node", "gpu[1-4]"}, {"--bogus"}, {"extra"}} {
		if code, _, _ := b.run(t, args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if code, out, _ := b.run(t, "--version"); code != 0 || !strings.HasPrefix(out, "gpuhc-healthcheck ") {
		t.Errorf("--version: %d %q", code, out)
	}
}

func TestStuckRunDrains(t *testing.T) {
	b := newBed(t, nvidiaLoaded, `"nvidia"`)
	lockPath := filepath.Join(b.dir, "hc.lock")
	l, err := lock.Try(lockPath)
	must(t, err)
	defer l.Release()
	// The holder started ten minutes ago and never finished.
	must(t, os.WriteFile(lockPath, []byte(fmt.Sprintf("4242 %d\n", time.Now().Add(-10*time.Minute).Unix())), 0o600))
	must(t, os.MkdirAll(filepath.Join(b.dir, "root/proc/4242"), 0o755))
	must(t, os.WriteFile(filepath.Join(b.dir, "root/proc/4242/comm"), []byte("gpuhc-healthche\n"), 0o644))
	code, out, _ := b.run(t)
	if code != ExitFail {
		t.Fatalf("exit %d\n%s", code, out)
	}
	calls := b.callLog(t)
	if len(calls) != 4 || !strings.Contains(calls[2], "State=DRAIN|Reason=gpuhc: healthcheck: host: previous run (pid 4242) stuck for 10m") {
		t.Errorf("calls %q", calls)
	}
	// The metrics show the stuck run, and no check durations: none ran.
	d := b.readMetrics(t)
	if st := status(t, d, "healthcheck", "host"); st != "FAIL" || value(t, d, "gpuhc_drained") != 1 ||
		value(t, d, "gpuhc_failures_total", "check", "healthcheck") != 1 || len(d.Samples("gpuhc_check_duration_seconds")) != 0 {
		t.Errorf("metrics of a stuck run: %+v", d.Families)
	}
}

// A storm: 3 of the 10 other nodes are drained by gpuhc already, so with
// the default 10% this node is not drained. The run says so on stdout and
// in the log at error level, records one event and exits 1.
func TestStormGuardSuppressesDrain(t *testing.T) {
	b := newBed(t, "", `"nvidia"`)
	var fleet strings.Builder
	for i := 1; i <= 10; i++ {
		line := fmt.Sprintf("NodeName=gpu1%02d Arch=x86_64 CPUTot=2 State=IDLE ThreadsPerCore=1 Partitions=debug", i)
		switch {
		case i <= 3:
			line = strings.Replace(line, "State=IDLE", "State=MIXED+DRAIN", 1) + " Reason=gpuhc: host.mounts: /data: not mounted [root@2026-11-30T05:53:48]"
		case i <= 6:
			line = strings.Replace(line, "State=IDLE", "State=IDLE+DRAIN", 1) + " Reason=maintenance [root@2026-11-30T05:53:48]"
		}
		fleet.WriteString(line + "\n")
	}
	must(t, os.WriteFile(b.state+".fleet", []byte(fleet.String()), 0o644))

	code, out, stderr := b.run(t)
	if code != ExitFail {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, stderr)
	}
	reason := "gpuhc: host.modules: nvidia: not loaded"
	want := "policy: drain-suppressed: 3 of 11 nodes already drained by gpuhc (limit 10%, at most 1 node); not draining: " + reason + " [2 Slurm calls via scontrol]"
	if !strings.Contains(out, want) {
		t.Errorf("stdout lacks %q:\n%s", want, out)
	}
	if !regexp.MustCompile(`level=error .*drain-suppressed: 3 of 11 nodes`).MatchString(stderr) {
		t.Errorf("not logged at error level:\n%s", stderr)
	}
	for _, c := range b.callLog(t) {
		if strings.Contains(c, "State=DRAIN") {
			t.Errorf("drained anyway: %q", c)
		}
	}
	ev, _ := os.ReadFile(filepath.Join(b.dir, "events.jsonl"))
	if n := strings.Count(string(ev), `"kind":"drain-suppressed"`); n != 1 || strings.Contains(string(ev), `"kind":"drain"`) {
		t.Errorf("events: %s", ev)
	}
	if _, err := os.Stat(filepath.Join(b.dir, "state", "storm.json")); err != nil {
		t.Errorf("count not cached: %v", err)
	}

	// The next run, within storm_cache, refuses again from the cache: one
	// node read, no list, and no second event.
	code, out, _ = b.run(t)
	calls := b.callLog(t)
	if code != ExitFail || !strings.Contains(out, "[1 Slurm calls via scontrol]") || len(calls) != 3 {
		t.Errorf("second run: exit %d, calls %q\n%s", code, calls, out)
	}
	ev, _ = os.ReadFile(filepath.Join(b.dir, "events.jsonl"))
	if n := strings.Count(string(ev), `"kind":"drain-suppressed"`); n != 1 {
		t.Errorf("second run recorded the refusal again: %s", ev)
	}
	// The metrics say the node fails and is held back, not drained.
	d := b.readMetrics(t)
	if v, w := value(t, d, "gpuhc_drain_suppressed"), value(t, d, "gpuhc_drained"); v != 1 || w != 0 {
		t.Errorf("suppressed %v, drained %v; want 1, 0", v, w)
	}
	// Healthy again: nothing is held back any more.
	must(t, os.WriteFile(filepath.Join(b.dir, "root/proc/modules"), []byte(nvidiaLoaded), 0o644))
	if code, out, _ := b.run(t); code != ExitHealthy {
		t.Fatalf("healthy run: exit %d\n%s", code, out)
	}
	if v := value(t, b.readMetrics(t), "gpuhc_drain_suppressed"); v != 0 {
		t.Errorf("suppressed %v after a healthy run, want 0", v)
	}
}

// readMetrics parses the bed's gpuhc.prom with the strict parser.
func (b bed) readMetrics(t *testing.T) *promtest.Doc {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.dir, "textfile", "gpuhc.prom"))
	must(t, err)
	d, err := promtest.Parse(data)
	if err != nil {
		t.Fatalf("gpuhc.prom is not valid exposition format: %v\n%s", err, data)
	}
	return d
}

// status returns the status set to 1 for a component, and fails the test
// unless exactly one of its five series is 1 and the others 0.
func status(t *testing.T, d *promtest.Doc, chk, component string) string {
	t.Helper()
	on := ""
	for _, st := range []string{"OK", "WARN", "FAIL", "ERROR", "SKIP"} {
		v, ok := d.Value("gpuhc_check_status", "check", chk, "component", component, "status", st)
		switch {
		case !ok:
			t.Fatalf("no %s series for %s/%s", st, chk, component)
		case v == 1 && on == "":
			on = st
		case v != 0:
			t.Fatalf("%s/%s: %s is %v (already %q)", chk, component, st, v, on)
		}
	}
	return on
}

func value(t *testing.T, d *promtest.Doc, name string, labels ...string) float64 {
	t.Helper()
	v, ok := d.Value(name, labels...)
	if !ok {
		t.Fatalf("no sample %s%q", name, labels)
	}
	return v
}

func TestMetricsAfterHealthyRun(t *testing.T) {
	b := newBed(t, nvidiaLoaded, `"nvidia"`)
	now := time.Date(2026, 11, 30, 6, 0, 0, 500e6, time.UTC)
	code, out, stderr := b.runAt(t, now)
	if code != ExitHealthy {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	d := b.readMetrics(t)
	if st := status(t, d, "host.modules", "nvidia"); st != "OK" {
		t.Errorf("host.modules/nvidia is %s", st)
	}
	for _, s := range d.Samples("gpuhc_check_status") {
		status(t, d, s.Labels["check"], s.Labels["component"])
	}
	if v := value(t, d, "gpuhc_check_duration_seconds", "check", "host.modules"); v < 0 || v > 10 {
		t.Errorf("duration %v", v)
	}
	if v := value(t, d, "gpuhc_failures_total", "check", "host.modules"); v != 0 {
		t.Errorf("failures_total %v on a node that never failed", v)
	}
	if v := value(t, d, "gpuhc_last_run_timestamp_seconds"); v != float64(now.UnixMilli())/1000 {
		t.Errorf("last run %v, want %v", v, now.Unix())
	}
	if v := value(t, d, "gpuhc_drained"); v != 0 {
		t.Errorf("drained %v", v)
	}
	fi, err := os.Stat(filepath.Join(b.dir, "textfile", "gpuhc.prom"))
	must(t, err)
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644 for node_exporter", fi.Mode())
	}
	if entries, _ := os.ReadDir(filepath.Join(b.dir, "textfile")); len(entries) != 1 {
		t.Errorf("textfile dir holds %v", entries)
	}
	if b.callLog(t) != nil {
		t.Errorf("metrics made a Slurm call: %q", b.callLog(t))
	}
}

// gpuhc_failures_total counts episodes: one per failure, however many
// runs it lasts, and again after the node was healthy.
func TestMetricsFailuresCountEpisodes(t *testing.T) {
	b := newBed(t, "", `"nvidia"`)
	modules := filepath.Join(b.dir, "root/proc/modules")
	steps := []struct {
		name     string
		modules  string
		code     int
		status   string
		failures float64
		drained  float64
	}{
		{"fails: drained", "", ExitFail, "FAIL", 1, 1},
		{"still failing", "", ExitFail, "FAIL", 1, 1},
		{"healthy 1 of 2", nvidiaLoaded, ExitHealthy, "OK", 1, 1},
		{"healthy 2 of 2: resumed", nvidiaLoaded, ExitHealthy, "OK", 1, 0},
		{"fails again", "", ExitFail, "FAIL", 2, 1},
	}
	for _, s := range steps {
		must(t, os.WriteFile(modules, []byte(s.modules), 0o644))
		code, out, _ := b.run(t)
		if code != s.code {
			t.Fatalf("%s: exit %d\n%s", s.name, code, out)
		}
		d := b.readMetrics(t)
		if st := status(t, d, "host.modules", "nvidia"); st != s.status {
			t.Errorf("%s: status %s, want %s", s.name, st, s.status)
		}
		if v := value(t, d, "gpuhc_failures_total", "check", "host.modules"); v != s.failures {
			t.Errorf("%s: failures_total %v, want %v", s.name, v, s.failures)
		}
		if v := value(t, d, "gpuhc_drain_suppressed"); v != 0 {
			t.Errorf("%s: drain_suppressed %v without a storm", s.name, v)
		}
		if v := value(t, d, "gpuhc_drained"); v != s.drained {
			t.Errorf("%s: drained %v, want %v\n%s", s.name, v, s.drained, out)
		}
	}
}

// A metrics file that cannot be written is logged; the exit code and the
// drain are the same as without metrics.
func TestMetricsWriteFailureChangesNothing(t *testing.T) {
	b := newBed(t, "", `"nvidia"`)
	blocker := filepath.Join(b.dir, "blocker")
	must(t, os.WriteFile(blocker, nil, 0o644))
	data, err := os.ReadFile(b.cfg)
	must(t, err)
	cfg := strings.Replace(string(data), filepath.Join(b.dir, "textfile"), filepath.Join(blocker, "textfile"), 1)
	must(t, os.WriteFile(b.cfg, []byte(cfg), 0o644))

	code, out, stderr := b.run(t)
	if code != ExitFail || !strings.Contains(out, "policy: drained: ") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if !regexp.MustCompile(`level=error msg="metrics not written"`).MatchString(stderr) {
		t.Errorf("failure not logged:\n%s", stderr)
	}
	must(t, os.WriteFile(filepath.Join(b.dir, "root/proc/modules"), []byte(nvidiaLoaded), 0o644))
	if code, out, _ := b.run(t); code != ExitHealthy {
		t.Errorf("healthy run with unwritable metrics: exit %d\n%s", code, out)
	}
}

type heartbeatEvent struct {
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	Node    string    `json:"node"`
	By      string    `json:"by"`
	Hours   float64   `json:"hours"`
	Serials []string  `json:"serials"`
	BootID  string    `json:"boot_id"`
}

func (b bed) heartbeats(t *testing.T) []heartbeatEvent {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.dir, "events.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	must(t, err)
	var out []heartbeatEvent
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev heartbeatEvent
		must(t, json.Unmarshal([]byte(line), &ev))
		if ev.Kind == "heartbeat" {
			out = append(out, ev)
		}
	}
	return out
}

// Heartbeats come at most once per events.heartbeat (24h), with the
// operating hours since the previous one: the gaps between runs, each
// counted for at most an hour, so a week powered off adds one hour.
func TestHeartbeat(t *testing.T) {
	b := newBed(t, nvidiaLoaded, `"nvidia"`)
	const bootID = "6f4c1a52-0d7e-4b8e-9a51-3c2d1e0f9a87"
	must(t, os.MkdirAll(filepath.Join(b.dir, "root/proc/sys/kernel/random"), 0o755))
	must(t, os.WriteFile(filepath.Join(b.dir, "root/proc/sys/kernel/random/boot_id"), []byte(bootID+"\n"), 0o444))
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	const day = 24 * time.Hour
	steps := []struct {
		at    time.Duration
		dry   bool
		beats int
		hours float64 // of the newest heartbeat
	}{
		{0, false, 0, 0},                // the first run starts the clock and writes no event
		{10 * time.Minute, false, 0, 0}, // 10m
		{20 * time.Minute, false, 0, 0}, // 20m
		{3 * time.Hour, true, 0, 0},     // a dry run neither writes nor moves the clock
		// Off for a week: the gap counts 1h, so 1h20m; 24h since the
		// clock started, so a heartbeat.
		{day * 7, false, 1, 1.3333},
		{day*7 + 5*time.Minute, false, 1, 0}, // 5m
		{day*7 + 23*time.Hour, false, 1, 0},  // 1h5m; 23h since the heartbeat: not yet
		{day * 8, false, 2, 2.0833},          // 2h5m; 24h since the heartbeat
		{day*8 + 5*time.Minute, false, 2, 0}, // 5m
	}
	for i, s := range steps {
		args := []string{}
		if s.dry {
			args = append(args, "--dry-run")
		}
		code, out, stderr := b.runAt(t, t0.Add(s.at), args...)
		if code != ExitHealthy {
			t.Fatalf("step %d: exit %d\n%s%s", i, code, out, stderr)
		}
		beats := b.heartbeats(t)
		if len(beats) != s.beats {
			t.Fatalf("step %d (+%s): %d heartbeats, want %d: %+v", i, s.at, len(beats), s.beats, beats)
		}
		if s.beats == 0 || s.hours == 0 {
			continue
		}
		hb := beats[len(beats)-1]
		if hb.Hours != s.hours || !hb.Time.Equal(t0.Add(s.at)) || hb.Node != "gpu007" || hb.By != "healthcheck" || hb.BootID != bootID {
			t.Errorf("step %d: heartbeat %+v, want %v hours at %s", i, hb, s.hours, t0.Add(s.at))
		}
	}
	if b.callLog(t) != nil {
		t.Errorf("heartbeats made Slurm calls: %q", b.callLog(t))
	}
}

func TestOldLockOfAnotherProgramIsNotAStuckRun(t *testing.T) {
	b := newBed(t, nvidiaLoaded, `"nvidia"`)
	lockPath := filepath.Join(b.dir, "hc.lock")
	l, err := lock.Try(lockPath)
	must(t, err)
	defer l.Release()
	// An admin's flock(1) holds the file; the stamp left in it is old, and
	// its pid is now some other program.
	must(t, os.WriteFile(lockPath, []byte(fmt.Sprintf("4243 %d\n", time.Now().Add(-time.Hour).Unix())), 0o600))
	must(t, os.MkdirAll(filepath.Join(b.dir, "root/proc/4243"), 0o755))
	must(t, os.WriteFile(filepath.Join(b.dir, "root/proc/4243/comm"), []byte("flock\n"), 0o644))
	code, _, stderr := b.run(t)
	if code != ExitInternal || !strings.Contains(stderr, "another run is still in progress") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if b.callLog(t) != nil {
		t.Errorf("drained on someone else's lock: %q", b.callLog(t))
	}
}
