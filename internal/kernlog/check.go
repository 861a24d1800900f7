// Package kernlog is the host.kernel check: the host faults that show only
// in the kernel log (PCIe AER, uncorrected memory errors, lockups and
// stalls, disk and filesystem failures, mlx5 firmware faults, the OOM
// killer taking a node daemon), judged as rows of one table (rules.go)
// over the run's one kernel-log pass (internal/kmsg). Its Book also keeps
// fabric.sxid's episodes.
//
//	gpuhc: host.kernel: 0000:3b:00.0: PCIe AER uncorrected fatal error: nvidia 0000:3b:00.0: PCIe Bus Error: … (1 this boot)
package kernlog

import (
	"context"
	"fmt"
	"strings"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/kmsg"
	"github.com/gpuhc/gpuhc/internal/pciaddr"
	"github.com/gpuhc/gpuhc/internal/statefile"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// Name is the check's name.
const Name = "host.kernel"

// StateFile keeps the boot's episodes (sticky FAILs, counts). Removing it
// clears every sticky host.kernel FAIL of the boot.
const StateFile = "host-kernel.json"

// excerpt is how much of the kernel line a message quotes: enough to
// recognise it, with room left in a 256-byte drain reason.
const excerpt = 150

type kernelCheck struct {
	rules []Rule
	paths *Paths
	book  Book
}

// New is the host.kernel check over r's snapshot. c disables and
// overrides rules (config validation has checked the names); paths says
// which PCI devices are on a GPU, HCA or NVSwitch path (nil: every device
// is taken to be); st keeps the episodes.
func New(c config.Kernel, paths *Paths, st statefile.Dir, r kmsg.Reader) check.Check {
	return &kernelCheck{rules: Configure(c), paths: paths, book: Book{
		Check: Name, File: StateFile, Dir: st, Reader: r, Healthy: "no host faults in the kernel log",
	}}
}

func (c *kernelCheck) Name() string { return Name }

func (c *kernelCheck) Run(ctx context.Context) []check.Result {
	return c.book.Run(ctx, func(lines []kmsg.Line) []Finding { return c.judge(ctx, lines) })
}

// Configure is the default table less the disabled rules, with the
// overrides applied. A rule overridden to OK is dropped.
func Configure(c config.Kernel) []Rule {
	off := map[string]bool{}
	for _, n := range c.Disable {
		off[n] = true
	}
	over := map[string]config.KernelOverride{}
	for _, o := range c.Override {
		over[o.Rule] = o
	}
	var out []Rule
	for _, r := range Rules {
		if off[r.Name] {
			continue
		}
		if o, ok := over[r.Name]; ok {
			r.Status, r.Action = Override(r.Status, r.Action, o.Status, o.Action)
			r.Sticky = r.Status == check.Fail
		}
		if r.Status <= check.OK {
			continue
		}
		out = append(out, r)
	}
	return out
}

// Override applies a configured status and action (either may be "") to
// a default verdict. A new status without an action takes "none" for
// OK and WARN, the default's action for a FAIL that was one, else drain.
func Override(st check.Status, act check.Action, status, action string) (check.Status, check.Action) {
	if status != "" {
		ns, err := check.ParseStatus(status)
		if err == nil && ns != st {
			switch {
			case ns == check.Fail:
				act = check.ActionDrain
			default:
				act = check.ActionNone
			}
			st = ns
		}
	}
	if action != "" {
		act = check.Action(action)
	}
	return st, act
}

func (c *kernelCheck) judge(ctx context.Context, lines []kmsg.Line) []Finding {
	least := -1 // the least severe level any rule takes
	for i := range c.rules {
		least = max(least, c.rules[i].MaxLevel)
	}
	var out []Finding
	for _, l := range lines {
		if l.Level > least {
			continue
		}
		for i := range c.rules {
			f, ok := c.match(ctx, &c.rules[i], l)
			if ok {
				out = append(out, f)
				break
			}
		}
	}
	return out
}

// match is rule r's finding on line l, if it matches.
func (c *kernelCheck) match(ctx context.Context, r *Rule, l kmsg.Line) (Finding, bool) {
	if (l.Level >= 0 && l.Level > r.MaxLevel) || !containsAny(l.Text, r.Has) {
		return Finding{}, false
	}
	m := r.Match.FindStringSubmatch(l.Text)
	if m == nil || (r.Unless != nil && r.Unless.MatchString(l.Text)) {
		return Finding{}, false
	}
	comp := r.Fixed
	for i, name := range r.Match.SubexpNames() {
		if name == "c" && m[i] != "" {
			comp = sysread.Printable(r.Comp(m[i]))
			break
		}
	}
	if comp == "" || (r.Ignore != nil && r.Ignore.MatchString(comp)) {
		return Finding{}, false
	}
	f := Finding{Rule: r.Name, Component: comp, Status: r.Status, Action: r.Action, Sticky: r.Sticky,
		Message: fmt.Sprintf("%s: %s", r.What, sysread.Cut(sysread.Printable(l.Text), excerpt))}
	if pciaddr.IsSysfs(comp) {
		f.IDs.PCIBusID = comp
	}
	if r.OffPath != 0 {
		c.placeOnPath(ctx, r, &f)
	}
	return f, true
}

// placeOnPath gives a rule that judges by PCI path its verdict off the
// path of a GPU, HCA or NVSwitch. A device that cannot be placed keeps the
// on-path verdict (and says so): uncorrected errors are rare, and one the
// check cannot place is worth an admin's look before jobs land on it.
func (c *kernelCheck) placeOnPath(ctx context.Context, r *Rule, f *Finding) {
	on, known := c.paths.On(ctx, f.Component)
	switch {
	case !known:
		f.Message += " (could not tell whether it is on a GPU, HCA or NVSwitch path)"
	case !on:
		f.Status, f.Action, f.Sticky = r.OffPath, check.ActionNone, false
		f.Message += " (not on a GPU, HCA or NVSwitch path)"
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
