//go:build cgo

package bandwidth

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

// fakeLibs are testdata/fakecuda.c built three ways, by TestMain.
var fakeLibs struct {
	plain, names, old string
	skip              string // why the fake could not be built
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fakecuda")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	buildFakes(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildFakes(dir string) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		fakeLibs.skip = "gcc not found: cannot build the fake libcuda (testdata/fakecuda.c)"
		return
	}
	build := func(name string, defs ...string) string {
		out := filepath.Join(dir, name)
		args := append([]string{"-shared", "-fPIC", "-Wall", "-Werror", "-o", out}, defs...)
		args = append(args, "testdata/fakecuda.c")
		if b, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
			fakeLibs.skip = fmt.Sprintf("building the fake libcuda failed: %v\n%s", err, b)
		}
		return out
	}
	fakeLibs.plain = build("libfakecuda.so.1")
	fakeLibs.names = build("libfakecuda-names.so.1", "-DFAKECUDA_ERROR_NAMES")
	fakeLibs.old = build("libfakecuda-old.so.1", "-DFAKECUDA_OLD")
}

// fakeConfig points libcuda at the fake, with floors for its default
// name that host memcpy clears easily.
func fakeConfig(t *testing.T, lib string) config.Bandwidth {
	t.Helper()
	if fakeLibs.skip != "" {
		t.Skip(fakeLibs.skip)
	}
	c := testConfig()
	c.Libcuda = lib
	c.Floor = append([]config.BandwidthFloor{{Model: "Fake GPU", H2DGBps: 0.2, D2HGBps: 0.2, D2DGBps: 0.2, P2PGBps: 0.2}},
		config.DefaultBandwidthFloors()...)
	for _, k := range []string{"FAKECUDA_DEVICES", "FAKECUDA_NAME", "FAKECUDA_FAIL", "FAKECUDA_HANG",
		"FAKECUDA_GBPS", "FAKECUDA_GBPS_ON", "FAKECUDA_NOPEER"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	return c
}

func measureFake(t *testing.T, c config.Bandwidth, timeout time.Duration) ([]Figure, []check.Result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return Measure(ctx, c, gpuLookup)
}

// Two devices through the real dlopen/dlsym path: every copy, named by
// PCI address, judged, healthy.
func TestFakeCUDATwoDevices(t *testing.T) {
	c := fakeConfig(t, fakeLibs.plain)
	t.Setenv("FAKECUDA_DEVICES", "2")
	figs, rs := measureFake(t, c, 10*time.Second)
	var got []string
	for _, r := range rs {
		if r.Status != check.OK || r.Check != Name || r.Action != check.ActionNone {
			t.Errorf("not healthy: %+v", r)
		}
		got = append(got, r.Component+" "+strings.Fields(r.Message)[0])
	}
	want := []string{"gpu0/h2d H2D", "gpu0/d2h D2H", "gpu0/d2d D2D", "gpu1/h2d H2D", "gpu1/d2h D2H", "gpu1/d2d D2D", "gpu0-gpu1/p2p P2P", "gpu1-gpu0/p2p P2P"}
	if !slices.Equal(got, want) {
		t.Errorf("results %q, want %q", got, want)
	}
	for _, f := range figs {
		if !(f.GBps > 0.2) || math.IsInf(f.GBps, 0) || f.Floor != 0.2 {
			t.Errorf("figure %+v", f)
		}
	}
	if rs[0].IDs.PCIBusID != "0000:1b:00.0" || rs[3].IDs.PCIBusID != "0000:2b:00.0" || rs[2].Message[len(rs[2].Message)-len("read+write >= 0.2"):] != "read+write >= 0.2" {
		t.Errorf("gpu0 %+v, gpu1 %+v, D2D %q", rs[0].IDs, rs[3].IDs, rs[2].Message)
	}
	// Again in the same process: the library is loaded once, peer access
	// is already enabled (CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED is fine).
	_, rs = measureFake(t, c, 10*time.Second)
	if check.Worst(rs) != check.OK || len(rs) != 8 {
		t.Errorf("second run: %q", summary(rs))
	}
}

// Everything on, through the real dlopen path with every peer pair: each
// result has a component of its own (the policy engine keys statuses by
// it), and the healthy node is all OK.
func TestFakeCUDAFullRunComponentsUnique(t *testing.T) {
	c := fullConfig(t, fakeConfig(t, fakeLibs.plain))
	t.Setenv("FAKECUDA_DEVICES", "2")
	figs, rs := measureFake(t, c, 20*time.Second)
	assertUniqueComponents(t, rs)
	assertFigures(t, figs)
	if got := components(rs); !slices.Equal(got, fullRunComponents) || check.Worst(rs) != check.OK {
		t.Errorf("results:\n%s\nwant all OK, components %q", strings.Join(summary(rs), "\n"), fullRunComponents)
	}
}

// A slow copy against a floor that matches the fake's name.
func TestFakeCUDASlow(t *testing.T) {
	tests := []struct {
		name, gbps, on string
		label, suffix  string  // of the FAIL messages
		value          float64 // expected figure, roughly (sleeping is not exact)
	}{
		{"H2D only", "2", "cuMemcpyHtoD_v2", "H2D", " GB/s < floor 48 (H100 80GB HBM3)", 2},
		{"peer copies", "2", "cuMemcpyPeer", "P2P", " GB/s < floor 335 (H100 80GB HBM3)", 2},
		{"memory", "2", "cuMemcpyDtoD_v2", "D2D", " GB/s read+write < floor 1500 (H100 80GB HBM3)", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fakeConfig(t, fakeLibs.plain)
			c.Size = "8MiB"
			// Only the slowed copy has a real floor; host memcpy clears the rest.
			c.Floor[0] = config.BandwidthFloor{Model: "NVIDIA H100 80GB HBM3", H2DGBps: 0.2, D2HGBps: 0.2, D2DGBps: 0.2, P2PGBps: 0.2}
			switch tt.on {
			case "cuMemcpyHtoD_v2":
				c.Floor[0].H2DGBps = 48
			case "cuMemcpyPeer":
				c.Floor[0].P2PGBps = 335
			default:
				c.Floor[0].D2DGBps = 1500
			}
			t.Setenv("FAKECUDA_DEVICES", "2")
			t.Setenv("FAKECUDA_NAME", "NVIDIA H100 80GB HBM3")
			t.Setenv("FAKECUDA_GBPS", tt.gbps)
			t.Setenv("FAKECUDA_GBPS_ON", tt.on)
			_, rs := measureFake(t, c, 20*time.Second)
			fails := 0
			for _, r := range rs {
				if r.Status == check.OK {
					continue
				}
				fails++
				var v float64
				_, err := fmt.Sscanf(strings.TrimPrefix(r.Message, tt.label+" "), "%g", &v)
				if r.Status != check.Fail || r.Action != check.ActionDrain || err != nil || !strings.HasPrefix(r.Message, tt.label+" ") ||
					!strings.HasSuffix(r.Message, tt.suffix) || v < tt.value*0.5 || v > tt.value*1.3 {
					t.Errorf("%s %s %s %q: want FAIL drain %q %.1f...%q", r.Component, r.Status, r.Action, r.Message, tt.label, tt.value, tt.suffix)
				}
			}
			if fails != 2 {
				t.Errorf("%d FAILs, want one per GPU or pair:\n%s", fails, strings.Join(summary(rs), "\n"))
			}
		})
	}
}

func TestFakeCUDANoPeerAccess(t *testing.T) {
	c := fakeConfig(t, fakeLibs.plain)
	c.Floor[0].P2PGBps = 1e6 // only a staged copy's worth: below any NVLink floor
	t.Setenv("FAKECUDA_DEVICES", "2")
	t.Setenv("FAKECUDA_NOPEER", "1")
	_, rs := measureFake(t, c, 10*time.Second)
	for _, r := range rs {
		if strings.Contains(r.Message, "P2P") && (r.Status != check.Fail || !strings.HasSuffix(r.Message, "(Fake GPU; no peer access)")) {
			t.Errorf("peer copy without access: %s %s %q", r.Component, r.Status, r.Message)
		}
	}
}

// Driver errors: never a FAIL, always what failed and the CUDA code.
func TestFakeCUDAErrors(t *testing.T) {
	tests := []struct {
		name, lib, devices, fail string
		want                     []string
	}{
		{"cuInit fails", fakeLibs.plain, "2", "cuInit:999", []string{"host ERROR cuInit: CUDA_ERROR_UNKNOWN (999)"}},
		{"driver names the error", fakeLibs.names, "2", "cuInit:802", []string{"host ERROR cuInit: FAKE_ERROR_802 (802)"}},
		{"no device", fakeLibs.plain, "0", "", []string{"host SKIP no CUDA device on this node"}},
		{"copy fails", fakeLibs.plain, "1", "cuMemcpyDtoD_v2:700", []string{
			"gpu0/h2d OK H2D", "gpu0/d2h OK D2H", "gpu0/d2d ERROR D2D: cuMemcpyDtoD_v2: CUDA_ERROR_ILLEGAL_ADDRESS (700)"}},
		{"pinned memory fails", fakeLibs.plain, "1", "cuMemHostAlloc:2", []string{
			"gpu0/h2d ERROR H2D: cuMemHostAlloc: CUDA_ERROR_OUT_OF_MEMORY (2)", "gpu0/d2h ERROR D2H: cuMemHostAlloc", "gpu0/d2d OK D2D"}},
		{"context fails", fakeLibs.plain, "2", "cuDevicePrimaryCtxRetain:201", []string{
			"gpu0 ERROR CUDA context: cuDevicePrimaryCtxRetain: CUDA_ERROR_INVALID_CONTEXT (201)",
			"gpu1 ERROR CUDA context: cuDevicePrimaryCtxRetain"}},
		{"peer enabling fails", fakeLibs.plain, "2", "cuCtxEnablePeerAccess:217", []string{
			"gpu0/h2d OK H2D", "gpu0-gpu1/p2p ERROR P2P: cuCtxEnablePeerAccess: CUDA_ERROR_PEER_ACCESS_UNSUPPORTED (217)"}},
		{"PCI id fails", fakeLibs.plain, "1", "cuDeviceGetPCIBusId:1", []string{
			"cuda0 ERROR cuDeviceGetPCIBusId: CUDA_ERROR_INVALID_VALUE (1)"}},
		{"missing library", "/nonexistent/libcuda.so.1", "1", "", []string{"host ERROR /nonexistent/libcuda.so.1: not found"}},
		{"missing library by name", "libcuda-gpuhc-test-absent.so.1", "1", "", []string{"host ERROR libcuda-gpuhc-test-absent.so.1: not found"}},
		{"not a library", "/etc/hostname", "1", "", []string{"host ERROR /etc/hostname: "}},
		{"driver too old", fakeLibs.old, "1", "", []string{"host ERROR " + fakeLibs.old + ": no symbol cuMemcpyPeer (driver too old?)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fakeConfig(t, tt.lib)
			t.Setenv("FAKECUDA_DEVICES", tt.devices)
			t.Setenv("FAKECUDA_FAIL", tt.fail)
			_, rs := measureFake(t, c, 10*time.Second)
			got := summary(rs)
			for _, w := range tt.want {
				if !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, w) }) {
					t.Errorf("missing %q in\n%s", w, strings.Join(got, "\n"))
				}
			}
			if check.Worst(rs) == check.Fail {
				t.Errorf("a driver error became a FAIL: %q", got)
			}
		})
	}
}

// A driver that never answers: the run ends at its deadline and says so.
func TestFakeCUDAHang(t *testing.T) {
	t.Run("in cuInit", func(t *testing.T) {
		c := fakeConfig(t, fakeLibs.plain)
		t.Setenv("FAKECUDA_HANG", "cuInit")
		start := time.Now()
		_, rs := measureFake(t, c, 500*time.Millisecond)
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("took %s", took)
		}
		if got := summary(rs); len(got) != 1 || !strings.HasPrefix(got[0], "host ERROR CUDA did not answer in 0.") ||
			!strings.HasSuffix(got[0], "s (cuInit); not measured") {
			t.Errorf("got %q", got)
		}
	})
	t.Run("in a copy", func(t *testing.T) {
		c := fakeConfig(t, fakeLibs.plain)
		t.Setenv("FAKECUDA_DEVICES", "2")
		t.Setenv("FAKECUDA_HANG", "cuMemcpyDtoH_v2")
		s := newSession(c, 1<<20, 3, gpuLookup, openCUDA)
		s.hangAfter = 200 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, rs, n := s.run(ctx)
		got := summary(rs)
		last := rs[len(rs)-1]
		if n != 2 || len(got) != 2 || !strings.HasPrefix(got[0], "gpu0/h2d OK H2D") ||
			!strings.HasPrefix(got[1], "gpu0/d2h FAIL CUDA did not answer in 1") || !strings.HasSuffix(got[1], "s (D2H copy)") ||
			last.Action != check.ActionReboot || last.IDs.Serial != "SN0" {
			t.Errorf("got %q (%d devices), last %+v", got, n, last)
		}
	})
}

// TestRealCUDA measures through the real driver, on a GPU node only:
//
//	GPUHC_REAL_CUDA=1 go test -run TestRealCUDA -v ./internal/bandwidth
//
// Every figure is logged, for calibrating the floors; a healthy node must
// come out all OK with the default configuration.
func TestRealCUDA(t *testing.T) {
	if os.Getenv("GPUHC_REAL_CUDA") == "" {
		t.Skip("set GPUHC_REAL_CUDA=1 on a node with NVIDIA GPUs and their driver")
	}
	c := config.Default().Checks.Bandwidth
	if p := os.Getenv("GPUHC_REAL_P2P"); p != "" {
		c.P2P = p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	start := time.Now()
	figs, rs := Measure(ctx, c, nil)
	t.Logf("took %s", time.Since(start).Round(time.Millisecond))
	for _, r := range rs {
		t.Logf("%-12s %-5s %s", r.Component, r.Status, r.Message)
	}
	for _, f := range figs {
		t.Logf("figure %s %s %.2f GB/s (floor %g)", f.Component, f.Kind, f.GBps, f.Floor)
	}
	if w := check.Worst(rs); w != check.OK {
		t.Errorf("worst status %s, want OK on a healthy node", w)
	}
}
