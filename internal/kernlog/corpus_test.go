package kernlog

import (
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/kernlog/kernlogtest"
)

// Every line of the corpus, alone, on a fresh node: the faults give their
// verdict on their component, the healthy lines an OK for the host; and
// every rule has a fault line in it.
func TestCorpus(t *testing.T) {
	cases := kernlogtest.ReadCorpus(t, "testdata/host-kernel.txt")
	if len(cases) < 60 {
		t.Fatalf("only %d corpus lines", len(cases))
	}
	faults := map[string]bool{}
	for _, c := range cases {
		t.Run(c.Where, func(t *testing.T) {
			r := &fakeReader{Snap: replay("boot-1", c.Text)}
			kernlogtest.Judge(t, c, newCheck(t, defaults(), nil, r).Run(t.Context()))
		})
		for _, r := range Rules {
			m := r.Match.MatchString(c.Text)
			if m && !containsAny(c.Text, r.Has) {
				t.Errorf("%s: rule %s matches %q but its Has %q would skip it", c.Where, r.Name, c.Text, r.Has)
			}
			if c.Status != check.OK && m {
				faults[r.Name] = true
			}
		}
	}
	for _, r := range Rules {
		if !faults[r.Name] {
			t.Errorf("rule %s has no fault line in the corpus", r.Name)
		}
	}
}
