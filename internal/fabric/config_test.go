package fabric

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/ib"
	"github.com/gpuhc/gpuhc/internal/pcibus"
	"github.com/gpuhc/gpuhc/internal/statefile"
)

// The config package refuses checks.fabric.manager values this check
// could not work with, naming the key.
func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c *config.FabricManager)
		want string // "" : valid
	}{
		{"defaults", func(c *config.FabricManager) {}, ""},
		{"unit check off", func(c *config.FabricManager) { c.Unit = "" }, ""},
		{"log off", func(c *config.FabricManager) { c.Log = "" }, ""},
		{"template unit", func(c *config.FabricManager) { c.Unit = "fm@0.service" }, ""},
		{"rotated elsewhere", func(c *config.FabricManager) { c.RotatedLog = "/var/log/old/fm.log" }, ""},
		{"no process", func(c *config.FabricManager) { c.Process = " " }, "checks.fabric.manager.process"},
		{"process path", func(c *config.FabricManager) { c.Process = "/usr/bin/nv-fabricmanager" }, "checks.fabric.manager.process"},
		{"unit without suffix", func(c *config.FabricManager) { c.Unit = "nvidia-fabricmanager" }, "checks.fabric.manager.unit"},
		{"unit with a slash", func(c *config.FabricManager) { c.Unit = "system.slice/x.service" }, "checks.fabric.manager.unit"},
		{"nvlsm off", func(c *config.FabricManager) { c.NVLSMProcess = "" }, ""},
		{"nvlsm in its own unit", func(c *config.FabricManager) { c.NVLSMUnit = "nvidia-nvlsm.service" }, ""},
		{"nvlsm path", func(c *config.FabricManager) { c.NVLSMProcess = "/opt/nvidia/nvlsm/sbin/nvlsm" }, "checks.fabric.manager.nvlsm_process"},
		{"nvlsm blank", func(c *config.FabricManager) { c.NVLSMProcess = " nvlsm" }, "checks.fabric.manager.nvlsm_process"},
		{"nvlsm unit without suffix", func(c *config.FabricManager) { c.NVLSMUnit = "nvlsm" }, "checks.fabric.manager.nvlsm_unit"},
		{"relative log", func(c *config.FabricManager) { c.Log = "fabricmanager.log" }, "checks.fabric.manager.log"},
		{"relative rotated log", func(c *config.FabricManager) { c.RotatedLog = "fm.log.1" }, "checks.fabric.manager.rotated_log"},
		{"rotated is the log", func(c *config.FabricManager) { c.RotatedLog = c.Log }, "checks.fabric.manager.rotated_log"},
		{"bad pattern", func(c *config.FabricManager) { c.FatalPatterns = []string{"ok", "fatal("} }, "checks.fabric.manager.fatal_patterns"},
		{"empty pattern", func(c *config.FabricManager) { c.FatalPatterns = []string{""} }, "checks.fabric.manager.fatal_patterns"},
		{"bad size", func(c *config.FabricManager) { c.MaxRead = "lots" }, "checks.fabric.manager.max_read"},
		{"size too small", func(c *config.FabricManager) { c.MaxRead = "1KiB" }, "checks.fabric.manager.max_read"},
		{"size too big", func(c *config.FabricManager) { c.MaxRead = "1GiB" }, "checks.fabric.manager.max_read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default()
			tc.edit(&c.Checks.Fabric.Manager)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("want valid, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("want an error naming %s, got %v", tc.want, err)
			}
		})
	}
}

// The default patterns catch the fatal lines and leave their non-fatal
// look-alikes alone.
func TestDefaultPatterns(t *testing.T) {
	m := NewManager("/", ib.NewGather("/"), pcibus.NewGather("/"), config.Default().Checks.Fabric.Manager, nil, statefile.Dir{}).(*manager)
	for line, fatal := range map[string]bool{
		"[Jul 23 2024 07:53:55] [ERROR] [tid 841] detected NVSwitch fatal error 20034 on fid 0 on NVSwitch pci bus id 00000000:86:00.0 physical id 3 port 33":       true,
		"[Jul 09 2024 18:14:07] [ERROR] [tid 12727] detected NVSwitch non-fatal error 12028 on fid 0 on NVSwitch pci bus id 00000000:86:00.0 physical id 3 port 61": false,
		"[Oct 13 2025 18:14:38] [ERROR] [tid 202] Fabric Manager detected GPU NVL Fatal error on :":                                                                 true,
		"[Jul 19 2025 18:34:55] [ERROR] [tid 192] Fabric Manager detected GPU NVL Non Fatal error on :":                                                             false,
		"[Mar 21 2023 12:37:32] [ERROR] [tid 2186] NVLink training failed on GPU 0000:18:00.0 link 4":                                                               true,
		"[Mar 21 2023 12:37:32] [INFO] [tid 2186] retrying NVLink training after failed attempt":                                                                    false,
		"[Feb 25 2025 13:59:45] [INFO] [tid 1808] multicast group 0 is freed.":                                                                                      false,
		"moduleId : 3": false,
	} {
		sc := &logScan{}
		(&logReader{patterns: m.patterns}).match(line, sc)
		if got := len(sc.fatal) == 1; got != fatal {
			t.Errorf("%q: fatal %v, want %v", line, got, fatal)
		}
	}
}

// A configuration that bypassed validation is an ERROR, never a panic.
func TestBadConfigIsError(t *testing.T) {
	for _, edit := range []func(c *config.FabricManager){
		func(c *config.FabricManager) { c.FatalPatterns = []string{"("} },
		func(c *config.FabricManager) { c.MaxRead = "x" },
		func(c *config.FabricManager) { c.MaxRead = "0" },
	} {
		c := config.Default().Checks.Fabric.Manager
		edit(&c)
		root := t.TempDir()
		rs := NewManager(root, ib.NewGather(root), pcibus.NewGather(root), c, nil, statefile.Dir{Path: t.TempDir()}).Run(context.Background())
		if len(rs) != 1 || rs[0].Status != check.Error || !strings.Contains(rs[0].Message, "bad configuration") {
			t.Errorf("%+v: got %+v", c, rs)
		}
	}
}
