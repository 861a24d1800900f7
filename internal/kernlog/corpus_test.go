package kernlog

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
)

// corpusCase is one line of a testdata corpus with its expected verdict.
type corpusCase struct {
	where     string // file:line, for failures
	source    string // URL, or "synthetic: why"
	status    check.Status
	action    check.Action
	component string
	text      string
}

// readCorpus parses the corpus format described at the top of
// testdata/host-kernel.txt (fabric.sxid's corpus uses it too).
func readCorpus(t *testing.T, path string) []corpusCase {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []corpusCase
	source := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "@source "):
			source = strings.TrimPrefix(line, "@source ")
			continue
		case strings.HasPrefix(line, "@synthetic "):
			source = "synthetic: " + strings.TrimPrefix(line, "@synthetic ")
			continue
		}
		verdict, text, ok := strings.Cut(line, " | ")
		if !ok || source == "" {
			t.Fatalf("%s:%d: want [@source …] then \"VERDICT | text\", got %q", path, n, line)
		}
		c := corpusCase{where: fmt.Sprintf("%s:%d", path, n), source: source, text: text}
		fields := strings.Fields(verdict)
		st, err := check.ParseStatus(fields[0])
		if err != nil {
			t.Fatalf("%s: %v", c.where, err)
		}
		c.status = st
		if st != check.OK {
			if len(fields) != 3 {
				t.Fatalf("%s: want STATUS ACTION COMPONENT, got %q", c.where, verdict)
			}
			c.action, c.component = check.Action(fields[1]), fields[2]
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Every line of the corpus, alone, on a fresh node: the faults give their
// verdict on their component, the healthy lines an OK for the host.
func TestCorpus(t *testing.T) {
	cases := readCorpus(t, "testdata/host-kernel.txt")
	if len(cases) < 60 {
		t.Fatalf("only %d corpus lines", len(cases))
	}
	faults := map[string]bool{}
	for _, c := range cases {
		t.Run(c.where, func(t *testing.T) {
			r := &fakeReader{snap: replay("boot-1", c.text)}
			res := newCheck(t, defaults(), nil, r).Run(t.Context())
			if len(res) != 1 {
				t.Fatalf("%q (%s): %d results %+v, want 1", c.text, c.source, len(res), res)
			}
			got := res[0]
			want := check.Result{Component: "host", Status: check.OK, Action: check.ActionNone}
			if c.status != check.OK {
				want = check.Result{Component: c.component, Status: c.status, Action: c.action}
			}
			if got.Component != want.Component || got.Status != want.Status || got.Action != want.Action {
				t.Errorf("%q (%s):\n got  %s %s %s: %s\n want %s %s %s", c.text, c.source,
					got.Status, got.Action, got.Component, got.Message, want.Status, want.Action, want.Component)
			}
		})
		if c.status != check.OK {
			for _, r := range Rules {
				if r.Match.MatchString(c.text) {
					faults[r.Name] = true
				}
			}
		}
	}
	for _, r := range Rules {
		if !faults[r.Name] {
			t.Errorf("rule %s has no fault line in the corpus", r.Name)
		}
	}
}
