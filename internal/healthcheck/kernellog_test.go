package healthcheck

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// gpu3 of the simulated DGX H100 is at 0000:5d:00.0.
const (
	dmesgXID79  = "[ 7215.402840] NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
	dmesgHealth = "[    0.000000] Linux version 5.15.0-1042-nvidia (buildd@lcy02-amd64-089)\n[   12.345678] nvidia-nvlink: Nvlink Core is being initialized, major device number 508\n"
)

func (b bed) saved(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(b.dir, name)
	must(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

// --kernel-log judges a saved log only where it cannot touch the real
// node: with --dry-run or --simulate. Refused otherwise, as a usage error.
func TestKernelLogNeedsDryRunOrSimulate(t *testing.T) {
	b := newBed(t, nvidiaLoaded, `"nvidia"`)
	log := b.saved(t, "dmesg.txt", dmesgXID79)
	code, out, stderr := b.run(t, "--kernel-log", log)
	if code != ExitUsage || !strings.Contains(stderr, "--kernel-log needs --dry-run or --simulate") || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if b.callLog(t) != nil {
		t.Errorf("refused run called Slurm: %q", b.callLog(t))
	}
	code, _, stderr = b.run(t, "--dry-run", "--kernel-log", filepath.Join(b.dir, "missing.txt"))
	if code != ExitUsage || !strings.Contains(stderr, "missing.txt") {
		t.Errorf("missing file: exit %d, stderr %q", code, stderr)
	}
}

var tableRow = regexp.MustCompile(`(?m)^gpu\.xid +(\S+) +(\S+) +(.*)$`)

func xidRows(out string) []string {
	var rows []string
	for _, m := range tableRow.FindAllStringSubmatch(out, -1) {
		rows = append(rows, m[1]+" "+m[2]+" "+strings.TrimSpace(m[3]))
	}
	return rows
}

// A replayed XID 79 under --simulate --dry-run: the verdict and exit code
// a real run gives, and nothing written.
func TestKernelLogReplay(t *testing.T) {
	b := newBed(t, nvidiaLoaded, `"nvidia"`)
	for _, tc := range []struct {
		name, log string
		code      int
		row       string // gpu.xid's gpu3 row
		policy    string
	}{
		{"xid 79", dmesgXID79, ExitFail, "gpu3 FAIL XID 79 GPU has fallen off the bus [simulated]",
			"policy (dry run): would-drain: gpuhc: gpu.xid: gpu3 (SN 1654922000003, 0000:5d:00.0): XID 79 GPU has fallen off the bus [simulated]"},
		{"healthy", dmesgHealth, ExitHealthy, "gpu3 OK no XIDs [simulated]", "policy (dry run): none"},
		// journalctl -k and a syslog line of another program: only the
		// kernel's line counts.
		{"syslog", "Mar  5 22:23:56 gpu007 python3[4121]: NVRM: Xid (PCI:0000:5d:00): 79, quoted\n" +
			"Mar 05 22:23:57 gpu007 kernel: NVRM: Xid (PCI:0000:5d:00): 13, pid=7781, name=train.py, Graphics SM Warp Exception\n",
			ExitHealthy, "gpu3 WARN XID 13 graphics engine exception (1 this boot) [simulated]", "policy (dry run): none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := b.saved(t, tc.name+".log", tc.log)
			code, out, stderr := b.run(t, "--dry-run", "--simulate", "dgxh100", "--kernel-log", log)
			var gpu3 string
			for _, r := range xidRows(out) {
				if strings.HasPrefix(r, "gpu3 ") {
					gpu3 = r
				}
			}
			if code != tc.code || gpu3 != tc.row || !strings.Contains(out, tc.policy) {
				t.Fatalf("exit %d (want %d), gpu3 %q (want %q)\n%s\n%s", code, tc.code, gpu3, tc.row, out, stderr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(b.dir, "state")); err == nil {
		entries, _ := os.ReadDir(filepath.Join(b.dir, "state/simulated"))
		if len(entries) > 0 {
			t.Errorf("dry run wrote state: %v", entries)
		}
	}
}

// Under --simulate alone a replay keeps the simulated state as a fire
// drill does: the sticky FAIL repeats on the next replay of the same
// file, the cursor is the replay's own boot, and the real state is left
// alone. The results say the lines were replayed where a fire drill does
// not already mark them.
func TestKernelLogReplaySimulatedState(t *testing.T) {
	b := newBed(t, nvidiaLoaded, `"nvidia"`)
	log := b.saved(t, "dmesg.txt", dmesgXID79)
	for i := range 2 {
		code, out, stderr := b.run(t, "--simulate", "dgxh100", "--kernel-log", log)
		if code != ExitFail || !strings.Contains(strings.Join(xidRows(out), "|"), "gpu3 FAIL XID 79 GPU has fallen off the bus [simulated]") {
			t.Fatalf("run %d: exit %d\n%s\n%s", i, code, out, stderr)
		}
	}
	var cur struct {
		BootID string `json:"boot_id"`
		Next   uint64 `json:"next_seq"`
	}
	data, err := os.ReadFile(filepath.Join(b.dir, "state/simulated/kmsg-cursor.json"))
	must(t, err)
	must(t, json.Unmarshal(data, &cur))
	if !strings.HasPrefix(cur.BootID, "replay-") || cur.Next != 1 {
		t.Errorf("cursor %+v", cur)
	}
	if _, err := os.Stat(filepath.Join(b.dir, "state/kmsg-cursor.json")); err == nil {
		t.Error("a replay wrote the real cursor")
	}
}

// A dry run on this machine's own GPUs (none here): the XID is judged all
// the same, named by its PCI address, and drains in the verdict.
func TestKernelLogDryRunRealGPUs(t *testing.T) {
	b := newBed(t, nvidiaLoaded, `"nvidia"`)
	log := b.saved(t, "kmsg.txt", "4,2218,7215402840,-;NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n")
	code, out, stderr := b.run(t, "--dry-run", "--kernel-log", log)
	rows := strings.Join(xidRows(out), "|")
	if code != ExitFail || rows != "0000:5d:00.0 FAIL XID 79 GPU has fallen off the bus [replayed]" ||
		!strings.Contains(out, "policy (dry run): would-drain: gpuhc: gpu.xid: 0000:5d:00.0: XID 79 GPU has fallen off the bus [replayed]") {
		t.Fatalf("exit %d, rows %q\n%s\n%s", code, rows, out, stderr)
	}
	if entries, _ := os.ReadDir(filepath.Join(b.dir, "state")); len(entries) > 0 {
		t.Errorf("dry run wrote state: %v", entries)
	}
}
