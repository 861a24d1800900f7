package host

import (
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

// testdata/cpu/node has 128 CPUs with the SMT siblings offline:
// online is 0-31,64-95.
func TestCPU(t *testing.T) {
	const online = "sys/devices/system/cpu/online"
	tests := []struct {
		name      string
		overrides map[string]string
		expected  int
		want      want
	}{
		{"as expected", nil, 64, want{check.OK, "64 CPUs online (0-31,64-95)"}},
		{"no expectation reports the count", nil, 0, want{check.OK, "64 CPUs online"}},
		{"fewer than expected drains", nil, 128, want{check.Fail, "64 CPUs online (0-31,64-95), expected 128"}},
		{"more than expected drains", map[string]string{online: "0-127\n"}, 64, want{check.Fail, "128 CPUs online (0-127), expected 64"}},
		{"one CPU lost drains", map[string]string{online: "0-30,64-95\n"}, 64, want{check.Fail, "63 CPUs online"}},
		{"single CPU", map[string]string{online: "0\n"}, 1, want{check.OK, "1 CPUs online (0)"}},
		{"missing file is an error", map[string]string{online: remove}, 64, want{check.Error, "read "}},
		{"garbage is an error", map[string]string{online: "0-31,banana\n"}, 64, want{check.Error, "bad CPU number"}},
		{"empty is an error", map[string]string{online: "\n"}, 64, want{check.Error, "empty CPU list"}},
		{"overlapping ranges are an error", map[string]string{online: "0-31,16-47\n"}, 48, want{check.Error, "out of order"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := fixture(t, "cpu/node", tc.overrides)
			rs := run(t, NewCPU(root, config.CPU{Expected: tc.expected}))
			expect(t, nameCPU, rs, map[string]want{"host": tc.want})
		})
	}
}

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		fail bool
	}{
		{"0-1", 2, false},
		{"0-31,64-95\n", 64, false},
		{"0,2,4-7", 6, false},
		{"5", 1, false},
		{"", 0, true},
		{"3-1", 0, true},
		{"0-", 0, true},
		{"-3", 0, true},
		{"0,,1", 0, true},
		{"+1", 0, true},
		{"1,0", 0, true},
		{"0-99999999", 0, true},
		{"0-65535", 65536, false},
		{"0-65536", 0, true},
	}
	for _, tc := range tests {
		n, err := parseCPUList(tc.in)
		if (err != nil) != tc.fail || n != tc.n {
			t.Errorf("parseCPUList(%q) = %d, %v; want %d, fail=%v", tc.in, n, err, tc.n, tc.fail)
		}
	}
}
