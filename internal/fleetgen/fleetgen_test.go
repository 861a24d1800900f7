package fleetgen

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
)

func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func TestDeterministic(t *testing.T) {
	p := Defaults()
	d1, d2, d3 := t.TempDir(), t.TempDir(), t.TempDir()
	t1, err := Generate(d1, p)
	if err != nil {
		t.Fatal(err)
	}
	t2, err := Generate(d2, p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(t1, t2) || !reflect.DeepEqual(readDir(t, d1), readDir(t, d2)) {
		t.Fatal("same parameters, different output")
	}
	p.Seed++
	t3, err := Generate(d3, p)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(t1.Episodes, t3.Episodes) {
		t.Fatal("another seed, same episodes")
	}
}

func TestLayoutAndContent(t *testing.T) {
	p := Defaults()
	dir := t.TempDir()
	tr, err := Generate(dir, p)
	if err != nil {
		t.Fatal(err)
	}
	files := readDir(t, dir)
	if len(files) != tr.Files {
		t.Fatalf("%d files, truth says %d", len(files), tr.Files)
	}
	var lines, heartbeats, torn int
	var size int64
	nodes := map[string]bool{}
	for name, b := range files {
		node, suffix, ok := strings.Cut(name, ".events.jsonl")
		if !ok {
			t.Fatalf("unexpected file %s", name)
		}
		nodes[node] = true
		isGz := len(b) > 2 && b[0] == 0x1f && b[1] == 0x8b
		if isGz != strings.HasSuffix(suffix, ".gz") || (suffix != "" && suffix != ".1" && !isGz) {
			t.Fatalf("%s: gzip %v", name, isGz)
		}
		if isGz {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if b, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		size += int64(len(b))
		if p.RotateBytes > 0 && len(b) > p.RotateBytes {
			t.Fatalf("%s: %d bytes, over %d", name, len(b), p.RotateBytes)
		}
		for _, line := range strings.SplitAfter(string(b), "\n") {
			if line == "" {
				continue
			}
			lines++
			var ev events.Event
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				torn++
				continue
			}
			if ev.Node != node || ev.Time.Before(tr.Start) || ev.Time.After(tr.End) {
				t.Fatalf("%s: %s", name, line)
			}
			if ev.Kind == events.KindHeartbeat {
				heartbeats++
				if len(ev.Serials) != p.GPUsPerNode || ev.Hours <= 0 || ev.Hours > 24 {
					t.Fatalf("%s: %s", name, line)
				}
			}
		}
	}
	if len(nodes) != p.Nodes || lines != tr.Lines || heartbeats != tr.Heartbeats || torn != tr.TornLines || torn != 2 || size != tr.Bytes {
		t.Fatalf("%d nodes %d lines %d heartbeats %d torn %d bytes; truth %+v", len(nodes), lines, heartbeats, torn, size, tr)
	}
	if tr.Spanning == 0 {
		t.Fatal("no episode spans a rotation")
	}
	for _, e := range tr.Episodes {
		if e.Node == tr.Quiet {
			t.Fatalf("the quiet node failed: %+v", e)
		}
	}
	// The moved GPU: two tenures, failures in both nodes.
	mv := tr.Moved
	var in []string
	for _, tn := range tr.Tenures {
		if tn.Serial == mv.Serial {
			in = append(in, tn.Node)
		}
	}
	failed := map[string]int{}
	for _, e := range tr.Episodes {
		if e.Serial == mv.Serial {
			failed[e.Node]++
		}
	}
	if !reflect.DeepEqual(in, []string{mv.From, mv.To}) || failed[mv.From] < 2 || failed[mv.To] < 2 || !mv.Installed.After(mv.Removed) {
		t.Fatalf("move %+v: tenures in %v, episodes %v", mv, in, failed)
	}
	// Hours: each node's heartbeats cover its period exactly.
	var want time.Duration
	for _, n := range tr.Nodes {
		want += n.To.Sub(n.From)
	}
	if got := heartbeatHours(t, dir); got != want.Hours() {
		t.Fatalf("heartbeat hours %v, want %v", got, want.Hours())
	}
}

func heartbeatHours(t *testing.T, dir string) float64 {
	t.Helper()
	var secs float64
	files := readDir(t, dir)
	for name, b := range files {
		if strings.HasSuffix(name, ".gz") {
			zr, _ := gzip.NewReader(bytes.NewReader(b))
			b, _ = io.ReadAll(zr)
		}
		for _, line := range strings.Split(string(b), "\n") {
			var ev events.Event
			if json.Unmarshal([]byte(line), &ev) == nil && ev.Kind == events.KindHeartbeat {
				secs += float64(int64(ev.Hours*3600 + 0.5))
			}
		}
	}
	return secs / 3600
}

func TestParams(t *testing.T) {
	for _, p := range []Params{{}, {Nodes: 1}, {Nodes: 1, Days: 1, FailureRate: -1}, {Nodes: 1, Days: 1, Heartbeat: time.Millisecond}} {
		if _, err := Generate(t.TempDir(), p); err == nil {
			t.Errorf("%+v: no error", p)
		}
	}
	// tiny fleets work, without the special cases they cannot hold
	tr, err := Generate(t.TempDir(), Params{Nodes: 1, Days: 1, GPUsPerNode: 0, FailureRate: 1000})
	if err != nil || tr.Moved.Serial != "" || len(tr.Episodes) != 0 || tr.Heartbeats != 1 {
		t.Fatalf("%+v %v", tr, err)
	}
}

// The truth follows docs/architecture.md#episodes: an admin's resume of a
// still-failing node ends the episode without re-arming the component, so
// an ERROR→FAIL blip after it opens no new episode.
func TestResumeDoesNotRearmInTruth(t *testing.T) {
	p := Params{Nodes: 40, GPUsPerNode: 8, Days: 120, FailureRate: 6, LemonNodes: 2, LemonFactor: 8, Seed: 7, RotateBytes: 12 << 10}
	dir := t.TempDir()
	tr, err := Generate(dir, p)
	if err != nil {
		t.Fatal(err)
	}
	byNode := map[string][]events.Event{}
	for name, b := range readDir(t, dir) {
		if strings.HasSuffix(name, ".gz") {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if b, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		for _, line := range strings.Split(string(b), "\n") {
			var ev events.Event
			if json.Unmarshal([]byte(line), &ev) == nil {
				byNode[ev.Node] = append(byNode[ev.Node], ev)
			}
		}
	}
	blips := 0
	for node, evs := range byNode {
		slices.SortStableFunc(evs, func(a, b events.Event) int { return a.Time.Compare(b.Time) })
		for i, ev := range evs {
			if ev.Kind != events.KindResume || ev.By != "gpuhc-drain:root" {
				continue
			}
			parts := strings.SplitN(strings.TrimPrefix(ev.Message, "gpuhc: "), ": ", 3)
			chk, comp := parts[0], parts[1]
			// the episode ended at the resume
			ended := false
			for _, e := range tr.Episodes {
				ended = ended || e.Node == node && e.Check == chk && e.Component == comp && e.End.Equal(ev.Time)
			}
			if !ended {
				t.Errorf("%s: no episode of %s %s ends at the admin's resume %v", node, chk, comp, ev.Time)
			}
			for _, later := range evs[i+1:] {
				if later.Kind != events.KindTransition || later.Check != chk || later.Component != comp {
					continue
				}
				if later.Status != "FAIL" {
					if later.Status == "OK" {
						break
					}
					continue
				}
				blips++
				for _, e := range tr.Episodes {
					if e.Node == node && e.Check == chk && e.Component == comp && e.Start.Equal(later.Time) {
						t.Errorf("%s: the FAIL at %v after the resume opens an episode", node, later.Time)
					}
				}
			}
		}
	}
	if blips == 0 {
		t.Fatal("no ERROR→FAIL after an admin's resume in the fleet")
	}
}
