package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/config/configtest"
)

// benchConfig times `gpuhc-healthcheck --check-config FILE` on every
// hostile config shape, sized just under the file cap, and on a 10 MB file
// the cap refuses: wall, CPU and peak RSS of the whole process, its exit
// code and how many bytes it wrote to stderr (slurmd's log).
func benchConfig(bin string, runs int) error {
	dir, err := os.MkdirTemp("", "gpuhc-bench-config-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	type file struct{ name, path string }
	var files []file
	for _, shape := range append(slices.Clone(configtest.Shapes), "10MB") {
		src := ""
		if shape == "10MB" {
			src = configtest.Shape("known-keys", 10<<20)
		} else {
			src = configtest.Shape(shape, config.MaxFile-4096)
		}
		p := filepath.Join(dir, shape+".toml")
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			return err
		}
		files = append(files, file{shape, p})
	}
	fmt.Printf("command: %s --check-config FILE, %d runs each (median; max RSS is the max)\n", bin, runs)
	fmt.Printf("%-14s %9s %8s %8s %8s %5s %7s\n", "shape", "bytes", "wall ms", "cpu ms", "RSS MiB", "exit", "stderr")
	for _, f := range files {
		var wall, cpu []float64
		var rss int64
		var code, errBytes int
		for range runs {
			s, c, n, err := runConfig(bin, f.path)
			if err != nil {
				return fmt.Errorf("%s: %w", f.name, err)
			}
			wall, cpu = append(wall, float64(s.wall)/1e6), append(cpu, float64(s.cpu)/1e6)
			rss, code, errBytes = max(rss, s.rssKiB), c, n
		}
		fi, _ := os.Stat(f.path)
		fmt.Printf("%-14s %9d %8.1f %8.1f %8.1f %5d %7d\n", f.name, fi.Size(), median(wall), median(cpu), float64(rss)/1024, code, errBytes)
	}
	return nil
}

// runConfig runs one --check-config and returns its usage, exit code and
// stderr size. Exit 2 (a refused config) is an answer, not a failure.
func runConfig(bin, path string) (sample, int, int, error) {
	cmd := exec.Command(bin, "--check-config", path)
	cmd.Env = []string{"SLURMD_NODENAME=bench001"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		return sample{}, 0, 0, err
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return sample{wall: wall, cpu: cpu, rssKiB: ru.Maxrss}, code, stderr.Len(), nil
}
