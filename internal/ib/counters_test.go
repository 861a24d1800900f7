package ib

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/statefile"
	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

const (
	bootA = "0b5c3c2e-3f0e-4b36-9d0e-6c1f2f1d2a01"
	bootB = "7e1d2c3b-4a59-4687-9a6b-5c4d3e2f1a00"
)

func setBoot(t testing.TB, root, id string) {
	writeFile(t, root, "proc/sys/kernel/random/boot_id", id+"\n")
}

func counter(dev, name string) string {
	return sysfsfix.PortDir(dev, 1) + "/counters/" + name
}

func TestCounters(t *testing.T) {
	disabled := h100Config()
	disabled.Counters.SymbolErrorMax = -1
	tests := []struct {
		name   string
		cfg    config.IB
		before func(t *testing.T, root string) // ahead of the first (baseline) run
		fault  func(t *testing.T, root string) // between the runs
		want   map[string]want                 // of the second run
	}{
		{"steady", h100Config(), nil, nil, map[string]want{"*": {check.OK, "error deltas within limits"}}},
		{"symbol errors past the limit", h100Config(), nil, func(t *testing.T, root string) {
			sysfsfix.Set(t, root, counter("mlx5_3", "symbol_error"), "25")
		}, map[string]want{
			"mlx5_3/1": {check.Fail, "symbol_error +25 since last run > max 10"},
			"*":        {check.OK, "within limits"},
		}},
		{"symbol errors within the limit", h100Config(), nil, func(t *testing.T, root string) {
			sysfsfix.Set(t, root, counter("mlx5_3", "symbol_error"), "10")
		}, map[string]want{"*": {check.OK, "within limits"}}},
		{"several counters past their limits", h100Config(), nil, func(t *testing.T, root string) {
			sysfsfix.Set(t, root, counter("mlx5_0", "port_rcv_errors"), "11")
			sysfsfix.Set(t, root, counter("mlx5_0", "port_xmit_discards"), "101")
			sysfsfix.Set(t, root, counter("mlx5_0", "excessive_buffer_overrun_errors"), "12")
			sysfsfix.Set(t, root, counter("mlx5_6", "link_error_recovery"), "40")
			sysfsfix.Set(t, root, counter("mlx5_6", "local_link_integrity_errors"), "11")
			sysfsfix.Set(t, root, counter("mlx5_7", "port_rcv_remote_physical_errors"), "101")
		}, map[string]want{
			"mlx5_0/1": {check.Fail, "port_rcv_errors +11 since last run > max 10; port_xmit_discards +101 since last run > max 100; excessive_buffer_overrun_errors +12"},
			"mlx5_6/1": {check.Fail, "link_error_recovery +40 since last run > max 10; local_link_integrity_errors +11"},
			"mlx5_7/1": {check.Fail, "port_rcv_remote_physical_errors +101 since last run > max 100"},
			"*":        {check.OK, "within limits"},
		}},
		{"4-bit counter past its limit", h100Config(), func(t *testing.T, root string) {
			sysfsfix.Set(t, root, counter("mlx5_1", "excessive_buffer_overrun_errors"), "2")
		}, func(t *testing.T, root string) {
			sysfsfix.Set(t, root, counter("mlx5_1", "excessive_buffer_overrun_errors"), "8")
		}, map[string]want{
			"mlx5_1/1": {check.Fail, "excessive_buffer_overrun_errors +6 since last run > max 5"},
			"*":        {check.OK, "within limits"},
		}},
		{"virtual devices' counters are not judged", h100Config(), func(t *testing.T, root string) {
			addVF(t, root, "mlx5_0", "mlx5_9", 1)
			addSF(t, root, "mlx5_1", "mlx5_10", 0)
		}, func(t *testing.T, root string) {
			sysfsfix.Set(t, root, counter("mlx5_9", "symbol_error"), "500")
			sysfsfix.Set(t, root, counter("mlx5_10", "link_downed"), "7")
		}, map[string]want{"*": {check.OK, "within limits"}}},
		{"unlistable ports are an error, not 'within limits'", h100Config(), nil, func(t *testing.T, root string) {
			sysfsfix.UnlistPorts(t, root, "mlx5_4")
		}, map[string]want{
			"mlx5_4": {check.Error, "cannot list its ports"},
			"*":      {check.OK, "within limits"},
		}},
		{"a flap warns", h100Config(), nil, func(t *testing.T, root string) {
			sysfsfix.Set(t, root, counter("mlx5_2", "link_downed"), "1")
		}, map[string]want{
			"mlx5_2/1": {check.Warn, "link flapped 1 time since last run"},
			"*":        {check.OK, "within limits"},
		}},
		{"flapping fails", h100Config(), func(t *testing.T, root string) {
			sysfsfix.Set(t, root, counter("mlx5_2", "link_downed"), "4")
		}, func(t *testing.T, root string) {
			sysfsfix.Set(t, root, counter("mlx5_2", "link_downed"), "7")
		}, map[string]want{
			"mlx5_2/1": {check.Fail, "link flapped 3 times since last run (max 1)"},
			"*":        {check.OK, "within limits"},
		}},
		{"a reset re-baselines", h100Config(), func(t *testing.T, root string) {
			sysfsfix.Set(t, root, counter("mlx5_4", "symbol_error"), "4000")
			sysfsfix.Set(t, root, counter("mlx5_4", "link_downed"), "9")
		}, func(t *testing.T, root string) {
			sysfsfix.Set(t, root, counter("mlx5_4", "symbol_error"), "3")
			sysfsfix.Set(t, root, counter("mlx5_4", "link_downed"), "0")
		}, map[string]want{
			"mlx5_4/1": {check.OK, "counters were reset, new baseline"},
			"*":        {check.OK, "within limits"},
		}},
		{"after a reset the new value is the delta", h100Config(), func(t *testing.T, root string) {
			sysfsfix.Set(t, root, counter("mlx5_4", "symbol_error"), "4000")
		}, func(t *testing.T, root string) {
			sysfsfix.Set(t, root, counter("mlx5_4", "symbol_error"), "50")
		}, map[string]want{
			"mlx5_4/1": {check.Fail, "symbol_error +50 since last run > max 10"},
			"*":        {check.OK, "within limits"},
		}},
		{"garbage counter is an error, not a drain", h100Config(), nil, func(t *testing.T, root string) {
			sysfsfix.Set(t, root, counter("mlx5_5", "symbol_error"), "-5")
		}, map[string]want{
			"mlx5_5/1": {check.Error, "not a count"},
			"*":        {check.OK, "within limits"},
		}},
		{"unreadable counter is an error", h100Config(), nil, func(t *testing.T, root string) {
			p := filepath.Join(root, counter("mlx5_5", "port_rcv_errors"))
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}, map[string]want{
			"mlx5_5/1": {check.Error, "cannot read counters"},
			"*":        {check.OK, "within limits"},
		}},
		{"a disabled counter is not judged", disabled, nil, func(t *testing.T, root string) {
			sysfsfix.Set(t, root, counter("mlx5_3", "symbol_error"), "40000")
		}, map[string]want{"*": {check.OK, "within limits"}}},
		{"excluded mlx5_8 is not judged", h100Config(), nil, func(t *testing.T, root string) {
			sysfsfix.Set(t, root, counter("mlx5_8", "symbol_error"), "40000")
		}, map[string]want{"*": {check.OK, "within limits"}}},
		{"a reboot re-baselines", h100Config(), nil, func(t *testing.T, root string) {
			setBoot(t, root, bootB)
			sysfsfix.Set(t, root, counter("mlx5_3", "symbol_error"), "25")
		}, map[string]want{"*": {check.OK, "baseline recorded"}}},
		{"without a boot id every port re-baselines", h100Config(), nil, func(t *testing.T, root string) {
			setBoot(t, root, "not-a-boot-id")
			sysfsfix.Set(t, root, counter("mlx5_3", "symbol_error"), "25")
		}, map[string]want{
			"host": {check.Error, "cannot read boot id, counters re-baselined"},
			"*":    {check.OK, "baseline recorded"},
		}},
		{"a port without counters skips", h100Config(), nil, func(t *testing.T, root string) {
			sysfsfix.Remove(t, root, sysfsfix.PortDir("mlx5_1", 1)+"/counters")
		}, map[string]want{
			"mlx5_1/1": {check.Skip, "no error counters"},
			"*":        {check.OK, "within limits"},
		}},
		{"a counter the driver does not offer is left out", h100Config(), nil, func(t *testing.T, root string) {
			sysfsfix.Remove(t, root, counter("mlx5_1", "symbol_error"))
		}, map[string]want{"*": {check.OK, "within limits"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := sysfsfix.Tree(t, sysfsfix.H100NDR)
			setBoot(t, root, bootA)
			st := statefile.Dir{Path: t.TempDir()}
			if tc.before != nil {
				tc.before(t, root)
			}
			expect(t, nameCounters, run(t, NewCounters(root, NewGather(root), tc.cfg, st)), map[string]want{"*": {check.OK, "baseline recorded"}})
			if tc.fault != nil {
				tc.fault(t, root)
			}
			expect(t, nameCounters, run(t, NewCounters(root, NewGather(root), tc.cfg, st)), tc.want)
		})
	}
}

// The error counters stop at 2^width-1 (drivers/infiniband/core/sysfs.c
// reads symbol_error at 16 bits, link_downed at 8, local_link_integrity_
// errors at 4): growth past that cannot be seen.
func TestCountersSaturation(t *testing.T) {
	disabled := h100Config()
	disabled.Counters.SymbolErrorMax = -1
	baseline := map[string]want{"*": {check.OK, "baseline recorded"}}
	tests := []struct {
		name          string
		cfg           config.IB
		counter       string
		before, after string
		first, second map[string]want
	}{
		// Reaching the top by growth within the limit is how a healthy
		// node's 4-bit counter gets to 15 after each reboot (gpud's
		// captured healthy H100): a WARN, said once. Growth past the
		// limit on the way is a fault.
		{"4-bit counter reaching 15 within the limit warns, without advice", h100Config(), "local_link_integrity_errors", "14", "15", baseline, map[string]want{
			"mlx5_3/1": {check.Warn, "local_link_integrity_errors reached its top 15 (+1 seen, within the limit 5); further errors on it cannot be seen"},
			"*":        {check.OK, "within limits"},
		}},
		{"4-bit counter reaching 15 past the limit fails", h100Config(), "local_link_integrity_errors", "3", "15", baseline, map[string]want{
			"mlx5_3/1": {check.Fail, "local_link_integrity_errors saturated at 15 (+12 seen); clear with perfquery -R -C mlx5_3 -P 1"},
			"*":        {check.OK, "within limits"},
		}},
		{"16-bit symbol_error reaching 65535 within the limit warns, with advice", h100Config(), "symbol_error", "65530", "65535", baseline, map[string]want{
			"mlx5_3/1": {check.Warn, "symbol_error reached its top 65535 (+5 seen, within the limit 10); further errors on it cannot be seen until cleared (perfquery -R -C mlx5_3 -P 1)"},
			"*":        {check.OK, "within limits"},
		}},
		{"16-bit symbol_error reaching 65535 past the limit fails", h100Config(), "symbol_error", "65000", "65535", baseline, map[string]want{
			"mlx5_3/1": {check.Fail, "symbol_error saturated at 65535 (+535 seen)"},
			"*":        {check.OK, "within limits"},
		}},
		{"8-bit link_downed reaching 255 past the limit fails", h100Config(), "link_downed", "250", "255", baseline, map[string]want{
			"mlx5_3/1": {check.Fail, "link_downed saturated at 255 (+5 seen)"},
			"*":        {check.OK, "within limits"},
		}},
		{"one below the top is a count", h100Config(), "symbol_error", "65530", "65534", baseline, map[string]want{
			"*": {check.OK, "within limits"},
		}},
		// Found at the top with no baseline: said once, then quiet (the
		// record keeps it), with advice where clearing shows something.
		{"saturated at the first run warns once", h100Config(), "symbol_error", "65535", "65535", map[string]want{
			"mlx5_3/1": {check.Warn, "symbol_error at its top 65535 on first sight; further errors on it cannot be seen until cleared (perfquery -R -C mlx5_3 -P 1)"},
			"*":        {check.OK, "baseline recorded"},
		}, map[string]want{
			"mlx5_3/1": {check.OK, "within limits (symbol_error at the top since first sight, not judged)"},
			"*":        {check.OK, "within limits"},
		}},
		{"saturated link_downed on first sight warns once", h100Config(), "link_downed", "255", "255", map[string]want{
			"mlx5_3/1": {check.Warn, "link_downed at its top 255 on first sight"},
			"*":        {check.OK, "baseline recorded"},
		}, map[string]want{
			"mlx5_3/1": {check.OK, "link_downed at the top since first sight"},
			"*":        {check.OK, "within limits"},
		}},
		{"cleared after saturating: a new baseline", h100Config(), "excessive_buffer_overrun_errors", "15", "2", map[string]want{
			"mlx5_3/1": {check.Warn, "excessive_buffer_overrun_errors at its top 15 on first sight; further errors on it cannot be seen"},
			"*":        {check.OK, "baseline recorded"},
		}, map[string]want{
			"mlx5_3/1": {check.OK, "counters were reset"},
			"*":        {check.OK, "within limits"},
		}},
		{"an unjudged counter is not reported saturated", disabled, "symbol_error", "65535", "65535", baseline, map[string]want{
			"*": {check.OK, "within limits"},
		}},
		// sysfs.c masks these to their width; a larger value means a wider
		// counter, which can only be judged by its growth.
		{"a value wider than the kernel's field is judged by growth", h100Config(), "symbol_error", "70000", "70025", baseline, map[string]want{
			"mlx5_3/1": {check.Fail, "symbol_error +25 since last run > max 10"},
			"*":        {check.OK, "within limits"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := sysfsfix.Tree(t, sysfsfix.H100NDR)
			setBoot(t, root, bootA)
			st := statefile.Dir{Path: t.TempDir()}
			sysfsfix.Set(t, root, counter("mlx5_3", tc.counter), tc.before)
			expect(t, nameCounters, run(t, NewCounters(root, NewGather(root), tc.cfg, st)), tc.first)
			sysfsfix.Set(t, root, counter("mlx5_3", tc.counter), tc.after)
			expect(t, nameCounters, run(t, NewCounters(root, NewGather(root), tc.cfg, st)), tc.second)
		})
	}
}

// A 4-bit counter at 15 on first sight (every port of gpud's captured
// healthy H100) warns once, without advice to clear it: cleared, it climbs
// back. Climbing back to the top within the limit (review: after every
// reboot) warns once and is then quiet; growth past the limit FAILs.
func TestCountersPeggedOnFirstSight(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.H100NDR)
	setBoot(t, root, bootA)
	st := statefile.Dir{Path: t.TempDir()}
	ebo := counter("mlx5_3", "excessive_buffer_overrun_errors")
	steps := []struct {
		value string
		want  map[string]want
	}{
		{"15", map[string]want{"mlx5_3/1": {check.Warn, "excessive_buffer_overrun_errors at its top 15 on first sight"}, "*": {check.OK, "baseline recorded"}}},
		// The record now holds 15 and no "saturated" list, as a record
		// written by an earlier gpuhc does: quiet, not a WARN every run.
		{"15", map[string]want{"mlx5_3/1": {check.OK, "at the top since first sight"}, "*": {check.OK, "within limits"}}},
		{"15", map[string]want{"mlx5_3/1": {check.OK, "at the top since first sight"}, "*": {check.OK, "within limits"}}},
		// Cleared by hand: a new baseline below the top.
		{"0", map[string]want{"mlx5_3/1": {check.OK, "counters were reset"}, "*": {check.OK, "within limits"}}},
		{"4", map[string]want{"*": {check.OK, "within limits"}}},
		{"8", map[string]want{"*": {check.OK, "within limits"}}},
		{"12", map[string]want{"*": {check.OK, "within limits"}}},
		{"15", map[string]want{"mlx5_3/1": {check.Warn, "excessive_buffer_overrun_errors reached its top 15 (+3 seen, within the limit"}, "*": {check.OK, "within limits"}}},
		{"15", map[string]want{"mlx5_3/1": {check.OK, "within limits"}, "*": {check.OK, "within limits"}}},
		// Cleared again, then a jump past the limit to the top: a fault.
		{"0", map[string]want{"mlx5_3/1": {check.OK, "counters were reset"}, "*": {check.OK, "within limits"}}},
		{"15", map[string]want{"mlx5_3/1": {check.Fail, "excessive_buffer_overrun_errors saturated at 15 (+15 seen)"}, "*": {check.OK, "within limits"}}},
		{"15", map[string]want{"mlx5_3/1": {check.OK, "within limits"}, "*": {check.OK, "within limits"}}},
	}
	for i, s := range steps {
		sysfsfix.Set(t, root, ebo, s.value)
		rs := run(t, NewCounters(root, NewGather(root), h100Config(), st))
		expect(t, nameCounters, rs, s.want)
		if i == 0 {
			for _, r := range rs {
				if strings.Contains(r.Message, "perfquery") {
					t.Errorf("advice to clear a 4-bit counter found at its top: %s", r.Message)
				}
			}
		}
		if t.Failed() {
			t.Fatalf("step %d (value %s)", i, s.value)
		}
	}
}

// Every judged counter has a known width, and its default limit can be
// exceeded before the counter stops.
func TestCounterWidths(t *testing.T) {
	for _, pc := range portCounters {
		if config.IBCounterBits(pc.name) == 0 {
			t.Errorf("%s: no width", pc.name)
		}
		if l := pc.limit(defaults().Counters); l < 0 || uint64(l) >= pc.top() {
			t.Errorf("%s: default limit %d, counter stops at %d", pc.name, l, pc.top())
		}
	}
}

// After an unreadable run the port is compared with its last good values,
// so growth hidden behind a garbage read is still caught.
func TestCountersKeepLastGoodValues(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.RoCE)
	setBoot(t, root, bootA)
	st := statefile.Dir{Path: t.TempDir()}
	c := NewCounters(root, NewGather(root), defaults(), st)
	run(t, c)
	sysfsfix.Set(t, root, counter("mlx5_1", "symbol_error"), "garbage")
	expect(t, nameCounters, run(t, c), map[string]want{"mlx5_1/1": {check.Error, "not a count"}, "*": {check.OK, "within limits"}})
	sysfsfix.Set(t, root, counter("mlx5_1", "symbol_error"), "30")
	expect(t, nameCounters, run(t, c), map[string]want{"mlx5_1/1": {check.Fail, "symbol_error +30"}, "*": {check.OK, "within limits"}})
}

func TestCountersState(t *testing.T) {
	load := func(t *testing.T, st statefile.Dir) countersState {
		t.Helper()
		var s countersState
		if err := st.Load(countersStateFile, &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Run("dry run does not save", func(t *testing.T) {
		root := sysfsfix.Tree(t, sysfsfix.RoCE)
		setBoot(t, root, bootA)
		dir := t.TempDir()
		c := NewCounters(root, NewGather(root), defaults(), statefile.Dir{Path: dir, ReadOnly: true})
		for range 2 {
			expect(t, nameCounters, run(t, c), map[string]want{"*": {check.OK, "baseline recorded"}})
		}
		if _, err := os.Stat(filepath.Join(dir, countersStateFile)); !os.IsNotExist(err) {
			t.Errorf("dry run wrote the state: %v", err)
		}
	})
	t.Run("a dry run compares with the saved record", func(t *testing.T) {
		root := sysfsfix.Tree(t, sysfsfix.RoCE)
		setBoot(t, root, bootA)
		dir := t.TempDir()
		run(t, NewCounters(root, NewGather(root), defaults(), statefile.Dir{Path: dir}))
		before, _ := os.ReadFile(filepath.Join(dir, countersStateFile))
		sysfsfix.Set(t, root, counter("mlx5_0", "symbol_error"), "99")
		dry := NewCounters(root, NewGather(root), defaults(), statefile.Dir{Path: dir, ReadOnly: true})
		expect(t, nameCounters, run(t, dry), map[string]want{"mlx5_0/1": {check.Fail, "symbol_error +99"}, "*": {check.OK, ""}})
		after, _ := os.ReadFile(filepath.Join(dir, countersStateFile))
		if string(before) != string(after) {
			t.Error("dry run changed the record")
		}
	})
	t.Run("record keyed by boot id, vanished and excluded ports dropped", func(t *testing.T) {
		root := sysfsfix.Tree(t, sysfsfix.H100NDR)
		setBoot(t, root, bootA)
		st := statefile.Dir{Path: t.TempDir()}
		run(t, NewCounters(root, NewGather(root), h100Config(), st))
		s := load(t, st)
		if s.BootID != bootA || len(s.Ports) != 8 || s.Ports["mlx5_8/1"] != nil || len(s.Ports["mlx5_3/1"]) != len(portCounters) {
			t.Fatalf("record %+v", s)
		}
		sysfsfix.RemoveHCA(t, root, "mlx5_3")
		expect(t, nameCounters, run(t, NewCounters(root, NewGather(root), h100Config(), st)), map[string]want{"*": {check.OK, "within limits"}})
		if s := load(t, st); len(s.Ports) != 7 || s.Ports["mlx5_3/1"] != nil {
			t.Errorf("vanished port kept: %+v", s)
		}
	})
	t.Run("corrupt record re-baselines", func(t *testing.T) {
		root := sysfsfix.Tree(t, sysfsfix.RoCE)
		setBoot(t, root, bootA)
		dir := t.TempDir()
		writeFile(t, dir, countersStateFile, "{not json")
		st := statefile.Dir{Path: dir}
		expect(t, nameCounters, run(t, NewCounters(root, NewGather(root), defaults(), st)), map[string]want{"*": {check.OK, "baseline recorded"}})
		if s := load(t, st); len(s.Ports) != 4 {
			t.Errorf("record not replaced: %+v", s)
		}
	})
	t.Run("save error is reported", func(t *testing.T) {
		root := sysfsfix.Tree(t, sysfsfix.RoCE)
		setBoot(t, root, bootA)
		dir := filepath.Join(t.TempDir(), "file")
		writeFile(t, dir, "", "")
		rs := run(t, NewCounters(root, NewGather(root), defaults(), statefile.Dir{Path: dir}))
		expect(t, nameCounters, rs, map[string]want{"host": {check.Error, "cannot keep IB counters"}, "*": {check.OK, "baseline"}})
	})
	t.Run("no RDMA devices: skip, nothing written", func(t *testing.T) {
		root := t.TempDir()
		setBoot(t, root, bootA)
		dir := t.TempDir()
		expect(t, nameCounters, run(t, NewCounters(root, NewGather(root), defaults(), statefile.Dir{Path: dir})),
			map[string]want{"host": {check.Skip, "no RDMA devices"}})
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("wrote %v", ents)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		root := sysfsfix.Tree(t, sysfsfix.RoCE)
		rs := NewCounters(root, NewGather(root), defaults(), statefile.Dir{Path: t.TempDir()}).Run(cancelled())
		expect(t, nameCounters, rs, map[string]want{"host": {check.Error, "interrupted"}})
	})
}

// The record must stay small however many runs there are.
func TestCountersStateBounded(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.RoCE)
	setBoot(t, root, bootA)
	dir := t.TempDir()
	c := NewCounters(root, NewGather(root), defaults(), statefile.Dir{Path: dir})
	var size int64
	for i := range 5 {
		sysfsfix.Set(t, root, counter("mlx5_0", "port_xmit_discards"), strconv.Itoa(i))
		run(t, c)
		fi, err := os.Stat(filepath.Join(dir, countersStateFile))
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && fi.Size() != size {
			t.Errorf("record grew from %d to %d bytes", size, fi.Size())
		}
		size = fi.Size()
	}
}

// A node without RDMA devices SKIPs, whatever else it lacks: a container
// or an odd kernel without a boot id must not turn it into an ERROR.
func TestCountersNoDevicesNoBootID(t *testing.T) {
	st := statefile.Dir{Path: t.TempDir()}
	root := t.TempDir()
	rs := run(t, NewCounters(root, NewGather(root), defaults(), st))
	if len(rs) != 1 || rs[0].Status != check.Skip {
		t.Fatalf("results %+v, want one SKIP", rs)
	}
	if _, err := os.Stat(filepath.Join(st.Path, countersStateFile)); err == nil {
		t.Errorf("a node without RDMA devices got a counters record")
	}
}

// In steady state the record is not rewritten (each save is a new file,
// fsynced); once a counter moves, it is.
func TestCountersSteadyStateWritesNothing(t *testing.T) {
	root := sysfsfix.Tree(t, sysfsfix.H100NDR)
	setBoot(t, root, bootA)
	dir := t.TempDir()
	c := NewCounters(root, NewGather(root), defaults(), statefile.Dir{Path: dir})
	inode := func() uint64 {
		t.Helper()
		fi, err := os.Stat(filepath.Join(dir, countersStateFile))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	run(t, c)
	first := inode()
	run(t, c)
	if inode() != first {
		t.Errorf("unchanged counters rewrote %s", countersStateFile)
	}
	sysfsfix.Set(t, root, counter("mlx5_2", "symbol_error"), "3")
	run(t, c)
	if inode() == first {
		t.Errorf("a moved counter was not saved")
	}
}
