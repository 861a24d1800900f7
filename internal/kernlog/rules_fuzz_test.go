package kernlog

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/kmsg"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// Any kernel line against every rule: the cheap Has test never skips a
// line the rule's expression matches (or a fault would go unseen), and a
// finding is one printable line of bounded size on a printable component.
func FuzzRules(f *testing.F) {
	if file, err := os.Open("testdata/host-kernel.txt"); err == nil {
		for sc := bufio.NewScanner(file); sc.Scan(); {
			if _, text, ok := strings.Cut(sc.Text(), " | "); ok {
				f.Add(text)
			}
		}
		file.Close()
	}
	f.Add("")
	f.Add("nvme nvme0: \xff\x00")
	c := &kernelCheck{rules: Rules}
	f.Fuzz(func(t *testing.T, s string) {
		for i := range c.rules {
			r := &c.rules[i]
			if r.Match.MatchString(s) && !containsAny(s, r.Has) {
				t.Fatalf("rule %s matches %q, but its Has %q skips it", r.Name, s, r.Has)
			}
			fd, ok := c.match(t.Context(), r, kmsg.Line{Level: -1, Text: s})
			if !ok {
				continue
			}
			if fd.Component == "" || sysread.Printable(fd.Component) != fd.Component || sysread.Printable(fd.Message) != fd.Message ||
				len(fd.Message) > len(r.What)+2+excerpt+100 || fd.Rule != r.Name {
				t.Fatalf("rule %s on %q: finding %+v", r.Name, s, fd)
			}
		}
	})
}
