package stub

import (
	"bytes"
	"strings"
	"testing"
)

func TestMain(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main("gpuhc-prolog", "p", []string{"--dry-run"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "not yet") {
		t.Errorf("dry run: %d %q", code, out.String())
	}
	out.Reset()
	if code := Main("gpuhc-prolog", "p", []string{"--version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "gpuhc-prolog dev") {
		t.Errorf("version: %d %q", code, out.String())
	}
	if code := Main("gpuhc-prolog", "p", []string{"--nope"}, &out, &errb); code != 2 {
		t.Errorf("bad flag: exit %d", code)
	}
}
