package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

func TestScanKeys(t *testing.T) {
	src := strings.Join([]string{
		`# comment = 1`,                     // 1
		`root = "/" # trailing [comment]`,   // 2
		`"quoted key" = 1`,                  // 3
		`a . b."c.d" = 2`,                   // 4
		`[ checks . thermal ]`,              // 5
		`exclude = [`,                       // 6
		`  "x", # [not.a.table]`,            // 7
		`  'y',`,                            // 8
		`]`,                                 // 9
		`[slurm]`,                           // 10
		`user = """`,                        // 11
		`[fake]`,                            // 12
		`fake = 1 \"""`,                     // 13
		`"""`,                               // 14
		`token_file = '''`,                  // 15
		`[fake2]'''`,                        // 16
		`retries = 3`,                       // 17
		`log = { level = "info", x.y = 1 }`, // 18
		`[[checks.mounts.mount]]`,           // 19
		`path = "/a"`,                       // 20
		`[[checks.mounts.mount]]`,           // 21
		`path = "/b"`,                       // 22
		`[[host]]`,                          // 23
		`match = "gpu1"`,                    // 24
		`[[host.checks.mounts.mount]]`,      // 25
		`path = "/c"`,                       // 26
		`[host.checks.modules]`,             // 27
		`required = ["m"]`,                  // 28
		`[[host]]`,                          // 29
		`[other]`,                           // 30
		`list = [ {path = "/d"},`,           // 31
		`          {path = "/e", "odd key" = 1} ]`, // 32
	}, "\n")
	var raw map[string]any
	if _, err := toml.Decode(src, &raw); err != nil {
		t.Fatalf("test document is not valid TOML: %v", err)
	}
	got := map[string]string{}
	keys, err := scanKeys(src)
	if err != nil {
		t.Fatalf("scanKeys: %v", err)
	}
	for _, k := range keys {
		got[k.inst] = fmt.Sprintf("%s@%d", k.key, k.line)
	}
	want := map[string]string{
		"root":                                "root@2",
		`"quoted key"`:                        `"quoted key"@3`,
		`a.b."c.d"`:                           `a.b."c.d"@4`,
		"checks.thermal":                      "checks.thermal@5",
		"checks.thermal.exclude":              "checks.thermal.exclude@6",
		"slurm":                               "slurm@10",
		"slurm.user":                          "slurm.user@11",
		"slurm.token_file":                    "slurm.token_file@15",
		"slurm.retries":                       "slurm.retries@17",
		"slurm.log":                           "slurm.log@18",
		"slurm.log.level":                     "slurm.log.level@18",
		"slurm.log.x.y":                       "slurm.log.x.y@18",
		"checks.mounts.mount[0]":              "checks.mounts.mount@19",
		"checks.mounts.mount[0].path":         "checks.mounts.mount.path@20",
		"checks.mounts.mount[1]":              "checks.mounts.mount@21",
		"checks.mounts.mount[1].path":         "checks.mounts.mount.path@22",
		"host[0]":                             "host@23",
		"host[0].match":                       "host.match@24",
		"host[0].checks.mounts.mount[0]":      "host.checks.mounts.mount@25",
		"host[0].checks.mounts.mount[0].path": "host.checks.mounts.mount.path@26",
		"host[0].checks.modules":              "host.checks.modules@27",
		"host[0].checks.modules.required":     "host.checks.modules.required@28",
		"host[1]":                             "host@29",
		"other":                               "other@30",
		"other.list":                          "other.list@31",
		"other.list[0].path":                  "other.list.path@31",
		"other.list[1].path":                  "other.list.path@32",
		"other.list[1].\"odd key\"":           `other.list."odd key"@32`,
	}
	for inst, w := range want {
		if got[inst] != w {
			t.Errorf("%s: got %q, want %q", inst, got[inst], w)
		}
	}
	for inst := range got {
		if strings.Contains(inst, "fake") || strings.Contains(inst, "not") {
			t.Errorf("scanner read %q inside a string or comment", inst)
		}
	}
}

// The scanner must end on anything, valid or not.
func TestScanKeysTerminates(t *testing.T) {
	for _, src := range []string{"", "[", "[[", "a", "a =", `a = "`, `a = """`, "a = [", "a = {", "a = { b", "=", "]]", "a.=1", "\ufeffa = 1"} {
		scanKeys(src)
	}
}
