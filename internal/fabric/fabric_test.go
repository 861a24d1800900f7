package fabric

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/statefile"
	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// step is one run of the check, after an optional change to the node.
type step struct {
	do  func(n *node)
	st  check.Status
	msg string
}

type scenario struct {
	name  string
	setup func(n *node) // before the first run
	steps []step
}

func play(t *testing.T, cases []scenario) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			if tc.setup != nil {
				tc.setup(n)
			}
			for i, s := range tc.steps {
				if s.do != nil {
					s.do(n)
				}
				want(t, fmt.Sprintf("run %d", i+1), n.run(), s.st, s.msg)
			}
		})
	}
}

const (
	msgStarted = "log cursor started at the log's end"
	msgHealthy = "nv-fabricmanager running (pid 2116), unit nvidia-fabricmanager.service active, log: no fatal lines"
	fatalQuote = "detected NVSwitch fatal error 20034 on fid 0"
)

// The PCI bus decides: on kernel-layout trees, NVSwitches or not.
func TestNVSwitchPresence(t *testing.T) {
	for _, tc := range []struct {
		name string
		root func(t *testing.T) string
		st   check.Status
		msg  string
	}{
		{"DGX H100", func(t *testing.T) string { return sysfsfix.Tree(t, sysfsfix.H100NDR) }, check.OK, msgHealthy},
		{"DGX A100", func(t *testing.T) string { return sysfsfix.Tree(t, sysfsfix.A100HDR) }, check.OK, msgHealthy},
		{"PCIe GPU server with RoCE", func(t *testing.T) string { return sysfsfix.Tree(t, sysfsfix.RoCE) }, check.Skip, "no NVSwitch on the PCI bus"},
		{"no PCI bus in sysfs", func(t *testing.T) string { return t.TempDir() }, check.Skip, "no NVSwitch on the PCI bus"},
		{"every NVSwitch's class garbage", func(t *testing.T) string {
			root := sysfsfix.Tree(t, sysfsfix.H100NDR)
			for _, a := range nvswitches {
				sysfsfix.Set(t, root, "sys/bus/pci/devices/"+a+"/class", "bridge")
			}
			return root
		}, check.Error, "no NVSwitch found, but 4 PCI devices unreadable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := onRoot(t, tc.root(t))
			want(t, "run", n.run(), tc.st, tc.msg)
			if ents, _ := os.ReadDir(n.state.Path); tc.st != check.OK && len(ents) != 0 {
				t.Errorf("a run that found no NVSwitch wrote state: %v", ents)
			}
		})
	}
}

// The healthy node is OK on its first run and every run after, with and
// without GPUs whose fabric state NVML reports.
func TestHealthy(t *testing.T) {
	for _, model := range []string{"", "dgxh100", "dgxh200", "dgxb200", "dgxa100"} {
		t.Run("gpus="+model, func(t *testing.T) {
			n := newNode(t)
			n.appendLog(n.info(30, "Connected to 1 node.") + n.info(31, "Successfully configured all the available NVSwitches to route GPU NVLink traffic."))
			okMsg := msgHealthy
			switch model {
			case "":
			case "dgxa100": // no fabric state before Hopper: nothing to add
				n.withGPUs(model)
			default:
				n.withGPUs(model)
				okMsg += ", fabric completed on 8 GPUs"
			}
			want(t, "first run", n.run(), check.OK, okMsg+" ("+msgStarted+")")
			n.appendLog(n.info(90, "multicast group 0 is allocated.") +
				n.stamp(95) + " [ERROR] [tid 12727] detected NVSwitch non-fatal error 12028 on fid 0 on NVSwitch pci bus id 00000000:86:00.0 physical id 3 port 61\n" +
				n.stamp(96) + " [ERROR] [tid 192] Fabric Manager detected GPU NVL Non Fatal error on :\nmoduleId : 1\n")
			for i := 2; i <= 3; i++ {
				r := n.run()
				if r.Message != okMsg {
					t.Errorf("run %d: got %v %q, want OK %q", i, r.Status, r.Message, okMsg)
				}
				want(t, fmt.Sprintf("run %d", i), r, check.OK, okMsg)
			}
		})
	}
}

func TestProcessAndUnit(t *testing.T) {
	play(t, []scenario{
		{name: "not running", setup: func(n *node) { n.remove("proc/2116") },
			steps: []step{{st: check.Fail, msg: "nv-fabricmanager not running"}}},
		{name: "only a zombie left", setup: func(n *node) {
			n.procState(fmPID, "nv-fabricmanager", "", fmStart, cgroupFM, 'Z')
		}, steps: []step{{st: check.Fail, msg: "nv-fabricmanager not running"}}},
		{name: "another daemon sharing the first 15 bytes", setup: func(n *node) {
			n.remove("proc/2116")
			n.proc(3000, "nv-fabricmanage-helper", "/usr/bin/nv-fabricmanage-helper", 100, cgroupFM)
		}, steps: []step{{st: check.Fail, msg: "nv-fabricmanager not running"}}},
		{name: "dies between runs", steps: []step{
			{st: check.OK, msg: msgHealthy},
			{do: func(n *node) { n.remove("proc/2116") }, st: check.Fail, msg: "nv-fabricmanager not running"},
			{do: func(n *node) { n.fm(fmPID+100, fmStart+90000, cgroupFM) }, st: check.OK, msg: "nv-fabricmanager running (pid 2216)"},
		}},
		{name: "a second process of the name", setup: func(n *node) {
			n.fm(4000, fmStart+500, "0::/user.slice/user-0.slice/session-3.scope\n")
		}, steps: []step{{st: check.OK, msg: msgHealthy}}},
		{name: "started by hand outside its unit", setup: func(n *node) {
			n.fm(fmPID, fmStart, "0::/user.slice/user-0.slice/session-3.scope\n")
			n.remove("sys/fs/cgroup/system.slice/" + unitName)
		}, steps: []step{{st: check.Warn, msg: "nv-fabricmanager running, unit nvidia-fabricmanager.service not active"}}},
		{name: "cgroup v1 names the unit", setup: func(n *node) {
			n.fm(fmPID, fmStart, "12:memory:/system.slice/"+unitName+"\n1:name=systemd:/system.slice/"+unitName+"\n")
			n.remove("sys/fs/cgroup/system.slice")
		}, steps: []step{{st: check.OK, msg: msgHealthy}}},
		{name: "unit in a site slice", setup: func(n *node) {
			n.fm(fmPID, fmStart, "0::/gpu.slice/gpu-fm.slice/"+unitName+"\n")
		}, steps: []step{{st: check.OK, msg: msgHealthy}}},
		{name: "unreadable daemon cgroup, unit group populated", setup: func(n *node) {
			n.remove("proc/2116/cgroup")
			n.mkdir("proc/2116/cgroup")
		}, steps: []step{{st: check.OK, msg: msgHealthy}}},
		{name: "unreadable daemon cgroup, no unit group", setup: func(n *node) {
			n.write("proc/2116/cgroup", "garbage without colons\n")
			n.remove("sys/fs/cgroup/system.slice")
		}, steps: []step{{st: check.Error, msg: "cannot tell whether unit nvidia-fabricmanager.service is active"}}},
		{name: "no systemd: the process alone counts", setup: func(n *node) {
			n.remove("run/systemd")
			n.fm(fmPID, fmStart, "0::/\n")
		}, steps: []step{{st: check.OK, msg: "nv-fabricmanager running (pid 2116), log: no fatal lines (no systemd, unit not checked; " + msgStarted + ")"}}},
		{name: "unit check off", setup: func(n *node) {
			n.cfg.Unit = ""
			n.fm(fmPID, fmStart, "0::/kubepods.slice/pod1/driver\n")
		}, steps: []step{{st: check.OK, msg: "nv-fabricmanager running (pid 2116), log: no fatal lines"}}},
	})
}

func TestLog(t *testing.T) {
	play(t, []scenario{
		{name: "fatal line since the last run", steps: []step{
			{st: check.OK, msg: msgStarted},
			{do: func(n *node) { n.appendLog(n.info(100, "ok") + n.fatal(101)) }, st: check.Fail, msg: "fatal line in log: \"["},
		}},
		{name: "fatal line quoted", steps: []step{
			{st: check.OK},
			{do: func(n *node) { n.appendLog(n.fatal(101)) }, st: check.Fail, msg: fatalQuote},
		}},
		{name: "several fatal lines", steps: []step{
			{st: check.OK},
			{do: func(n *node) { n.appendLog(n.fatal(101) + n.fatal(102) + n.fatal(103)) }, st: check.Fail, msg: "(+2 more)"},
		}},
		{name: "GPU NVL fatal error", steps: []step{
			{st: check.OK},
			{do: func(n *node) {
				n.appendLog(n.stamp(200) + " [ERROR] [tid 202] Fabric Manager detected GPU NVL Fatal error on :\nmoduleId : 3\n")
			}, st: check.Fail, msg: "Fabric Manager detected GPU NVL Fatal error"},
		}},
		{name: "NVLink training failure", steps: []step{
			{st: check.OK},
			{do: func(n *node) {
				n.appendLog(n.stamp(200) + " [ERROR] [tid 77] NVLink training failed for GPU 3 link 5\n")
			}, st: check.Fail, msg: "NVLink training failed"},
		}},
		{name: "fatal line before the first run is history", setup: func(n *node) { n.appendLog(n.fatal(101)) }, steps: []step{
			{st: check.OK, msg: msgStarted},
			{st: check.OK, msg: msgHealthy},
		}},
		{name: "fatal line stays until Fabric Manager restarts", steps: []step{
			{st: check.OK},
			{do: func(n *node) { n.appendLog(n.fatal(101)) }, st: check.Fail, msg: fatalQuote},
			{st: check.Fail, msg: fatalQuote},
			{do: func(n *node) { n.appendLog(n.info(300, "ok")) }, st: check.Fail, msg: fatalQuote},
			{do: func(n *node) { n.restartFM(5000, 60000) }, st: check.OK, msg: "nv-fabricmanager running (pid 5000)"},
		}},
		{name: "fatal line stays until reboot", steps: []step{
			{st: check.OK},
			{do: func(n *node) { n.appendLog(n.fatal(101)) }, st: check.Fail, msg: fatalQuote},
			{do: func(n *node) { n.reboot() }, st: check.OK, msg: msgHealthy},
		}},
		{name: "fatal line of an instance restarted since is a warning", steps: []step{
			{st: check.OK},
			{do: func(n *node) {
				n.appendLog(n.fatal(101))
				n.restartFM(5000, 60000) // started 600 s after boot
				n.appendLog(n.info(601, "Connected to 1 node."))
			}, st: check.Warn, msg: "fatal line in log from before nv-fabricmanager restarted: "},
			{st: check.OK, msg: "nv-fabricmanager running (pid 5000)"},
		}},
		{name: "fatal line while Fabric Manager is down", steps: []step{
			{st: check.OK},
			{do: func(n *node) {
				n.appendLog(n.fatal(101))
				n.remove("proc/2116")
			}, st: check.Fail, msg: "nv-fabricmanager not running; fatal line in log: "},
			{st: check.Fail, msg: "nv-fabricmanager not running; fatal line in log: "},
			{do: func(n *node) { n.fm(5000, 60000, cgroupFM) }, st: check.OK, msg: "nv-fabricmanager running (pid 5000)"},
		}},
		{name: "line still being written is read whole next run", steps: []step{
			{st: check.OK},
			{do: func(n *node) { n.appendLog(strings.TrimSuffix(n.fatal(101), "port 33\n")) }, st: check.OK, msg: msgHealthy},
			{do: func(n *node) { n.appendLog("port 33\n") }, st: check.Fail, msg: "physical id 3 port 33"},
		}},
		{name: "rotated with a fatal line at the end of the old log", steps: []step{
			{st: check.OK},
			{do: func(n *node) {
				n.appendLog(n.info(100, "ok") + n.fatal(101))
				n.rotate()
				n.appendLog(n.info(102, "after rotation"))
			}, st: check.Fail, msg: fatalQuote},
		}},
		{name: "rotated with the fatal line in the new log", steps: []step{
			{st: check.OK},
			{do: func(n *node) {
				n.appendLog(n.info(100, "ok"))
				n.rotate()
				n.appendLog(n.fatal(101))
			}, st: check.Fail, msg: fatalQuote},
		}},
		{name: "rotated before the new log was created", steps: []step{
			{st: check.OK},
			{do: func(n *node) {
				n.appendLog(n.fatal(101))
				n.rotate()
				n.remove(logRel)
			}, st: check.Fail, msg: fatalQuote},
			{do: func(n *node) { n.write(logRel, n.info(120, "new log")) }, st: check.Fail, msg: fatalQuote},
		}},
		{name: "copytruncate with a fatal line at the end of the old log", setup: func(n *node) { n.appendLog(n.info(10, "history")) }, steps: []step{
			{st: check.OK},
			{do: func(n *node) {
				n.appendLog(n.info(100, "ok") + n.fatal(101))
				n.copyTruncate()
				n.appendLog(n.info(102, "after truncation, longer than what was there before this run"))
			}, st: check.Fail, msg: fatalQuote},
		}},
		{name: "truncated in place, old tail gone", setup: func(n *node) { n.appendLog(n.info(10, "history ") + n.info(11, "more history")) }, steps: []step{
			{st: check.OK},
			{do: func(n *node) {
				n.write(logRel, n.info(200, "restarted with LOG_APPEND_TO_LOG=0"))
			}, st: check.OK, msg: "(log rotated, its old tail not found)"},
			{do: func(n *node) { n.appendLog(n.fatal(201)) }, st: check.Fail, msg: fatalQuote},
		}},
		{name: "rewritten in place past the cursor", setup: func(n *node) { n.appendLog(n.info(10, "history")) }, steps: []step{
			{st: check.OK},
			{do: func(n *node) {
				n.write(logRel, n.info(200, "a new log longer than the old one")+n.fatal(201))
			}, st: check.Fail, msg: fatalQuote},
		}},
		{name: "rotated twice, the old tail compressed away", setup: func(n *node) { n.appendLog(n.info(10, "history")) }, steps: []step{
			{st: check.OK},
			{do: func(n *node) {
				n.appendLog(n.fatal(101))
				n.rotate()
				n.remove(logRel + ".1")
				n.appendLog(n.info(300, "new"))
			}, st: check.OK, msg: "(log rotated, its old tail not found)"},
		}},
		{name: "rotated log elsewhere", setup: func(n *node) { n.cfg.RotatedLog = "/var/log/fm/old.log" }, steps: []step{
			{st: check.OK},
			{do: func(n *node) {
				n.appendLog(n.fatal(101))
				n.mkdir("var/log/fm")
				if err := os.Rename(n.path(logRel), n.path("var/log/fm/old.log")); err != nil {
					t.Fatal(err)
				}
				n.write(logRel, "")
			}, st: check.Fail, msg: fatalQuote},
		}},
		{name: "more than max_read skips the oldest part", setup: func(n *node) { n.cfg.MaxRead = "64KiB" }, steps: []step{
			{st: check.OK},
			{do: func(n *node) {
				big := strings.Repeat(n.info(100, strings.Repeat("x", 100)), 1000) // ~140 KiB
				n.appendLog(n.fatal(99) + big)
			}, st: check.OK, msg: "log bytes over max_read)"},
			{do: func(n *node) { n.appendLog(n.fatal(200)) }, st: check.Fail, msg: fatalQuote},
		}},
		{name: "fatal line within max_read is caught", setup: func(n *node) { n.cfg.MaxRead = "64KiB" }, steps: []step{
			{st: check.OK},
			{do: func(n *node) {
				n.appendLog(strings.Repeat(n.info(100, strings.Repeat("x", 100)), 1000) + n.fatal(101))
			}, st: check.Fail, msg: fatalQuote},
		}},
		{name: "another log configured", setup: func(n *node) { n.write("var/log/fm2.log", n.fatal(5)) }, steps: []step{
			{st: check.OK, msg: msgStarted},
			{do: func(n *node) { n.cfg.Log = "/var/log/fm2.log" }, st: check.OK, msg: msgStarted},
			{do: func(n *node) { n.appendTo("var/log/fm2.log", n.fatal(101)) }, st: check.Fail, msg: fatalQuote},
		}},
		{name: "log reading off", setup: func(n *node) { n.cfg.Log = ""; n.appendLog(n.fatal(1)) }, steps: []step{
			{st: check.OK, msg: "nv-fabricmanager running (pid 2116), unit nvidia-fabricmanager.service active"},
			{do: func(n *node) { n.appendLog(n.fatal(101)) }, st: check.OK},
		}},
	})
}

func TestGPUFabric(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inject []string
		first  step
		second step
	}{
		{"gpu3 registering", []string{"gpu3:fabric=in-progress"},
			step{st: check.Warn, msg: "nv-fabricmanager running, fabric not initialised yet: gpu3 state in-progress (first sighting)"},
			step{st: check.Fail, msg: "nv-fabricmanager running but fabric not initialised: gpu3 state in-progress"}},
		{"several GPUs in two states", []string{"gpu0:fabric=not-started", "gpu1:fabric=in-progress", "gpu2:fabric=in-progress"},
			step{st: check.Warn, msg: "fabric not initialised yet: gpu0 state not-started, gpu1,gpu2 state in-progress"},
			step{st: check.Fail, msg: "fabric not initialised: gpu0 state not-started, gpu1,gpu2 state in-progress"}},
		{"registration failed", []string{"gpu7:fabric=failed"},
			step{st: check.Fail, msg: "nv-fabricmanager running but fabric registration failed: gpu7 (" + nvml.ErrorString(nvml.ERROR_UNKNOWN) + ")"},
			step{st: check.Fail, msg: "fabric registration failed: gpu7"}},
		{"a PCIe SKU among them", []string{"gpu5:fabric=unsupported"},
			step{st: check.OK, msg: "fabric completed on 7 GPUs"},
			step{st: check.OK, msg: "fabric completed on 7 GPUs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t).withGPUs("dgxh100", tc.inject...)
			want(t, "first run", n.run(), tc.first.st, tc.first.msg)
			want(t, "second run", n.run(), tc.second.st, tc.second.msg)
		})
	}
}

// Registration starts over with each Fabric Manager: a restart gives it
// the grace of a first sighting again.
func TestGPUFabricAfterRestart(t *testing.T) {
	n := newNode(t).withGPUs("dgxh100", "gpu3:fabric=in-progress")
	want(t, "run 1", n.run(), check.Warn, "(first sighting)")
	n.restartFM(5000, 60000)
	want(t, "run 2 after restart", n.run(), check.Warn, "(first sighting)")
	want(t, "run 3", n.run(), check.Fail, "fabric not initialised: gpu3 state in-progress")
	n.remove("proc/5000")
	want(t, "run 4, daemon gone", n.run(), check.Fail, "nv-fabricmanager not running")
	n.fm(6000, 90000, cgroupFM)
	want(t, "run 5, started again", n.run(), check.Warn, "(first sighting)")
}

// NVML not answering is "could not check" here; the gpu.* checks FAIL it.
func TestGPUFabricHang(t *testing.T) {
	n := newNode(t).withGPUs("dgxh100")
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	d := n.m.Devices[2]
	d.GetGpuFabricInfo_v4Func = func() (nvml.GpuFabricInfo_v4, nvml.Return) {
		<-release
		return nvml.GpuFabricInfo_v4{}, nvml.ERROR_UNKNOWN
	}
	start := time.Now()
	want(t, "run", n.runIn(n.state, time.Second), check.Error, "cannot read GPU fabric state: NVML did not answer on gpu2")
	if el := time.Since(start); el > time.Second {
		t.Errorf("took %v, past the deadline", el)
	}
}

// Garbage or unreadable files are ERROR ("could not check"), never FAIL,
// and never a panic.
func TestGarbageIsError(t *testing.T) {
	play(t, []scenario{
		{name: "one NVSwitch unreadable, others found", setup: func(n *node) {
			n.write("sys/bus/pci/devices/0000:03:00.0/vendor", "\xff\xfe")
			n.remove("sys/bus/pci/devices/0000:05:00.0/class")
		}, steps: []step{{st: check.OK, msg: msgHealthy}}},
		{name: "NVSwitch's class huge", setup: func(n *node) {
			for _, a := range nvswitches {
				n.write("sys/bus/pci/devices/"+a+"/class", "0x068000"+strings.Repeat(" ", 1<<20))
			}
		}, steps: []step{{st: check.Error, msg: "larger than 4096 bytes"}}},
		{name: "daemon's stat garbage", setup: func(n *node) { n.write("proc/2116/stat", "garbage") },
			steps: []step{{st: check.Error, msg: "nv-fabricmanager not found, but 1 processes unreadable"}}},
		{name: "daemon's start time not a number", setup: func(n *node) {
			n.write("proc/2116/stat", "2116 (nv-fabricmanage) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 -5 20\n")
		}, steps: []step{{st: check.Error, msg: "is not a number"}}},
		{name: "cmdline unreadable", setup: func(n *node) {
			n.remove("proc/2116/cmdline")
			n.mkdir("proc/2116/cmdline")
		}, steps: []step{{st: check.Error, msg: "nv-fabricmanager not found, but 1 processes unreadable"}}},
		{name: "no /proc", setup: func(n *node) { n.remove("proc") },
			steps: []step{{st: check.Error, msg: "cannot list processes"}}},
		{name: "btime garbage", setup: func(n *node) { n.write("proc/stat", "btime -3\n") },
			steps: []step{{st: check.Error, msg: "cannot tell when nv-fabricmanager started"}}},
		{name: "log is a directory", setup: func(n *node) { n.remove(logRel); n.mkdir(logRel) },
			steps: []step{{st: check.Error, msg: "cannot read the Fabric Manager log"}}},
		{name: "log missing", setup: func(n *node) { n.remove(logRel) },
			steps: []step{
				{st: check.Warn, msg: "no Fabric Manager log at /var/log/fabricmanager.log (logging to syslog? then set log = \"\")"},
				// Created since: no history, read from its start.
				{do: func(n *node) { n.write(logRel, n.fatal(500)) }, st: check.Fail, msg: fatalQuote},
			}},
		{name: "log replaced by a directory after the first run", steps: []step{
			{st: check.OK},
			{do: func(n *node) { n.remove(logRel); n.mkdir(logRel) }, st: check.Error, msg: "cannot read the Fabric Manager log"},
		}},
		{name: "binary garbage without newlines", steps: []step{
			{st: check.OK},
			{do: func(n *node) { n.appendLog(strings.Repeat("\x00\xff\x1b[31m", 40000)) }, st: check.OK, msg: msgHealthy},
			{do: func(n *node) { n.appendLog("\n" + n.fatal(300)) }, st: check.Fail, msg: fatalQuote},
		}},
		{name: "corrupt record starts afresh", setup: func(n *node) {
			if err := os.WriteFile(n.state.Path+"/"+stateFile, []byte("{not json"), 0o600); err != nil {
				t.Fatal(err)
			}
			n.appendLog(n.fatal(10))
		}, steps: []step{{st: check.OK, msg: msgStarted}}},
		{name: "unreadable record", setup: func(n *node) {
			if err := os.Mkdir(n.state.Path+"/"+stateFile, 0o700); err != nil {
				t.Fatal(err)
			}
		}, steps: []step{{st: check.Error, msg: "cannot read the log cursor"}}},
	})
}

// A dry run reads the same lines again and again: it never moves the
// cursor, nor starts one.
func TestDryRunKeepsTheCursor(t *testing.T) {
	n := newNode(t)
	dry := statefile.Dir{Path: n.state.Path, ReadOnly: true}
	want(t, "dry first run", n.runWith(dry), check.OK, msgStarted)
	want(t, "dry again: still no cursor", n.runWith(dry), check.OK, msgStarted)
	want(t, "real run", n.run(), check.OK, msgStarted)
	before, err := os.ReadFile(n.state.Path + "/" + stateFile)
	if err != nil {
		t.Fatal(err)
	}
	n.appendLog(n.fatal(101))
	want(t, "dry run", n.runWith(dry), check.Fail, fatalQuote)
	want(t, "dry run again", n.runWith(dry), check.Fail, fatalQuote)
	after, err := os.ReadFile(n.state.Path + "/" + stateFile)
	if err != nil || string(after) != string(before) {
		t.Errorf("dry run changed the record:\n%s\n%s (%v)", before, after, err)
	}
	want(t, "real run", n.run(), check.Fail, fatalQuote)
}
