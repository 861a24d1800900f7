package bandwidth

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

// goCUDA is a CUDA driver in Go for the session's logic: which copies run,
// how answers become results, what a stuck call looks like.
type goCUDA struct {
	n        int
	initErr  error
	names    []string
	gbps     map[string]float64 // kind -> rate; 100 GB/s by default
	fail     map[string]error   // "retain", "describe" or a kind -> error
	block    string             // a kind, "init" or "retain" that never returns
	ms       []float64          // returned as is when set
	noAccess bool
	reverse  bool     // CUDA's order is the reverse of the bus order
	copies   []string // "p2p 0->1"
	unblock  chan struct{}
}

func (g *goCUDA) wait(what string) {
	if g.block == what {
		<-g.unblock
	}
}

func (g *goCUDA) init() (int, error) {
	g.wait("init")
	return g.n, g.initErr
}

func (g *goCUDA) describe(i int) (string, string, error) {
	if err := g.fail["describe"]; err != nil {
		return "", "", err
	}
	name := "NVIDIA H100 80GB HBM3"
	if i < len(g.names) {
		name = g.names[i]
	}
	bus := i
	if g.reverse {
		bus = g.n - 1 - i
	}
	return name, fmt.Sprintf("0000:%02X:00.0", 0x1b+0x10*bus), nil
}

func (g *goCUDA) retain(i int) error {
	g.wait("retain")
	return g.fail["retain"]
}

func (g *goCUDA) release(int) error { return nil }

func (g *goCUDA) copy(kind string, dev, peer int, size uint64, iters int) ([]float64, bool, error) {
	g.copies = append(g.copies, fmt.Sprintf("%s %d->%d", kind, dev, peer))
	g.wait(kind)
	if err := g.fail[kind]; err != nil {
		return nil, false, err
	}
	if g.ms != nil {
		return g.ms, true, nil
	}
	rate := 100.0
	if r, ok := g.gbps[kind]; ok {
		rate = r
	}
	bytes := float64(size)
	if kind == KindD2D {
		bytes *= 2
	}
	ms := make([]float64, iters)
	for i := range ms {
		ms[i] = bytes / rate / 1e6
	}
	return ms, !g.noAccess, nil
}

// gpuLookup names the GPUs as gpu.Node would.
func gpuLookup(pci string) (string, check.IDs, bool) {
	var bus int
	if _, err := fmt.Sscanf(pci, "0000:%x:00.0", &bus); err != nil || (bus-0x1b)%0x10 != 0 {
		return "", check.IDs{}, false
	}
	i := (bus - 0x1b) / 0x10
	return fmt.Sprintf("gpu%d", i), check.IDs{GPUIndex: &i, Serial: fmt.Sprintf("SN%d", i), PCIBusID: pci}, true
}

func testConfig() config.Bandwidth {
	c := config.Default().Checks.Bandwidth
	c.Size = "1MiB"
	c.Iterations = 3
	return c
}

// summary writes results as "component STATUS message" for comparisons.
func summary(rs []check.Result) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s %s %s", r.Component, r.Status, r.Message))
	}
	return out
}

func runSession(t *testing.T, c config.Bandwidth, g *goCUDA, timeout time.Duration) ([]Figure, []check.Result, int) {
	t.Helper()
	size, err := config.ParseSize(c.Size)
	if err != nil {
		t.Fatal(err)
	}
	if g.unblock == nil {
		g.unblock = make(chan struct{})
	}
	t.Cleanup(func() { close(g.unblock) })
	s := newSession(c, size, c.Iterations, gpuLookup, func(string) (cudaAPI, error) { return g, nil })
	s.hangAfter = 50 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.run(ctx)
}

func TestSessionHealthyH100s(t *testing.T) {
	g := &goCUDA{n: 4, gbps: map[string]float64{KindH2D: 55.1, KindD2H: 54.2, KindD2D: 2100, KindP2P: 389}}
	figs, rs, n := runSession(t, testConfig(), g, 5*time.Second)
	if n != 4 {
		t.Errorf("device count %d", n)
	}
	want := []string{
		"gpu0/h2d OK H2D 55.1 GB/s >= 48", "gpu0/d2h OK D2H 54.2 GB/s >= 48", "gpu0/d2d OK D2D 2100.0 GB/s read+write >= 1500",
		"gpu1/h2d OK H2D 55.1 GB/s >= 48", "gpu1/d2h OK D2H 54.2 GB/s >= 48", "gpu1/d2d OK D2D 2100.0 GB/s read+write >= 1500",
		"gpu2/h2d OK H2D 55.1 GB/s >= 48", "gpu2/d2h OK D2H 54.2 GB/s >= 48", "gpu2/d2d OK D2D 2100.0 GB/s read+write >= 1500",
		"gpu3/h2d OK H2D 55.1 GB/s >= 48", "gpu3/d2h OK D2H 54.2 GB/s >= 48", "gpu3/d2d OK D2D 2100.0 GB/s read+write >= 1500",
		"gpu0-gpu1/p2p OK P2P 389.0 GB/s >= 335", "gpu1-gpu2/p2p OK P2P 389.0 GB/s >= 335",
		"gpu2-gpu3/p2p OK P2P 389.0 GB/s >= 335", "gpu3-gpu0/p2p OK P2P 389.0 GB/s >= 335",
	}
	if got := summary(rs); !slices.Equal(got, want) {
		t.Errorf("results:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Figures keep the bare component, the kind apart.
	if len(figs) != len(want) || figs[2].Component != "gpu0" || figs[2].Kind != KindD2D || math.Abs(figs[2].GBps-2100) > 1e-6 ||
		figs[2].Floor != 1500 || figs[12].Component != "gpu0-gpu1" || figs[12].Kind != KindP2P {
		t.Errorf("figures: %+v", figs)
	}
	if rs[0].IDs.Serial != "SN0" || rs[12].IDs.Serial != "" {
		t.Errorf("ids: gpu0 %+v, pair %+v", rs[0].IDs, rs[12].IDs)
	}
}

// CUDA's fastest-first order is not the bus order; the ring and the
// results follow the bus, as GPU names do.
func TestSessionBusOrder(t *testing.T) {
	g := &goCUDA{n: 3, reverse: true}
	_, rs, _ := runSession(t, testConfig(), g, 5*time.Second)
	var comps []string
	for _, r := range rs {
		if c, _, _ := strings.Cut(r.Component, "/"); !slices.Contains(comps, c) {
			comps = append(comps, c)
		}
	}
	if want := []string{"gpu0", "gpu1", "gpu2", "gpu0-gpu1", "gpu1-gpu2", "gpu2-gpu0"}; !slices.Equal(comps, want) {
		t.Errorf("components %q, want %q", comps, want)
	}
	if g.copies[0] != "h2d 2->0" {
		t.Errorf("first copy %q, want gpu0 (CUDA device 2)", g.copies[0])
	}
}

func TestSessionPairs(t *testing.T) {
	tests := []struct {
		mode string
		n    int
		want []string
	}{
		{"ring", 2, []string{"p2p 0->1", "p2p 1->0"}},
		{"ring", 3, []string{"p2p 0->1", "p2p 1->2", "p2p 2->0"}},
		{"all", 3, []string{"p2p 0->1", "p2p 0->2", "p2p 1->0", "p2p 1->2", "p2p 2->0", "p2p 2->1"}},
		{"off", 3, nil},
		{"ring", 1, nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.mode, tt.n), func(t *testing.T) {
			c := testConfig()
			c.P2P = tt.mode
			g := &goCUDA{n: tt.n}
			runSession(t, c, g, 5*time.Second)
			var p2p []string
			for _, cp := range g.copies {
				if strings.HasPrefix(cp, "p2p") {
					p2p = append(p2p, cp)
				}
			}
			if !slices.Equal(p2p, tt.want) {
				t.Errorf("peer copies %q, want %q", p2p, tt.want)
			}
		})
	}
}

// Each fault the in-process measurement claims to catch, and each way it
// can fail to check.
func TestSessionFaults(t *testing.T) {
	illegal := &cudaError{Op: "cuMemcpyDtoD_v2", Code: 700}
	tests := []struct {
		name    string
		g       *goCUDA
		timeout time.Duration
		want    []string // results that must be among the output
		count   int      // device count reported
	}{
		{"slow host link", &goCUDA{n: 2, gbps: map[string]float64{KindH2D: 24.8}}, time.Second,
			[]string{"gpu0/h2d FAIL H2D 24.8 GB/s < floor 48 (H100 80GB HBM3)", "gpu0/d2h OK D2H 100.0 GB/s >= 48"}, 2},
		{"slow NVLink", &goCUDA{n: 2, gbps: map[string]float64{KindP2P: 150}}, time.Second,
			[]string{"gpu0-gpu1/p2p FAIL P2P 150.0 GB/s < floor 335 (H100 80GB HBM3)"}, 2},
		{"no peer access", &goCUDA{n: 2, gbps: map[string]float64{KindP2P: 21}, noAccess: true}, time.Second,
			[]string{"gpu1-gpu0/p2p FAIL P2P 21.0 GB/s < floor 335 (H100 80GB HBM3; no peer access)"}, 2},
		{"slow memory", &goCUDA{n: 1, gbps: map[string]float64{KindD2D: 900}}, time.Second,
			[]string{"gpu0/d2d FAIL D2D 900.0 GB/s read+write < floor 1500 (H100 80GB HBM3)"}, 1},
		{"model without floor", &goCUDA{n: 1, names: []string{"NVIDIA RTX A6000"}, gbps: map[string]float64{KindH2D: 3}}, time.Second,
			[]string{"gpu0/h2d OK H2D 3.0 GB/s (no floor for NVIDIA RTX A6000)"}, 1},
		{"copy error", &goCUDA{n: 1, fail: map[string]error{KindD2D: illegal}}, time.Second,
			[]string{"gpu0/d2d ERROR D2D: cuMemcpyDtoD_v2: CUDA_ERROR_ILLEGAL_ADDRESS (700)", "gpu0/h2d OK H2D 100.0 GB/s >= 48"}, 1},
		{"no device", &goCUDA{initErr: &cudaError{Op: "cuInit", Code: 100}}, time.Second,
			[]string{"host SKIP no CUDA device on this node"}, 0},
		{"no device counted", &goCUDA{n: 0}, time.Second, []string{"host SKIP no CUDA device on this node"}, 0},
		{"init error", &goCUDA{initErr: &cudaError{Op: "cuInit", Code: 802}}, time.Second,
			[]string{"host ERROR cuInit: CUDA_ERROR_SYSTEM_NOT_READY (802)"}, -1},
		{"absurd count", &goCUDA{n: 1000}, time.Second, []string{"host ERROR cuDeviceGetCount: 1000 devices is not a count"}, -1},
		{"context error", &goCUDA{n: 1, fail: map[string]error{"retain": &cudaError{Op: "cuDevicePrimaryCtxRetain", Code: 2}}}, time.Second,
			[]string{"gpu0 ERROR CUDA context: cuDevicePrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY (2)"}, 1},
		{"describe error", &goCUDA{n: 1, fail: map[string]error{"describe": &cudaError{Op: "cuDeviceGetName", Code: 999, Name: "CUDA_ERROR_UNKNOWN"}}}, time.Second,
			[]string{"cuda0 ERROR cuDeviceGetName: CUDA_ERROR_UNKNOWN (999)"}, 1},
		{"garbage timing", &goCUDA{n: 1, ms: []float64{1, math.NaN(), 1}}, time.Second,
			[]string{"gpu0/h2d ERROR H2D: CUDA timed the copies at [1 NaN 1] ms, not a measurement"}, 1},
		{"zero timing", &goCUDA{n: 1, ms: []float64{0, 0, 0}}, time.Second,
			[]string{"gpu0/d2d ERROR D2D: CUDA timed the copies at [0 0 0] ms, not a measurement"}, 1},
		{"too few timings", &goCUDA{n: 1, ms: []float64{1}}, time.Second,
			[]string{"gpu0/d2h ERROR D2H: CUDA timed the copies at [1] ms, not a measurement"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rs, n := runSession(t, testConfig(), tt.g, tt.timeout)
			got := summary(rs)
			for _, w := range tt.want {
				if !slices.Contains(got, w) {
					t.Errorf("missing %q in\n%s", w, strings.Join(got, "\n"))
				}
			}
			if n != tt.count {
				t.Errorf("device count %d, want %d", n, tt.count)
			}
		})
	}
}

// A run cut short says what it was doing: a copy stuck past hangAfter is
// a FAIL (the GPU cannot complete work), the driver starting is an ERROR,
// and a run that merely ran out of time is an ERROR.
func TestSessionCutShort(t *testing.T) {
	tests := []struct {
		name      string
		block     string
		hangAfter time.Duration
		want      string
		action    check.Action
	}{
		{"copy hangs", KindH2D, 50 * time.Millisecond, "gpu0/h2d FAIL CUDA did not answer in", check.ActionReboot},
		{"peer copy hangs", KindP2P, 50 * time.Millisecond, "gpu0-gpu1/p2p FAIL CUDA did not answer in", check.ActionReboot},
		{"init hangs", "init", 50 * time.Millisecond, "host ERROR CUDA did not answer in", check.ActionNone},
		{"context creation hangs", "retain", 50 * time.Millisecond, "host ERROR CUDA did not answer in", check.ActionNone},
		{"copy merely slow", KindD2H, time.Hour, "host ERROR out of time after 1 of 8 measurements (D2H copy on gpu0", check.ActionNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testConfig()
			g := &goCUDA{n: 2, block: tt.block, unblock: make(chan struct{})}
			size, _ := config.ParseSize(c.Size)
			s := newSession(c, size, c.Iterations, gpuLookup, func(string) (cudaAPI, error) { return g, nil })
			s.hangAfter = tt.hangAfter
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, rs, _ := s.run(ctx)
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("run took %s after its deadline", took)
			}
			last := rs[len(rs)-1]
			if got := summary(rs[len(rs)-1:])[0]; !strings.HasPrefix(got, tt.want) || last.Action != tt.action {
				t.Errorf("last result %q %s, want %q %s", got, last.Action, tt.want, tt.action)
			}
			// The abandoned worker must add nothing once it gets going again.
			n := len(rs)
			close(g.unblock)
			time.Sleep(50 * time.Millisecond)
			s.mu.Lock()
			defer s.mu.Unlock()
			if len(s.results) > n {
				t.Errorf("worker added results after the run ended: %v", summary(s.results[n:]))
			}
		})
	}
}

func TestSessionOutOfTimeBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	opened := false
	s := newSession(testConfig(), 1<<20, 3, nil, func(string) (cudaAPI, error) { opened = true; return nil, errors.New("x") })
	_, rs, n := s.run(ctx)
	if got := summary(rs); !slices.Equal(got, []string{"host ERROR not run: out of time"}) || n != -1 || opened {
		t.Errorf("got %q, count %d, library opened %v", got, n, opened)
	}
}

func TestSessionLoadError(t *testing.T) {
	c := testConfig()
	s := newSession(c, 1<<20, 3, nil, func(p string) (cudaAPI, error) {
		return nil, &loadError{Path: p, Msg: "not found"}
	})
	_, rs, n := s.run(context.Background())
	if got := summary(rs); !slices.Equal(got, []string{"host ERROR libcuda.so.1: not found"}) || n != -1 {
		t.Errorf("got %q, count %d", got, n)
	}
}

func TestSessionPanicIsAnError(t *testing.T) {
	s := newSession(testConfig(), 1<<20, 3, nil, func(string) (cudaAPI, error) { panic("driver bug") })
	_, rs, _ := s.run(context.Background())
	if got := summary(rs); len(got) != 1 || !strings.HasPrefix(got[0], "host ERROR in-process measurement failed: driver bug") {
		t.Errorf("got %q", got)
	}
}

func TestMeasureDisabledAndNothingToDo(t *testing.T) {
	c := testConfig()
	c.Enabled = false
	_, rs := Measure(context.Background(), c, nil)
	if got := summary(rs); !slices.Equal(got, []string{"host SKIP disabled in the configuration"}) || rs[0].Check != Name {
		t.Errorf("disabled: %q", got)
	}
	c = testConfig()
	c.Libcuda = ""
	_, rs = Measure(context.Background(), c, nil)
	if got := summary(rs); !slices.Equal(got, []string{"host SKIP nothing to measure: libcuda and every tool are off"}) {
		t.Errorf("nothing: %q", got)
	}
}

func TestCUDAErrorText(t *testing.T) {
	tests := []struct {
		err  *cudaError
		want string
	}{
		{&cudaError{Op: "cuInit", Code: 100}, "cuInit: CUDA_ERROR_NO_DEVICE (100)"},
		{&cudaError{Op: "cuInit", Code: 12345}, "cuInit: CUDA error (12345)"},
		{&cudaError{Op: "cuInit", Code: 3, Name: "DRIVER_NAME"}, "cuInit: DRIVER_NAME (3)"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
	var le error = &loadError{Path: "x", Msg: "y", err: errors.ErrUnsupported}
	if !errors.Is(le, errors.ErrUnsupported) {
		t.Error("loadError does not unwrap")
	}
}
