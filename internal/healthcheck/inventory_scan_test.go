package healthcheck

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gpuhc/gpuhc/internal/catalog"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/ib"
	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// --print-inventory's [checks.ib.port] and [checks.topology] fragments
// describe one scan of the RDMA devices, and a scan error ends it.
func TestInventoryScansOnce(t *testing.T) {
	cfg := config.Default()
	cfg.Root = sysfsfix.Tree(t, sysfsfix.B200)
	var scans atomic.Int32
	env := catalog.Env{IB: ib.GatherWith(func(ctx context.Context) (ib.Devices, error) {
		scans.Add(1)
		return ib.Scan(ctx, cfg.Root)
	})}
	frag, err := inventory(context.Background(), cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	if n := scans.Load(); n != 1 {
		t.Errorf("%d scans, want 1", n)
	}
	for _, want := range []string{"expected_hcas = 8", `"0000:1b:00.0=mlx5_0"`} {
		if !strings.Contains(frag, want) {
			t.Errorf("fragment lacks %s:\n%s", want, frag)
		}
	}

	env.IB = ib.GatherWith(func(context.Context) (ib.Devices, error) {
		return ib.Devices{}, errors.New("read sys/class/infiniband: input/output error")
	})
	if _, err := inventory(context.Background(), cfg, env); err == nil || !strings.Contains(err.Error(), "input/output error") {
		t.Errorf("inventory after a scan error: %v", err)
	}
}
