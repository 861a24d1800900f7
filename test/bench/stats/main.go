// Command stats measures fleet statistics at scale: it generates a
// synthetic fleet's event logs once (internal/fleetgen; 10,000 nodes × 365
// days by default, cached between runs), then reads them all and computes
// the report in a child process, whose wall time and peak RSS it reports
// against the targets (< 10 s, < 500 MB on a 2-core machine).
//
//	go run ./test/bench/stats [-nodes 10000] [-days 365] [-bin bin/gpuhc-drain]
//
// `make bench` passes -bin bin/gpuhc-drain, so the real CLI is measured
// (`gpuhc-drain stats --events DIR`). Without -bin the child is this
// program itself, running events.Scan and stats.Accumulator as the CLI does.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/fleetgen"
	"github.com/gpuhc/gpuhc/internal/stats"
)

// layout changes when fleetgen's output does, so old caches are not used.
const layout = 1

// fleetInfo is kept next to a cached fleet.
type fleetInfo struct {
	Layout                   int
	Params                   fleetgen.Params
	Files, Lines, Heartbeats int
	Episodes, Drains         int
	Bytes, DiskBytes         int64
	GenerateSeconds          float64
}

func main() {
	nodes := flag.Int("nodes", 10000, "nodes")
	days := flag.Int("days", 365, "days")
	seed := flag.Uint64("seed", 1, "generator seed")
	cache := flag.String("cache", "", "where to keep the generated logs (default: the user cache dir, gpuhc-bench/)")
	bin := flag.String("bin", "", "measure `BIN stats --events DIR` instead of the in-process reader")
	maxWall := flag.Duration("max-wall", 10*time.Second, "target wall time")
	maxRSS := flag.Int64("max-rss-mb", 500, "target peak RSS, MB")
	child := flag.String("child", "", "internal: read DIR and print the report")
	flag.Parse()
	if *child != "" {
		if err := runChild(*child); err != nil {
			fmt.Fprintln(os.Stderr, "stats bench child:", err)
			os.Exit(1)
		}
		return
	}
	if err := bench(*nodes, *days, *seed, *cache, *bin, *maxWall, *maxRSS); err != nil {
		fmt.Fprintln(os.Stderr, "stats bench:", err)
		os.Exit(1)
	}
}

func bench(nodes, days int, seed uint64, cache, bin string, maxWall time.Duration, maxRSS int64) error {
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		cache = filepath.Join(dir, "gpuhc-bench")
	}
	root := filepath.Join(cache, fmt.Sprintf("stats-%dx%d-seed%d", nodes, days, seed))
	logs := filepath.Join(root, "events")
	info, err := fleet(root, logs, nodes, days, seed)
	if err != nil {
		return err
	}
	fmt.Printf("stats bench: %d nodes × %d days: %d lines (%d heartbeats), %d files, %.1f MB of JSON lines (%.1f MB on disk, older rotations gzipped), %d episodes, %d drains\n",
		nodes, days, info.Lines, info.Heartbeats, info.Files, float64(info.Bytes)/1e6, float64(info.DiskBytes)/1e6, info.Episodes, info.Drains)
	fmt.Printf("  logs in %s (generated in %.1fs; remove the directory to free the space)\n", logs, info.GenerateSeconds)

	var cmd *exec.Cmd
	what := "in-process events.Scan + stats"
	if bin != "" {
		cmd = exec.Command(bin, "stats", "--events", logs)
		what = bin + " stats --events DIR"
	} else {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		cmd = exec.Command(self, "-child", logs)
	}
	cmd.Stdout = io.Discard
	cmd.Stderr = os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	wall := time.Since(start)
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return errors.New("no rusage on this system")
	}
	rssMB := float64(ru.Maxrss) * 1024 / 1e6 // Linux: KiB
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	verdict := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "OVER TARGET"
	}
	fmt.Printf("  %s: wall %.2fs (target < %v: %s), peak RSS %.0f MB (target < %d MB: %s), CPU %.2fs (user %.2fs, sys %.2fs), %.0f lines/s\n",
		what, wall.Seconds(), maxWall, verdict(wall < maxWall), rssMB, maxRSS, verdict(rssMB < float64(maxRSS)),
		cpu.Seconds(), time.Duration(ru.Utime.Nano()).Seconds(), time.Duration(ru.Stime.Nano()).Seconds(), float64(info.Lines)/wall.Seconds())
	return nil
}

// fleet generates the logs unless a matching cache is there.
func fleet(root, logs string, nodes, days int, seed uint64) (fleetInfo, error) {
	p := fleetgen.Params{Nodes: nodes, GPUsPerNode: 8, Days: days, FailureRate: 4, LemonNodes: max(nodes/100, 1),
		LemonFactor: 10, Seed: seed, RotateBytes: 48 << 10, Heartbeat: 24 * time.Hour}
	marker := filepath.Join(root, "fleet.json")
	var info fleetInfo
	if b, err := os.ReadFile(marker); err == nil && json.Unmarshal(b, &info) == nil && info.Layout == layout && info.Params.Nodes == nodes && info.Params.Days == days {
		return info, nil
	}
	fmt.Printf("stats bench: generating %d nodes × %d days into %s ...\n", nodes, days, logs)
	if err := os.RemoveAll(root); err != nil {
		return info, err
	}
	start := time.Now()
	t, err := fleetgen.Generate(logs, p)
	if err != nil {
		return info, err
	}
	info = fleetInfo{Layout: layout, Params: p, Files: t.Files, Lines: t.Lines, Heartbeats: t.Heartbeats, Episodes: len(t.Episodes),
		Drains: len(t.Drains), Bytes: t.Bytes, DiskBytes: t.DiskBytes, GenerateSeconds: time.Since(start).Seconds()}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return info, err
	}
	return info, os.WriteFile(marker, b, 0o644)
}

// runChild does what `gpuhc-drain stats --events DIR --json` will: read
// every log, count, and write the report.
func runChild(dir string) error {
	acc := stats.New(stats.Options{})
	warnings := 0
	tot, err := events.ScanTotals(context.Background(), []string{dir}, nil, func(string) { warnings++ }, func(ev events.Event) error {
		acc.Add(ev)
		return nil
	})
	if err != nil {
		return err
	}
	rep := acc.Report()
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "  read %d files, %d lines, %d events (%d malformed, %d warnings); fleet: %.0f hours, %d episodes, MTTF %s h, MTTR %s h, %d lemons\n",
		tot.Files, tot.Lines, tot.Events, tot.Malformed, warnings, rep.Fleet.Hours, rep.Fleet.Episodes,
		stats.FormatHours(rep.Fleet.MTTF), stats.FormatHours(rep.Fleet.MTTR), len(rep.Lemons))
	return nil
}
