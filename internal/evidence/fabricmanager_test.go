package evidence

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/fabric"
	"github.com/gpuhc/gpuhc/internal/ib"
	"github.com/gpuhc/gpuhc/internal/pcibus"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

// fmNode is a node root with one NVSwitch and a running Fabric Manager
// (started in 2020, before every line of the logs), no systemd and no
// GPUs: only the log decides the verdict.
func fmNode(t *testing.T) (root string) {
	t.Helper()
	root = t.TempDir()
	files := map[string]string{
		"sys/bus/pci/devices/0000:86:00.0/vendor": "0x10de\n",
		"sys/bus/pci/devices/0000:86:00.0/class":  "0x068000\n",
		"proc/stat":                               "cpu  1 2 3 4\nbtime 1600000000\n",
		// Fields 3-22 of stat: state ... starttime (100 s after boot).
		"proc/4242/stat":            "4242 (nv-fabricmanage) S 1 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 10000 0 0\n",
		"proc/4242/cmdline":         "/usr/bin/nv-fabricmanager\x00-c\x00/usr/share/nvidia/nvswitch/fabricmanager.cfg\x00",
		"var/log/fabricmanager.log": "",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestFabricManagerLogVerdicts runs the real fabric.manager check over
// each Fabric Manager log of the corpus as a log the daemon appends
// while gpuhc runs: a first run starts the cursor at the (empty) log's
// end, the log then grows by the whole file, and a second run judges it.
func TestFabricManagerLogVerdicts(t *testing.T) {
	logs, err := FabricManagerLogs()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range logs {
		t.Run(l.Name, func(t *testing.T) {
			data, err := os.ReadFile(l.Path)
			if err != nil {
				t.Fatal(err)
			}
			root := fmNode(t)
			cfg := config.Default().Checks.Fabric.Manager
			st := statefile.Dir{Path: filepath.Join(t.TempDir(), "state")}
			c := fabric.NewManager(root, ib.NewGather(root), pcibus.NewGather(root), cfg, nil, st)
			ctx := context.Background()
			first := c.Run(ctx)
			if len(first) != 1 || first[0].Status != check.OK {
				t.Fatalf("first run (empty log): %+v", first)
			}
			logPath := filepath.Join(root, "var/log/fabricmanager.log")
			if err := os.WriteFile(logPath, data, 0o644); err != nil {
				t.Fatal(err)
			}
			got := c.Run(ctx)
			if len(got) != 1 {
				t.Fatalf("want one result, got %+v", got)
			}
			r := got[0]
			want := check.OK
			var wantAction check.Action = check.ActionNone
			for _, v := range l.Expect.Verdicts {
				s, err := check.ParseStatus(v.Status)
				if err != nil {
					t.Fatal(err)
				}
				want, wantAction = max(want, s), check.Action(v.Action)
			}
			if r.Status != want {
				t.Fatalf("fabric.manager on %s: %s %q, want %s (%s)", l.Name, r.Status, r.Message, want, l.Expect.Source)
			}
			if want == check.Fail && !strings.Contains(r.Message, "fatal line in log") {
				t.Errorf("FAIL for another reason than the log: %q", r.Message)
			}
			if r.Action != wantAction {
				// NVIDIA's recovery for a fatal NVSwitch error is a reset of
				// all GPUs and NVSwitches; fabric.manager says drain. Logged,
				// not failed: the action is the lead's call (see the README).
				t.Logf("fabric.manager action %s, NVIDIA's recovery is %s", r.Action, wantAction)
			}
		})
	}
}
