package ib

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuhc/gpuhc/internal/bootid"
	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/statefile"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// countersStateFile keeps each port's error counters for the next run.
const countersStateFile = "ib-counters.json"

// portCounter is one judged counter of ports/<n>/counters/.
type portCounter struct {
	name  string
	limit func(config.IBCounters) int64
}

// top is the value the counter stops at: IBA PortCounters error counters
// do not wrap, they stay at all-ones until cleared, and the kernel reads
// them at their field's width (config.IBCounterBits).
func (pc portCounter) top() uint64 { return 1<<config.IBCounterBits(pc.name) - 1 }

var portCounters = []portCounter{
	{"symbol_error", func(c config.IBCounters) int64 { return c.SymbolErrorMax }},
	{"link_downed", func(c config.IBCounters) int64 { return c.LinkDownedMax }},
	{"link_error_recovery", func(c config.IBCounters) int64 { return c.LinkErrorRecoveryMax }},
	{"port_rcv_errors", func(c config.IBCounters) int64 { return c.PortRcvErrorsMax }},
	{"port_rcv_remote_physical_errors", func(c config.IBCounters) int64 { return c.PortRcvRemotePhysicalErrorsMax }},
	{"port_xmit_discards", func(c config.IBCounters) int64 { return c.PortXmitDiscardsMax }},
	{"local_link_integrity_errors", func(c config.IBCounters) int64 { return c.LocalLinkIntegrityErrorsMax }},
	{"excessive_buffer_overrun_errors", func(c config.IBCounters) int64 { return c.ExcessiveBufferOverrunErrorsMax }},
}

// countersState is ib-counters.json. Counters restart at a reboot, so a
// record from another boot is no baseline. Ports are keyed "mlx5_0/1";
// only ports seen in the last run are kept, which bounds the record.
type countersState struct {
	BootID string                       `json:"boot_id"`
	Ports  map[string]map[string]uint64 `json:"ports"`
	// Saturated lists, per port, the counters that reached their top
	// under a baseline below it (a FAIL then): they WARN while they stay
	// there. A counter at its top that is not listed was found there
	// with no baseline (or by a gpuhc that kept no list), was warned
	// about on first sight, and is quiet.
	Saturated map[string][]string `json:"saturated,omitempty"`
}

type countersCheck struct {
	root  string
	devs  *Gather
	cfg   config.IB
	state statefile.Dir
	boot  *bootid.Once
}

// NewCounters checks that no port error counter of a physical RDMA device
// grew by more than its limit since the previous run. The first run, a
// new boot and a counter that went down (driver reload, perfquery -R)
// take a new baseline. The counters stop at their width's all-ones: one
// that got there since the last run by growing past its limit FAILs; one
// that got there within its limit, or was found there with no baseline,
// WARNs once (a healthy node's 4-bit counter reaches 15 after every
// reboot). Either way it is quiet while it stays there, so that old
// errors keep neither a node drained nor an alert firing. A device without a PMA
// ("N/A (no PMA)", iWARP) is SKIP. devs is the run's scan of the RDMA
// devices; their counters and the boot id are read under root.
func NewCounters(root string, devs *Gather, c config.IB, st statefile.Dir, opts ...CountersOption) check.Check {
	cc := &countersCheck{root: root, devs: devs, cfg: c, state: st, boot: bootid.New(root)}
	for _, o := range opts {
		o(cc)
	}
	return cc
}

func (c *countersCheck) Name() string { return nameCounters }

// CountersOption adjusts NewCounters.
type CountersOption func(*countersCheck)

// WithBoot gives the check the run's one read of the boot id.
func WithBoot(b *bootid.Once) CountersOption { return func(c *countersCheck) { c.boot = b } }

func (c *countersCheck) Run(ctx context.Context) []check.Result {
	devs, stop, ok := listHCAs(ctx, c.devs, nameCounters)
	if !ok {
		return []check.Result{stop}
	}
	all := devs.HCAs
	incl := included(all, c.cfg.Exclude)
	// A virtual device's counters are its physical port's, or its own
	// share of them, and it may be gone after a reboot: not judged.
	hcas, virt := physical(incl)
	if len(hcas) == 0 {
		// Nothing to judge, so nothing else (the boot id) may fail the run.
		return c.noDevices(noDevices(nameCounters, len(all)-len(incl), virt))
	}
	var out []check.Result
	boot, bootErr := c.boot.Get()
	if bootErr != nil {
		// Without a boot id a reboot cannot be told, so every port takes
		// a new baseline rather than risk comparing with another boot.
		out = append(out, result(nameCounters, componentHost, check.Error, "cannot read boot id, counters re-baselined: %s", errText(bootErr)))
	}
	var prev countersState
	// A corrupt record only costs one run of deltas; the save below
	// replaces it.
	if c.state.Load(countersStateFile, &prev) != nil || bootErr != nil || prev.BootID != boot {
		prev = countersState{}
	}
	next := countersState{BootID: boot, Ports: map[string]map[string]uint64{}}
	for _, h := range hcas {
		if h.PortsErr != nil { // its counters cannot be found: say so, never "no errors"
			r := result(nameCounters, h.Name, check.Error, "cannot list its ports: %s", errText(h.PortsErr))
			r.IDs.PCIBusID = h.PCIAddr
			out = append(out, r)
		}
		for _, p := range h.Ports {
			if ctx.Err() != nil {
				return append(out, interrupted(ctx, nameCounters))
			}
			comp := portName(h.Name, p.Num)
			pv := c.judgePort(h.Name, p.Num, prev.Ports[comp], prev.Saturated[comp])
			pv.result.IDs.PCIBusID = h.PCIAddr
			out = append(out, pv.result)
			if pv.now != nil {
				next.Ports[comp] = pv.now
			}
			if len(pv.saturated) > 0 {
				if next.Saturated == nil {
					next.Saturated = map[string][]string{}
				}
				next.Saturated[comp] = pv.saturated
			}
		}
	}
	if next.BootID == prev.BootID && maps.EqualFunc(next.Ports, prev.Ports, maps.Equal) &&
		maps.EqualFunc(next.Saturated, prev.Saturated, slices.Equal) {
		// Steady state: error counters rarely move, and rewriting (and
		// fsyncing) the same record every run would be most of this
		// check's cost.
		return out
	}
	if err := c.state.Save(countersStateFile, next); err != nil {
		out = append(out, result(nameCounters, componentHost, check.Error, "cannot keep IB counters: %s", errText(err)))
	}
	return out
}

// noDevices returns skip, the result on a node without (included,
// physical) RDMA devices. A record left from ports that have gone is
// emptied; a node that never had any gets no file.
func (c *countersCheck) noDevices(skip check.Result) []check.Result {
	out := []check.Result{skip}
	var prev countersState
	if err := c.state.Load(countersStateFile, &prev); err == nil && len(prev.Ports) == 0 {
		return out
	}
	if err := c.state.Save(countersStateFile, countersState{Ports: map[string]map[string]uint64{}}); err != nil {
		out = append(out, result(nameCounters, componentHost, check.Error, "cannot keep IB counters: %s", errText(err)))
	}
	return out
}

// portVerdict is one port's judgement and what to keep of it.
type portVerdict struct {
	result check.Result
	// now is what to keep for the next run: the values read; the previous
	// ones when they could not be read (the next run compares against
	// the last good values); nil when the port has no counters.
	now map[string]uint64
	// saturated are the counters that reached their top under a
	// baseline (countersState.Saturated).
	saturated []string
}

// clearAdvice says how to clear a counter, where that helps. perfquery -R
// resets the PortCounters these are read from (-x would reset the
// extended data counters instead). It helps where a counter stuck at its
// top hides what comes next and clearing it leaves a count that means
// something: after a fault is fixed, or for a wide counter found pegged
// by old errors. It does not help for a 4-bit counter found at 15 on
// first sight: 15 is what a healthy node's whole uptime can add up to
// (gpud's captured healthy H100 shows excessive_buffer_overrun_errors at
// 15 on every port), so a cleared one climbs back and its growth would
// then FAIL the node for nothing.
func clearAdvice(pc portCounter, dev string, port int, firstSight bool) string {
	if firstSight && config.IBCounterBits(pc.name) <= 4 {
		return ""
	}
	return fmt.Sprintf("perfquery -R -C %s -P %d", dev, port)
}

// judgePort reads one port's counters and compares them with prev.
func (c *countersCheck) judgePort(dev string, port int, prev map[string]uint64, prevSaturated []string) portVerdict {
	comp := portName(dev, port)
	dir := filepath.Join(c.root, classDir, dev, "ports", strconv.Itoa(port), "counters")
	now, noPMA, err := readCounters(dir)
	switch {
	case err != nil:
		return portVerdict{result: result(nameCounters, comp, check.Error, "cannot read counters: %s", errText(err)),
			now: prev, saturated: prevSaturated}
	case noPMA:
		// drivers/infiniband/core/sysfs.c answers every PMA counter with
		// "N/A (no PMA)" on a device without a performance management
		// agent (iWARP: cxgb4, irdma in iWARP mode): nothing to judge.
		return portVerdict{result: result(nameCounters, comp, check.Skip, "no error counters (N/A (no PMA): the device has no performance management agent)")}
	case len(now) == 0:
		return portVerdict{result: result(nameCounters, comp, check.Skip, "no error counters")}
	}
	v := verdict{name: nameCounters, comp: comp}
	out := portVerdict{now: now}
	var quiet []string
	compared, reset := 0, false
	for _, pc := range portCounters {
		b, ok := now[pc.name]
		a, had := prev[pc.name]
		limit := pc.limit(c.cfg.Counters)
		if !ok || limit < 0 {
			continue
		}
		if !had {
			// No baseline; a pegged counter hides what comes next. Said
			// once: the baseline keeps the value, and a counter found at
			// its top and still there is quiet from then on.
			if b == pc.top() {
				msg := fmt.Sprintf("%s at its top %d on first sight; further errors on it cannot be seen", pc.name, b)
				if adv := clearAdvice(pc, dev, port, true); adv != "" {
					msg += " until cleared (" + adv + ")"
				}
				v.add(check.Warn, msg)
			}
			continue
		}
		compared++
		switch {
		case b == pc.top() && a < b && b-a > uint64(limit):
			// It reached its ceiling since the last run, having grown past
			// the limit on the way: a fault, and whatever came after is
			// lost.
			v.add(check.Fail, fmt.Sprintf("%s saturated at %d (+%d seen); clear with %s once fixed", pc.name, b, b-a, clearAdvice(pc, dev, port, false)))
			out.saturated = append(out.saturated, pc.name)
		case b == pc.top() && a < b:
			// It reached its ceiling by growth within the limit: how a
			// healthy node's 4-bit counter gets to 15 over a few days
			// after every reboot (gpud's captured healthy H100). Said
			// once; from now on further errors cannot be seen.
			msg := fmt.Sprintf("%s reached its top %d (+%d seen, within the limit %d); further errors on it cannot be seen", pc.name, b, b-a, limit)
			if adv := clearAdvice(pc, dev, port, true); adv != "" {
				msg += " until cleared (" + adv + ")"
			}
			v.add(check.Warn, msg)
			out.saturated = append(out.saturated, pc.name)
		case b == pc.top() && a == b:
			// At its top since an earlier run, and judged then (FAIL or
			// WARN): saying so every run would keep a healthy node warning
			// for ever, and failing again would keep a node drained for
			// errors that may be long over.
			if slices.Contains(prevSaturated, pc.name) {
				out.saturated = append(out.saturated, pc.name)
			}
			quiet = append(quiet, pc.name)
		case b < a:
			// Cleared since the last run: what it counts now is all new.
			reset = true
			c.judgeDelta(&v, pc.name, b, limit)
		default:
			// Also a value above the kernel's width (b > top), which only
			// a wider counter than sysfs.c's could show: growth is all
			// that can be judged then.
			c.judgeDelta(&v, pc.name, b-a, limit)
		}
	}
	okMsg := "error deltas within limits"
	switch {
	case compared == 0:
		okMsg = "baseline recorded"
	case reset:
		okMsg = "counters were reset, new baseline; deltas within limits"
	}
	if len(quiet) > 0 {
		okMsg += " (" + strings.Join(quiet, ", ") + " at the top since first sight, not judged)"
	}
	out.result = v.result(okMsg)
	return out
}

func (c *countersCheck) judgeDelta(v *verdict, name string, d uint64, limit int64) {
	over := d > uint64(limit)
	if name == "link_downed" {
		times := "times"
		if d == 1 {
			times = "time"
		}
		switch {
		case over:
			v.add(check.Fail, fmt.Sprintf("link flapped %d %s since last run (max %d)", d, times, limit))
		case d > 0:
			// Within the limit a flap is still news: jobs on the link may
			// have failed.
			v.add(check.Warn, fmt.Sprintf("link flapped %d %s since last run", d, times))
		}
		return
	}
	if over {
		v.add(check.Fail, fmt.Sprintf("%s +%d since last run > max %d", name, d, limit))
	}
}

// noPMA is what drivers/infiniband/core/sysfs.c (show_pma_counter)
// writes for every PMA counter of a device that has no performance
// management agent.
const noPMA = "N/A (no PMA)"

// readCounters reads the judged counters of one port. A missing counters
// directory, or a counter the driver does not offer, is absent from the
// map; na is true when every counter present reads noPMA. Anything else
// that cannot be read, or is not a decimal count, is an error.
func readCounters(dir string) (map[string]uint64, bool, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	out := map[string]uint64{}
	var errs []error
	na := 0
	for _, pc := range portCounters {
		p := filepath.Join(dir, pc.name)
		s, err := sysread.Attr(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			errs = append(errs, err)
			continue
		case s == noPMA:
			na++
			continue
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: not a count: %s", p, sysread.QuoteShort(s)))
			continue
		}
		out[pc.name] = n
	}
	if err := errors.Join(errs...); err != nil {
		return nil, false, err
	}
	return out, na > 0 && len(out) == 0, nil
}
