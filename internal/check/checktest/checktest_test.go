package checktest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
)

// recorder stands in for the test a helper is given, keeping what the
// helper reports instead of failing the real test.
type recorder struct {
	testing.TB
	errs  []string
	fatal bool
}

func (r *recorder) Helper()           {}
func (r *recorder) Error(args ...any) { r.errs = append(r.errs, fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatal(args ...any) { r.Error(args...); r.fatal = true }

// want is declared as the checks' test packages declare theirs.
type want Want

func res(comp string, s check.Status, msg string) check.Result {
	r := check.Result{Check: "x", Component: comp, Status: s, Message: msg, Action: check.ActionNone}
	if s == check.Fail {
		r.Action = check.ActionDrain
	}
	return r
}

func TestExpect(t *testing.T) {
	healthy := []check.Result{res("a", check.OK, "rate 400 Gb/sec"), res("b", check.Fail, "rate 200 Gb/sec < expected 400")}
	tests := []struct {
		name string
		rs   []check.Result
		w    map[string]want
		errs []string // fragments, one per error expected, in order
	}{
		{"all as wanted", healthy,
			map[string]want{"a": {check.OK, "400"}, "b": {check.Fail, "< expected 400"}}, nil},
		{"empty fragment takes any message", healthy,
			map[string]want{"a": {Status: check.OK}, "b": {Status: check.Fail}}, nil},
		{"wrong status", healthy,
			map[string]want{"a": {check.Warn, ""}, "b": {check.Fail, ""}}, []string{"a: got OK"}},
		{"wrong message", healthy,
			map[string]want{"a": {check.OK, "800"}, "b": {check.Fail, ""}}, []string{`want OK containing "800"`}},
		{"missing component", healthy,
			map[string]want{"a": {check.OK, ""}, "b": {check.Fail, ""}, "c": {check.OK, ""}}, []string{`no result for "c"`}},
		{"unexpected component", healthy,
			map[string]want{"a": {check.OK, ""}}, []string{"unexpected result b"}},
		{"duplicate component", append(healthy, res("a", check.OK, "rate 400 Gb/sec")),
			map[string]want{"a": {check.OK, ""}, "b": {check.Fail, ""}}, []string{`component "a" reported twice`}},
		{"rest covers the unnamed", healthy,
			map[string]want{"b": {check.Fail, ""}, Rest: {check.OK, "400"}}, nil},
		{"rest judged like any other", healthy,
			map[string]want{"a": {check.OK, ""}, Rest: {check.OK, ""}}, []string{"b: got FAIL"}},
		{"rest does not excuse a missing name", healthy,
			map[string]want{"c": {check.OK, ""}, Rest: {check.OK, ""}}, []string{`no result for "c"`, "b: got FAIL"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			Expect(rec, tc.rs, tc.w, WellFormed("x"))
			// Map order varies, so compare as a set of fragments.
			if len(rec.errs) != len(tc.errs) {
				t.Fatalf("got errors %q, want %d matching %q", rec.errs, len(tc.errs), tc.errs)
			}
			for _, frag := range tc.errs {
				found := false
				for _, e := range rec.errs {
					found = found || strings.Contains(e, frag)
				}
				if !found {
					t.Errorf("no error containing %q in %q", frag, rec.errs)
				}
			}
		})
	}
}

func TestWellFormed(t *testing.T) {
	ok := res("mlx5_0/1", check.OK, "state ACTIVE")
	tests := []struct {
		name string
		edit func(r *check.Result)
		want string // error fragment; empty: none
	}{
		{"good", func(r *check.Result) {}, ""},
		{"good FAIL drains", func(r *check.Result) { r.Status, r.Action = check.Fail, check.ActionDrain }, ""},
		{"other check's name", func(r *check.Result) { r.Check = "y" }, `check name "y", want "x"`},
		{"unstamped", func(r *check.Result) { r.Check = "" }, `check name "", want "x"`},
		{"empty component", func(r *check.Result) { r.Component = "" }, "empty component or message"},
		{"empty message", func(r *check.Result) { r.Message = "" }, "empty component or message"},
		{"two-line message", func(r *check.Result) { r.Message = "a\nb" }, "not one printable line"},
		{"control byte in component", func(r *check.Result) { r.Component = "mlx5\x1b" }, "not one printable line"},
		{"padded message", func(r *check.Result) { r.Message = " a" }, "not one printable line"},
		{"FAIL without drain", func(r *check.Result) { r.Status = check.Fail }, "status FAIL with action"},
		{"ERROR drains", func(r *check.Result) { r.Status, r.Action = check.Error, check.ActionDrain }, "status ERROR with action"},
		{"WARN drains", func(r *check.Result) { r.Status, r.Action = check.Warn, check.ActionDrain }, "status WARN with action"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := ok
			tc.edit(&r)
			err := WellFormed("x")(r)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want %q", err, tc.want)
			}
			// Through Expect too: a broken result fails the test even
			// when its verdict is the one wanted.
			rec := &recorder{TB: t}
			Expect(rec, []check.Result{r}, map[string]want{r.Component: {r.Status, ""}}, WellFormed("x"))
			if (len(rec.errs) > 0) != (tc.want != "") {
				t.Errorf("Expect reported %q", rec.errs)
			}
		})
	}
}

func TestNilInvariantIsFatal(t *testing.T) {
	rec := &recorder{TB: t}
	Expect(rec, []check.Result{res("a", check.OK, "fine")}, map[string]want{"a": {check.OK, ""}}, nil)
	if !rec.fatal {
		t.Error("nil invariant accepted")
	}
}
