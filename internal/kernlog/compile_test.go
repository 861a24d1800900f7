package kernlog

import "testing"

// The rules' expressions compile on first use (lazyre); every one must
// compile, or a line that reaches it would panic a run.
func TestEveryRuleExpressionCompiles(t *testing.T) {
	for _, r := range Rules {
		if r.Match == nil {
			t.Errorf("%s: no Match", r.Name)
			continue
		}
		if _, err := r.Match.Compile(); err != nil {
			t.Errorf("%s: Match: %v", r.Name, err)
		}
		if r.Ignore != nil {
			if _, err := r.Ignore.Compile(); err != nil {
				t.Errorf("%s: Ignore: %v", r.Name, err)
			}
		}
		if r.Unless != nil {
			if _, err := r.Unless.Compile(); err != nil {
				t.Errorf("%s: Unless: %v", r.Name, err)
			}
		}
	}
}
