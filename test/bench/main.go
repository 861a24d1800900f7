// Command bench measures gpuhc-healthcheck on a healthy node: wall time,
// CPU time and peak RSS over repeated runs, and how many calls reached
// Slurm. Calls are counted independently of the binary's own report: the
// config points scontrol at a shim that logs each exec, and slurmrestd at
// a local listener that counts requests.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("bin", "bin/gpuhc-healthcheck", "health check binary")
	runs := flag.Int("runs", 30, "number of runs")
	dry := flag.Bool("dry-run", true, "pass --dry-run")
	simulate := flag.String("simulate", "", "pass --simulate MODEL (every GPU check against NVIDIA's simulated server)")
	ib := flag.Bool("ib", false, "measure what the IB and topology checks add on a DGX H100 sysfs tree (root)")
	km := flag.Bool("kmsg", false, "measure what the kernel-log pass and its rules add, over a full 1 MiB ring (in process)")
	cfg := flag.Bool("config", false, "time --check-config on every hostile config shape (docs/reliability.md)")
	flag.Parse()
	run := func() error { return bench(*bin, *runs, *dry, *simulate) }
	switch {
	case *ib:
		run = func() error { return benchIB(*bin, *runs) }
	case *km:
		run = func() error { return benchKmsg(*runs) }
	case *cfg:
		run = func() error { return benchConfig(*bin, *runs) }
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type sample struct {
	wall, cpu time.Duration
	rssKiB    int64
}

func bench(bin string, runs int, dry bool, simulate string) error {
	dir, err := os.MkdirTemp("", "gpuhc-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var restCalls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		restCalls.Add(1)
		http.Error(w, "bench: no Slurm here", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	shimLog := filepath.Join(dir, "scontrol.calls")
	cfg, err := writeFixtures(dir, srv.URL, shimLog)
	if err != nil {
		return err
	}
	args := []string{"--config", cfg, "--node", "bench001"}
	if dry {
		args = append(args, "--dry-run")
	}
	if simulate != "" {
		args = append(args, "--simulate", simulate)
	}
	var samples []sample
	for i := 0; i < runs; i++ {
		s, err := runOnce(bin, args)
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		samples = append(samples, s)
	}
	report(bin, args, samples, restCalls.Load(), countLines(shimLog))
	return nil
}

func writeFixtures(dir, url, shimLog string) (string, error) {
	shim := filepath.Join(dir, "scontrol")
	script := "#!/bin/sh\necho \"$@\" >> " + shimLog + "\nexit 1\n"
	if err := os.WriteFile(shim, []byte(script), 0o755); err != nil {
		return "", err
	}
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("bench-token\n"), 0o600); err != nil {
		return "", err
	}
	cfg := filepath.Join(dir, "gpuhc.toml")
	body := fmt.Sprintf(`state_dir = %q
lock_file = %q
[events]
file = %q
[slurm]
backend = "auto"
url = %q
token_file = %q
scontrol = %q
# A realistic healthy node: every check has something to do.
[checks.processes]
required = [%q]
[[checks.mounts.mount]]
path = "/"
writable = true
min_free = "1%%"
[[checks.mounts.mount]]
path = "/proc"
fstype = "proc"
`, filepath.Join(dir, "state"), filepath.Join(dir, "hc.lock"), filepath.Join(dir, "events.jsonl"), url, token, shim, filepath.Base(os.Args[0]))
	return cfg, os.WriteFile(cfg, []byte(body), 0o644)
}

func runOnce(bin string, args []string) (sample, error) {
	cmd := exec.Command(bin, args...)
	// slurmd's environment: nothing but the node name.
	cmd.Env = []string{"SLURMD_NODENAME=bench001"}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return sample{}, fmt.Errorf("%v\n%s", err, out.String())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return sample{wall: wall, cpu: cpu, rssKiB: ru.Maxrss}, nil
}

func report(bin string, args []string, s []sample, rest int64, scontrol int) {
	wall := pick(s, func(x sample) float64 { return float64(x.wall) / 1e6 })
	cpu := pick(s, func(x sample) float64 { return float64(x.cpu) / 1e6 })
	rss := pick(s, func(x sample) float64 { return float64(x.rssKiB) / 1024 })
	fmt.Printf("command: %s %s (env: SLURMD_NODENAME only), %d runs\n", bin, strings.Join(args, " "), len(s))
	fmt.Printf("%-14s %10s %10s\n", "metric", "median", "max")
	fmt.Printf("%-14s %10.1f %10.1f\n", "wall ms", median(wall), slices.Max(wall))
	fmt.Printf("%-14s %10.1f %10.1f\n", "cpu ms", median(cpu), slices.Max(cpu))
	fmt.Printf("%-14s %10.1f %10.1f\n", "max RSS MiB", median(rss), slices.Max(rss))
	fmt.Printf("slurm calls: %d (slurmrestd requests %d, scontrol execs %d)\n", rest+int64(scontrol), rest, scontrol)
}

func pick(s []sample, f func(sample) float64) []float64 {
	out := make([]float64, len(s))
	for i, x := range s {
		out[i] = f(x)
	}
	return out
}

func median(v []float64) float64 {
	c := slices.Clone(v)
	slices.Sort(c)
	n := len(c)
	if n%2 == 1 {
		return c[n/2]
	}
	return (c[n/2-1] + c[n/2]) / 2
}

func countLines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}
