// Package kernlogtest holds what the kernel-log rules' tests share: a
// fake kernel-log pass and the reader of their testdata corpora.
package kernlogtest

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/kmsg"
)

// Reader hands out a fixed snapshot and records who judged it.
type Reader = kmsg.Fixed

// Replay is a snapshot of text lines of unknown level, as a replayed log.
func Replay(boot string, texts ...string) kmsg.Snapshot {
	s := kmsg.Snapshot{BootID: boot}
	for i, t := range texts {
		s.Lines = append(s.Lines, kmsg.Line{Seq: uint64(i), Level: -1, Text: t})
	}
	return s
}

// Seqs numbers the lines of successive snapshots of one node on, as the
// kernel numbers its records: a node's log only grows within a boot, and
// the rules skip lines they have judged already (kmsg.Snapshot.Unjudged).
type Seqs struct{ next uint64 }

// Number renumbers s's lines after the ones numbered before.
func (q *Seqs) Number(s kmsg.Snapshot) kmsg.Snapshot {
	lines := make([]kmsg.Line, len(s.Lines))
	for i, l := range s.Lines {
		l.Seq = q.next
		q.next++
		lines[i] = l
	}
	s.Lines = lines
	return s
}

// Case is one line of a corpus with its expected verdict.
type Case struct {
	Where     string // file:line
	Source    string // URL, or "synthetic: why"
	Status    check.Status
	Action    check.Action
	Component string
	Text      string
}

// ReadCorpus parses a corpus file:
//
//	# comment
//	@source URL                  (the lines below were pasted there)
//	@synthetic why               (written here: no public sample found)
//	STATUS ACTION COMPONENT | kernel message text
//	OK | kernel message text     (must not fire)
func ReadCorpus(t *testing.T, path string) []Case {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Case
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
		c, err := parseCase(line)
		if err != nil || source == "" {
			t.Fatalf("%s:%d: want [@source …] then \"VERDICT | text\", got %q (%v)", path, n, line, err)
		}
		c.Where, c.Source = fmt.Sprintf("%s:%d", path, n), source
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func parseCase(line string) (Case, error) {
	verdict, text, ok := strings.Cut(line, " | ")
	fields := strings.Fields(verdict)
	if !ok || len(fields) == 0 {
		return Case{}, fmt.Errorf("no verdict")
	}
	st, err := check.ParseStatus(fields[0])
	if err != nil {
		return Case{}, err
	}
	c := Case{Status: st, Text: text}
	if st == check.OK {
		return c, nil
	}
	if len(fields) != 3 {
		return Case{}, fmt.Errorf("want STATUS ACTION COMPONENT, got %q", verdict)
	}
	c.Action, c.Component = check.Action(fields[1]), fields[2]
	return c, nil
}

// Judge checks results of one corpus line: one result, the case's
// verdict on its component, or OK for the host.
func Judge(t *testing.T, c Case, res []check.Result) {
	t.Helper()
	want := check.Result{Component: "host", Status: check.OK, Action: check.ActionNone}
	if c.Status != check.OK {
		want = check.Result{Component: c.Component, Status: c.Status, Action: c.Action}
	}
	if len(res) != 1 {
		t.Fatalf("%q (%s): %d results %+v, want 1", c.Text, c.Source, len(res), res)
	}
	got := res[0]
	if got.Component != want.Component || got.Status != want.Status || got.Action != want.Action {
		t.Errorf("%q (%s):\n got  %s %s %s: %s\n want %s %s %s", c.Text, c.Source,
			got.Status, got.Action, got.Component, got.Message, want.Status, want.Action, want.Component)
	}
}
