package ib

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/check/checktest"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// trees are the fixture nodes, each healthy as generated.
var trees = []string{sysfsfix.H100NDR, sysfsfix.A100HDR, sysfsfix.RoCE}

// want is the expected verdict on one component (see checktest.Want).
type want checktest.Want

// expect checks that rs holds exactly the components in w, with their
// statuses and message fragments, and that every result is well formed.
// A component "*" stands for every component not named otherwise.
func expect(t *testing.T, name string, rs []check.Result, w map[string]want) {
	t.Helper()
	checktest.Expect(t, rs, w, checktest.WellFormed(name))
}

// run runs c with a generous deadline, as the runner would.
func run(t testing.TB, c check.Check) []check.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Run(ctx)
}

func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// defaults is the shipped [checks.ib] configuration.
func defaults() config.IB { return config.Default().Checks.IB }

// writeFile creates or replaces root/rel, for files the fixture trees do
// not have (the boot id) and for garbage cases.
func writeFile(t testing.TB, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// discover lists the HCAs under root, as Scan does, without the NVSwitch
// management devices.
func discover(ctx context.Context, root string) ([]HCA, error) {
	d, err := Scan(ctx, root)
	return d.HCAs, err
}

// hcaNames lists the tree's RDMA devices.
func hcaNames(t testing.TB, root string) []string {
	t.Helper()
	hs, err := discover(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range hs {
		names = append(names, h.Name)
	}
	return names
}
