package host

import (
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

// testdata/memory/node/proc/meminfo is a real one with MemTotal 24684084 kB.
func TestMemory(t *testing.T) {
	tests := []struct {
		name      string
		overrides map[string]string
		minTotal  string
		want      want
	}{
		{"no expectation reports the value", nil, "", want{check.OK, "MemTotal 23.5 GiB"}},
		{"at least the minimum", nil, "20GiB", want{check.OK, "MemTotal 23.5 GiB >= min 20 GiB"}},
		{"below the minimum drains", nil, "1000GiB", want{check.Fail, "MemTotal 23.5 GiB < min 1000 GiB"}},
		{"one kB short drains", nil, "25276503040", want{check.Fail, "MemTotal 23.5 GiB < min 23.5 GiB"}},
		{"bad min_total is an error", nil, "lots", want{check.Error, "bad min_total"}},
		{"missing meminfo is an error", map[string]string{"proc/meminfo": remove}, "", want{check.Error, "read "}},
		{"no MemTotal is an error", map[string]string{"proc/meminfo": "MemFree:  100 kB\n"}, "1GiB", want{check.Error, "no MemTotal"}},
		{"zero MemTotal is an error", map[string]string{"proc/meminfo": "MemTotal:  0 kB\n"}, "1GiB", want{check.Error, "no MemTotal"}},
		{"garbage meminfo is an error", map[string]string{"proc/meminfo": "MemTotal: 24684084 kB\n\x00\x01garbage\n"}, "1GiB",
			want{check.Error, "line 2: not a meminfo line"}},
		{"unknown unit is an error", map[string]string{"proc/meminfo": "MemTotal: 24684084 MB\n"}, "", want{check.Error, "bad amount"}},
		{"overflowing value is an error", map[string]string{"proc/meminfo": "MemTotal: 18446744073709551615 kB\n"}, "", want{check.Error, "bad amount"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := fixture(t, "memory/node", tc.overrides)
			rs := run(t, NewMemory(root, config.Memory{MinTotal: tc.minTotal}))
			expect(t, nameMemory, rs, map[string]want{"host": tc.want})
		})
	}
}

func TestMemoryHonoursContext(t *testing.T) {
	rs := NewMemory(fixture(t, "memory/node", nil), config.Memory{}).Run(cancelled())
	expect(t, nameMemory, rs, map[string]want{"host": {check.Error, "interrupted"}})
}
