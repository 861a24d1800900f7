package drainctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

// fakeCtl is an in-memory cluster.
type fakeCtl struct {
	mu     sync.Mutex
	nodes  map[string]slurm.Node
	calls  []string
	failOn map[string]error // "drain gpu001" → error
	lost   map[string]bool  // the change is made, then an error returned
	// hook, when set, is asked about every call after failOn; an error
	// fails the call.
	hook    func(op string) error
	user    string
	now     time.Time
	listErr error
}

var _ slurm.Controller = (*fakeCtl)(nil)

func newFake(now time.Time, nodes ...slurm.Node) *fakeCtl {
	f := &fakeCtl{nodes: map[string]slurm.Node{}, failOn: map[string]error{}, lost: map[string]bool{}, user: "root", now: now}
	for _, n := range nodes {
		f.nodes[n.Name] = n
	}
	return f
}

func (f *fakeCtl) Backend() string { return "fake" }

func (f *fakeCtl) call(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, op)
	if err := f.failOn[op]; err != nil {
		return err
	}
	if f.hook != nil {
		return f.hook(op)
	}
	return nil
}

func (f *fakeCtl) Node(_ context.Context, name string) (slurm.Node, error) {
	if err := f.call("node " + name); err != nil {
		return slurm.Node{}, err
	}
	n, ok := f.nodes[name]
	if !ok {
		return slurm.Node{}, fmt.Errorf("node %s: %w", name, slurm.ErrNodeNotFound)
	}
	return n, nil
}

func (f *fakeCtl) Nodes(context.Context) ([]slurm.Node, error) {
	if err := f.call("nodes"); err != nil {
		return nil, err
	}
	var out []slurm.Node
	for _, n := range f.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *fakeCtl) Drain(_ context.Context, name, reason string) error {
	if err := f.call("drain " + name); err != nil {
		return err
	}
	n := f.nodes[name]
	if !n.Drained() {
		n.State = append(n.State, "DRAIN")
	}
	n.Reason, n.ReasonUser, n.ReasonTime = reason, f.user, f.now
	f.nodes[name] = n
	if f.lost["drain "+name] {
		return errors.New("answer lost")
	}
	return nil
}

func (f *fakeCtl) Resume(_ context.Context, name string) error {
	if err := f.call("resume " + name); err != nil {
		return err
	}
	n := f.nodes[name]
	var st []string
	for _, s := range n.State {
		if s != "DRAIN" && s != "NOT_RESPONDING" {
			st = append(st, s)
		}
	}
	if st[0] == "DOWN" {
		st[0] = "IDLE"
	}
	n.State = st // 24.11 keeps the old reason on the idle node
	f.nodes[name] = n
	if f.lost["resume "+name] {
		return errors.New("answer lost")
	}
	return nil
}

func (f *fakeCtl) changes() []string {
	var out []string
	for _, c := range f.calls {
		if !strings.HasPrefix(c, "node ") && c != "nodes" {
			out = append(out, c)
		}
	}
	return out
}

// bed is one test's world: a config whose events.file is a per-node file
// in a temp directory, a fake cluster and a fixed clock.
type bed struct {
	t      *testing.T
	dir    string
	conf   string
	ctl    *fakeCtl
	now    time.Time
	env    map[string]string
	stdin  string
	stdout string
	stderr string
}

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func newBed(t *testing.T, nodes ...slurm.Node) *bed {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "gpuhc.toml")
	body := fmt.Sprintf("[events]\nfile = %q\n", filepath.Join(dir, "log", "%n.jsonl"))
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(2 * time.Hour)
	return &bed{t: t, dir: dir, conf: conf, ctl: newFake(now, nodes...), now: now,
		env: map[string]string{"SUDO_USER": "alice", "USER": "root"}}
}

// run runs gpuhc-drain with args (the config is added) and returns the
// exit code; stdout and stderr are kept.
func (b *bed) run(args ...string) int {
	b.t.Helper()
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") && args[0] != "help" {
		args = append([]string{args[0], "--config", b.conf}, args[1:]...)
	}
	var out, errb bytes.Buffer
	p := Program{
		Args:     args,
		Getenv:   func(k string) string { return b.env[k] },
		Hostname: func() (string, error) { return "admin1.example", nil },
		Stdin:    strings.NewReader(b.stdin),
		Stdout:   &out,
		Stderr:   &errb,
		Now:      func() time.Time { return b.now },
		NewController: func(config.Slurm, logrus.FieldLogger) (slurm.Controller, error) {
			return b.ctl, nil
		},
		UID: func() int { return 0 },
	}
	code := p.Main()
	b.stdout, b.stderr = out.String(), errb.String()
	return code
}

func (b *bed) mustRun(want int, args ...string) {
	b.t.Helper()
	if got := b.run(args...); got != want {
		b.t.Fatalf("%v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, got, want, b.stdout, b.stderr)
	}
}

// logEvents writes events into node's log, as the health check would.
func (b *bed) logEvents(node string, evs ...events.Event) {
	b.t.Helper()
	path := filepath.Join(b.dir, "log", node+".jsonl")
	if err := (events.Log{Path: path}).Append(context.Background(), evs...); err != nil {
		b.t.Fatal(err)
	}
}

// events reads node's log back.
func (b *bed) events(node string) []events.Event {
	b.t.Helper()
	data, err := os.ReadFile(filepath.Join(b.dir, "log", node+".jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		b.t.Fatal(err)
	}
	var out []events.Event
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev events.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			b.t.Fatalf("bad event line %q: %v", line, err)
		}
		out = append(out, ev)
	}
	return out
}

func node(name string, state []string, reason, user string, at time.Time) slurm.Node {
	return slurm.Node{Name: name, State: state, Reason: reason, ReasonUser: user, ReasonTime: at}
}

var _ slurm.Tuner = (*fakeCtl)(nil)

// Tune sets the node's weight and features as slurmctld would.
func (f *fakeCtl) Tune(_ context.Context, name string, s slurm.Settings) error {
	if err := f.call("tune " + name); err != nil {
		return err
	}
	n := f.nodes[name]
	if s.Weight != nil {
		n.Weight = *s.Weight
	}
	if s.Features != nil {
		n.Features = *s.Features
	}
	if s.ActiveFeatures != nil {
		n.ActiveFeatures = *s.ActiveFeatures
	}
	f.nodes[name] = n
	if f.lost["tune "+name] {
		return errors.New("answer lost")
	}
	return nil
}
