package ib

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/statefile"
	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// countingScan is Scan under root, counting its calls.
func countingScan(root string, n *atomic.Int32) func(context.Context) (Devices, error) {
	return func(ctx context.Context) (Devices, error) {
		n.Add(1)
		return Scan(ctx, root)
	}
}

// Every ib check of a run, run together as the runner runs them, judges
// one scan of an HGX B200: 12 ConnectX functions, each VPD read once.
func TestGatherOneScanForAllChecks(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.B200)
	var scans atomic.Int32
	devs := GatherWith(countingScan(root, &scans))
	st := statefile.Dir{Path: t.TempDir()}
	tasks := []check.Task{
		{Check: NewPort(devs, b200Config()), Timeout: 10 * time.Second},
		{Check: NewCounters(root, devs, b200Config(), st), Timeout: 10 * time.Second},
		{Check: NewGDR(root, devs, b200Config(), nil), Timeout: 10 * time.Second},
	}
	timed := check.Run(context.Background(), tasks)
	if n := scans.Load(); n != 1 {
		t.Errorf("%d scans, want 1", n)
	}
	expect(t, namePort, timed[0].Results, map[string]want{"*": {check.OK, ""}, "host": {check.OK, "8 HCAs, 8 of 8 ports active (4 NVSwitch management devices, not HCAs)"}})
	expect(t, nameCounters, timed[1].Results, map[string]want{"*": {check.OK, "baseline recorded"}})
	expect(t, nameGDR, timed[2].Results, map[string]want{"host": {check.OK, "(8 GPUs, 8 HCAs)"}})
	if _, err := Fragment(context.Background(), devs, nil); err != nil || scans.Load() != 1 {
		t.Errorf("inventory after the checks: %v, %d scans", err, scans.Load())
	}
}

// An error of the scan is the run's answer: every check reports it as its
// ERROR, and none scans again.
func TestGatherErrorReachesEveryCheck(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.B200)
	var scans atomic.Int32
	devs := GatherWith(func(context.Context) (Devices, error) {
		scans.Add(1)
		return Devices{}, errors.New("stat sys/class/infiniband: input/output error")
	})
	st := statefile.Dir{Path: t.TempDir()}
	for _, c := range []check.Check{NewPort(devs, b200Config()), NewCounters(root, devs, b200Config(), st), NewGDR(root, devs, b200Config(), nil)} {
		expect(t, c.Name(), run(t, c), map[string]want{"host": {check.Error, "cannot list RDMA devices: stat sys/class/infiniband: input/output error"}})
	}
	if _, err := Fragment(context.Background(), devs, nil); err == nil || !strings.Contains(err.Error(), "input/output error") {
		t.Errorf("inventory: %v", err)
	}
	if n := scans.Load(); n != 1 {
		t.Errorf("%d scans, want 1", n)
	}
}

// Callers arriving while the scan runs wait for it rather than scan
// again, and each gets a copy of its own: a check that trims its HCAs
// does not change what another judges.
func TestGatherConcurrentCallersShareOneScan(t *testing.T) {
	release := make(chan struct{})
	var scans atomic.Int32
	devs := GatherWith(func(context.Context) (Devices, error) {
		scans.Add(1)
		<-release
		return Devices{HCAs: []HCA{{Name: "mlx5_0", Ports: []Port{{Num: 1, Netdevs: []string{"ib0"}}}}}}, nil
	})
	const callers = 16
	got := make([]Devices, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			d, err := devs.Devices(context.Background())
			if err != nil {
				t.Error(err)
			}
			got[i] = d
		})
	}
	time.Sleep(20 * time.Millisecond) // let them all arrive
	close(release)
	wg.Wait()
	if n := scans.Load(); n != 1 {
		t.Errorf("%d scans, want 1", n)
	}
	got[0].HCAs[0].Ports[0].Netdevs[0] = "changed"
	got[0].HCAs[0].Name = "changed"
	for i, d := range got[1:] {
		if len(d.HCAs) != 1 || d.HCAs[0].Name != "mlx5_0" || d.HCAs[0].Ports[0].Netdevs[0] != "ib0" {
			t.Errorf("caller %d: %+v", i+1, d.HCAs)
		}
	}
	if d, _ := devs.Devices(context.Background()); d.HCAs[0].Name != "mlx5_0" || d.HCAs[0].Ports[0].Netdevs[0] != "ib0" {
		t.Errorf("kept devices changed by a caller: %+v", d.HCAs)
	}
}

// A scan cut short by its caller's time limit is not the run's answer: a
// check with time left scans again and judges the devices. A caller that
// waits for another's scan waits no longer than its own context.
func TestGatherInterruptedScanNotKept(t *testing.T) {
	started := make(chan struct{})
	var scans atomic.Int32
	devs := GatherWith(func(ctx context.Context) (Devices, error) {
		if scans.Add(1) == 1 {
			close(started)
			<-ctx.Done()
			return Devices{}, ctx.Err()
		}
		return Devices{HCAs: []HCA{{Name: "mlx5_0"}}}, nil
	})
	first, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := devs.Devices(first)
		done <- err
	}()
	<-started
	short, stop := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer stop()
	if _, err := devs.Devices(short); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "still being scanned") {
		t.Errorf("waiter past its deadline: %v", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("interrupted scan: %v", err)
	}
	d, err := devs.Devices(context.Background())
	if err != nil || len(d.HCAs) != 1 || scans.Load() != 2 {
		t.Errorf("after an interrupted scan: %+v %v, %d scans", d, err, scans.Load())
	}
	if _, err := devs.Devices(context.Background()); err != nil || scans.Load() != 2 {
		t.Errorf("kept scan: %v, %d scans", err, scans.Load())
	}
	// A context already over does not start a scan.
	over := GatherWith(func(context.Context) (Devices, error) { t.Error("scanned"); return Devices{}, nil })
	if _, err := over.Devices(cancelled()); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled caller: %v", err)
	}
}

// A scan that panics does not leave the callers waiting for it.
func TestGatherPanicReleasesWaiters(t *testing.T) {
	release := make(chan struct{})
	var scans atomic.Int32
	devs := GatherWith(func(context.Context) (Devices, error) {
		if scans.Add(1) == 1 {
			<-release
			panic("scan bug")
		}
		return Devices{HCAs: []HCA{{Name: "mlx5_0"}}}, nil
	})
	go func() {
		defer func() { _ = recover() }()
		_, _ = devs.Devices(context.Background())
	}()
	for scans.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	waited := make(chan Devices, 1)
	go func() {
		d, _ := devs.Devices(context.Background())
		waited <- d
	}()
	close(release)
	select {
	case d := <-waited:
		if len(d.HCAs) != 1 {
			t.Errorf("after a panicked scan: %+v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter still waiting after the scan panicked")
	}
}
