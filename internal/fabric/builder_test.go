package fabric

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
	"github.com/gpuhc/gpuhc/internal/ib"
	"github.com/gpuhc/gpuhc/internal/pcibus"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

// The fixture node: the PCI devices of a DGX H100 (4 NVSwitches, 0x22a3
// class 0x068000, and what else the bus has), with what this check reads
// besides: /proc entries for Fabric Manager, /proc/stat, systemd's marker
// directory, the unit's cgroup and the log. The kernel-layout trees of
// sysfsfix are used where the PCI bus itself is under test (they are
// large: copying one for every case would make the tests slow).
const (
	fmPID    = 2116
	fmStart  = 2000 // ticks after boot: 20 s
	btime    = 1_700_000_000
	logRel   = "var/log/fabricmanager.log"
	unitName = "nvidia-fabricmanager.service"
	cgroupFM = "0::/system.slice/" + unitName + "\n"
)

type node struct {
	t     *testing.T
	root  string
	state statefile.Dir
	cfg   config.FabricManager
	m     *sim.Machine // nil: no NVML
	model string
	btime int64
}

// nvswitches are the NVSwitches' PCI addresses in newNode's tree, as in
// sysfsfix's h100-ndr.
var nvswitches = []string{"0000:03:00.0", "0000:05:00.0", "0000:e3:00.0", "0000:e5:00.0"}

// newNode is a healthy NVSwitch node: Fabric Manager running in its unit,
// an empty log, NVML off (see withGPUs).
func newNode(t *testing.T) *node {
	t.Helper()
	root := t.TempDir()
	pci := map[string][2]string{
		"0000:00:00.0": {"0x8086", "0x060000"}, // host bridge
		"0000:02:01.0": {"0x8086", "0x060400"}, // root port
		"0000:18:00.0": {"0x10de", "0x030200"}, // H100 SXM5
		"0000:19:00.0": {"0x15b3", "0x020700"}, // ConnectX-7
	}
	for _, a := range nvswitches {
		pci[a] = [2]string{"0x10de", "0x068000"}
	}
	n := onRoot(t, root)
	for a, vc := range pci {
		n.write("sys/bus/pci/devices/"+a+"/vendor", vc[0]+"\n")
		n.write("sys/bus/pci/devices/"+a+"/class", vc[1]+"\n")
	}
	return n
}

// onRoot adds a healthy Fabric Manager to a tree that has the PCI bus.
func onRoot(t *testing.T, root string) *node {
	t.Helper()
	n := &node{t: t, root: root, state: statefile.Dir{Path: t.TempDir()},
		cfg: config.Default().Checks.Fabric.Manager, btime: btime}
	n.write("proc/stat", fmt.Sprintf("cpu  1 2 3 4\nintr 5\nctxt 6\nbtime %d\nprocesses 7\n", n.btime))
	n.mkdir("run/systemd/system")
	n.proc(1, "systemd", "/sbin/init", 1, "0::/init.scope\n")
	n.proc(900, "sshd", "/usr/sbin/sshd", 500, "0::/system.slice/ssh.service\n")
	n.fm(fmPID, fmStart, cgroupFM)
	n.write("sys/fs/cgroup/system.slice/"+unitName+"/cgroup.procs", fmt.Sprintf("%d\n", fmPID))
	n.write(logRel, "")
	return n
}

// withGPUs adds the simulated DGX H100 (or another model) with faults.
func (n *node) withGPUs(model string, inject ...string) *node {
	n.t.Helper()
	m, err := sim.Build(model, inject)
	if err != nil {
		n.t.Fatal(err)
	}
	n.m, n.model = m, model
	return n
}

func (n *node) path(rel string) string { return filepath.Join(n.root, rel) }

func (n *node) mkdir(rel string) {
	n.t.Helper()
	if err := os.MkdirAll(n.path(rel), 0o755); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) write(rel, content string) {
	n.t.Helper()
	n.mkdir(filepath.Dir(rel))
	if err := os.WriteFile(n.path(rel), []byte(content), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) remove(rel string) {
	n.t.Helper()
	if err := os.RemoveAll(n.path(rel)); err != nil {
		n.t.Fatal(err)
	}
}

// proc writes /proc/<pid>/{stat,cmdline,cgroup}. comm is cut to 15 bytes
// as the kernel does.
func (n *node) proc(pid int, comm, argv0 string, start uint64, cgroup string) {
	n.t.Helper()
	n.procState(pid, comm, argv0, start, cgroup, 'S')
}

func (n *node) procState(pid int, comm, argv0 string, start uint64, cgroup string, state byte) {
	n.t.Helper()
	if len(comm) > commLen {
		comm = comm[:commLen]
	}
	dir := fmt.Sprintf("proc/%d/", pid)
	n.write(dir+"stat", fmt.Sprintf("%d (%s) %c 1 %d %d 0 -1 4194624 1000 0 0 0 10 20 0 0 20 0 10 0 %d 123456789 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n",
		pid, comm, state, pid, pid, start))
	n.write(dir+"cmdline", argv0+"\x00-c\x00/usr/share/nvidia/nvswitch/fabricmanager.cfg\x00")
	n.write(dir+"cgroup", cgroup)
}

// fm starts Fabric Manager as pid (comm "nv-fabricmanage", argv[0] the
// full path, as on a node).
func (n *node) fm(pid int, start uint64, cgroup string) {
	n.t.Helper()
	n.proc(pid, "nv-fabricmanager", "/usr/bin/nv-fabricmanager", start, cgroup)
}

// restartFM replaces the running Fabric Manager by a new process.
func (n *node) restartFM(pid int, start uint64) {
	n.t.Helper()
	n.remove(fmt.Sprintf("proc/%d", fmPID))
	n.fm(pid, start, cgroupFM)
}

// reboot starts a new boot: a new boot time, Fabric Manager with the same
// PID and start ticks as before (identical boots do that).
func (n *node) reboot() {
	n.t.Helper()
	n.btime += 3600
	n.write("proc/stat", fmt.Sprintf("cpu  1 2 3 4\nbtime %d\n", n.btime))
}

// stamp is a Fabric Manager line prefix for the time secs after boot.
func (n *node) stamp(secs int64) string {
	return "[" + time.Unix(n.btime+secs, 0).In(time.Local).Format("Jan 02 2006 15:04:05") + "]"
}

// info and fatal are log lines stamped secs after boot.
func (n *node) info(secs int64, msg string) string {
	return n.stamp(secs) + " [INFO] [tid 1803] " + msg + "\n"
}

func (n *node) fatal(secs int64) string {
	return n.stamp(secs) + " [ERROR] [tid 841] detected NVSwitch fatal error 20034 on fid 0 on NVSwitch pci bus id 00000000:86:00.0 physical id 3 port 33\n"
}

func (n *node) appendLog(s string) { n.appendTo(logRel, s) }

func (n *node) appendTo(rel, s string) {
	n.t.Helper()
	f, err := os.OpenFile(n.path(rel), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		n.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		n.t.Fatal(err)
	}
}

// rotate renames the log to <log>.1 and starts an empty one (logrotate's
// default "create").
func (n *node) rotate() {
	n.t.Helper()
	if err := os.Rename(n.path(logRel), n.path(logRel+".1")); err != nil {
		n.t.Fatal(err)
	}
	n.write(logRel, "")
}

// copyTruncate copies the log to <log>.1 and truncates it in place.
func (n *node) copyTruncate() {
	n.t.Helper()
	b, err := os.ReadFile(n.path(logRel))
	if err != nil {
		n.t.Fatal(err)
	}
	n.write(logRel+".1", string(b))
	if err := os.Truncate(n.path(logRel), 0); err != nil {
		n.t.Fatal(err)
	}
}

// run runs the check once, as one run of gpuhc-healthcheck would (a new
// NVML view each time), and checks the invariants every result keeps.
func (n *node) run() check.Result {
	n.t.Helper()
	return n.runWith(n.state)
}

func (n *node) runWith(st statefile.Dir) check.Result {
	n.t.Helper()
	return n.runIn(st, 10*time.Second)
}

// runIn runs the check under a deadline of d.
func (n *node) runIn(st statefile.Dir, d time.Duration) check.Result {
	n.t.Helper()
	var g *gpu.Node
	if n.m != nil {
		g = gpu.NewNode(n.m.Server, "", -1, n.model, gpu.WithBus(n.m.OnBus))
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	rs := NewManager(n.root, ib.NewGather(n.root), pcibus.NewGather(n.root), n.cfg, g, st).Run(ctx)
	if len(rs) != 1 {
		n.t.Fatalf("want one result, got %+v", rs)
	}
	r := rs[0]
	if r.Check != Name || r.Component != componentHost || r.Message == "" {
		n.t.Errorf("bad result %+v", r)
	}
	if printable(r.Message) != r.Message || strings.Contains(r.Message, "\n") {
		n.t.Errorf("not one printable line: %q", r.Message)
	}
	if (r.Status == check.Fail) != (r.Action == check.ActionDrain) {
		n.t.Errorf("status %v with action %q", r.Status, r.Action)
	}
	return r
}

// want checks a result's status and that its message contains msg.
func want(t *testing.T, what string, r check.Result, st check.Status, msg string) {
	t.Helper()
	if r.Status != st || !strings.Contains(r.Message, msg) {
		t.Errorf("%s: got %v %q, want %v containing %q", what, r.Status, r.Message, st, msg)
	}
}
