// Package checktest holds assertions on check results for the checks' tests.
package checktest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// Want is the expected verdict on one component: its status, and a
// fragment its message must contain (empty: any message).
type Want struct {
	Status check.Status
	Msg    string
}

// Wants admits a test package's own table type declared as
// "type want checktest.Want": vet rejects unkeyed literals of a type from
// another package, and the checks' tables are hundreds of {status, msg}
// pairs that read best unkeyed.
type Wants interface {
	~struct {
		Status check.Status
		Msg    string
	}
}

// Rest is the component key that stands for every component the table
// does not name, so a case can say "and all the others are OK" without
// listing every port of a fixture node.
const Rest = "*"

// Invariant says what is wrong with one result, nil if nothing.
type Invariant func(check.Result) error

// WellFormed is what every result of the check name must be: stamped with
// the check's name, a component and a message that are each one printable
// line (they end up in a drain reason), and a drain asked for by FAIL and
// only by FAIL.
func WellFormed(name string) Invariant {
	return func(r check.Result) error {
		var errs []error
		if r.Check != name {
			errs = append(errs, fmt.Errorf("%s: check name %q, want %q", r.Component, r.Check, name))
		}
		if r.Component == "" || r.Message == "" {
			errs = append(errs, fmt.Errorf("empty component or message: %+v", r))
		}
		if sysread.Printable(r.Message) != r.Message || sysread.Printable(r.Component) != r.Component {
			errs = append(errs, fmt.Errorf("not one printable line: %+v", r))
		}
		if (r.Status == check.Fail) != (r.Action == check.ActionDrain) {
			errs = append(errs, fmt.Errorf("%s: status %v with action %q", r.Component, r.Status, r.Action))
		}
		return errors.Join(errs...)
	}
}

// Holds fails the test if r breaks inv.
func Holds(t testing.TB, r check.Result, inv Invariant) {
	t.Helper()
	if inv == nil {
		// A forgotten invariant would silently drop every check on the
		// results' form; a test that means none says so with a func.
		t.Fatal("checktest: nil invariant")
		return
	}
	if err := inv(r); err != nil {
		t.Error(err)
	}
}

// ByComponent indexes rs by component, failing the test on a component
// reported twice and on any result that breaks inv.
func ByComponent(t testing.TB, rs []check.Result, inv Invariant) map[string]check.Result {
	t.Helper()
	got := map[string]check.Result{}
	for _, r := range rs {
		if _, dup := got[r.Component]; dup {
			t.Errorf("component %q reported twice", r.Component)
		}
		got[r.Component] = r
		Holds(t, r, inv)
	}
	return got
}

// Expect checks that rs holds exactly the components named in w, each
// with its status and message fragment, and that every result keeps inv.
// A component Rest ("*") in w stands for every component not named
// otherwise; without it an unnamed component fails the test.
func Expect[W Wants](t testing.TB, rs []check.Result, w map[string]W, inv Invariant) {
	t.Helper()
	got := ByComponent(t, rs, inv)
	for comp, wr := range w {
		if comp == Rest {
			continue
		}
		r, ok := got[comp]
		if !ok {
			t.Errorf("no result for %q; got %v", comp, rs)
			continue
		}
		match(t, r, Want(wr))
	}
	rest, hasRest := w[Rest]
	for comp, r := range got {
		if _, ok := w[comp]; ok {
			continue
		}
		if !hasRest {
			t.Errorf("unexpected result %s: %v %q", comp, r.Status, r.Message)
			continue
		}
		match(t, r, Want(rest))
	}
}

func match(t testing.TB, r check.Result, w Want) {
	t.Helper()
	if r.Status != w.Status || !strings.Contains(r.Message, w.Msg) {
		t.Errorf("%s: got %v %q, want %v containing %q", r.Component, r.Status, r.Message, w.Status, w.Msg)
	}
}
