// Package fabric is the fabric.manager check: NVIDIA Fabric Manager on
// NVSwitch systems (docs/architecture.md#fabric-and-nvswitch). Where
// NVSwitches are on the PCI bus, or, on NVLink5 baseboards (B200, B300),
// where the IB discovery finds NVSwitch management devices (VPD
// SMDL=SW_MNG), it checks, reading /proc, /sys and the log under a root and
// executing nothing:
//
//  1. the nv-fabricmanager process is running, and on NVLink5 the NVLink
//     subnet manager (nvlsm) too;
//  2. its systemd unit is what runs it (see unit.go);
//  3. no fatal line in its log since the last run (see logscan.go and
//     record for the cursor, rotation and how long a failure holds);
//  4. with NVML, every GPU finished registering with the NVLink fabric.
//
// It reports one result, for component "host", naming the worst finding:
//
//	gpuhc: fabric.manager: host: nv-fabricmanager not running
package fabric

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/ib"
	"github.com/gpuhc/gpuhc/internal/pcibus"
	"github.com/gpuhc/gpuhc/internal/statefile"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// Name is the check's name.
const Name = "fabric.manager"

const componentHost = "host"

// restartSlack: a fatal line stamped more than this before Fabric Manager
// started is from an earlier instance. Stamps have whole seconds.
const restartSlack = 2 * time.Second

type manager struct {
	root  string
	devs  *ib.Gather
	pci   *pcibus.Gather
	cfg   config.FabricManager
	node  *gpu.Node
	state statefile.Dir
	loc   *time.Location // the log's time zone: the node's

	patterns []*regexp.Regexp
	budget   int64
	cfgErr   error
}

// NewManager is the fabric.manager check. root prefixes /proc, /sys, /run
// and the log paths ("/" on a node); devs is the run's scan of the RDMA
// devices, among which an NVLink5 board's NVSwitch management functions
// are found; n is the GPU side (nil, or a node without GPUs, leaves the
// fabric registration out); st keeps the log cursor and what must hold
// between runs (never written when st.ReadOnly, as in a dry run).
func NewManager(root string, devs *ib.Gather, pci *pcibus.Gather, c config.FabricManager, n *gpu.Node, st statefile.Dir) check.Check {
	m := &manager{root: root, devs: devs, pci: pci, cfg: c, node: n, state: st, loc: time.Local}
	for _, p := range c.FatalPatterns {
		re, err := regexp.Compile(p)
		if err != nil {
			m.cfgErr = fmt.Errorf("fatal pattern %q: %w", p, err)
			break
		}
		m.patterns = append(m.patterns, re)
	}
	if m.cfgErr == nil && c.Log != "" {
		b, err := config.ParseSize(c.MaxRead)
		switch {
		case err != nil:
			m.cfgErr = fmt.Errorf("max_read: %w", err)
		case b == 0:
			m.cfgErr = errors.New("max_read is 0")
		}
		m.budget = int64(min(b, config.MaxFabricMaxRead))
	}
	return m
}

func (m *manager) Name() string { return Name }

// finding is one part's verdict; the result is the worst of them.
type finding struct {
	status check.Status
	msg    string
}

type verdict struct {
	findings []finding
	ok       []string // what was found healthy, for the OK message
	notes    []string // remarks on an OK or WARN run
}

func (v *verdict) add(st check.Status, format string, a ...any) {
	v.findings = append(v.findings, finding{st, fmt.Sprintf(format, a...)})
}

func (m *manager) Run(ctx context.Context) []check.Result {
	ctx, cancel := check.FinishEarly(ctx)
	defer cancel()
	if m.cfgErr != nil {
		return result(check.Error, "bad configuration: %v", m.cfgErr)
	}
	fab, stop := m.findFabric(ctx)
	if stop != nil {
		return stop
	}

	var v verdict
	rec, err := load(m.state)
	if err != nil {
		v.add(check.Error, "cannot read the log cursor, starting at the log's end: %v", err)
	}
	inst, known := m.process(ctx, fab, &v)
	if f := rec.Fatal; f != nil && known {
		switch f.Instance {
		case inst.id:
		case unknownInstance:
			f.Instance = inst.id
		default:
			rec.Fatal = nil // Fabric Manager restarted, or the node rebooted
		}
	}
	running := known && inst.id != ""
	if running {
		m.unit(inst, &v)
	}
	m.log(ctx, &rec, inst, known, &v)
	if running {
		m.gpus(ctx, &rec, inst, &v)
	} else {
		rec.PendingUnder = ""
	}
	if err := m.state.Save(stateFile, rec); err != nil {
		v.add(check.Error, "cannot save the log cursor, lines will be read again: %v", err)
	}
	return v.result()
}

// findFabric says what manages the node's NVSwitches, or returns the
// result that ends the run (SKIP without any, ERROR when it cannot tell).
func (m *manager) findFabric(ctx context.Context) (fabric, []check.Result) {
	pci, err := m.pci.Bus(ctx)
	if err != nil {
		return fabric{}, result(check.Error, "cannot list PCI devices: %v", err)
	}
	if len(pci.Switches()) > 0 {
		return fabric{}, nil
	}
	// NVLink5 baseboards show no NVSwitch on the PCI bus: their switches
	// are reached through ConnectX management functions, which the IB
	// discovery sets apart.
	devs, err := m.devs.Devices(ctx)
	switch {
	case err != nil:
		return fabric{}, result(check.Error, "no NVSwitch on the PCI bus, and cannot list RDMA devices: %v", err)
	case len(devs.SwitchMgmt) > 0:
		f := fabric{nvlink5: true}
		for _, h := range devs.SwitchMgmt {
			f.mgmt = append(f.mgmt, h.Name)
		}
		return f, nil
	case len(devs.VPDErrs) > 0:
		// Whether an RDMA device manages NVSwitches is in its VPD: one
		// that cannot be read may be one.
		return fabric{}, result(check.Error, "no NVSwitch on the PCI bus, but %d RDMA devices' VPD unreadable: %v", len(devs.VPDErrs), devs.VPDErrs[0])
	case len(pci.Unreadable) > 0:
		return fabric{}, result(check.Error, "no NVSwitch found, but %v", pci.UnreadableErr())
	}
	return fabric{}, result(check.Skip, "no NVSwitch on the PCI bus, no NVSwitch management device (VPD SMDL=SW_MNG)")
}

// fabric is how the node's NVSwitches are managed.
type fabric struct {
	// nvlink5: through ConnectX functions (mgmt, their RDMA device
	// names) by Fabric Manager and the NVLink subnet manager together,
	// rather than as PCI devices by Fabric Manager alone.
	nvlink5 bool
	mgmt    []string
}

// process finds Fabric Manager, and on NVLink5 the subnet manager, in one
// pass over /proc; known is false when /proc could not tell whether
// Fabric Manager runs.
func (m *manager) process(ctx context.Context, fab fabric, v *verdict) (in instance, known bool) {
	name := m.cfg.Process
	names := []string{name}
	withSM := fab.nvlink5 && m.cfg.NVLSMProcess != ""
	if withSM {
		names = append(names, m.cfg.NVLSMProcess)
	}
	scs, err := scanProcs(ctx, m.root, names...)
	if err != nil {
		v.add(check.Error, "cannot list processes: %v", err)
		return instance{}, false
	}
	if fab.nvlink5 {
		v.ok = append(v.ok, fmt.Sprintf("NVLink5, NVSwitches managed through %s", strings.Join(fab.mgmt, ",")))
	}
	if withSM {
		m.subnetManager(scs[1], v)
	}
	sc := scs[0]
	p, ok := sc.oldest()
	switch {
	case !ok && sc.N > 0:
		v.add(check.Error, "%s not found, but %d processes unreadable: %v", name, sc.N, sc.First)
		return instance{}, false
	case !ok:
		v.add(check.Fail, "%s not running", name)
		return instance{}, true
	}
	btime, err := bootTime(m.root)
	if err != nil {
		v.add(check.Error, "cannot tell when %s started: %v", name, err)
	}
	in = newInstance(p, btime)
	in.procs = sc.procs
	v.ok = append(v.ok, fmt.Sprintf("%s running (pid %d)", name, p.pid))
	return in, true
}

// subnetManager judges the NVLink subnet manager. Without it Fabric
// Manager cannot program an NVLink5 fabric: it fails to start, or the
// GPUs never finish fabric registration, and CUDA answers
// cudaErrorSystemNotReady (NVIDIA Fabric Manager user guide, "Systems
// Using Fourth Generation NVSwitches"). Its absence is a FAIL of its own,
// named apart from Fabric Manager's.
func (m *manager) subnetManager(sc *procScan, v *verdict) {
	name := m.cfg.NVLSMProcess
	p, ok := sc.oldest()
	switch {
	case !ok && sc.N > 0:
		v.add(check.Error, "%s not found, but %d processes unreadable: %v", name, sc.N, sc.First)
		return
	case !ok:
		v.add(check.Fail, "%s not running (NVLink5 fabric: Fabric Manager needs the NVLink subnet manager)", name)
		return
	}
	v.ok = append(v.ok, fmt.Sprintf("%s running (pid %d)", name, p.pid))
	if m.cfg.NVLSMUnit == "" || !systemdBooted(m.root) {
		return
	}
	active, err := unitActive(m.root, m.cfg.NVLSMUnit, sc.procs)
	switch {
	case err != nil:
		v.add(check.Error, "cannot tell whether unit %s is active: %v", m.cfg.NVLSMUnit, err)
	case !active:
		v.add(check.Warn, "%s running, unit %s not active", name, m.cfg.NVLSMUnit)
	default:
		v.ok = append(v.ok, fmt.Sprintf("unit %s active", m.cfg.NVLSMUnit))
	}
}

// unit judges the systemd unit. Running outside it is a WARN, not a FAIL:
// jobs need the daemon, not the unit, and a daemon started by hand or by
// a container (the GPU operator's driver container runs it) serves the
// fabric as well; what is lost is only systemd restarting it, and a dead
// daemon FAILs on its own.
func (m *manager) unit(in instance, v *verdict) {
	if m.cfg.Unit == "" {
		return
	}
	if !systemdBooted(m.root) {
		v.notes = append(v.notes, "no systemd, unit not checked")
		return
	}
	active, err := unitActive(m.root, m.cfg.Unit, in.procs)
	switch {
	case err != nil:
		v.add(check.Error, "cannot tell whether unit %s is active: %v", m.cfg.Unit, err)
	case !active:
		v.add(check.Warn, "%s running, unit %s not active", m.cfg.Process, m.cfg.Unit)
	default:
		v.ok = append(v.ok, fmt.Sprintf("unit %s active", m.cfg.Unit))
	}
}

// log reads the log since the cursor and judges its fatal lines.
func (m *manager) log(ctx context.Context, rec *record, in instance, known bool, v *verdict) {
	if m.cfg.Log == "" {
		rec.Fatal = nil // log reading turned off since it was seen
		return
	}
	rotated := m.cfg.RotatedLog
	if rotated == "" {
		rotated = m.cfg.Log + ".1"
	}
	r := &logReader{path: at(m.root, m.cfg.Log), rotated: at(m.root, rotated),
		patterns: m.patterns, budget: m.budget, loc: m.loc}
	sc, err := r.scan(ctx, rec.Log)
	rec.Log = sc.next
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// No file at all is most often a Fabric Manager that logs to
		// syslog (LOG_USE_SYSLOG=1). An ERROR every run would keep the
		// node's healthy runs from counting towards resume; a WARN says
		// the same without that.
		v.add(check.Warn, "no Fabric Manager log at %s (logging to syslog? then set log = \"\")", m.cfg.Log)
	case err != nil:
		v.add(check.Error, "cannot read the Fabric Manager log: %v", err)
	}
	var current, earlier []fatalLine
	for _, l := range sc.fatal {
		if !in.started.IsZero() && !l.when.IsZero() && l.when.Before(in.started.Add(-restartSlack)) {
			earlier = append(earlier, l)
		} else {
			current = append(current, l)
		}
	}
	if len(earlier) > 0 {
		v.add(check.Warn, "fatal line in log from before %s restarted: %s", m.cfg.Process, quoteLines(earlier))
	}
	switch {
	case len(current) > 0:
		id := in.id
		if !known {
			id = unknownInstance
		}
		rec.Fatal = &sticky{Message: "fatal line in log: " + quoteLines(current), Instance: id}
		v.add(check.Fail, "%s", rec.Fatal.Message)
	case rec.Fatal != nil:
		v.add(check.Fail, "%s", rec.Fatal.Message)
	case err == nil:
		v.ok = append(v.ok, "log: no fatal lines")
	}
	switch {
	case sc.started:
		v.notes = append(v.notes, "log cursor started at the log's end")
	case sc.lost:
		v.notes = append(v.notes, "log rotated, its old tail not found")
	}
	if sc.skipped > 0 {
		v.notes = append(v.notes, fmt.Sprintf("skipped %d log bytes over max_read", sc.skipped))
	}
}

// quoteLines quotes the first fatal line, cut short, and counts the rest.
func quoteLines(ls []fatalLine) string {
	s := fmt.Sprintf("%q", sysread.Cut(printable(ls[0].text), 150))
	if len(ls) > 1 {
		s += fmt.Sprintf(" (+%d more)", len(ls)-1)
	}
	return s
}

// gpus judges the GPUs' fabric registration while Fabric Manager runs.
func (m *manager) gpus(ctx context.Context, rec *record, in instance, v *verdict) {
	pendingBefore := rec.PendingUnder == in.id
	rec.PendingUnder = ""
	if m.node == nil {
		return
	}
	reports, err := gpu.FabricReports(ctx, m.node)
	switch {
	case errors.Is(err, gpu.ErrNoGPUs):
		return
	case err != nil:
		v.add(check.Error, "cannot read GPU fabric state: %v", err)
		return
	}
	var pending, failed []string
	byState := map[string][]string{}
	completed := 0
	for _, r := range reports {
		comp := r.GPU.Component()
		switch {
		case r.Hung:
			v.add(check.Error, "cannot read GPU fabric state: NVML did not answer on %s", comp)
		case !r.Supported(): // PCIe or pre-Hopper: no fabric state to judge
		case r.Ret != nvml.SUCCESS:
			v.add(check.Error, "cannot read GPU fabric state of %s: %s", comp, nvml.ErrorString(r.Ret))
		case r.Pending():
			if len(byState[r.State]) == 0 {
				pending = append(pending, r.State)
			}
			byState[r.State] = append(byState[r.State], comp)
		case r.State != "completed":
			v.add(check.Error, "unknown fabric state on %s", comp)
		case r.Status != nvml.SUCCESS:
			failed = append(failed, fmt.Sprintf("%s (%s)", comp, nvml.ErrorString(r.Status)))
		default:
			completed++
		}
	}
	if len(failed) > 0 {
		v.add(check.Fail, "%s running but fabric registration failed: %s", m.cfg.Process, strings.Join(failed, ", "))
	}
	if len(pending) > 0 {
		groups := make([]string, 0, len(pending))
		for _, st := range pending {
			groups = append(groups, fmt.Sprintf("%s state %s", strings.Join(byState[st], ","), st))
		}
		list := strings.Join(groups, ", ")
		rec.PendingUnder = in.id
		if pendingBefore {
			v.add(check.Fail, "%s running but fabric not initialised: %s", m.cfg.Process, list)
		} else {
			v.add(check.Warn, "%s running, fabric not initialised yet: %s (first sighting)", m.cfg.Process, list)
		}
	}
	if completed > 0 && len(pending) == 0 && len(failed) == 0 {
		v.ok = append(v.ok, fmt.Sprintf("fabric completed on %d GPUs", completed))
	}
}

// result is the worst finding's message (all findings of that status,
// joined); remarks go with an OK or WARN verdict only.
func (v *verdict) result() []check.Result {
	worst := check.OK
	for _, f := range v.findings {
		worst = max(worst, f.status)
	}
	var parts []string
	if worst == check.OK {
		parts = v.ok
	}
	for _, f := range v.findings {
		if f.status == worst {
			parts = append(parts, f.msg)
		}
	}
	msg := strings.Join(parts, ", ")
	if worst != check.OK {
		msg = strings.Join(parts, "; ")
	}
	if worst <= check.Warn && len(v.notes) > 0 {
		msg += " (" + strings.Join(v.notes, "; ") + ")"
	}
	return result(worst, "%s", msg)
}

func result(st check.Status, format string, a ...any) []check.Result {
	act := check.ActionNone
	if st == check.Fail {
		act = check.ActionDrain
	}
	return []check.Result{{Check: Name, Component: componentHost, Status: st, Action: act,
		Message: printable(fmt.Sprintf(format, a...))}}
}
