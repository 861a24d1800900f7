// Command fleetgen writes a synthetic fleet's gpuhc event logs into a
// directory (see internal/fleetgen), for the stats bench and for trying
// gpuhc-drain stats by hand:
//
//	go run ./test/fleetgen -nodes 100 -days 90 -out /tmp/fleet
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/gpuhc/gpuhc/internal/fleetgen"
)

func main() {
	d := fleetgen.Defaults()
	p := d
	flag.IntVar(&p.Nodes, "nodes", d.Nodes, "number of nodes")
	flag.IntVar(&p.GPUsPerNode, "gpus", d.GPUsPerNode, "GPUs per node")
	flag.IntVar(&p.Days, "days", d.Days, "days of logs")
	flag.Uint64Var(&p.Seed, "seed", d.Seed, "random seed")
	flag.Float64Var(&p.FailureRate, "rate", d.FailureRate, "incidents per node-year on an ordinary node")
	flag.IntVar(&p.LemonNodes, "lemons", d.LemonNodes, "nodes failing -lemon-factor times as often")
	flag.Float64Var(&p.LemonFactor, "lemon-factor", d.LemonFactor, "how much more often lemon nodes fail")
	flag.IntVar(&p.RotateBytes, "rotate", d.RotateBytes, "rotate a node's log at this many bytes (0: never)")
	flag.DurationVar(&p.Heartbeat, "heartbeat", d.Heartbeat, "heartbeat interval")
	flag.Func("start", "when the logs begin, RFC 3339 (default 2025-01-01T00:00:00Z); a start -days back from now makes open drains end at now, as on a live fleet", func(v string) error {
		t, err := time.Parse(time.RFC3339, v)
		p.Start = t
		return err
	})
	out := flag.String("out", "", "directory to write (required)")
	truth := flag.String("truth", "", "also write the ground truth as JSON to this file")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: fleetgen -out DIR [-nodes N] [-days N] [-seed N] ...")
		os.Exit(2)
	}
	start := time.Now()
	t, err := fleetgen.Generate(*out, p)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetgen:", err)
		os.Exit(1)
	}
	open := 0
	for _, d := range t.Drains {
		if d.Resume.IsZero() {
			open++
		}
	}
	fmt.Printf("fleetgen: %d nodes x %d days into %s in %.1fs: %d files, %d lines (%d heartbeats), %.1f MB (%.1f MB on disk), %d episodes, %d drains (%d open), %d episodes across rotation\n",
		p.Nodes, p.Days, *out, time.Since(start).Seconds(), t.Files, t.Lines, t.Heartbeats, float64(t.Bytes)/1e6, float64(t.DiskBytes)/1e6,
		len(t.Episodes), len(t.Drains), open, t.Spanning)
	if *truth != "" {
		b, err := json.MarshalIndent(t, "", "  ")
		if err == nil {
			err = os.WriteFile(*truth, b, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "fleetgen:", err)
			os.Exit(1)
		}
	}
}
