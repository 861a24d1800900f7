package healthcheck

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/runenv"
	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// runProgram runs gpuhc-healthcheck with args as node gpu007.
func runProgram(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	p := Program{Process: runenv.Process{
		Args:     args,
		Getenv:   func(k string) string { return map[string]string{"SLURMD_NODENAME": "gpu007"}[k] },
		Hostname: func() (string, error) { return "", errors.New("no host name in tests") },
		Stdout:   &out, Stderr: &errb,
		Exit: func(c int) { t.Fatalf("watchdog fired with %d", c) },
	}}
	return p.Main(), out.String(), errb.String()
}

// invBed is a node on a sysfsfix tree with its config (base: the node's
// paths plus extra lines) for the bring-up tests.
type invBed struct {
	root, dir, cfgPath, base string
}

func newInvBed(t *testing.T, tree, extra string) invBed {
	t.Helper()
	b := invBed{root: sysfsfix.Tree(t, tree), dir: t.TempDir()}
	b.cfgPath = filepath.Join(b.dir, "gpuhc.toml")
	b.base = fmt.Sprintf("root = %q\nstate_dir = %q\nlock_file = %q\n[events]\nfile = \"\"\n",
		b.root, filepath.Join(b.dir, "state"), filepath.Join(b.dir, "lock")) + extra
	must(t, os.WriteFile(b.cfgPath, []byte(b.base), 0o644))
	return b
}

// inventory is --print-inventory under --simulate model, which must exit
// 0 and print every want.
func (b invBed) inventory(t *testing.T, model string, wants ...string) string {
	t.Helper()
	code, out, errOut := runProgram(t, "--config", b.cfgPath, "--simulate", model, "--print-inventory")
	if code != ExitHealthy {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("inventory lacks %q:\n%s", want, out)
		}
	}
	return out
}

// load puts the fragment into the config as it is, after the base.
func (b invBed) load(t *testing.T, fragment string) string {
	t.Helper()
	full := b.base + "\n" + fragment
	must(t, os.WriteFile(b.cfgPath, []byte(full), 0o644))
	return full
}

func (b invBed) dryRun(t *testing.T, model string) (int, string) {
	t.Helper()
	code, out, _ := runProgram(t, "--config", b.cfgPath, "--simulate", model, "--dry-run")
	return code, out
}

// degradedDrains: with mlx5_3 port 1 at rate, the dry run would drain for
// it.
func (b invBed) degradedDrains(t *testing.T, rate string) {
	t.Helper()
	sysfsfix.Set(t, b.root, sysfsfix.PortDir("mlx5_3", 1)+"/rate", rate)
	code, out := b.dryRun(t, "dgxh100")
	if code != ExitFail || !strings.Contains(out, "would-drain: gpuhc: ib.port: mlx5_3/1 (0000:5e:00.0): rate 200 Gb/sec < expected 400") {
		t.Errorf("mlx5_3/1 at %s with the inventory: exit %d\n%s", rate, code, out)
	}
}

// Bring-up: --print-inventory on a known-good DGX H100 writes a fragment
// that loads as configuration, pins what the node has, and that the node
// then passes; the same fragment makes a degraded node fail.
func TestPrintInventory(t *testing.T) {
	b := newInvBed(t, sysfsfix.H100NDR, "[checks.ib]\nexclude = [\"mlx5_8\"]\n[checks.fabric.manager]\nenabled = false\n")
	out := b.inventory(t, "dgxh100",
		"expected = 8\n", "expected_hcas = 8\n", "expected_active_ports = 8\n", "min_rate_gbps = 400.0\n",
		`link_layer = "InfiniBand"`, `firmware = "28.39.2048"`, `"0000:5d:00.0=mlx5_3", # gpu3: same PCIe switch`)
	if _, err := os.Stat(filepath.Join(b.dir, "state")); err == nil {
		t.Errorf("--print-inventory wrote a state directory")
	}

	// The fragment goes into the config as it is (the [checks.ib] table
	// is already there, so it is not repeated).
	full := b.load(t, out)
	if _, err := config.Parse("inventory", []byte(full), "gpu007"); err != nil {
		t.Fatalf("fragment does not load: %v\n%s", err, full)
	}
	_, out = b.dryRun(t, "dgxh100")
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "ib.") || strings.HasPrefix(line, "topology") || strings.HasPrefix(line, "gpu.count") {
			if f := strings.Fields(line); len(f) < 3 || f[2] != "OK" {
				t.Errorf("known-good node with its own inventory: %s", line)
			}
		}
	}
	b.degradedDrains(t, "200 Gb/sec (4X HDR)")
}

func TestPrintInventoryBadConfig(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "gpuhc.toml")
	must(t, os.WriteFile(cfgPath, []byte("[checks.ib]\nexclude = [\"[\"]\n"), 0o644))
	if code, _, _ := runProgram(t, "--config", cfgPath, "--print-inventory"); code != ExitUsage {
		t.Errorf("bad config: exit %d, want %d", code, ExitUsage)
	}
}

// Bring-up on a node whose ports are not all alike (eight NDR ports
// beside an Ethernet port at a lower rate): the inventory pins rate and
// count per link layer, so that an NDR port later trained at 2X NDR
// drains the node, though the Ethernet port's rate is lower still.
func TestPrintInventoryPerLinkLayer(t *testing.T) {
	b := newInvBed(t, sysfsfix.H100NDR, "[checks.fabric.manager]\nenabled = false\n")
	out := b.inventory(t, "dgxh100",
		"expected_hcas = 9\n", "min_rate_gbps = 0.0\n",
		"[[checks.ib.port.group]]\nlink_layer = \"Ethernet\"\nmin_rate_gbps = 100.0\nexpected_active_ports = 1\n",
		"[[checks.ib.port.group]]\nlink_layer = \"InfiniBand\"\nmin_rate_gbps = 400.0\nexpected_active_ports = 8\n")
	b.load(t, out)
	if code, out := b.dryRun(t, "dgxh100"); code != ExitHealthy {
		t.Errorf("known-good node with its own inventory: exit %d\n%s", code, out)
	}
	b.degradedDrains(t, "200 Gb/sec (2X NDR)")
}

// On an HGX B200 the inventory counts the 8 HCAs, lists the NVSwitch
// management devices as such, and pins every GPU to its own HCA.
func TestPrintInventoryB200(t *testing.T) {
	b := newInvBed(t, sysfsfix.B200, "")
	out := b.inventory(t, "dgxb200",
		"expected_hcas = 8\n", "expected_active_ports = 8\n", "min_rate_gbps = 400.0\n", `link_layer = "InfiniBand"`,
		"# mlx5_11 0000:8a:00.0 fw 28.43.1014 (NVSwitch management, VPD SMDL=SW_MNG: not an HCA, not counted)\n",
		`"0000:1b:00.0=mlx5_0", # gpu0: same PCIe switch`, `"0000:df:00.0=mlx5_7", # gpu7: same PCIe switch`)
	if strings.Contains(out, "=mlx5_8\"") || strings.Contains(out, "=mlx5_1") && strings.Contains(out, "=mlx5_10") {
		t.Errorf("a management device pinned:\n%s", out)
	}
}
