package ib

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/sysfsfix"
)

// trees are the fixture nodes, each healthy as generated.
var trees = []string{sysfsfix.H100NDR, sysfsfix.A100HDR, sysfsfix.RoCE}

// want is the expected verdict on one component. Message must contain
// msg (empty: anything).
type want struct {
	status check.Status
	msg    string
}

// expect checks that rs holds exactly the components in w, with their
// statuses and message fragments, and the invariants every result keeps.
// A component "*" stands for every component not named otherwise.
func expect(t *testing.T, name string, rs []check.Result, w map[string]want) {
	t.Helper()
	got := map[string]check.Result{}
	for _, r := range rs {
		if _, dup := got[r.Component]; dup {
			t.Errorf("component %q reported twice", r.Component)
		}
		got[r.Component] = r
		checkInvariants(t, name, r)
	}
	for comp, wr := range w {
		if comp == "*" {
			continue
		}
		r, ok := got[comp]
		if !ok {
			t.Errorf("no result for %q; got %v", comp, rs)
			continue
		}
		if r.Status != wr.status || !strings.Contains(r.Message, wr.msg) {
			t.Errorf("%s: got %v %q, want %v containing %q", comp, r.Status, r.Message, wr.status, wr.msg)
		}
	}
	rest, hasRest := w["*"]
	for comp, r := range got {
		if _, ok := w[comp]; ok {
			continue
		}
		if !hasRest {
			t.Errorf("unexpected result %s: %v %q", comp, r.Status, r.Message)
		} else if r.Status != rest.status || !strings.Contains(r.Message, rest.msg) {
			t.Errorf("%s: got %v %q, want %v containing %q", comp, r.Status, r.Message, rest.status, rest.msg)
		}
	}
}

// checkInvariants holds for every result an ib check returns: stamped, one
// printable line, and only FAIL asks for a drain.
func checkInvariants(t *testing.T, name string, r check.Result) {
	t.Helper()
	if r.Check != name {
		t.Errorf("%s: check name %q, want %q", r.Component, r.Check, name)
	}
	if r.Component == "" || r.Message == "" {
		t.Errorf("empty component or message: %+v", r)
	}
	if printable(r.Message) != r.Message || printable(r.Component) != r.Component {
		t.Errorf("not one printable line: %+v", r)
	}
	if (r.Status == check.Fail) != (r.Action == check.ActionDrain) {
		t.Errorf("%s: status %v with action %q", r.Component, r.Status, r.Action)
	}
}

// run runs c with a generous deadline, as the runner would.
func run(t testing.TB, c check.Check) []check.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Run(ctx)
}

func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// defaults is the shipped [checks.ib] configuration.
func defaults() config.IB { return config.Default().Checks.IB }

// writeFile creates or replaces root/rel, for files the fixture trees do
// not have (the boot id) and for garbage cases.
func writeFile(t testing.TB, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// hcaNames lists the tree's RDMA devices.
func hcaNames(t testing.TB, root string) []string {
	t.Helper()
	hs, err := Discover(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range hs {
		names = append(names, h.Name)
	}
	return names
}
