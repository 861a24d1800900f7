package host

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// maxCPUID bounds CPU numbers so a garbage range cannot claim billions;
// the kernel's NR_CPUS tops out at 8192.
const maxCPUID = 1 << 16

type cpu struct {
	root string
	cfg  config.CPU
}

// NewCPU checks the number of online CPUs against the expected count.
func NewCPU(root string, c config.CPU) check.Check {
	return &cpu{root: root, cfg: c}
}

func (c *cpu) Name() string { return nameCPU }

func (c *cpu) Run(ctx context.Context) []check.Result {
	if ctx.Err() != nil {
		return stamp(nameCPU, []check.Result{interrupted(ctx)})
	}
	return stamp(nameCPU, []check.Result{c.judge()})
}

func (c *cpu) judge() check.Result {
	path := at(c.root, "sys/devices/system/cpu/online")
	list, err := sysread.Attr(path)
	if err != nil {
		return errorf(componentHost, "%v", err)
	}
	n, err := parseCPUList(list)
	if err != nil {
		return errorf(componentHost, "parse %s: %v", path, err)
	}
	// Negative is as meaningless as 0: report only.
	if c.cfg.Expected > 0 && n != c.cfg.Expected {
		return failf(componentHost, "%d CPUs online (%s), expected %d", n, shortList(list), c.cfg.Expected)
	}
	return okf(componentHost, "%d CPUs online (%s)", n, shortList(list))
}

// shortList keeps a long list of ranges from swamping a drain reason.
func shortList(s string) string {
	const max = 40
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

// parseCPUList counts the CPUs in a kernel CPU list such as "0-31,64-95".
// The kernel writes ranges ascending and disjoint; anything else is not
// its output, so it is refused rather than counted.
func parseCPUList(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty CPU list")
	}
	n, prev := 0, -1
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := cpuID(lo)
		if err != nil {
			return 0, err
		}
		b := a
		if isRange {
			if b, err = cpuID(hi); err != nil {
				return 0, err
			}
		}
		if a > b || a <= prev {
			return 0, fmt.Errorf("range %s out of order", sysread.QuoteShort(part))
		}
		n += b - a + 1
		prev = b
	}
	return n, nil
}

func cpuID(s string) (int, error) {
	if s == "" || len(s) > 5 || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("bad CPU number %s", sysread.QuoteShort(s))
	}
	v, _ := strconv.Atoi(s)
	if v >= maxCPUID {
		return 0, fmt.Errorf("CPU number %d too large", v)
	}
	return v, nil
}
