package topology

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/pciaddr"
)

// Any resolved device path: what split accepts is the path cut in two at
// its last host bridge, a chain of PCI functions down to the device.
func FuzzSplit(f *testing.F) {
	for _, s := range [][2]string{
		{"pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0", "0000:18:00.0"},
		{"pci0000:00/0000:00:0e.0/pci10000:00/10000:00:02.0/10000:01:00.0", "10000:01:00.0"},
		{"pci0000:00", "0000:00:00.0"}, {"", ""}, {"pci0000:00//0000:00:01.0", "0000:00:01.0"}, {"platform/x/0000:00:01.0", "0000:00:01.0"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, rel, addr string) {
		complex, chain, err := split(rel, addr)
		if err != nil {
			return
		}
		bridge := complex[strings.LastIndexByte(complex, '/')+1:]
		if !hostBridgeRE.MatchString(bridge) || len(chain) == 0 || chain[len(chain)-1] != addr ||
			complex+"/"+strings.Join(chain, "/") != filepath.ToSlash(rel) {
			t.Fatalf("split(%q, %q) = %q, %q", rel, addr, complex, chain)
		}
		for _, c := range chain {
			if !pciaddr.IsSysfs(c) || hostBridgeRE.MatchString(c) {
				t.Fatalf("split(%q, %q): chain %q", rel, addr, chain)
			}
		}
	})
}
