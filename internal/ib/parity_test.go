package ib

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// parityEnv carries the fixture root to the re-executed test binary.
const parityEnv = "GPUHC_IB_PARITY_ROOT"

const unshareBin = "/usr/bin/unshare"

// On a node discover(ctx, "/") lists devices through rdmamap; everywhere
// else it walks the tree itself. This runs the rdmamap path against each
// fixture, bind-mounted over /sys in a private mount namespace, and
// requires both paths to agree.
func TestDiscoverParity(t *testing.T) {
	if root := os.Getenv(parityEnv); root != "" {
		parityChild(t, root)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: bind-mounts a fixture over /sys in a private mount namespace")
	}
	if _, err := os.Stat(unshareBin); err != nil {
		t.Skipf("needs %s: %v", unshareBin, err)
	}
	if err := exec.Command(unshareBin, "-m", "--propagation", "private", "/bin/true").Run(); err != nil {
		t.Skipf("cannot create a mount namespace here (%s -m): %v", unshareBin, err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	roots := map[string]func(t *testing.T) string{
		// SR-IOV VFs and an SF: Virtual must come out the same both ways.
		"h100-ndr+virtual": func(t *testing.T) string { return withVirtual(t) },
	}
	for _, tree := range trees {
		roots[tree] = func(t *testing.T) string { return sysfsfix.Tree(t, tree) }
	}
	for name, mk := range roots {
		t.Run(name, func(t *testing.T) {
			root := mk(t)
			cmd := exec.Command(unshareBin, "-m", "--propagation", "private", exe,
				"-test.run=^TestDiscoverParity$", "-test.count=1", "-test.v")
			cmd.Env = []string{parityEnv + "=" + root, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("rdmamap path disagrees with the tree walk: %v\n%s", err, out)
			}
		})
	}
}

// parityChild runs inside the private mount namespace.
func parityChild(t *testing.T, root string) {
	want, err := discover(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		t.Fatal("fixture has no RDMA devices")
	}
	if err := unix.Mount(filepath.Join(root, "sys"), "/sys", "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		t.Fatalf("bind-mount the fixture over /sys: %v", err)
	}
	got, err := discover(context.Background(), "/")
	if err != nil {
		t.Fatal(err)
	}
	// The healthy trees have no attribute errors, whose paths would differ.
	if !reflect.DeepEqual(got, want) {
		t.Errorf("discover(\"/\") over the fixture\n got  %+v\n want %+v", got, want)
	}
}
