package bandwidth

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
)

func TestParseAllReduce(t *testing.T) {
	tests := []struct {
		sample string
		want   allReduce
		err    string
	}{
		{"h100x8.txt", allReduce{size: 1 << 30, busbw: 482.05, wrong: 0, oob: 0, avg: 481.71}, ""},
		{"h100x8-degraded.txt", allReduce{size: 1 << 30, busbw: 212.40, wrong: 0, oob: 0, avg: 212.18}, ""},
		{"h100x8-wrong.txt", allReduce{size: 1 << 30, busbw: 481.22, wrong: 4096, oob: 4096, oobFailed: true, avg: 481.065}, ""},
		{"h100x8-novalidation.txt", allReduce{size: 1 << 30, busbw: 482.05, wrong: -1, oob: 0, avg: 481.71}, ""},
		{"2gpu-2019.txt", allReduce{size: 134217728, busbw: 43.71, wrong: -1, oob: 0, avg: 42.3251}, ""},
		{"2gpu-oob-failed.txt", allReduce{size: 134217728, busbw: 5.66, wrong: 12, oob: 12, oobFailed: true, avg: 5.6575}, ""},
		{"h100x8-truncated.txt", allReduce{}, `no "Avg bus bandwidth" line`},
		{"../nvbandwidth/garbage.txt", allReduce{}, "no result table"},
	}
	for _, tt := range tests {
		t.Run(tt.sample, func(t *testing.T) {
			got, err := parseAllReduce(readSample(t, "all_reduce_perf/"+tt.sample))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	head := "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n"
	for _, bad := range []string{
		head + "  1073741824     268435456     float     sum      -1   3903.5  275.07\n# Avg bus bandwidth    : 1\n",
		head + "  1073741824     268435456     float     sum      -1   3903.5  275.07  x  0   3898.0  275.46  y  0\n# Avg bus bandwidth    : 1\n",
		head + "# Avg bus bandwidth    : 1\n",
		head + "  1073741824     268435456     float     sum      -1   3903.5  275.07  481.37  0   3898.0  275.46  482.05  0\n# Avg bus bandwidth    : NaN\n",
	} {
		if r, err := parseAllReduce([]byte(bad)); err == nil {
			t.Errorf("%q: parsed %+v", bad, r)
		}
	}
}

func TestAllReduceCheck(t *testing.T) {
	tests := []struct {
		name   string
		sample string
		status string
		gpus   int
		floor  float64
		want   string
		worst  check.Status
	}{
		{"healthy", "h100x8.txt", "0", 8, 400, "all-gpus OK all_reduce busbw 482.1 GB/s at 1 GiB >= 400", check.OK},
		{"no floor", "h100x8.txt", "0", 8, 0, "all-gpus OK all_reduce busbw 482.1 GB/s at 1 GiB (no floor set)", check.OK},
		{"degraded NVLink", "h100x8-degraded.txt", "0", 8, 400, "all-gpus FAIL all_reduce busbw 212.4 GB/s at 1 GiB < floor 400", check.Fail},
		{"wrong results", "h100x8-wrong.txt", "0", 8, 400, "all-gpus FAIL all_reduce_perf: 4096 wrong values in the results (busbw 481.2 GB/s)", check.Fail},
		{"validation failed", "2gpu-oob-failed.txt", "0", 2, 0, "all-gpus FAIL all_reduce_perf: 12 wrong values", check.Fail},
		{"truncated", "h100x8-truncated.txt", "0", 8, 400, `all-gpus ERROR all_reduce_perf: output not understood: no "Avg bus bandwidth" line`, check.Error},
		{"tool fails", "h100x8-truncated.txt", "1", 8, 400, "all-gpus ERROR ", check.Error},
		{"one GPU", "h100x8.txt", "0", 1, 400, "all-gpus SKIP all_reduce_perf: one GPU", check.Skip},
		{"no GPU", "h100x8.txt", "0", 0, 400, "all-gpus SKIP all_reduce_perf: no CUDA device", check.Skip},
		{"count unknown", "h100x8.txt", "0", -1, 400, "all-gpus ERROR all_reduce_perf: not run: the GPU count comes from the in-process measurement", check.Error},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := toolConfig()
			c.AllReducePerf = catTool(t, "testdata/all_reduce_perf/"+tt.sample, tt.status)
			c.AllReduceGBps = tt.floor
			var m measurement
			m.allReduce(context.Background(), c, tt.gpus)
			got := summary(m.results)
			if len(got) != 1 || !strings.HasPrefix(got[0], tt.want) || check.Worst(m.results) != tt.worst {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			if tt.worst == check.Fail && m.results[0].Action != check.ActionDrain {
				t.Errorf("action %s", m.results[0].Action)
			}
		})
	}
}

func TestAllReduceArguments(t *testing.T) {
	dir := t.TempDir()
	c := toolConfig()
	c.AllReducePerf = fakeTool(t, `echo "$@" > `+dir+"/args\n/bin/cat "+mustAbs(t, "testdata/all_reduce_perf/h100x8.txt"))
	var m measurement
	m.allReduce(context.Background(), c, 8)
	b, _ := os.ReadFile(dir + "/args")
	if got := strings.TrimSpace(string(b)); got != "-b 1G -e 1G -f 2 -g 8 -c 1" {
		t.Errorf("args %q", got)
	}
	if len(m.figures) != 1 || m.figures[0].Kind != KindAllReduce || m.figures[0].GBps != 482.05 {
		t.Errorf("figures %+v", m.figures)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	b, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return b + "/" + p
}
