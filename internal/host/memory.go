package host

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

type memory struct {
	root string
	cfg  config.Memory
}

// NewMemory checks MemTotal against the configured minimum. MemTotal is
// what the kernel manages, a few percent below the installed DIMMs, so a
// minimum should sit a little under the nominal size; a lost DIMM or
// channel costs far more than that.
func NewMemory(root string, c config.Memory) check.Check {
	return &memory{root: root, cfg: c}
}

func (m *memory) Name() string { return nameMemory }

func (m *memory) Run(ctx context.Context) []check.Result {
	if ctx.Err() != nil {
		return stamp(nameMemory, []check.Result{interrupted(ctx)})
	}
	return stamp(nameMemory, []check.Result{m.judge()})
}

func (m *memory) judge() check.Result {
	var floor uint64
	if strings.TrimSpace(m.cfg.MinTotal) != "" {
		v, err := config.ParseSize(m.cfg.MinTotal)
		if err != nil {
			return errorf(componentHost, "bad min_total: %v", err)
		}
		floor = v
	}
	path := at(m.root, "proc/meminfo")
	b, err := sysread.File(path, maxProc)
	if err != nil {
		return errorf(componentHost, "%v", err)
	}
	info, err := parseMeminfo(string(b))
	if err != nil {
		return errorf(componentHost, "parse %s: %v", path, err)
	}
	total, ok := info["MemTotal"]
	switch {
	case !ok || total == 0:
		return errorf(componentHost, "no MemTotal in %s", path)
	case total < floor:
		return failf(componentHost, "MemTotal %s < min %s", fmtBytes(total), fmtBytes(floor))
	case floor > 0:
		return okf(componentHost, "MemTotal %s >= min %s", fmtBytes(total), fmtBytes(floor))
	default:
		return okf(componentHost, "MemTotal %s", fmtBytes(total))
	}
}

// parseMeminfo reads /proc/meminfo lines such as "MemTotal:  24684084 kB"
// or "HugePages_Total:       0" into byte counts (counts without a unit
// are kept as they are). A malformed line fails the whole parse.
func parseMeminfo(s string) (map[string]uint64, error) {
	info := map[string]uint64{}
	for i, line := range strings.Split(s, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		key, v, err := parseMeminfoLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		info[key] = v
	}
	return info, nil
}

func parseMeminfoLine(line string) (string, uint64, error) {
	key, rest, ok := strings.Cut(line, ":")
	f := strings.Fields(rest)
	if !ok || key == "" || strings.ContainsAny(key, " \t") || len(f) < 1 || len(f) > 2 {
		return "", 0, fmt.Errorf("not a meminfo line: %s", sysread.QuoteShort(line))
	}
	v, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("%s: bad value %s", key, sysread.QuoteShort(f[0]))
	}
	if len(f) == 1 {
		return key, v, nil
	}
	if f[1] != "kB" || v > math.MaxUint64/1024 {
		return "", 0, fmt.Errorf("%s: bad amount %s", key, sysread.QuoteShort(strings.TrimSpace(rest)))
	}
	return key, v * 1024, nil
}
