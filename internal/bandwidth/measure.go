package bandwidth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/pciaddr"
)

// cudaAPI is the part of the CUDA driver the measurement uses; the cgo
// build implements it with the real library, tests with fakes. Every
// call may block for as long as the driver does.
type cudaAPI interface {
	// init is cuInit and cuDeviceGetCount.
	init() (int, error)
	// describe gives a device's name and PCI bus id.
	describe(ordinal int) (name, pci string, err error)
	// retain and release hold the device's primary context.
	retain(ordinal int) error
	release(ordinal int) error
	// copy times iters copies of size bytes after a warm-up and returns
	// the milliseconds of each; peer is used by KindP2P only, and
	// peerAccess says whether dev reached peer directly.
	copy(kind string, dev, peer int, size uint64, iters int) (ms []float64, peerAccess bool, err error)
}

// loadError is the driver library failing to load.
type loadError struct {
	Path, Msg string
	err       error
}

func (e *loadError) Error() string { return e.Path + ": " + e.Msg }
func (e *loadError) Unwrap() error { return e.err }

// cudaError is a CUDA driver call failing.
type cudaError struct {
	Op   string
	Code int
	Name string // the driver's name for Code, when it has one
}

func (e *cudaError) Error() string {
	name := e.Name
	if name == "" {
		name = cudaErrorNames[e.Code]
	}
	if name == "" {
		name = "CUDA error"
	}
	return fmt.Sprintf("%s: %s (%d)", e.Op, name, e.Code)
}

// cudaErrorNoDevice is cuInit's answer on a node without a usable GPU.
const cudaErrorNoDevice = 100

// cudaErrorNames names the driver errors gpuhc is likely to meet, for a
// driver without cuGetErrorName (cuda.h's CUresult values).
var cudaErrorNames = map[int]string{
	1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY", 3: "CUDA_ERROR_NOT_INITIALIZED",
	4: "CUDA_ERROR_DEINITIALIZED", 34: "CUDA_ERROR_STUB_LIBRARY", 46: "CUDA_ERROR_DEVICE_UNAVAILABLE",
	100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE", 201: "CUDA_ERROR_INVALID_CONTEXT",
	214: "CUDA_ERROR_ECC_UNCORRECTABLE", 217: "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
	220: "CUDA_ERROR_NVLINK_UNCORRECTABLE", 400: "CUDA_ERROR_INVALID_HANDLE",
	700: "CUDA_ERROR_ILLEGAL_ADDRESS", 704: "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
	719: "CUDA_ERROR_LAUNCH_FAILED", 800: "CUDA_ERROR_NOT_PERMITTED", 801: "CUDA_ERROR_NOT_SUPPORTED",
	802: "CUDA_ERROR_SYSTEM_NOT_READY", 803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", 999: "CUDA_ERROR_UNKNOWN",
}

// maxDevices bounds cuDeviceGetCount's answer: more is not a real node.
const maxDevices = 64

// minHang is the least time a copy must be stuck before it counts as a
// hang (FAIL) rather than a slow run that ran out of time (ERROR).
const minHang = 5 * time.Second

// device is one CUDA device as the measurement names and judges it.
type device struct {
	ordinal   int
	component string
	ids       check.IDs
	model     model
}

// step is what the worker is doing, so that a run cut short can say so.
type step struct {
	what      string // "H2D copy", "cuInit"
	component string // bare: "gpu0", "gpu0-gpu1"
	kind      string // of a copy
	ids       check.IDs
	copying   bool // a timed copy: stuck here long enough is a hang
	start     time.Time
	returned  bool // the driver answered; the worker is between steps
}

// session is one in-process measurement. The driver is called from a
// worker goroutine; if ctx ends first the worker is abandoned (it stops
// at its next step, or never if the driver never returns) and the run
// reports what it has.
type session struct {
	cfg       config.Bandwidth
	size      uint64
	iters     int
	lookup    Lookup
	open      func(path string) (cudaAPI, error)
	hangAfter time.Duration

	mu       sync.Mutex
	stopped  bool
	cur      step
	figures  []Figure
	results  []check.Result
	done     int // measurements finished
	planned  int
	devCount int // CUDA devices, -1 until counted
}

func newSession(c config.Bandwidth, size uint64, iters int, lookup Lookup, open func(string) (cudaAPI, error)) *session {
	// A copy step moves (iters+1)*size bytes. At 1 GB/s, far below any
	// floor, it would still be done in this time: beyond it the driver
	// is not slow but stuck.
	atOneGBps := time.Duration(float64(size) * float64(iters+1))
	return &session{
		cfg: c, size: size, iters: iters, lookup: lookup, open: open,
		hangAfter: max(minHang, atOneGBps), devCount: -1,
	}
}

// run measures within ctx. It returns the figures, the results and the
// number of CUDA devices (-1 when they were not counted).
func (s *session) run(ctx context.Context) ([]Figure, []check.Result, int) {
	if ctx.Err() != nil {
		return nil, []check.Result{errorf(componentHost, "not run: out of time")}, -1
	}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer func() {
			if p := recover(); p != nil {
				s.add(errorf(componentHost, "in-process measurement failed: %v", p))
			}
		}()
		s.work()
	}()
	select {
	case <-finished:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	figs := append([]Figure(nil), s.figures...)
	rs := append([]check.Result(nil), s.results...)
	select {
	case <-finished:
	default:
		s.stopped = true
		// The worker may have reported its own end (a host ERROR) just as
		// time ran out: its word is the better one, and a second result
		// under the same component would read as flapping.
		cut := s.cutShort()
		if !slices.ContainsFunc(rs, func(r check.Result) bool { return r.Component == cut.Component }) {
			rs = append(rs, cut)
		}
	}
	return figs, rs, s.devCount
}

// cutShort reports a run that ctx ended, by what was in flight: a timed
// copy stuck for longer than any slow link explains is a hang (FAIL, as
// for NVML: a GPU that does not complete a copy cannot run a job); the
// driver still starting is ERROR (without persistence mode it takes tens
// of seconds, and gpu.* reports a dead driver); otherwise the time simply
// ran out (ERROR).
func (s *session) cutShort() check.Result {
	c := s.cur
	if c.start.IsZero() {
		return errorf(componentHost, "not run: out of time")
	}
	took := time.Since(c.start).Round(100 * time.Millisecond).Seconds()
	switch {
	case c.copying && !c.returned && time.Since(c.start) >= s.hangAfter:
		return check.Result{Component: figureComponent(c.component, c.kind), IDs: c.ids, Status: check.Fail, Action: check.ActionReboot,
			Message: fmt.Sprintf("CUDA did not answer in %gs (%s)", took, c.what)}
	case !c.copying && !c.returned:
		return errorf(componentHost, "CUDA did not answer in %gs (%s); not measured", took, c.what)
	}
	return errorf(componentHost, "out of time after %d of %d measurements (%s on %s for %gs); raise checks.bandwidth.timeout or lower size",
		s.done, s.planned, c.what, c.component, took)
}

// begin records the next step; false when the run was abandoned.
func (s *session) begin(st step) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st.start = time.Now()
	s.cur = st
	return !s.stopped
}

// returned notes that the driver answered the step in flight.
func (s *session) returned() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur.returned = true
}

func (s *session) add(r check.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped {
		s.results = append(s.results, r)
	}
}

func (s *session) addFigure(f Figure, r check.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped {
		s.figures = append(s.figures, f)
		s.results = append(s.results, r)
		s.done++
	}
}

func (s *session) work() {
	path := s.cfg.Libcuda
	if !s.begin(step{what: "loading " + path}) {
		return
	}
	api, err := s.open(path)
	if err != nil {
		s.add(errorf(componentHost, "%s", printable(err.Error())))
		return
	}
	if !s.begin(step{what: "cuInit"}) {
		return
	}
	n, err := api.init()
	var ce *cudaError
	switch {
	case errors.As(err, &ce) && ce.Code == cudaErrorNoDevice, err == nil && n == 0:
		s.add(check.Result{Component: componentHost, Status: check.Skip, Message: "no CUDA device on this node"})
		s.setCount(0)
		return
	case err != nil:
		s.add(errorf(componentHost, "%s", printable(err.Error())))
		return
	case n < 0 || n > maxDevices:
		s.add(errorf(componentHost, "cuDeviceGetCount: %d devices is not a count", n))
		return
	}
	s.setCount(n)
	devs := s.enumerate(api, n)
	// CUDA enumerates fastest first unless told otherwise; in bus order
	// the ring follows nvidia-smi's numbering, and nvbandwidth's (run
	// with CUDA_DEVICE_ORDER=PCI_BUS_ID).
	slices.SortStableFunc(devs, func(a, b device) int { return strings.Compare(a.ids.PCIBusID, b.ids.PCIBusID) })
	defer s.releaseAll(api, devs)
	pairs := s.pairs(devs)
	s.mu.Lock()
	s.planned = 3*len(devs) + len(pairs)
	s.mu.Unlock()
	for _, d := range devs {
		for _, k := range []string{KindH2D, KindD2H, KindD2D} {
			if !s.measure(api, k, d, device{}) {
				return
			}
		}
	}
	for _, p := range pairs {
		if !s.measure(api, KindP2P, p[0], p[1]) {
			return
		}
	}
}

func (s *session) setCount(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.devCount = n
}

// enumerate names each device and holds its context; a device that
// fails either gets an ERROR and is left out.
func (s *session) enumerate(api cudaAPI, n int) []device {
	var devs []device
	for i := range n {
		d := device{ordinal: i, component: "cuda" + strconv.Itoa(i)}
		if !s.begin(step{what: "cuDeviceGetName", component: d.component}) {
			return devs
		}
		name, pci, err := api.describe(i)
		if err != nil {
			s.add(errorf(d.component, "%s", printable(err.Error())))
			continue
		}
		d.model = modelFor(floors(s.cfg), name)
		if pci != "" {
			d.ids.PCIBusID = pciaddr.Normalize(pci)
			if s.lookup != nil {
				if comp, ids, ok := s.lookup(d.ids.PCIBusID); ok && comp != "" {
					d.component, d.ids = comp, ids
				}
			}
		}
		if !s.begin(step{what: "creating a CUDA context", component: d.component}) {
			return devs
		}
		if err := api.retain(i); err != nil {
			s.add(errorf(d.component, "CUDA context: %s", printable(err.Error())))
			continue
		}
		devs = append(devs, d)
	}
	return devs
}

func (s *session) releaseAll(api cudaAPI, devs []device) {
	for _, d := range devs {
		if !s.begin(step{what: "releasing a CUDA context", component: d.component}) {
			return
		}
		// A failed release changes nothing that was measured.
		_ = api.release(d.ordinal)
	}
}

// pairs lists the GPU pairs for peer copies: every ordered pair, or each
// GPU to the next, wrapping around.
func (s *session) pairs(devs []device) [][2]device {
	n := len(devs)
	var out [][2]device
	switch {
	case n < 2 || s.cfg.P2P == "off":
	case s.cfg.P2P == "all":
		for _, a := range devs {
			for _, b := range devs {
				if a.ordinal != b.ordinal {
					out = append(out, [2]device{a, b})
				}
			}
		}
	default: // "ring"; with two GPUs, both directions
		for i, a := range devs {
			out = append(out, [2]device{a, devs[(i+1)%n]})
		}
	}
	return out
}

// measure times one kind of copy and judges it; false when the run was
// abandoned.
func (s *session) measure(api cudaAPI, kind string, d, peer device) bool {
	label := kindLabel(kind)
	comp, ids := d.component, d.ids
	if kind == KindP2P {
		// A pair's figure belongs to neither GPU alone.
		comp, ids = d.component+"-"+peer.component, check.IDs{}
	}
	if !s.begin(step{what: label + " copy", component: comp, kind: kind, ids: ids, copying: true}) {
		return false
	}
	ms, access, err := api.copy(kind, d.ordinal, peer.ordinal, s.size, s.iters)
	s.returned()
	// A copy's ERROR shares its figure's component: "gpu0/d2d" going from
	// ERROR to OK is a recovery, not a new component.
	rc := figureComponent(comp, kind)
	if err != nil {
		s.add(check.Result{Component: rc, IDs: ids, Status: check.Error, Action: check.ActionNone,
			Message: label + ": " + printable(err.Error())})
		s.countDone()
		return true
	}
	bytes := float64(s.size)
	j := d.model.judge(comp, kind, label, 0)
	j.ids = ids
	if kind == KindD2D {
		// Read and write each move size bytes, as bandwidthTest counts.
		bytes *= 2
		j.counts = "read+write"
	}
	if kind == KindP2P && !access {
		j.note = "no peer access"
	}
	rates := make([]float64, len(ms))
	for i, t := range ms {
		rates[i] = bytes / (t * 1e6) // ms -> GB/s
	}
	v, ok := median(rates)
	if len(ms) != s.iters || !ok {
		s.add(check.Result{Component: rc, IDs: ids, Status: check.Error, Action: check.ActionNone,
			Message: fmt.Sprintf("%s: CUDA timed the copies at %v ms, not a measurement", label, ms)})
		s.countDone()
		return true
	}
	j.value = v
	f, r := j.verdict()
	s.addFigure(f, r)
	return true
}

func (s *session) countDone() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done++
}
